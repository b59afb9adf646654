"""A host program for the OAuth process tests: an agent that uses a remote MCP server behind OAuth.

Run as `python -m support.oauth_agent_app COMMAND --store URL --mcp URL --clock-file F` from the
`tests` folder; the token key comes from the environment (`OAUTH_TEST_KEY`). Each command builds
the toolkit as a host would — `create_toolkit(config, mcp_options=McpOptions(auth=OAuthOptions(
store=<the run store>, key=..., clock=<time + the clock file's offset>)))` — and prints one JSON
line:

- `start`: a new run of `reader` (model `m-docs`): it calls `docs_call` to sign in and list the
  server's tools, then `docs_call` to run `echo`. The run parks on the sign-in request.
- `answer --id ID --url URL`: resume the parked run with the redirect URL the browser came back
  with (`Answer(ok=True, data={"url": URL})`), in this process.
- `again`: a new run of `direct` (model `m-direct`), which calls `docs_echo` at once: the server
  is signed in already, so its own tools are offered.
"""

from __future__ import annotations

import argparse
import asyncio
import dataclasses
import json
import os
import sys
from typing import Any

from toolnexus import Answer, create_toolkit
from toolnexus.agents import agent, resume
from toolnexus.mcp_auth import OAuthOptions
from toolnexus.mcp_source import McpOptions
from toolnexus.stores import open_store

from .agent_kit import calls
from .mock_llm import MockLLM
from .oauth_server import Clock

LLM = {"base_url": "http://mock.local", "style": "openai", "model": "m-docs", "api_key": "unused"}
REDIRECT = "http://127.0.0.1:9/callback"  # never contacted: the test reads the redirect itself
SCRIPTS = {
    "m-docs": [
        {"whenToolMsgs": 0, "toolCalls": calls(("docs_call", {}))},
        {"whenToolMsgs": 1, "toolCalls": calls(("docs_call", {"tool": "echo", "arguments": {"text": "hello"}}))},
        {"whenToolMsgs": ">=2", "text": "<last tool msg content>"},
    ],
    "m-direct": [
        {"whenToolMsgs": 0, "toolCalls": calls(("docs_echo", {"text": "again"}))},
        {"whenToolMsgs": ">=1", "text": "<last tool msg content>"},
    ],
}


def summary(result: Any) -> dict[str, Any]:
    return {"status": result.status, "text": result.text, "run_id": result.run_id,
            "pending": dataclasses.asdict(result.pending) if result.pending else None}


async def main(opts: argparse.Namespace) -> dict[str, Any]:
    model = MockLLM({"style": "openai", "scripts": SCRIPTS})
    async with open_store(opts.store) as store:
        auth = OAuthOptions(store=store, key=os.environ["OAUTH_TEST_KEY"], clock=Clock(opts.clock_file),
                            redirect_uri=REDIRECT)
        config = {"mcpServers": {"docs": {"url": opts.mcp, "timeout": 20000}}}
        async with await create_toolkit(config, builtins=False, mcp_options=McpOptions(auth=auth)) as toolkit:
            tools = toolkit.tools()
            reader = agent("reader", does="reads the docs server", model="m-docs", uses={"tools": tools})
            direct = agent("direct", does="uses the docs server", model="m-direct", uses={"tools": tools})
            offered = [t.name for t in tools]
            if opts.command == "start":
                r = await reader.run("say hello through the docs server", store=store, run_id=opts.run_id, llm=LLM,
                                     transport=model)
                await r.runtime.aclose()
                return {**summary(r), "tools": offered, "status_mcp": toolkit.mcp_status()}
            if opts.command == "answer":
                final = await resume(store, Answer(id=opts.id, ok=True, data={"url": opts.url}),
                                     agents=[reader], llm=LLM, transport=model)
                return {**summary(final), "tools": offered}
            if opts.command == "again":
                r = await direct.run("echo again", store=store, run_id=opts.run_id, llm=LLM, transport=model)
                await r.runtime.close(r.runtime.root)
                return {**summary(r), "tools": offered, "status_mcp": toolkit.mcp_status()}
    raise SystemExit(f"unknown command {opts.command}")


if __name__ == "__main__":
    p = argparse.ArgumentParser()
    p.add_argument("command", choices=["start", "answer", "again"])
    p.add_argument("--store", required=True)
    p.add_argument("--mcp", required=True)
    p.add_argument("--clock-file", required=True)
    p.add_argument("--run-id")
    p.add_argument("--id")
    p.add_argument("--url")
    print(json.dumps(asyncio.run(main(p.parse_args(sys.argv[1:])))), flush=True)
