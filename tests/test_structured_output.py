"""Structured output: `output_type=` on the client run, `stream`, `ask`, durable resume and agents.

The model is scripted behind the transport seam (both wires); the `final_result` tool, the
validation and the retry loop are the real ones.
"""

from __future__ import annotations

import dataclasses
import json
from typing import Any

import pytest
from pydantic import BaseModel, Field

from support.llm_server import (
    LlmServer,
    RecordingTransport,
    Sse,
    anthropic_calls,
    anthropic_text,
    openai_calls,
    openai_sse,
    openai_text,
    unbalanced_turns,
)
from toolnexus import OutputValidationError, define_tool, pending
from toolnexus.agents import agent
from toolnexus.client import FINAL_RESULT_TOOL, create_client
from toolnexus.client._structured import FINAL_RESULT_DESCRIPTION, JSON_RETRY, TEXT_RETRY
from toolnexus.toolkit import Toolkit
from toolnexus.types import Answer, Tool, ToolResult


class Weather(BaseModel):
    city: str
    temp_c: float = Field(description="Temperature in Celsius")
    days: int = Field(ge=1, le=7)


@dataclasses.dataclass
class Point:
    x: int
    y: int = 0


WIRES = [("openai", openai_calls, openai_text), ("anthropic", anthropic_calls, anthropic_text)]


def client_for(transport: Any, style: str = "openai", **kw: Any):
    return create_client(base_url="http://mock.local", style=style, model="m", api_key="k", http_transport=transport,
                         **kw)


def kit(*tools):
    return Toolkit(None, None, [], [], list(tools))


def declared(payload: dict, style: str) -> dict[str, dict]:
    if style == "openai":
        return {t["function"]["name"]: t["function"] for t in payload["tools"]}
    return {t["name"]: t for t in payload["tools"]}


def tool_results(payload: dict, style: str) -> list[str]:
    """Every tool-result text of the request, in order."""
    out = []
    for m in payload["messages"]:
        if style == "openai" and m.get("role") == "tool":
            out.append(m["content"])
        elif style == "anthropic" and m.get("role") == "user" and isinstance(m.get("content"), list):
            out += [b["content"] for b in m["content"] if b.get("type") == "tool_result"]
    return out


@pytest.mark.parametrize("style,calls,text", WIRES)
async def test_a_valid_final_result_ends_the_run_with_the_instance(style, calls, text):
    transport = RecordingTransport(calls(("f1", "final_result", {"city": "Oslo", "temp_c": 4.5, "days": 2})))
    r = await client_for(transport, style).run("weather?", output_type=Weather)
    assert (r.status, r.turns) == ("done", 1)
    assert r.output == Weather(city="Oslo", temp_c=4.5, days=2) and isinstance(r.output, Weather)
    assert json.loads(r.text) == {"city": "Oslo", "temp_c": 4.5, "days": 2}
    tools = declared(transport.payloads[0], style)
    schema_key = "parameters" if style == "openai" else "input_schema"
    assert list(tools) == [FINAL_RESULT_TOOL]
    assert tools["final_result"]["description"] == FINAL_RESULT_DESCRIPTION == (
        "Give your final answer by calling this tool; its arguments are the answer. Call it once, when you are done.")
    assert tools["final_result"][schema_key] == Weather.model_json_schema()
    assert r.tool_calls[0]["output"] == "final result accepted" and r.tool_calls[0]["is_error"] is False
    assert unbalanced_turns(r.messages) == []


@pytest.mark.parametrize("style,calls,text", WIRES)
async def test_a_rejected_final_result_tells_the_model_each_field_and_reason(style, calls, text):
    transport = RecordingTransport(
        calls(("f1", "final_result", {"city": "Oslo", "temp_c": "warm", "days": 9})),
        calls(("f2", "final_result", {"city": "Oslo", "temp_c": 4, "days": 3})),
    )
    r = await client_for(transport, style).run("weather?", output_type=Weather)
    assert r.output == Weather(city="Oslo", temp_c=4.0, days=3)
    assert tool_results(transport.payloads[1], style) == [
        "final_result rejected: temp_c: Input should be a valid number, unable to parse string as a number; "
        "days: Input should be less than or equal to 7. Fix these and call final_result again."
    ]
    assert [c["is_error"] for c in r.tool_calls] == [True, False]


@pytest.mark.parametrize("style,calls,text", WIRES)
async def test_a_plain_text_answer_is_answered_with_the_exact_retry_message(style, calls, text):
    transport = RecordingTransport(text("It is 4 degrees in Oslo."),
                                   calls(("f1", "final_result", {"city": "Oslo", "temp_c": 4, "days": 1})))
    r = await client_for(transport, style).run("weather?", output_type=Weather)
    assert r.output.city == "Oslo" and r.turns == 2
    second = transport.payloads[1]["messages"]
    assert second[-1] == {"role": "user", "content": TEXT_RETRY}
    assert TEXT_RETRY == ("Your answer must be given by calling the final_result tool with arguments that match its "
                          "schema; plain text is not accepted. Call final_result now.")


async def test_a_json_text_answer_is_accepted_and_an_invalid_one_gets_its_problems():
    fenced = '```json\n{"city": "Rome", "temp_c": 20, "days": 1}\n```'
    r = await client_for(RecordingTransport(openai_text(fenced))).run("weather?", output_type=Weather)
    assert (r.output, r.turns) == (Weather(city="Rome", temp_c=20, days=1), 1)
    assert json.loads(r.text) == {"city": "Rome", "temp_c": 20.0, "days": 1}

    transport = RecordingTransport(
        openai_text('{"city": "Rome"}'), openai_text('{"city": "Rome", "temp_c": 1, "days": 1}')
    )
    r = await client_for(transport).run("weather?", output_type=Weather)
    assert r.output.temp_c == 1
    assert transport.payloads[1]["messages"][-1]["content"] == JSON_RETRY.format(
        problems="temp_c: Field required; days: Field required") == (
        "Your answer does not match the required schema: temp_c: Field required; days: Field required. "
        "Call final_result with every problem fixed.")


async def test_the_run_gives_up_after_the_retries_with_a_clear_error_and_keeps_the_transcript():
    bad = {"city": "Oslo", "temp_c": 1, "days": 0}
    transport = RecordingTransport(*(openai_calls((f"f{i}", "final_result", bad)) for i in range(3)))
    with pytest.raises(OutputValidationError) as info:
        await client_for(transport).run("weather?", output_type=Weather)
    assert str(info.value) == ("toolnexus: the model's final answer did not match Weather after 3 attempts: "
                               "days: Input should be greater than or equal to 1")
    assert info.value.problems == ["days: Input should be greater than or equal to 1"]
    assert isinstance(info.value, ValueError)
    assert len(transport.payloads) == 3  # no fourth call after giving up
    assert info.value.result.turns == 3 and len(info.value.result.tool_calls) == 3

    transport = RecordingTransport(openai_text("no idea"))
    with pytest.raises(OutputValidationError) as info:
        await client_for(transport).run("weather?", output_type=Weather, output_retries=0)
    assert str(info.value) == ("toolnexus: the model's final answer did not match Weather after 1 attempt: "
                               "it answered in plain text instead of calling final_result")


async def test_run_errors_are_counted_in_metrics():
    events: list[dict] = []
    transport = RecordingTransport(openai_text("no idea"))
    with pytest.raises(OutputValidationError):
        await client_for(transport, on_metric=events.append).run("q", output_type=Weather, output_retries=0)
    run = [e for e in events if e["event"] == "run"]
    assert run[0]["error"].startswith("toolnexus: the model's final answer did not match Weather")


async def test_a_json_schema_dict_output_type():
    schema = {"type": "object", "title": "Verdict", "properties": {"ok": {"type": "boolean"},
                                                                  "score": {"type": "integer", "maximum": 10}},
              "required": ["ok"], "additionalProperties": False}
    transport = RecordingTransport(openai_calls(("f1", "final_result", {"ok": "yes", "score": 11, "extra": 1})),
                                   openai_calls(("f2", "final_result", {"ok": True, "score": 7})))
    r = await client_for(transport).run("judge", output_type=schema)
    assert r.output == {"ok": True, "score": 7}
    assert declared(transport.payloads[0], "openai")["final_result"]["parameters"] == schema
    assert tool_results(transport.payloads[1], "openai") == [
        "final_result rejected: Additional properties are not allowed ('extra' was unexpected); "
        "ok: 'yes' is not of type 'boolean'; score: 11 is greater than the maximum of 10. "
        "Fix these and call final_result again."]


async def test_dataclass_and_non_object_output_types():
    r = await client_for(RecordingTransport(openai_calls(("f1", "final_result", {"x": 3})))).run(
        "p", output_type=Point)
    assert r.output == Point(3, 0) and isinstance(r.output, Point)

    transport = RecordingTransport(openai_calls(("f1", "final_result", {"response": ["a", 2]})),
                                   openai_calls(("f2", "final_result", {"response": ["a", "b"]})))
    r = await client_for(transport).run("tags", output_type=list[str])
    assert r.output == ["a", "b"] and r.text == '["a", "b"]'
    assert declared(transport.payloads[0], "openai")["final_result"]["parameters"] == {
        "type": "object", "properties": {"response": {"items": {"type": "string"}, "type": "array"}},
        "required": ["response"], "additionalProperties": False}
    assert tool_results(transport.payloads[1], "openai") == [
        "final_result rejected: response/1: Input should be a valid string. Fix these and call final_result again."]


async def test_other_tools_of_the_turn_still_run_and_the_run_then_ends():
    ran = []

    @define_tool
    def note(text: str) -> str:
        ran.append(text)
        return "noted"

    transport = RecordingTransport(openai_calls(("c1", "note", {"text": "hi"}),
                                                ("f1", "final_result", {"city": "A", "temp_c": 1, "days": 1})))
    r = await client_for(transport).run("q", kit(note), output_type=Weather)
    assert ran == ["hi"] and r.output.city == "A"
    assert [c["name"] for c in r.tool_calls] == ["note", "final_result"]
    assert [t["function"]["name"] for t in transport.payloads[0]["tools"]] == ["note", "final_result"]


async def test_stream_and_ask_carry_the_output():
    args = {"city": "A", "temp_c": 1, "days": 1}
    with LlmServer() as server:
        server.add(Sse(openai_sse("Here:", calls=(("f1", "final_result", args),))))
        async with create_client(base_url=server.base_url, style="openai", model="m", api_key="k") as c:
            events = [e async for e in c.stream("q", output_type=Weather)]
    assert [e["type"] for e in events] == ["text", "tool_call", "tool_result", "usage", "done"]
    assert events[-1]["result"].output == Weather(city="A", temp_c=1, days=1)
    assert events[-1]["result"].text == json.dumps({"city": "A", "temp_c": 1.0, "days": 1})

    reply = openai_calls(("f1", "final_result", args))

    c = client_for(RecordingTransport(reply))
    r = await c.ask("q", id="conv", output_type=Weather)
    saved = await c.conversation_store.get("conv")
    assert r.output.city == "A" and saved == r.messages and unbalanced_turns(saved) == []


async def test_running_out_of_turns_is_incomplete_not_done():
    transport = RecordingTransport(openai_text("thinking"), openai_text("still thinking"))
    r = await client_for(transport, max_turns=2).run("q", output_type=Weather, output_retries=5)
    assert (r.status, r.limit, r.output) == ("incomplete", "maxTurns", None)


async def test_a_suspended_structured_run_resumes_to_its_output():
    async def approve(args, ctx=None):
        if ctx is not None and ctx.answer is not None:
            return ToolResult("approved", False)
        return pending(kind="approval", prompt="OK to publish?")

    publish = Tool("publish", "publish it", {"type": "object", "properties": {}}, "native", approve)
    c = client_for(RecordingTransport(openai_calls(("c1", "publish", {})),
                                      openai_calls(("f1", "final_result", {"x": 1, "y": 2}))))
    first = await c.run("go", kit(publish), output_type=Point)
    assert (first.status, first.output) == ("pending", None)
    resumed = await c.run_with_answer(kit(publish), first.messages, first.pending,
                                      Answer(id=first.pending.id, ok=True), output_type=Point)
    assert (resumed.status, resumed.output) == ("done", Point(1, 2))


async def test_unusable_output_types_and_name_clashes_fail_before_any_call():
    transport = RecordingTransport()
    c = client_for(transport)
    with pytest.raises(TypeError) as info:
        await c.run("q", output_type=42)
    assert str(info.value) == ("toolnexus: output_type must be a pydantic model class, a dataclass, a type pydantic "
                               "can validate, or a JSON Schema dict; got 42")
    with pytest.raises(ValueError, match="output_type is not a valid JSON Schema: 'maybe' is not valid under"):
        await c.run("q", output_type={"type": "maybe"})
    with pytest.raises(ValueError) as info:
        await c.run("q", output_type=Point, output_retries=-1)
    assert str(info.value) == "toolnexus: output_retries must be an integer >= 0, got -1"

    clash = define_tool(lambda: "x", name="final_result")
    with pytest.raises(ValueError) as info:
        await c.run("q", kit(clash), output_type=Point)
    assert str(info.value) == ('toolnexus: output_type needs the tool name "final_result", but the toolkit already '
                               "has a tool with that name; rename that tool")
    assert transport.payloads == []


def _final(args: dict[str, Any]):
    def generate(request: dict[str, Any]) -> dict[str, Any]:
        if request["messages"][-1]["role"] == "tool":
            return {"content": "unreachable"}
        return {"tool_calls": [{"id": "f1", "name": "final_result", "arguments": args}]}

    return generate


async def test_agents_return_the_parsed_value_as_result_output():
    forecaster = agent("forecaster", does="forecasts", output_type=Weather)
    r = await forecaster.run("weather?", in_process=_final({"city": "Oslo", "temp_c": 3, "days": 2}))
    assert (r.status, r.is_error) == ("done", False)
    assert r.output == Weather(city="Oslo", temp_c=3, days=2)
    assert json.loads(r.text) == {"city": "Oslo", "temp_c": 3.0, "days": 2}
    assert forecaster.registry()["forecaster"].output_type is Weather


async def test_an_agent_that_never_validates_ends_with_an_error_result():
    stubborn = agent("stubborn", does="forecasts", output_type=Weather, output_retries=1)
    r = await stubborn.run("weather?", in_process=lambda request: {"content": "sunny"})
    assert (r.status, r.is_error, r.output) == ("error", True, None)
    assert r.text == ("toolnexus: the model's final answer did not match Weather after 2 attempts: "
                      "it answered in plain text instead of calling final_result")


def test_agent_checks_its_output_type_when_declared():
    with pytest.raises(TypeError, match="output_type must be a pydantic model class"):
        agent("x", does="y", output_type="Weather")
