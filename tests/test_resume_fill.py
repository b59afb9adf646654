"""Durable resume fills the halted turn and continues (suspension.md §9.2 C–E, §10 beyond #2 #4 #5 #6).

The model is scripted behind the transport seam and every request body it receives is checked
for balance (one result per tool call, in order); tools, hooks, relay tools and toolkits are real.
"""

from __future__ import annotations

import asyncio
import copy
import dataclasses
import json
from datetime import UTC, datetime

import pytest

from support.llm_server import (
    RecordingTransport,
    anthropic_calls,
    anthropic_text,
    openai_calls,
    openai_text,
    tool_from as make_tool,
    toolkit_of as kit,
    unbalanced_turns,
)
from toolnexus.client import RunCancelled, create_client
from toolnexus.relay import RelayResult, relay_answer, relay_calls_of, relay_tool
from toolnexus.types import Answer, Request, ToolResult, answer_declined, pending

REPLIES = {"openai": (openai_calls, openai_text), "anthropic": (anthropic_calls, anthropic_text)}



def client(transport, style="openai", **kw):
    kw.setdefault("api_key", "k")
    return create_client(base_url="http://mock.local", style=style, model="m", http_transport=transport, **kw)


class Tools:
    """Gates that suspend once (request id `req-<name>`), a plain tool, a relay tool; runs are logged."""

    def __init__(self):
        self.runs = []

    def gate(self, name, **request):
        async def fn(args, ctx):
            answer = None if ctx is None else ctx.answer
            self.runs.append((name, args, answer))
            if answer is not None:
                return ToolResult(f"{name} got {json.dumps(answer.data)}", False)
            return pending(kind="approval", prompt=f"{name}?", id=f"req-{name}", **request)

        return make_tool(name, fn)

    def plain(self):
        async def fn(args, ctx):
            self.runs.append(("plain", args, None))
            return ToolResult(f"plain {args.get('n')}", False)

        return make_tool("plain", fn)

    def kit(self, *names, relay=False):
        tools = [self.plain() if n == "plain" else self.gate(n) for n in names]
        return kit(*tools, *([relay_tool("lookup", "host-side lookup")] if relay else []))


def assert_balanced(transport):
    for payload in transport.payloads:
        assert unbalanced_turns(payload["messages"]) == []


# -- non-relay halted call ---------------------------------------------------------------------------


@pytest.mark.parametrize("style", ["openai", "anthropic"])
async def test_ok_answer_retries_the_halted_tool_then_continues_with_no_new_user_turn(style):
    calls, text = REPLIES[style]
    tools, hooks_seen, metrics = Tools(), [], []
    hooks = {"before_tool": lambda ev: hooks_seen.append(("before", ev["name"])),
             "after_tool": lambda ev: hooks_seen.append(("after", ev["name"]))}
    t = RecordingTransport(calls(("c1", "plain", {"n": 1}), ("c2", "a", {"x": 2})),
                           text("all done", **({"prompt": 10, "completion": 5} if style == "openai" else
                                               {"input_tokens": 10, "output_tokens": 5})))
    c = client(t, style, system_prompt="be brief", hooks=hooks, on_metric=metrics.append)
    halted = await c.run("go", tools.kit("plain", "a"))
    tools.runs.clear(), hooks_seen.clear(), metrics.clear()

    r = await c.run_with_answer(tools.kit("plain", "a"), halted.messages, halted.pending,
                                Answer("req-a", True, {"ok": "yes"}))
    assert tools.runs == [("a", {"x": 2}, Answer("req-a", True, {"ok": "yes"}))]
    assert hooks_seen == [("after", "a")]  # no before_tool on the retry
    assert (r.status, r.text, r.turns, r.pending) == ("done", "all done", 1, None)
    assert r.usage == {"prompt_tokens": 10, "completion_tokens": 5, "total_tokens": 15}
    assert r.tool_calls == [{"name": "a", "args": {"x": 2}, "output": 'a got {"ok": "yes"}', "is_error": False,
                             "metadata": None}]
    assert [e["event"] for e in metrics] == ["tool", "llm", "run"]
    assert "pending" not in metrics[0] and metrics[-1]["turns"] == 1
    sent = t.payloads[-1]["messages"]
    assert sent[: len(halted.messages) - 1] == halted.messages[:-1]  # nothing before the halted slot changed
    assert sent[-1]["role"] == ("tool" if style == "openai" else "user")  # the filled turn, no new prompt
    assert [m for m in sent if m.get("role") == "system"] == ([{"role": "system", "content": "be brief"}]
                                                             if style == "openai" else [])
    assert r.messages == sent + [r.messages[-1]] and r.messages[-1]["role"] == "assistant"
    assert_balanced(t)


@pytest.mark.parametrize("style", ["openai", "anthropic"])
async def test_earlier_results_are_kept_byte_for_byte_and_the_placeholder_is_replaced(style):
    calls, text = REPLIES[style]
    tools = Tools()
    t = RecordingTransport(calls(("c1", "plain", {"n": 1}), ("c2", "a", {})), text("ok"))
    c = client(t, style)
    halted = await c.run("go", tools.kit("plain", "a"))
    history = copy.deepcopy(halted.messages)
    if style == "openai":
        history[-2] = {"role": "tool", "tool_call_id": "c1", "content": "plain 1 (edited by host)", "x-note": [1, "é"]}
    else:
        history[-1]["content"][0] = {"type": "tool_result", "tool_use_id": "c1",
                                     "content": [{"type": "text", "text": "t"}],
                                     "is_error": False, "cache_control": {"type": "ephemeral"}}
    kept = copy.deepcopy(history[-2] if style == "openai" else history[-1]["content"][0])
    r = await c.run_with_answer(tools.kit("plain", "a"), history, halted.pending, Answer("req-a", True))
    if style == "openai":
        assert r.messages[len(history) - 2] == kept
        assert r.messages[len(history) - 1] == {"role": "tool", "tool_call_id": "c2", "content": "a got null"}
    else:
        blocks = r.messages[len(history) - 1]["content"]
        assert blocks == [kept, {"type": "tool_result", "tool_use_id": "c2", "content": "a got null",
                                 "is_error": False}]
    assert [x for x in tools.runs if x[0] == "plain"] == [("plain", {"n": 1}, None)]  # only the original run


async def test_declined_answer_closes_the_slot_without_running_the_tool():
    tools, metrics = Tools(), []
    t = RecordingTransport(openai_calls(("c1", "a", {})), openai_text("understood"))
    c = client(t, on_metric=metrics.append)
    halted = await c.run("go", tools.kit("a"))
    tools.runs.clear(), metrics.clear()
    r = await c.run_with_answer(tools.kit("a"), halted.messages, halted.pending, answer_declined("req-a", "cancelled"))
    assert tools.runs == [] and [e["event"] for e in metrics] == ["llm", "run"]
    assert r.tool_calls == [{"name": "a", "args": {}, "output": "declined/expired: a?", "is_error": True,
                             "metadata": None}]
    assert t.payloads[-1]["messages"][-1] == {"role": "tool", "tool_call_id": "c1", "content": "declined/expired: a?"}


async def test_ok_answer_that_re_suspends_becomes_unresolved():
    async def stubborn(args, ctx):
        return pending(kind="input", prompt="still need more" if ctx else "need input", id="req-s")

    t = RecordingTransport(openai_calls(("c1", "stubborn", {})), openai_text("ok"))
    c = client(t)
    tk = kit(make_tool("stubborn", stubborn))
    halted = await c.run("go", tk)
    r = await c.run_with_answer(tk, halted.messages, halted.pending, Answer("req-s", True))
    assert r.tool_calls[0]["output"] == "unresolved: need input" and r.status == "done"


# -- expiry (item 4, beyond #2) ----------------------------------------------------------------------


@pytest.mark.parametrize("relay", [False, True])
async def test_expired_request_at_resume_becomes_declined_expired_and_the_tool_does_not_run(relay):
    tools = Tools()
    if relay:
        async def lookup_expiring(args, ctx):
            tools.runs.append(("lookup", args, ctx))
            call = {"id": "", "name": "lookup", "input": args, "arguments": "{}"}
            return pending(kind="tool_call", prompt="relay tool call lookup to the caller for execution",
                           data={"calls": [call]}, expiresAt="2030-06-01T12:00:00Z")

        tk = kit(make_tool("lookup", lookup_expiring))
    else:
        tk = kit(tools.gate("a", expiresAt="2030-06-01T12:00:00Z"))
    t = RecordingTransport(openai_calls(("c1", "lookup" if relay else "a", {})), openai_text("too late"))
    c = client(t)
    halted = await c.run("go", tk)
    tools.runs.clear()
    c.clock = lambda: datetime(2030, 6, 1, 12, 0, 0, tzinfo=UTC)
    answer = relay_answer(halted.pending.id, [RelayResult("c1", "found")]) if relay else Answer("req-a", True, {"v": 1})
    r = await c.run_with_answer(tk, halted.messages, halted.pending, answer)
    expected = "relay declined for lookup: expired" if relay else "declined/expired: a?"
    assert r.tool_calls[0]["output"] == expected and r.tool_calls[0]["is_error"] is True
    assert tools.runs == [] and r.status == "done"


async def test_a_request_that_has_not_expired_yet_is_answered_normally():
    tools = Tools()
    t = RecordingTransport(openai_calls(("c1", "a", {})), openai_text("ok"))
    c = client(t)
    tk = kit(tools.gate("a", expiresAt="2030-06-01T12:00:00Z"))
    halted = await c.run("go", tk)
    c.clock = lambda: datetime(2030, 6, 1, 11, 59, 59, tzinfo=UTC)
    r = await c.run_with_answer(tk, halted.messages, halted.pending, Answer("req-a", True, {"v": 1}))
    assert r.tool_calls[0]["output"] == 'a got {"v": 1}'


# -- parallel suspensions (beyond #4) ----------------------------------------------------------------


@pytest.mark.parametrize("style", ["openai", "anthropic"])
async def test_two_parallel_non_relay_suspensions_become_a_chain_of_halts_with_balanced_bodies(style):
    calls, text = REPLIES[style]
    tools = Tools()
    t = RecordingTransport(calls(("c1", "a", {"n": 1}), ("c2", "b", {"n": 2})), text("both approved"))
    c = client(t, style)
    first = await c.run("go", tools.kit("a", "b"))
    assert first.pending.id == "req-a"
    tools.runs.clear()

    second = await c.run_with_answer(
        tools.kit("a", "b"), first.messages, first.pending, Answer("req-a", True, {"v": "A"})
    )
    assert (second.status, second.pending.id, second.text, second.turns) == ("pending", "req-b", "b?", 0)
    assert len(t.payloads) == 1  # no LLM call on a repeat halt
    assert tools.runs == [("a", {"n": 1}, Answer("req-a", True, {"v": "A"})), ("b", {"n": 2}, None)]
    assert [x["output"] for x in second.tool_calls] == ['a got {"v": "A"}', "b?"]
    tools.runs.clear()

    done = await c.run_with_answer(
        tools.kit("a", "b"), second.messages, second.pending, Answer("req-b", True, {"v": "B"})
    )
    assert (done.status, done.text) == ("done", "both approved")
    assert tools.runs == [("b", {"n": 2}, Answer("req-b", True, {"v": "B"}))]
    assert len(t.payloads) == 2
    assert_balanced(t)
    results = ([m["content"] for m in t.payloads[1]["messages"] if m["role"] == "tool"] if style == "openai"
               else [b["content"] for b in t.payloads[1]["messages"][-1]["content"]])
    assert results == ['a got {"v": "A"}', 'b got {"v": "B"}']


async def test_two_parallel_relay_suspensions_travel_together_and_one_answer_fills_both():
    t = RecordingTransport(openai_calls(("c1", "lookup", '{"q":"a"}'), ("c2", "lookup", '{"q":"b"}')),
                           openai_text("ok"))
    c = client(t)
    tk = Tools().kit(relay=True)
    halted = await c.run("go", tk)
    assert [x.id for x in relay_calls_of(halted.pending)] == ["c1", "c2"]
    answer = relay_answer(halted.pending.id, [RelayResult("c2", "B!"), {"id": "c1", "output": "oops", "isError": True}])
    r = await c.run_with_answer(tk, halted.messages, halted.pending, answer)
    assert [(x["output"], x["is_error"]) for x in r.tool_calls] == [("oops", True), ("B!", False)]
    assert t.payloads[-1]["messages"][-2:] == [{"role": "tool", "tool_call_id": "c1", "content": "oops"},
                                               {"role": "tool", "tool_call_id": "c2", "content": "B!"}]
    assert_balanced(t)


@pytest.mark.parametrize("answer, outputs", [
    (lambda rid: Answer(rid, True, {"output": "first only"}),
     ["first only", "no result supplied on resume for lookup"]),
    (lambda rid: Answer(rid, True, None),
     ["no result supplied on resume for lookup", "no result supplied on resume for lookup"]),
    (lambda rid: answer_declined(rid), ["relay declined for lookup: declined"] * 2),
    (lambda rid: Answer(rid, False), ["relay declined for lookup: declined"] * 2),
    (lambda rid: answer_declined(rid, "cancelled"), ["relay declined for lookup: cancelled"] * 2),
])
async def test_relay_shorthand_missing_results_and_declines_fill_every_relayed_call(answer, outputs):
    t = RecordingTransport(openai_calls(("c1", "lookup", {}), ("c2", "lookup", {})), openai_text("ok"))
    c = client(t)
    tk = Tools().kit(relay=True)
    halted = await c.run("go", tk)
    r = await c.run_with_answer(tk, halted.messages, halted.pending, answer(halted.pending.id))
    assert [x["output"] for x in r.tool_calls] == outputs
    assert all(x["is_error"] for x in r.tool_calls if x["output"] != "first only")
    assert_balanced(t)


async def test_relay_and_non_relay_suspensions_in_one_turn_resume_strictly_in_call_order():
    tools = Tools()
    t = RecordingTransport(openai_calls(("c1", "lookup", {"q": 1}), ("c2", "a", {}), ("c3", "lookup", {"q": 3})),
                           openai_text("finished"))
    c = client(t)
    tk = tools.kit("a", relay=True)
    first = await c.run("go", tk)
    assert [x.id for x in relay_calls_of(first.pending)] == ["c1", "c3"]  # never mixed with the gate
    both = relay_answer(first.pending.id, [RelayResult("c1", "one"), RelayResult("c3", "three")])

    second = await c.run_with_answer(tk, first.messages, first.pending, both)
    assert (second.status, second.pending.id, second.turns) == ("pending", "req-a", 0)
    assert [m.get("tool_call_id") for m in second.messages if m["role"] == "tool"] == ["c1", "c2"]
    assert second.messages[-2]["content"] == "one"

    third = await c.run_with_answer(tk, second.messages, second.pending, Answer("req-a", True))
    assert third.status == "pending" and [x.id for x in relay_calls_of(third.pending)] == ["c3"]
    assert third.messages[-1] == {"role": "tool", "tool_call_id": "c3",
                                  "content": "relay tool call lookup to the caller for execution"}

    done = await c.run_with_answer(tk, third.messages, third.pending, Answer(third.pending.id, True, {"output": "3!"}))
    assert done.status == "done" and len(t.payloads) == 2
    assert [m["content"] for m in t.payloads[1]["messages"] if m["role"] == "tool"] == ["one", "a got null", "3!"]
    assert_balanced(t)


async def test_with_the_clients_wait_for_the_other_suspensions_resolve_inline():
    tools = Tools()
    t = RecordingTransport(openai_calls(("c1", "a", {}), ("c2", "b", {})), openai_text("ok"))
    halted = await client(t).run("go", tools.kit("a", "b"))
    asked = []

    def wait_for(request):
        asked.append(request.id)
        return Answer(request.id, True, {"v": "inline"})

    r = await client(t, wait_for=wait_for).run_with_answer(tools.kit("a", "b"), halted.messages, halted.pending,
                                                           Answer("req-a", True, {"v": "durable"}))
    assert asked == ["req-b"] and r.status == "done"
    assert [x["output"] for x in r.tool_calls] == ['a got {"v": "durable"}', 'b got {"v": "inline"}']
    assert_balanced(t)


async def test_without_a_toolkit_relay_calls_fill_and_other_calls_are_unknown_tools():
    tools = Tools()
    t = RecordingTransport(openai_calls(("c1", "lookup", {}), ("c2", "plain", {})), openai_text("ok"))
    c = client(t)
    halted = await c.run("go", tools.kit("plain", relay=True))
    r = await c.run_with_answer(None, halted.messages, halted.pending, Answer(halted.pending.id, True, {"output": "x"}))
    assert [x["output"] for x in r.tool_calls] == ["x", "unknown tool: plain"]
    assert "tools" not in t.payloads[-1]
    assert_balanced(t)


async def test_a_cancel_already_set_raises_before_anything_runs_and_the_answer_stays_usable():
    tools = Tools()
    t = RecordingTransport(openai_calls(("c1", "a", {})), openai_text("ok"))
    c = client(t)
    halted = await c.run("go", tools.kit("a"))
    tools.runs.clear()
    cancel = asyncio.Event()
    cancel.set()
    with pytest.raises(RunCancelled):
        await c.run_with_answer(tools.kit("a"), halted.messages, halted.pending, Answer("req-a", True), cancel=cancel)
    assert tools.runs == [] and len(t.payloads) == 1
    r = await c.run_with_answer(tools.kit("a"), halted.messages, halted.pending, Answer("req-a", True))
    assert r.status == "done"


# -- conversations (ask_with_answer, beyond #6) ------------------------------------------------------


async def test_ask_with_answer_saves_a_repeat_halt_and_then_the_finished_conversation():
    tools = Tools()
    t = RecordingTransport(openai_calls(("c1", "a", {}), ("c2", "b", {})), openai_text("done"))
    c = client(t)
    first = await c.ask("go", tools.kit("a", "b"), id="conv")
    second = await c.ask_with_answer(tools.kit("a", "b"), "conv", first.pending, Answer("req-a", True))
    assert second.status == "pending" and await c.store.get("conv") == second.messages
    done = await c.ask_with_answer(tools.kit("a", "b"), "conv", second.pending, Answer("req-b", True))
    assert done.status == "done" and await c.store.get("conv") == done.messages
    assert_balanced(t)


async def test_declining_through_ask_with_answer_abandons_a_halted_conversation_cleanly():
    tools = Tools()
    t = RecordingTransport(openai_calls(("c1", "a", {}), ("c2", "plain", {})), openai_text("ok, I won't"),
                           openai_text("sure"))
    c = client(t)
    first = await c.ask("go", tools.kit("a", "plain"), id="conv")
    tools.runs.clear()
    closed = await c.ask_with_answer(tools.kit("a", "plain"), "conv", first.pending, answer_declined("req-a"))
    assert [x["output"] for x in closed.tool_calls] == ["declined/expired: a?", "plain None"]
    assert [r[0] for r in tools.runs] == ["plain"]
    nxt = await c.ask("something else", tools.kit("a", "plain"), id="conv")
    assert nxt.text == "sure"
    assert_balanced(t)


# -- the seed page's JSON round trip (beyond #1, in process) ------------------------------------------


async def test_seed_json_round_trip_resumes_with_answer_data_reaching_the_tool():
    async def refund(args=None, ctx=None):
        if ctx is not None and ctx.answer is not None and ctx.answer.ok:
            amount = (ctx.answer.data or {}).get("amount", 0)
            return ToolResult(output=f"refunded ${amount}", is_error=False)
        return pending(kind="input", prompt="How much should be refunded?")

    t = RecordingTransport(openai_calls(("c1", "refund", "{}")), openai_text("refund processed."))
    tk = kit(make_tool("refund", refund))
    r = await client(t).run("refund the last order", tk)
    assert r.status == "pending"

    wire = json.dumps(dataclasses.asdict(r.pending))
    saved = json.dumps(r.messages)
    restored = json.loads(wire)
    answer = Answer(id=restored["id"], ok=True, data={"amount": 40})

    fresh = client(t)
    final = await fresh.run_with_answer(tk, json.loads(saved), Request(**restored), answer)
    assert (final.status, final.text) == ("done", "refund processed.")
    assert final.tool_calls[0]["output"] == "refunded $40"
    assert t.payloads[-1]["messages"][-1] == {"role": "tool", "tool_call_id": "c1", "content": "refunded $40"}
