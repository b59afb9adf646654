"""`toolnexus serve --mcp-stdio`, driven by the official mcp SDK's own stdio client.

The installed console script is started as the MCP server process (as a desktop host would),
with Python tools from `--tools-from cli_tools:TOOLS`.
"""

from __future__ import annotations

from contextlib import asynccontextmanager
from typing import Any, AsyncIterator

import mcp_types as mtypes
from mcp.client.session import ClientSession
from mcp.client.stdio import StdioServerParameters, stdio_client

from support.cli_run import TOOLNEXUS, cli_env, run_cli


@asynccontextmanager
async def stdio_session(*args: str, **session_kwargs: Any) -> AsyncIterator[ClientSession]:
    params = StdioServerParameters(command=TOOLNEXUS, args=["serve", "--mcp-stdio", "--no-builtins",
                                                            "--tools-from", "cli_tools:TOOLS", *args], env=cli_env())
    async with stdio_client(params) as (read, write):
        async with ClientSession(read, write, **session_kwargs) as session:
            await session.initialize()
            yield session


async def test_tools_list_a_call_and_a_raising_tool() -> None:
    async with stdio_session("--mcp-name", "desk") as s:
        init = s.initialize_result
        listed = [t.name for t in (await s.list_tools()).tools]
        ok = await s.call_tool("echo", {"x": "hi"})
        raised = await s.call_tool("fail", {})
    assert init is not None and init.server_info.name == "desk"
    assert listed == ["echo", "fail", "ask", "approve"]
    assert (ok.content[0].text, ok.is_error) == ("echo:hi", False)
    assert (raised.content[0].text, raised.is_error) == ("kaboom from fail", True)


async def test_a_suspension_is_answered_by_elicitation() -> None:
    seen: list[Any] = []

    async def elicit(ctx: Any, params: Any) -> mtypes.ElicitResult:
        seen.append(params)
        return mtypes.ElicitResult(action="accept", content={"name": "bob"})

    async with stdio_session(elicitation_callback=elicit) as s:
        result = await s.call_tool("ask", {})
    assert (result.content[0].text, result.is_error) == ("hello bob", False)
    assert [p.message for p in seen] == ["What is your name?"]
    assert seen[0].requested_schema["properties"] == {"name": {"type": "string"}}


async def test_a_declined_elicitation_is_declined_expired() -> None:
    async def decline(ctx: Any, params: Any) -> mtypes.ElicitResult:
        return mtypes.ElicitResult(action="decline")

    async with stdio_session(elicitation_callback=decline) as s:
        result = await s.call_tool("ask", {})
    assert (result.content[0].text, result.is_error) == ("declined/expired: What is your name?", True)


async def test_the_mcp_tool_filter_applies_over_stdio() -> None:
    async with stdio_session("--mcp-tool", "echo", "--mcp-tool=fail") as s:
        listed = [t.name for t in (await s.list_tools()).tools]
    assert listed == ["echo", "fail"]


def test_mcp_stdio_cannot_be_combined_with_http_profiles() -> None:
    done = run_cli("serve", "--mcp-stdio", "--mcp")
    assert done.returncode == 2 and "cannot be combined" in done.stderr and done.stdout == ""
