"""Our MCP client as the MCP conformance suite drives it: `python mcp_client_program.py <server URL>`.

The suite starts this program once per client scenario (`MCP_CONFORMANCE_SCENARIO`, and for some
`MCP_CONFORMANCE_CONTEXT`: a pre-registered client, client credentials) against a server it runs.
Everything goes through toolnexus as a host uses it: `load_mcp_with_context` with `McpOptions`
(OAuth in memory, the suite's redirect URI and client metadata document URL), and a `wait_for`
that plays the person: it opens the authorization URL (the suite's authorization server approves
at once and redirects) and answers with the redirect; it accepts elicitations with the schema's
defaults. A tool call that comes back parked on a sign-in (a scope step-up) is answered the same
way and retried, at most twice. Exit 0 when the scenario's steps ran; 1 otherwise.
"""

from __future__ import annotations

import asyncio
import json
import os
import sys
from typing import Any, Optional

import httpx

from toolnexus.mcp_auth import OAuthOptions
from toolnexus.mcp_source import McpOptions, load_mcp_with_context
from toolnexus.types import Answer, Request, ToolContext, pending_of

REDIRECT_URI = "http://localhost:3000/callback"
CLIENT_METADATA_URL = "https://conformance-test.local/client-metadata.json"
TOOL_ARGS = {"tools_call": ("add_numbers", {"a": 5, "b": 3}), "sse-retry": ("test_reconnection", {}),
             "elicitation-sep1034-client-defaults": ("test_client_elicitation_defaults", {})}


async def person(request: Request) -> Optional[Answer]:
    """Sign in by following the authorization URL; accept an elicitation with its defaults."""
    if request.kind == "auth" and request.url:
        async with httpx.AsyncClient(timeout=20) as http:
            response = await http.get(request.url, follow_redirects=False)
        location = response.headers.get("location")
        if response.status_code not in (301, 302, 303, 307, 308) or not location:
            print(f"authorization URL answered {response.status_code}, not a redirect", file=sys.stderr)
            return None
        return Answer(id=request.id, ok=True, data={"url": location})
    if request.kind == "input":
        schema = (request.data or {}).get("schema") or {}
        defaults = {k: v["default"] for k, v in (schema.get("properties") or {}).items()
                    if isinstance(v, dict) and "default" in v}
        return Answer(id=request.id, ok=True, data=defaults)
    return None


def oauth_entry(scenario: str, context: dict[str, Any]) -> Any:
    if scenario == "auth/client-credentials-basic":
        return {"grant": "client_credentials", "clientId": context["client_id"],
                "clientSecret": context["client_secret"], "tokenEndpointAuthMethod": "client_secret_basic"}
    if scenario == "auth/client-credentials-jwt":
        return {"grant": "client_credentials", "clientId": context["client_id"],
                "privateKey": context["private_key_pem"], "signingAlgorithm": context.get("signing_algorithm", "ES256")}
    if context.get("client_id"):  # a pre-registered client
        entry = {"clientId": context["client_id"]}
        if context.get("client_secret"):
            entry["clientSecret"] = context["client_secret"]
        return entry
    return True


async def call(source: Any, name: str, args: dict[str, Any]) -> None:
    tool = next(t for t in source.tools if t.name == name)
    result = await tool.execute(args)
    for _ in range(2):  # a sign-in asked for mid-session (scope step-up): answer it and retry
        request = pending_of(result)
        if request is None:
            break
        answer = await person(request)
        if answer is None:
            break
        result = await tool.execute(args, ToolContext(answer=answer))
    print(f"{name}: {'error' if result.is_error else 'ok'}: {result.output[:200]}", file=sys.stderr)


async def main(url: str) -> int:
    scenario = os.environ.get("MCP_CONFORMANCE_SCENARIO", "")
    context = json.loads(os.environ.get("MCP_CONFORMANCE_CONTEXT") or "{}")
    config = {"mcpServers": {"s": {"url": url, "timeout": 20000, "oauth": oauth_entry(scenario, context)}}}
    options = McpOptions(auth=OAuthOptions(redirect_uri=REDIRECT_URI, client_metadata_url=CLIENT_METADATA_URL,
                                           client_name="toolnexus-conformance"))
    source = await load_mcp_with_context(config, wait_for=person, options=options)
    try:
        if source.status.get("s") != "connected":
            print(f"not connected: {source.reasons.get('s')}", file=sys.stderr)
            return 1
        if scenario in TOOL_ARGS:
            name, args = TOOL_ARGS[scenario]
            await call(source, "s_" + name, args)
        elif scenario.startswith("auth/") and source.tools:
            await call(source, source.tools[0].name, {})
        return 0
    finally:
        await source.close()


if __name__ == "__main__":
    sys.exit(asyncio.run(main(sys.argv[1])))
