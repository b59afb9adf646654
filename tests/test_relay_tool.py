"""Relay tools at the tool level: the suspension they produce and how a retry reads answers."""

from toolnexus import Answer, Request, ToolContext, ToolResult, pending_of
from toolnexus.relay import (
    RELAY_KIND,
    RelayCall,
    RelayResult,
    is_relay_request,
    relay_answer,
    relay_calls_of,
    relay_tool,
)


async def test_first_execution_suspends_with_one_blank_id_call():
    t = relay_tool("lookup", "Look a thing up.")
    assert (t.source, t.input_schema) == ("relay", {"type": "object", "properties": {}})
    r = await t.execute({"q": "é", "n": 1})
    req = pending_of(r)
    assert r.is_error and r.output == "relay tool call lookup to the caller for execution"
    assert req.kind == RELAY_KIND == "tool_call"
    assert req.data == {
        "calls": [{"id": "", "name": "lookup", "input": {"q": "é", "n": 1}, "arguments": '{"q":"é","n":1}'}]
    }
    assert is_relay_request(req) and relay_calls_of(req) == [
        RelayCall("", "lookup", {"q": "é", "n": 1}, '{"q":"é","n":1}')
    ]
    assert not is_relay_request(Request("x", "approval", "p")) and relay_calls_of(Request("x", "approval", "p")) == []


async def test_retry_reads_shorthand_single_results_and_rejects_missing_output():
    t = relay_tool("lookup", "", {"type": "object"})
    ok = await t.execute({}, ToolContext(answer=Answer("i", True, {"output": "42", "isError": False})))
    assert ok == ToolResult("42", False)
    err = await t.execute({}, ToolContext(answer=Answer("i", True, {"output": "boom", "isError": True})))
    assert err == ToolResult("boom", True)
    one = await t.execute({}, ToolContext(answer=relay_answer("i", [RelayResult("c1", "from list")])))
    assert one == ToolResult("from list", False)
    missing = await t.execute({}, ToolContext(answer=Answer("i", True, {"output": 3})))
    assert missing == ToolResult("no result supplied on resume for lookup", True)


def test_relay_answer_builds_wire_results_from_dataclasses_and_mappings():
    a = relay_answer("pnd-1", [RelayResult("c1", "out"), {"id": "c2", "output": "x", "isError": True}])
    assert a == Answer("pnd-1", True, {"results": [
        {"id": "c1", "output": "out", "isError": False}, {"id": "c2", "output": "x", "isError": True}]})
