"""Durable resume refuses what it cannot honour (suspension.md §9.2 A, beyond #3/#9, issue #4 items 4–5).

Every refusal is a `ResumeError` starting `toolnexus: cannot resume — `, raised before any tool
runs, any provider request is sent or anything is saved; the inputs are left byte-identical.
"""

from __future__ import annotations

import asyncio
import copy
import json
import re

import pytest

from support.llm_server import (
    RecordingTransport,
    anthropic_calls,
    openai_calls,
    openai_text,
    tool_from as make_tool,
    toolkit_of as kit,
)
from toolnexus import ResumeError
from toolnexus.client import create_client
from toolnexus.client._resume import LEDGER_SIZE, AnswerLedger
from toolnexus.relay import relay_tool
from toolnexus.types import Answer, Request, ToolResult, answer_declined, pending

PREFIX = "toolnexus: cannot resume — "



class Setup:
    """A client halted on `gate` (call c2, after a plain call c1), with a log of tool runs."""

    def __init__(self, *, style="openai", data=None, more=()):
        self.runs = []
        calls = openai_calls if style == "openai" else anthropic_calls
        self.transport = RecordingTransport(calls(("c1", "plain", {}), ("c2", "gate", {})), *more)
        self.client = create_client(base_url="http://mock.local", style=style, model="m", api_key="k",
                                    http_transport=self.transport)
        self.kit = kit(make_tool("plain", self.plain), make_tool("gate", self.gate))
        self.data = data

    async def plain(self, args, ctx):
        self.runs.append("plain")
        return ToolResult("plain done", False)

    async def gate(self, args, ctx):
        self.runs.append(("gate", None if ctx is None else ctx.answer))
        if ctx is not None and ctx.answer is not None:
            return ToolResult(f"gate got {json.dumps(ctx.answer.data)}", False)
        return pending(kind="input", prompt="How much?", id="req-1", data=self.data)

    async def halt(self):
        r = await self.client.run("go", self.kit)
        assert r.status == "pending"
        self.runs.clear()
        self.sent = len(self.transport.payloads)
        return r

    def assert_nothing_happened(self):
        assert self.runs == [] and len(self.transport.payloads) == self.sent


async def refused(setup, history, pending_, answer, match, toolkit="default"):
    before = json.dumps(history)
    with pytest.raises(ResumeError) as info:
        await setup.client.run_with_answer(setup.kit if toolkit == "default" else toolkit, history, pending_, answer)
    message = str(info.value)
    assert message.startswith(PREFIX), message
    assert re.search(match, message), message
    assert json.dumps(history) == before
    setup.assert_nothing_happened()
    return message


# -- A.1–A.5 -----------------------------------------------------------------------------------------


async def test_answer_id_mismatch_is_refused_naming_both_ids():
    s = Setup()
    r = await s.halt()
    message = await refused(s, r.messages, r.pending, Answer("req-other", True), "")
    assert message == f"{PREFIX}answer id 'req-other' does not match the pending request 'req-1'"


async def test_empty_history_is_refused():
    s = Setup()
    r = await s.halt()
    await refused(s, [], r.pending, Answer("req-1", True), "the history is empty")


async def test_history_without_a_tool_call_turn_is_refused():
    s = Setup()
    r = await s.halt()
    history = [{"role": "user", "content": "hi"}, {"role": "assistant", "content": "hello"}]
    await refused(s, history, r.pending, Answer("req-1", True), "no assistant turn with tool calls")


async def test_a_turn_with_no_results_was_not_halted():
    s = Setup()
    r = await s.halt()
    await refused(s, r.messages[:2], r.pending, Answer("req-1", True), r"message 1\) has no results after it")


async def test_a_turn_continued_with_a_new_prompt_is_closed():
    s = Setup(more=[openai_text("fine")])
    r = await s.halt()
    continued = await s.client.run("never mind", s.kit, history=r.messages)
    s.runs.clear()
    s.sent = len(s.transport.payloads)
    await refused(
        s,
        continued.messages,
        r.pending,
        Answer("req-1", True),
        r"is closed: it is followed by a message with role 'user'",
    )


async def test_results_that_are_not_an_in_order_prefix_are_refused():
    s = Setup()
    r = await s.halt()
    swapped = r.messages[:-2] + [r.messages[-1], r.messages[-2]]
    await refused(s, swapped, r.pending, Answer("req-1", True), r"\['c2', 'c1'\].*not an in-order prefix")


async def test_a_placeholder_that_is_not_this_requests_prompt_is_refused():
    s = Setup()
    r = await s.halt()
    other = Request("req-1", "input", "Something else?")
    await refused(s, r.messages, other, Answer("req-1", True),
                  r"halted call 'c2' \(gate\) holds 'How much\?', not the pending request's prompt 'Something else\?'")


async def test_relay_request_must_relay_the_halted_call_and_only_open_calls():
    s = Setup()
    r = await s.halt()
    s.kit.register(relay_tool("lookup", "host lookup"))
    relay = Request("req-1", "tool_call", "How much?", data={"calls": [{"id": "c9", "name": "gate", "input": {},
                                                                        "arguments": "{}"}]})
    await refused(s, r.messages, relay, Answer("req-1", True), r"first call 'c9' is not the halted call 'c2'")
    relay.data["calls"] = [{"id": "c2", "name": "gate"}, {"id": "c1", "name": "plain"}]
    await refused(s, r.messages, relay, Answer("req-1", True), r"relay call 'c1' is not an open call")


async def test_anthropic_histories_are_validated_on_their_own_shape():
    s = Setup(style="anthropic")
    r = await s.halt()
    broken = copy.deepcopy(r.messages)
    broken[-1]["content"].append({"type": "text", "text": "extra"})
    await refused(
        s, broken, r.pending, Answer("req-1", True), r"is closed: it is followed by a message with role 'user'"
    )
    finished = r.messages + [{"role": "assistant", "content": [{"type": "text", "text": "done"}]}]
    await refused(s, finished, r.pending, Answer("req-1", True), r"followed by a message with role 'assistant'")
    as_openai = r.messages[:-1] + [{"role": "tool", "tool_call_id": "c1", "content": "plain done"},
                                   {"role": "tool", "tool_call_id": "c2", "content": "How much?"}]
    await refused(
        s, as_openai, r.pending, Answer("req-1", True), r"is closed: it is followed by a message with role 'tool'"
    )


# -- A.6 / beyond #9: relay outputs ------------------------------------------------------------------


async def relay_halt():
    t = RecordingTransport(openai_calls(("c1", "lookup", {"q": "a"}), ("c2", "lookup", {"q": "b"})))
    c = create_client(base_url="http://mock.local", style="openai", model="m", api_key="k", http_transport=t)
    tk = kit(relay_tool("lookup", "host lookup"))
    r = await c.run("go", tk)
    return c, tk, t, r


@pytest.mark.parametrize("data, match", [
    ({"results": [{"id": "c1", "output": 42}]}, r"results\[0\] \(call 'c1'\) output must be a str, got int"),
    ({"results": [{"id": "c1"}]}, r"results\[0\] \(call 'c1'\) output must be a str, got NoneType"),
    ({"output": ["x"]}, r"the relay answer's output must be a str, got list"),
    ({"results": {"c1": "x"}}, r"results must be a list, got dict"),
    ({"results": [{"id": "c7", "output": "x"}]}, r"results\[0\] names call 'c7', which the request does not relay"),
])
async def test_relay_output_that_is_not_a_string_is_refused_not_blanked(data, match):
    c, tk, t, r = await relay_halt()
    before = json.dumps(r.messages)
    with pytest.raises(ResumeError, match=PREFIX + ".*" + match):
        await c.run_with_answer(tk, r.messages, r.pending, Answer(r.pending.id, True, data))
    assert json.dumps(r.messages) == before and len(t.payloads) == 1


# -- item 5: answer schema ---------------------------------------------------------------------------

SCHEMA = {"type": "object", "properties": {"amount": {"type": "number"}}, "required": ["amount"]}


async def test_schema_invalid_answer_data_is_refused_before_the_tool_sees_it_and_a_valid_one_then_works():
    s = Setup(data={"schema": SCHEMA}, more=[openai_text("refunded")])
    r = await s.halt()
    message = await refused(s, r.messages, r.pending, Answer("req-1", True, {"amount": "lots"}), "")
    assert message == (f"{PREFIX}the answer to 'req-1' does not match the request's schema: "
                       "amount: 'lots' is not of type 'number'")
    done = await s.client.run_with_answer(s.kit, r.messages, r.pending, Answer("req-1", True, {"amount": 40}))
    assert done.status == "done" and s.runs == [("gate", Answer("req-1", True, {"amount": 40}))]


async def test_a_declined_answer_is_not_schema_checked():
    s = Setup(data={"schema": SCHEMA}, more=[openai_text("ok")])
    r = await s.halt()
    done = await s.client.run_with_answer(s.kit, r.messages, r.pending, answer_declined("req-1"))
    assert done.tool_calls[0]["output"] == "declined/expired: How much?" and s.runs == []


# -- A.7 / beyond #3: double answers -----------------------------------------------------------------


async def test_answering_the_same_request_twice_is_refused_and_changes_nothing():
    s = Setup(more=[openai_text("done")])
    r = await s.halt()
    first = await s.client.run_with_answer(s.kit, r.messages, r.pending, Answer("req-1", True, {"v": 1}))
    assert first.status == "done"
    s.runs.clear()
    s.sent = len(s.transport.payloads)
    snapshot = json.dumps(first.messages)
    # the same client remembers the id, even given the original (still open) history
    await refused(s, r.messages, r.pending, Answer("req-1", True, {"v": 2}),
                  "'req-1' was already answered by this client")
    # a fresh client (empty ledger) sees that the resumed transcript is closed
    s.client = create_client(base_url="http://mock.local", style="openai", model="m", api_key="k",
                             http_transport=s.transport)
    await refused(s, first.messages, r.pending, Answer("req-1", True, {"v": 2}), "is closed")
    assert json.dumps(first.messages) == snapshot


async def test_ask_with_answer_twice_is_refused_and_the_store_is_byte_identical():
    s = Setup(more=[openai_text("done")])
    halted = await s.client.ask("go", s.kit, id="conv")
    s.runs.clear()
    await s.client.ask_with_answer(s.kit, "conv", halted.pending, Answer("req-1", True))
    stored = json.dumps(await s.client.store.get("conv"))
    sent = len(s.transport.payloads)
    with pytest.raises(ResumeError, match=PREFIX):
        await s.client.ask_with_answer(s.kit, "conv", halted.pending, Answer("req-1", True))
    assert json.dumps(await s.client.store.get("conv")) == stored
    assert len(s.transport.payloads) == sent and s.runs == [("gate", Answer("req-1", True))]


async def test_of_two_concurrent_ask_with_answer_calls_exactly_one_succeeds():
    arrived, release = asyncio.Event(), asyncio.Event()

    class SlowModel:
        def __init__(self):
            self.payloads = []

        async def post(self, url, headers, payload, timeout):
            self.payloads.append(payload)
            if len(self.payloads) == 1:
                return openai_calls(("c1", "gate", {}))
            arrived.set()
            await release.wait()  # the winner holds the conversation lock here
            return openai_text("done")

    async def gate(args, ctx):
        if ctx is not None and ctx.answer is not None:
            return ToolResult("approved", False)
        return pending(kind="approval", prompt="OK?", id="req-c")

    model = SlowModel()
    c = create_client(base_url="http://mock.local", style="openai", model="m", api_key="k", http_transport=model)
    tk = kit(make_tool("gate", gate))
    halted = await c.ask("go", tk, id="conv")
    both = asyncio.gather(*(c.ask_with_answer(tk, "conv", halted.pending, Answer("req-c", True)) for _ in range(2)),
                          return_exceptions=True)
    await arrived.wait()
    release.set()
    outcomes = await both
    assert sorted(type(o).__name__ for o in outcomes) == ["ResumeError", "RunResult"]
    assert len(model.payloads) == 2  # the loser sent nothing
    assert (await c.store.get("conv"))[-1] == {"role": "assistant", "content": "done"}


async def test_a_resume_in_flight_refuses_a_second_answer_for_the_same_request():
    entered, release = asyncio.Event(), asyncio.Event()

    async def slow_gate(args, ctx):
        if ctx is not None and ctx.answer is not None:
            entered.set()
            await release.wait()
            return ToolResult("ok", False)
        return pending(kind="approval", prompt="OK?", id="req-s")

    t = RecordingTransport(openai_calls(("c1", "gate", {})), openai_text("done"))
    c = create_client(base_url="http://mock.local", style="openai", model="m", api_key="k", http_transport=t)
    tk = kit(make_tool("gate", slow_gate))
    halted = await c.run("go", tk)
    first = asyncio.create_task(c.run_with_answer(tk, halted.messages, halted.pending, Answer("req-s", True)))
    await entered.wait()
    with pytest.raises(ResumeError, match="'req-s' is being resumed right now"):
        await c.run_with_answer(tk, halted.messages, halted.pending, Answer("req-s", True))
    release.set()
    assert (await first).status == "done"


async def test_a_failed_resume_is_not_recorded_so_the_host_can_retry():
    s = Setup(more=[RuntimeError("provider down"), openai_text("done")])
    r = await s.halt()
    with pytest.raises(RuntimeError, match="provider down"):
        await s.client.run_with_answer(s.kit, r.messages, r.pending, Answer("req-1", True))
    done = await s.client.run_with_answer(s.kit, r.messages, r.pending, Answer("req-1", True))
    assert done.status == "done"


def test_the_answer_ledger_keeps_the_last_4096_ids():
    ledger = AnswerLedger()
    for n in range(LEDGER_SIZE + 1):
        ledger.record(f"id-{n}")
    assert LEDGER_SIZE == 4096 and len(ledger) == 4096
    assert "id-0" not in ledger and "id-1" in ledger and f"id-{LEDGER_SIZE}" in ledger


# -- inputs ------------------------------------------------------------------------------------------


async def test_ask_with_answer_needs_a_conversation_id():
    s = Setup()
    r = await s.halt()
    for falsy in ("", None):
        with pytest.raises(ValueError) as info:
            await s.client.ask_with_answer(s.kit, falsy, r.pending, Answer("req-1", True))
        assert str(info.value) == "toolnexus: ask_with_answer needs a conversation id"
        assert not isinstance(info.value, ResumeError)


async def test_plain_json_mappings_are_accepted_and_malformed_ones_are_named():
    s = Setup(more=[openai_text("done")])
    r = await s.halt()
    with pytest.raises(ResumeError, match=PREFIX + "the pending request mapping has no 'prompt'"):
        await s.client.run_with_answer(s.kit, r.messages, {"id": "req-1", "kind": "input"}, {"id": "req-1", "ok": True})
    with pytest.raises(ResumeError, match=PREFIX + "the answer must be an Answer or a mapping, got str"):
        await s.client.run_with_answer(s.kit, r.messages, r.pending, "yes")
    done = await s.client.run_with_answer(s.kit, r.messages, {"id": "req-1", "kind": "input", "prompt": "How much?",
                                                              "future": 1}, {"id": "req-1", "ok": True})
    assert done.status == "done"


async def test_an_ok_answer_for_a_tool_the_toolkit_lacks_is_refused():
    s = Setup()
    r = await s.halt()
    await refused(s, r.messages, r.pending, Answer("req-1", True),
                  r"the toolkit has no tool 'gate' for the halted call 'c2'",
                  toolkit=kit(make_tool("plain", s.plain)))
