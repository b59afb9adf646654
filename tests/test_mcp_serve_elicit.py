"""A served tool's `pending(kind="input")` is bridged to elicitation on the MCP caller.

Over HTTP the official client's modern era (2026-07-28, the default `mcp.client.Client` mode)
gets `InputRequiredResult`; its elicitation callback answers and the tool is re-run with
`ctx.answer`. Over a back channel (in-process legacy session, or an HTTP session opened for a
client that declared elicitation) the server asks mid-call.
"""

from __future__ import annotations

from typing import Any

import mcp_types as mtypes
import pytest
from mcp.client.client import Client
from mcp.client.session import ClientSession
from mcp.client.streamable_http import streamable_http_client
from mcp.shared.exceptions import MCPError

from test_mcp_serve_kit import ASK_SCHEMA, Recorder, make_toolkit, mcp_session, served
from toolnexus import Tool, ToolResult, pending
from toolnexus.mcp_serve import build_mcp_server

PROMPT = "What is your name?"


def answering(action: str, content: Any = None, seen: list | None = None):
    async def callback(ctx: Any, params: Any) -> mtypes.ElicitResult:
        if seen is not None:
            seen.append(params)
        return mtypes.ElicitResult(action=action, content=content)

    return callback


async def _call_extra_tool(extra: Tool, callback: Any) -> mtypes.CallToolResult:
    """Serve the kit toolkit plus `extra`, and call `extra` from a modern client."""
    toolkit = make_toolkit(Recorder())
    toolkit.register(extra)
    async with served(toolkit, mcp={}) as h:
        async with Client(h.url + "/mcp", elicitation_callback=callback) as client:
            return await client.call_tool(extra.name, {})


async def test_modern_client_answers_through_its_elicitation_callback_and_the_tool_reruns_with_answer() -> None:
    rec, seen, events = Recorder(), [], []
    async with served(make_toolkit(rec), mcp={}, on_call=events.append) as h:
        async with Client(h.url + "/mcp", elicitation_callback=answering("accept", {"n": "bob"}, seen)) as client:
            result = await client.call_tool("ask", {"greeting": "hey"})
    assert (result.content[0].text, result.is_error) == ("hello bob (hey)", False)
    assert [(p.message, p.requested_schema) for p in seen] == [(PROMPT, ASK_SCHEMA)]
    first, retry = rec.contexts["ask"]
    assert first is not None and first.answer is None
    assert retry is not None and retry.answer is not None
    assert (retry.answer.ok, retry.answer.data) == (True, {"n": "bob"})
    assert [(e["name"], e["is_error"]) for e in events] == [("ask", False)]


@pytest.mark.parametrize("action", ["decline", "cancel"])
async def test_a_declined_elicitation_is_declined_expired_and_the_tool_is_not_rerun(action: str) -> None:
    rec = Recorder()
    async with served(make_toolkit(rec), mcp={}) as h:
        async with Client(h.url + "/mcp", elicitation_callback=answering(action)) as client:
            result = await client.call_tool("ask", {})
    assert (result.content[0].text, result.is_error) == (f"declined/expired: {PROMPT}", True)
    assert len(rec.contexts["ask"]) == 1


async def test_a_client_without_elicitation_gets_the_suspension_as_error_text() -> None:
    async with served(make_toolkit(Recorder()), mcp={}) as h:
        async with Client(h.url + "/mcp") as client:
            result = await client.call_tool("ask", {})
    assert (result.content[0].text, result.is_error) == (PROMPT, True)


async def test_a_handshake_era_http_client_that_declared_elicitation_gets_a_session_and_is_asked() -> None:
    seen: list = []
    async with served(make_toolkit(Recorder()), mcp={}) as h:
        async with mcp_session(h.url + "/mcp", elicitation_callback=answering("accept", {"n": "x"}, seen)) as s:
            result = await s.call_tool("ask", {})
    assert (result.content[0].text, result.is_error) == ("hello x (hi)", False)
    assert [p.message for p in seen] == [PROMPT]


async def test_with_sessions_off_stateless_http_has_no_back_channel_so_the_suspension_is_error_text() -> None:
    async with served(make_toolkit(Recorder()), mcp={"sessions": False}) as h:
        async with mcp_session(h.url + "/mcp", elicitation_callback=answering("accept", {"n": "x"})) as s:
            result = await s.call_tool("ask", {})
    assert (result.content[0].text, result.is_error) == (PROMPT, True)


async def test_a_rerun_that_suspends_again_is_unresolved() -> None:
    async def stubborn(args: dict, ctx=None) -> ToolResult:
        return pending(kind="input", prompt="again?" if ctx and ctx.answer else "first?")

    tool = Tool("stubborn", "always asks", {"type": "object"}, "native", stubborn)
    result = await _call_extra_tool(tool, answering("accept", {}))
    assert (result.content[0].text, result.is_error) == ("unresolved: first?", True)


async def test_other_suspension_kinds_are_not_bridged() -> None:
    async def login(args: dict, ctx=None) -> ToolResult:
        return pending(kind="authorization", prompt="Log in", url="https://auth.example/authorize")

    seen: list = []
    tool = Tool("login", "needs auth", {"type": "object"}, "native", login)
    result = await _call_extra_tool(tool, answering("accept", {}, seen))
    assert (result.content[0].text, result.is_error) == ("Log in\nhttps://auth.example/authorize", True)
    assert seen == []


async def test_request_state_is_sealed_and_bound_to_the_arguments() -> None:
    async with served(make_toolkit(Recorder()), mcp={}) as h:
        async with streamable_http_client(h.url + "/mcp") as streams:
            async with ClientSession(
                streams[0], streams[1], elicitation_callback=answering("accept", {})
            ) as s:
                await s.discover()
                asked = await s.call_tool("ask", {"greeting": "a"}, allow_input_required=True)
                assert isinstance(asked, mtypes.InputRequiredResult)
                (key,) = asked.input_requests
                answer = {key: mtypes.ElicitResult(action="accept", content={"n": "eve"})}
                state = asked.request_state
                assert state is not None and "What is your name" not in state  # sealed, not readable
                with pytest.raises(MCPError) as forged:
                    forged_state = state[:-4] + "AAAA"
                    await s.call_tool("ask", {"greeting": "a"}, input_responses=answer, request_state=forged_state)
                with pytest.raises(MCPError) as other_args:
                    await s.call_tool("ask", {"greeting": "b"}, input_responses=answer, request_state=state)
                done = await s.call_tool("ask", {"greeting": "a"}, input_responses=answer, request_state=state)
    assert forged.value.code == other_args.value.code == mtypes.INVALID_PARAMS
    assert done.content[0].text == "hello eve (a)"


async def test_a_schema_elicitation_cannot_carry_falls_back_to_error_text_with_a_warning(caplog) -> None:
    async def listy(args: dict, ctx=None) -> ToolResult:
        return pending(kind="input", prompt="Pick items", data={"schema": {"type": "array"}})

    tool = Tool("listy_asker", "asks for a list", {"type": "object"}, "native", listy)
    result = await _call_extra_tool(tool, answering("accept", {}))
    assert (result.content[0].text, result.is_error) == ("Pick items", True)
    assert any('tool "listy_asker" asked for input with a schema' in r.getMessage() for r in caplog.records)


async def test_with_a_back_channel_the_server_elicits_mid_call() -> None:
    rec, seen = Recorder(), []
    server = build_mcp_server(make_toolkit(rec).tools)
    async with Client(server, mode="legacy", elicitation_callback=answering("accept", {"n": "ann"}, seen)) as client:
        result = await client.call_tool("ask", {})
    assert (result.content[0].text, result.is_error) == ("hello ann (hi)", False)
    assert [p.message for p in seen] == [PROMPT]
    assert [c.answer is not None for c in rec.contexts["ask"]] == [False, True]
