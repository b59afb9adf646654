"""Hostile text leaves every wire as strict JSON (issue #31).

A lone surrogate (`"\\ud800"`: valid JSON, half of a UTF-16 pair) in a tool's output or an agent's
reply is kept losslessly by the stores, and the provider wire already sent it as U+FFFD. The other
wires did not: a served A2A reply and an outgoing A2A call carried the `\\udXXX` escape, which the
official a2a-sdk refuses ("Unpaired surrogate"), and a served MCP reply was an HTTP 500 (the mcp
SDK's encoder refuses the character). Now each sends U+FFFD, and a surrogate *pair* its character.

Real peers on loopback: the official a2a-sdk client and server, the official mcp client, httpx.
"""

from __future__ import annotations

import json
from typing import Any, Optional

import httpx
import mcp_types as mtypes
from a2a.types import a2a_pb2 as pb

from support.a2a_sdk_server import sdk_agent
from support.serve_kit import AgentRecorder, agent_toolkit, served_agent
from support.strict_json import assert_strict_json
from test_a2a_serve_sdk import sdk_client
from test_mcp_serve_kit import ACCEPT, mcp_session, served
from toolnexus import Tool, ToolContext, ToolResult, pending, resource
from toolnexus._text import strict_json, strict_value
from toolnexus.a2a import agent, agent_tools
from toolnexus.toolkit import Toolkit

HOSTILE = "half \udcff here, a pair \ud83d\ude00"  # what surrogateescape makes of a stray byte, and a split emoji
READ = "half \ufffd here, a pair \U0001f600"  # what a strict peer reads
OBJ = {"type": "object", "properties": {}}


async def hostile(args: Any = None, ctx: Optional[ToolContext] = None) -> ToolResult:
    return ToolResult(HOSTILE, False)


def broken_read() -> str:
    raise OSError("the disk said \udcff")


async def test_a_served_a2a_reply_with_a_lone_surrogate_reaches_the_sdk_client() -> None:
    toolkit = agent_toolkit(AgentRecorder(), replace={"block": Tool("block", "Says hostile text", OBJ, "native",
                                                                    hostile)})
    async with served_agent(toolkit, a2a={"name": "Ours"}) as h, sdk_client(h.url) as (client, _):
        msg = pb.Message(role=pb.ROLE_USER, message_id="m-hostile", parts=[pb.Part(text="block")])
        events = [ev async for ev in client.send_message(pb.SendMessageRequest(message=msg))]  # before: ParseError
        async with httpx.AsyncClient() as http:
            raw = await http.post(h.url, content=json.dumps({"jsonrpc": "2.0", "id": 1, "method": "GetTask", "params": {
                "id": events[0].task.id}}), headers={"content-type": "application/json", "a2a-version": "1.0"})
    task = events[0].task
    assert task.status.state == pb.TASK_STATE_COMPLETED
    assert "".join(p.text for a in task.artifacts for p in a.parts) == "done: " + READ
    got = assert_strict_json(raw.content)  # the task as stored, read back: strict too
    assert got["result"]["artifacts"][0]["parts"][0]["text"] == "done: " + READ


async def test_a_served_mcp_reply_with_a_lone_surrogate_reaches_the_mcp_client() -> None:
    toolkit = Toolkit(None, None, [], [], [Tool("hostile", "Says \udcff text", OBJ, "native", hostile)])
    broken = resource("disk://broken")(broken_read)
    async with served(toolkit, mcp={"resources": [broken]}) as h:
        async with mcp_session(h.url + "/mcp") as session:
            listed = await session.list_tools()  # before: HTTP 500, the listing lost
            called = await session.call_tool("hostile", {})  # before: HTTP 500
        async with httpx.AsyncClient() as http:
            raw = await http.post(h.url + "/mcp", headers=ACCEPT, content=json.dumps({
                "jsonrpc": "2.0", "id": 7, "method": "resources/read", "params": {"uri": "disk://broken"}}))
    assert [t.description for t in listed.tools] == ["Says \ufffd text"]
    assert [c.text for c in called.content] == [READ] and not called.is_error  # type: ignore[union-attr]
    error = assert_strict_json(raw.content)["error"]  # before: HTTP 500
    assert error["message"] == "reading disk://broken failed: the disk said \ufffd"


async def test_an_outgoing_a2a_call_with_a_lone_surrogate_reaches_an_sdk_server() -> None:
    async with sdk_agent() as remote:
        [tool] = await agent_tools(agent(remote.card_url, poll_every=20, timeout=20_000))
        result = await tool.execute({"task": HOSTILE})
    assert (result.output, result.is_error) == ("sdk echo: " + READ, False)  # before: "Invalid params"


def test_the_strict_rule_is_one_rule_for_bytes_and_values() -> None:
    values: list[Any] = [HOSTILE, {"k\ud800": ["\udc00\ud800", 1, None, 2.5]}, "plain", ["\ud83d\ude00\ud83d"]]
    for value in values:
        assert json.loads(strict_json(value)) == strict_value(value)
        assert_strict_json(strict_json(value))
    same = {"a": ["b", {"c": "é"}]}
    assert strict_value(same) is same  # nothing to change: nothing copied


async def test_what_a_served_tool_sends_on_its_own_over_mcp_is_strict_too() -> None:
    async def talk(args: Any = None, ctx: Optional[ToolContext] = None) -> ToolResult:
        assert ctx is not None
        if ctx.answer is None:
            await ctx.log("info", {"said": HOSTILE}, logger="log \udcff")
            await ctx.progress(1, 2, HOSTILE)
            heard = await ctx.sample(HOSTILE, max_tokens=5, system=HOSTILE)
            return pending(kind="input", prompt=HOSTILE + " " + heard,
                           data={"schema": {"type": "object", "properties": {"x": {"type": "string",
                                                                                   "description": HOSTILE}}}})
        return ToolResult("got " + str((ctx.answer.data or {}).get("x")), False)

    seen: list[Any] = []

    async def on_log(params: Any) -> None:
        seen.append(("log", params.logger, params.data))

    async def on_progress(progress: float, total: Any, message: Any) -> None:
        seen.append(("progress", message))

    async def sample(ctx: Any, params: mtypes.CreateMessageRequestParams) -> mtypes.CreateMessageResult:
        seen.append(("sample", params.messages[0].content.text, params.system_prompt))  # type: ignore[union-attr]
        return mtypes.CreateMessageResult(role="assistant", content=mtypes.TextContent(type="text", text="ok"),
                                          model="m")

    async def elicit(ctx: Any, params: Any) -> mtypes.ElicitResult:
        seen.append(("elicit", params.message, params.requested_schema["properties"]["x"]["description"]))
        return mtypes.ElicitResult(action="accept", content={"x": "y"})

    toolkit = Toolkit(None, None, [], [], [Tool("talk", "Talks", OBJ, "native", talk)])
    async with served(toolkit, mcp={}) as h:  # before: each message below failed to encode and never arrived
        async with mcp_session(h.url + "/mcp", logging_callback=on_log, sampling_callback=sample,
                               elicitation_callback=elicit) as session:
            result = await session.call_tool("talk", {}, progress_callback=on_progress)
    assert [c.text for c in result.content] == ["got y"]  # type: ignore[union-attr]
    assert seen == [("log", "log \ufffd", {"said": READ}), ("progress", READ), ("sample", READ, READ),
                    ("elicit", READ + " ok", READ)]
