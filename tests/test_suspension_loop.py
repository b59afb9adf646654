"""The suspension rule inside one run (suspension.md §5–§7): halts, hooks, metrics, streams, answers.

The model is scripted behind the transport seam (a recording transport, or the loopback SSE
server for streams); tools, toolkit, hooks and the `question` built-in are real.
"""

from __future__ import annotations

import json
from datetime import datetime

import pytest

from support.llm_server import (
    LlmServer,
    RecordingTransport,
    Sse,
    openai_calls,
    openai_sse,
    openai_text,
    tool_from as make_tool,
    toolkit_of as kit,
    unbalanced_turns,
)
from toolnexus.builtin import create_builtin_tools
from toolnexus.client import create_client
from toolnexus.relay import relay_answer, relay_calls_of, relay_tool
from toolnexus.toolkit import Toolkit
from toolnexus.types import Answer, Request, ToolResult, pending, pending_of


def client(transport, **kw):
    kw.setdefault("api_key", "k")
    return create_client(base_url="http://mock.local", style="openai", model="m", http_transport=transport, **kw)


def gate(name, log, *, prompt=None, **request):
    """A tool that suspends on its first run and reports the answer it was retried with."""

    async def fn(args, ctx):
        log.append((name, args, None if ctx is None else ctx.answer))
        if ctx is not None and ctx.answer is not None:
            return ToolResult(f"{name} got {json.dumps(ctx.answer.data)}", False)
        return pending(kind="approval", prompt=prompt or f"{name}?", id=f"req-{name}", **request)

    return make_tool(name, fn)


async def plain(args, ctx):
    return ToolResult(f"plain {args.get('n')}", False)


# -- durable halt: first in call order, transcript rule -------------------------------------------


async def test_halt_is_at_the_first_suspension_in_call_order_with_the_tools_own_request():
    log = []
    own = {}

    async def first(args, ctx):
        result = pending(kind="input", prompt="Which one?", id="req-first")
        own["request"] = result.metadata["pending"]
        return result

    t = RecordingTransport(openai_calls(("c1", "plain", {"n": 1}), ("c2", "first", {}), ("c3", "later", {})))
    r = await client(t).run("go", kit(make_tool("plain", plain), make_tool("first", first), gate("later", log)))
    assert r.pending is own["request"]
    assert (r.status, r.text, r.limit, r.turns) == ("pending", "Which one?", None, 1)
    assert log == [("later", {}, None)]  # the later call ran, but leaves no trace
    assert [m.get("tool_call_id") for m in r.messages if m["role"] == "tool"] == ["c1", "c2"]
    assert r.tool_calls == [
        {"name": "plain", "args": {"n": 1}, "output": "plain 1", "is_error": False, "metadata": None},
        {"name": "first", "args": {}, "output": "Which one?", "is_error": True, "metadata": None}]


async def test_suspension_is_not_a_tool_error_and_after_tool_does_not_run_on_it():
    log, metrics, after = [], [], []
    t = RecordingTransport(openai_calls(("c1", "plain", {}), ("c2", "a", {})))
    c = client(t, on_metric=metrics.append, hooks={"after_tool": lambda ev: after.append(ev["name"])})
    r = await c.run("go", kit(make_tool("plain", plain), gate("a", log)))
    assert r.status == "pending" and after == ["plain"]
    tool_events = [e for e in metrics if e["event"] == "tool"]
    assert [(e["tool"], e["is_error"], e.get("pending")) for e in tool_events] == [
        ("plain", False, None), ("a", False, True)]
    assert "pending" not in tool_events[0]
    assert 'toolnexus_tool_calls_total{tool="a",source="native",is_error="false",pending="true"} 1' in c.metrics()
    run = [e for e in metrics if e["event"] == "run"]
    assert len(run) == 1 and "error" not in run[0]


async def test_before_tool_pending_without_wait_for_halts_like_a_tool_suspension_and_resumes_the_real_tool():
    ran, metrics, guard_calls = [], [], []

    async def deploy(args, ctx):
        ran.append(None if ctx is None else ctx.answer.ok)
        return ToolResult("deployed", False)

    def before_tool(ev):
        guard_calls.append(ev["name"])
        return {"result": pending(kind="approval", prompt="Allow deploy?", id="req-guard")}

    t = RecordingTransport(openai_calls(("c1", "deploy", {})), openai_text("shipped"))
    c = client(t, hooks={"before_tool": before_tool}, on_metric=metrics.append)
    tk = kit(make_tool("deploy", deploy))
    halted = await c.run("go", tk)
    assert (halted.status, halted.pending.id, halted.messages[-1]["content"]) == (
        "pending", "req-guard", "Allow deploy?")
    assert ran == [] and [e.get("pending") for e in metrics if e["event"] == "tool"] == [True]
    done = await c.run_with_answer(tk, halted.messages, halted.pending, Answer("req-guard", True))
    assert (done.status, done.text, ran, guard_calls) == ("done", "shipped", [True], ["deploy"])
    assert done.tool_calls[0]["output"] == "deployed"


async def test_retry_sees_before_tool_args_and_after_tool_may_override_a_resuspension():
    seen = []

    async def fickle(args, ctx):
        seen.append(args)
        return pending(kind="input", prompt="again?" if ctx else "first?", id="req-fickle")

    def after_tool(ev):
        return {"result": ToolResult(f"overridden for {ev['args']}", False)}

    hooks = {"before_tool": lambda ev: {"args": {"rewritten": True}}, "after_tool": after_tool}
    t = RecordingTransport(openai_calls(("c1", "fickle", {"orig": 1})), openai_text("ok"))
    c = client(t, hooks=hooks, wait_for=lambda req: Answer(req.id, True))
    r = await c.run("go", kit(make_tool("fickle", fickle)))
    assert seen == [{"rewritten": True}, {"rewritten": True}]
    assert r.tool_calls[0]["output"] == "overridden for {'rewritten': True}"


async def test_wait_for_failure_propagates_with_an_error_run_metric_and_nothing_saved():
    metrics = []

    def wait_for(request):
        raise RuntimeError("host is down")

    t = RecordingTransport(openai_calls(("c1", "a", {})))
    c = client(t, wait_for=wait_for, on_metric=metrics.append)
    with pytest.raises(RuntimeError, match="host is down"):
        await c.ask("go", kit(gate("a", [])), id="conv")
    assert await c.store.get("conv") is None
    assert [e.get("error") for e in metrics if e["event"] == "run"] == ["host is down"]


async def test_wait_for_may_answer_with_a_plain_json_mapping():
    log = []
    t = RecordingTransport(openai_calls(("c1", "a", {})), openai_text("ok"))
    r = await client(t, wait_for=lambda req: {"id": req.id, "ok": True, "data": {"v": 1}, "extra": "ignored"}).run(
        "go", kit(gate("a", log)))
    assert r.tool_calls[0]["output"] == 'a got {"v": 1}'
    assert log[-1][2] == Answer("req-a", True, {"v": 1})


async def test_a_raw_dict_pending_in_metadata_is_coerced_and_halts_cleanly():
    async def legacy(args, ctx):
        return ToolResult("Need a PIN", True, {"pending": {"id": "req-raw", "kind": "input", "prompt": "Need a PIN"}})

    t = RecordingTransport(openai_calls(("c1", "legacy", {})))
    r = await client(t).run("go", kit(make_tool("legacy", legacy)))
    assert r.status == "pending" and r.pending == Request("req-raw", "input", "Need a PIN")
    assert pending_of(r) == r.pending


# -- the question built-in through the loop ------------------------------------------------------

QUESTIONS = [{"question": "Which region?", "options": ["eu", "us"]}, {"question": "Why?"}]
RENDERED = "Which region? (options: eu, us)\nWhy?"


def question_kit():
    return Toolkit(None, None, [t for t in create_builtin_tools() if t.name == "question"], [], [])


async def test_question_builtin_resolves_inline_with_wait_for():
    asked = []

    def wait_for(request):
        asked.append((request.kind, request.prompt, request.data))
        return Answer(request.id, True, {"Which region?": "eu", "Why?": "latency"})

    t = RecordingTransport(openai_calls(("q1", "question", {"questions": QUESTIONS})), openai_text("eu it is"))
    r = await client(t, wait_for=wait_for).run("deploy where?", question_kit())
    assert asked == [("question", RENDERED, {"questions": QUESTIONS})]
    assert (r.status, r.text) == ("done", "eu it is")
    assert t.payloads[1]["messages"][-1] == {"role": "tool", "tool_call_id": "q1",
                                             "content": '{"Which region?": "eu", "Why?": "latency"}'}


async def test_question_builtin_halts_without_wait_for_and_resumes_durably():
    t = RecordingTransport(openai_calls(("q1", "question", {"questions": QUESTIONS})), openai_text("us it is"))
    c = client(t)
    halted = await c.run("deploy where?", question_kit())
    assert (halted.status, halted.pending.kind, halted.text) == ("pending", "question", RENDERED)
    assert halted.messages[-1] == {"role": "tool", "tool_call_id": "q1", "content": RENDERED}
    done = await c.run_with_answer(question_kit(), halted.messages, halted.pending,
                                   Answer(halted.pending.id, True, {"Which region?": "us"}))
    assert (done.status, done.text) == ("done", "us it is")
    assert t.payloads[1]["messages"][-1]["content"] == '{"Which region?": "us"}'
    assert unbalanced_turns(t.payloads[1]["messages"]) == []


# -- answers that must not be accepted silently (in process) ---------------------------------------


def at(text):
    return lambda: datetime.fromisoformat(text)


@pytest.mark.parametrize("expires, now, accepted", [
    ("2030-01-01T00:00:00Z", "2030-01-01T00:00:00+00:00", False),          # not after now: expired
    ("2030-01-01T00:00:01Z", "2030-01-01T00:00:00+00:00", True),
    ("2030-01-01T02:00:00+02:00", "2030-01-01T00:00:01+00:00", False),     # offsets compare as instants
    ("2030-01-01T00:00:00", "2030-01-01T00:00:00+00:00", False),           # naive = UTC
    ("2030-01-01t00:00:00z", "2030-01-01T00:00:00+00:00", False),          # RFC 3339 allows lower case
    ("next tuesday", "2099-01-01T00:00:00+00:00", True),                   # unparseable: not enforced
])
async def test_wait_for_answer_at_or_after_expires_at_becomes_declined_expired(expires, now, accepted):
    log = []
    t = RecordingTransport(openai_calls(("c1", "a", {})), openai_text("ok"))
    c = client(t, wait_for=lambda req: Answer(req.id, True, {"v": 1}))
    c.clock = at(now)
    r = await c.run("go", kit(gate("a", log, prompt="Ship it?", expiresAt=expires)))
    if accepted:
        assert r.tool_calls[0]["output"] == 'a got {"v": 1}' and len(log) == 2
    else:
        assert r.tool_calls[0] == {"name": "a", "args": {}, "output": "declined/expired: Ship it?", "is_error": True,
                                   "metadata": None}
        assert len(log) == 1  # the tool never saw the late answer


SCHEMA = {"type": "object", "properties": {"amount": {"type": "number", "minimum": 0}}, "required": ["amount"]}


@pytest.mark.parametrize("data, output", [
    ({"amount": 40}, 'a got {"amount": 40}'),
    ({"amount": "forty"}, "invalid answer for How much?: amount: 'forty' is not of type 'number'"),
    (None, "invalid answer for How much?: 'amount' is a required property"),
])
async def test_wait_for_answer_is_checked_against_the_request_schema_before_the_tool_sees_it(data, output):
    log, metrics = [], []
    t = RecordingTransport(openai_calls(("c1", "a", {})), openai_text("ok"))
    c = client(t, wait_for=lambda req: Answer(req.id, True, data), on_metric=metrics.append)
    r = await c.run("go", kit(gate("a", log, prompt="How much?", data={"schema": SCHEMA})))
    assert r.tool_calls[0]["output"] == output
    valid = data == {"amount": 40}
    assert r.tool_calls[0]["is_error"] is not valid
    assert len(log) == (2 if valid else 1)
    assert len([e for e in metrics if e["event"] == "tool"]) == (2 if valid else 1)


# -- relay in process ------------------------------------------------------------------------------


async def test_resolve_concurrently_lets_a_host_collect_every_relay_call_before_answering():
    import asyncio

    collected = []
    all_in = asyncio.Event()

    async def wait_for(request):
        collected.extend(relay_calls_of(request))
        if len(collected) == 2:
            all_in.set()
        await all_in.wait()
        call = relay_calls_of(request)[0]
        return relay_answer(request.id, [{"id": call.id, "output": f"looked up {call.input['q']}"}])

    t = RecordingTransport(openai_calls(("c1", "lookup", {"q": "a"}), ("c2", "lookup", {"q": "b"})), openai_text("ok"))
    c = client(t, wait_for=wait_for, resolve_concurrently=True)
    r = await asyncio.wait_for(c.run("go", kit(relay_tool("lookup", "host lookup"))), 5)
    assert sorted(x.id for x in collected) == ["c1", "c2"]
    assert [x["output"] for x in r.tool_calls] == ["looked up a", "looked up b"]


# -- streaming ---------------------------------------------------------------------------------------


async def test_stream_pending_event_carries_the_merged_relay_request_and_no_usage_event():
    with LlmServer() as server:
        server.add(Sse(openai_sse(calls=(("c1", "lookup", {"q": "a"}), ("c2", "lookup", {"q": "b"})))))
        async with create_client(base_url=server.base_url, style="openai", model="m", api_key="k") as c:
            events = [e async for e in c.stream("go", kit(relay_tool("lookup", "host lookup")))]
    assert [e["type"] for e in events] == ["tool_call", "tool_call", "pending", "done"]
    result = events[-1]["result"]
    assert events[2]["request"] is result.pending
    assert [x.id for x in relay_calls_of(result.pending)] == ["c1", "c2"]


async def test_stream_over_a_halted_conversation_balances_it_before_the_first_call():
    with LlmServer() as server:
        server.add(Sse(openai_sse(calls=(("c1", "a", {}), ("c2", "b", {})))), Sse(openai_sse("moving on")))
        async with create_client(base_url=server.base_url, style="openai", model="m", api_key="k") as c:
            tk = kit(gate("a", []), gate("b", []))
            halted = [e async for e in c.stream("go", tk, id="conv")][-1]["result"]
            assert halted.status == "pending"
            events = [e async for e in c.stream("forget it", tk, id="conv")]
        sent = server.requests[1].json["messages"]
    assert events[-1]["result"].text == "moving on"
    assert unbalanced_turns(sent) == []
    assert sent[-3:] == [{"role": "tool", "tool_call_id": "c1", "content": "a?"},
                         {"role": "tool", "tool_call_id": "c2", "content": "no result supplied on resume for b"},
                         {"role": "user", "content": "forget it"}]
