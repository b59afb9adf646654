"""Runtime snapshots: the whole handle tree as plain JSON, rebuilt in a fresh runtime (agents.md beyond #2)."""

from __future__ import annotations

import asyncio
import json
import math
from typing import Any

import pytest

from support.agent_kit import calls, delegate, gate_tool, scripted, text
from toolnexus.agents import AgentDef, AgentRuntime, Budget, InboxItem
from toolnexus.agents._snapshot import SNAPSHOT_FORMAT, SnapshotError
from toolnexus.agents.clock import VirtualClock
from toolnexus.client import InMemoryConversationStore
from toolnexus.types import Answer, Tool, ToolResult

LEAF = [
    {"whenNoToolMsgContains": "bumped", "toolCalls": calls(("bump", {}))},
    {"whenNoToolMsgContains": "gated 1 ok", "toolCalls": calls(("gate", {"x": 1}))},
    {"always": True, "text": "leaf done: <last tool msg content>"},
]
SCRIPTS = {
    "m-boss": delegate("leaf", "do it", "boss: <last tool msg content>"),
    "m-leaf": LEAF,
    "m-quiet": text("quiet done"),
    "m-slow": [{"always": True, "text": "slow done", "blocksUntil": "released-or-aborted"}],
}


def bump_tool(runs: list) -> Tool:
    async def execute(args: Any = None, ctx: Any = None) -> ToolResult:
        runs.append(1)
        return ToolResult(f"bumped {len(runs)}", False)

    return Tool("bump", "a side effect", {"type": "object", "properties": {}}, "native", execute)


def registry(runs: list, *, leaf_mode: str = "replay", quiet_prompt: str = "") -> dict[str, AgentDef]:
    defs = [
        AgentDef("boss", "delegates", "", "m-boss", task_targets=["leaf"], budget=Budget(max_tokens=5000)),
        AgentDef("leaf", "bumps then asks", "", "m-leaf", tools=[bump_tool(runs), gate_tool()], resume_mode=leaf_mode),
        AgentDef("quiet", "answers", quiet_prompt, "m-quiet"),
        AgentDef(
            "holder", "queues its children", "", "m-quiet", budget=Budget(max_concurrent=0, max_tool_calls=math.inf)
        ),
        AgentDef("slow", "blocks", "", "m-slow"),
    ]
    return {d.name: d for d in defs}


def runtime(reg: dict[str, AgentDef], transport: Any = None, **opts: Any) -> AgentRuntime:
    return AgentRuntime(
        registry=reg, transport=transport or scripted(SCRIPTS), clock=opts.pop("clock", VirtualClock()), **opts
    )


async def through_json(rt: AgentRuntime, **kw: Any) -> dict[str, Any]:
    return json.loads(json.dumps(await rt.snapshot(**kw), allow_nan=False))


def handles(rt: AgentRuntime) -> list:
    out, stack = [], [rt.root]
    while stack:
        h = stack.pop(0)
        out.append(h)
        stack[:0] = h.children
    return out


def durable(h) -> dict[str, Any]:
    rec = h.to_record()
    rec.pop("spawned_at")
    return rec


async def busy_tree(rt: AgentRuntime):
    """Every kind of state: a suspended team with drained input, a settled handle with an inbox
    (including coalesced ticks), a closed one, and a queued wake."""
    boss = rt.spawn(rt.root, "boss")
    rt.post(boss, InboxItem("external", "chat", "context for the boss"))
    rt.wake(boss, "go")
    first = await rt.wait(boss)
    quiet = rt.spawn(rt.root, "quiet")
    rt.wake(quiet, "hi")
    await rt.wait(quiet)
    rt.post(quiet, InboxItem("external", "chat", "later"))
    rt.post(quiet, InboxItem("clock", "timer", "tick"))
    rt.post(quiet, InboxItem("clock", "timer", "tick"))
    gone = rt.spawn(rt.root, "quiet")
    await rt.close(gone)
    holder = rt.spawn(rt.root, "holder")
    kid = rt.spawn(holder, "quiet")
    rt.wake(kid, "when a slot frees")
    return boss, first


async def test_a_snapshot_round_trips_list_and_every_counter(exits):
    rt = runtime(registry([]))
    exits.push_async_callback(rt.close, rt.root)
    boss, first = await busy_tree(rt)
    leaf = boss.children[0]
    assert first.status == "pending" and boss.drained and leaf.state == "suspended"

    rt2 = await AgentRuntime.from_snapshot(await through_json(rt), registry=registry([]), transport=scripted(SCRIPTS),
                                           clock=VirtualClock())
    exits.push_async_callback(rt2.close, rt2.root)

    assert rt2.list() == rt.list()
    assert [durable(h) for h in handles(rt2)] == [durable(h) for h in handles(rt)]
    pairs = list(zip(handles(rt), handles(rt2), strict=True))
    for a, b in pairs:  # the counters by name, for the reader
        assert (b.usage_total, b.own_total, b.turns_total, b.seq, b.task_key) == \
               (a.usage_total, a.own_total, a.turns_total, a.seq, a.task_key)
        assert (b.pool.tokens, b.pool.tool_calls, b.pool.children) == (
            a.pool.tokens,
            a.pool.tool_calls,
            a.pool.children,
        )
        assert (b.pending_req, b.pending_input, b.inbox, b.drained, b.wake_queue) == \
               (a.pending_req, a.pending_input, a.inbox, a.drained, a.wake_queue)
        assert (b.last_result, b.state, b.depth) == (a.last_result, a.state, a.depth)
        assert (b.parent and b.parent.id, [c.id for c in b.children]) == (
            a.parent and a.parent.id,
            [c.id for c in a.children],
        )
    assert rt2.trace == rt.trace and rt2.events == rt.events
    assert rt2.max_observed_concurrent_turns == rt.max_observed_concurrent_turns
    for h in handles(rt)[1:]:
        assert await rt2.conversation_store.get(h.id) == await rt.conversation_store.get(h.id)
    assert rt2.inspect(rt2.root.children[1]).inbox == 2 and rt2.root.children[1].inbox[1].ticks == 2


async def test_a_suspended_tree_resumes_in_a_fresh_runtime_exactly_like_the_original(exits):
    original_runs, restored_runs = [], []
    rt = runtime(registry(original_runs))
    exits.push_async_callback(rt.close, rt.root)
    boss, first = await busy_tree(rt)
    snap = await through_json(rt)
    transport2 = scripted(SCRIPTS)
    rt2 = await AgentRuntime.from_snapshot(snap, registry=registry(restored_runs), transport=transport2,
                                           clock=VirtualClock())
    exits.push_async_callback(rt2.close, rt2.root)

    answer = Answer(id=first.pending.id, ok=True)
    expected = await rt.resume(answer)
    got = await rt2.resume(answer)

    assert got == expected and (got.status, got.text) == ("done", "boss: leaf done: gated 1 ok")
    boss2 = rt2.root.children[0]
    assert [c.id for c in boss2.children] == ["root/boss.1/leaf.1"]  # no duplicate child
    assert rt2.list() == rt.list() and rt2.trace == rt.trace
    assert len(restored_runs) == 1 and len(transport2.calls_for("m-boss")) == 2  # only the post-restart calls
    assert boss2.turns_total == boss.turns_total and boss2.usage_total == boss.usage_total


async def test_a_continued_suspension_survives_a_restore_into_a_fresh_store(exits):
    runs: list = []
    rt = runtime(registry(runs, leaf_mode="continue"))
    leaf = rt.spawn(rt.root, "leaf")
    rt.wake(leaf, "go")
    first = await rt.wait(leaf)
    snap = await through_json(rt)
    await rt.close(rt.root)

    transport2 = scripted(SCRIPTS)
    rt2 = await AgentRuntime.from_snapshot(snap, registry=registry(runs, leaf_mode="continue"), transport=transport2,
                                           clock=VirtualClock())
    exits.push_async_callback(rt2.close, rt2.root)
    assert isinstance(rt2.conversation_store, InMemoryConversationStore)
    final = await rt2.resume(Answer(id=first.pending.id, ok=True))

    assert (final.status, final.text, final.turns) == ("done", "leaf done: gated 1 ok", 3)
    assert len(runs) == 1 and len(transport2.calls_for("m-leaf")) == 1


async def test_without_conversations_the_host_passes_the_same_store(exits):
    store = InMemoryConversationStore()
    rt = runtime(registry([], leaf_mode="continue"), store=store)
    exits.push_async_callback(rt.close, rt.root)
    leaf = rt.spawn(rt.root, "leaf")
    rt.wake(leaf, "go")
    first = await rt.wait(leaf)
    snap = await through_json(rt, conversations=False)
    assert "conversations" not in snap

    rt2 = await AgentRuntime.from_snapshot(snap, registry=registry([], leaf_mode="continue"), store=store,
                                           transport=scripted(SCRIPTS), clock=VirtualClock())
    exits.push_async_callback(rt2.close, rt2.root)
    assert (await rt2.resume(Answer(id=first.pending.id, ok=True))).status == "done"


async def test_an_answer_applied_before_the_snapshot_is_not_applied_again(exits):
    rt = runtime(registry([]))
    exits.push_async_callback(rt.close, rt.root)
    boss, first = await busy_tree(rt)
    answer = Answer(id=first.pending.id, ok=True)
    done = await rt.resume(answer)
    transport2 = scripted(SCRIPTS)
    rt2 = await AgentRuntime.from_snapshot(await through_json(rt), registry=registry([]), transport=transport2,
                                           clock=VirtualClock())
    exits.push_async_callback(rt2.close, rt2.root)

    assert await rt2.resume(answer) == done
    assert transport2.requests == [] and rt2.trace == rt.trace


async def test_a_running_handle_comes_back_idle_interrupted_by_restart_and_queued_wakes_can_be_dispatched(exits):
    transport = scripted(SCRIPTS)
    reg = registry([])
    reg["lane"] = AgentDef("lane", "one child at a time", "", "m-quiet", budget=Budget(max_concurrent=1))
    rt = runtime(reg, transport)
    exits.push_async_callback(rt.close, rt.root, force=True)  # the restart below closes it; this is for a failure
    exits.callback(transport.release)
    lane = rt.spawn(rt.root, "lane")
    slow, next_up = rt.spawn(lane, "slow"), rt.spawn(lane, "quiet")
    rt.post(slow, InboxItem("external", "chat", "keep me"))
    rt.wake(slow, "block")
    rt.wake(next_up, "queued")
    await asyncio.to_thread(transport.blocked.wait, 5)
    assert slow.state == "running" and slow.drained and next_up.wake_queue == ["queued"]

    snap = await through_json(rt)
    reg2 = dict(reg)
    rt2 = await AgentRuntime.from_snapshot(snap, registry=reg2, transport=scripted(SCRIPTS), clock=VirtualClock())
    exits.push_async_callback(rt2.close, rt2.root)
    transport.release()
    await rt.close(rt.root, force=True)

    lane2, slow2, next2 = rt2.root.children[0], *rt2.root.children[0].children
    assert slow2.state == "idle" and [i.text for i in slow2.inbox] == ["keep me"] and slow2.drained == []
    assert (slow2.last_result.status, slow2.last_result.text) == ("interrupted", "interrupted by restart")
    assert f"{slow2.id}: running→idle (interrupted by restart)" in rt2.trace
    assert lane2.running_children == 0 and next2.wake_queue == ["queued"]
    assert rt2.dispatch_queued() == 1
    assert (await rt2.wait(next2)).text == "quiet done"


async def test_a_registry_that_differs_from_the_snapshot_fails_loudly(exits):
    rt = runtime(registry([]))
    exits.push_async_callback(rt.close, rt.root)
    rt.spawn(rt.root, "quiet")
    snap = await through_json(rt)
    with pytest.raises(SnapshotError, match=r"changed: quiet"):
        await AgentRuntime.from_snapshot(snap, registry=registry([], quiet_prompt="another soul"),
                                         transport=scripted(SCRIPTS))
    smaller = {k: v for k, v in registry([]).items() if k != "slow"}
    with pytest.raises(ValueError, match=r"missing: slow"):
        await AgentRuntime.from_snapshot(snap, registry=smaller, transport=scripted(SCRIPTS))


async def test_a_malformed_snapshot_names_what_is_wrong(exits):
    rt = runtime(registry([]))
    exits.push_async_callback(rt.close, rt.root)
    rt.spawn(rt.root, "quiet")
    snap = await through_json(rt)
    with pytest.raises(SnapshotError, match="expected format"):
        await AgentRuntime.from_snapshot({**snap, "format": "v0"}, registry=registry([]), transport=scripted(SCRIPTS))
    broken = json.loads(json.dumps(snap))
    broken["handles"][1]["state"] = "sleeping"
    with pytest.raises(SnapshotError, match=r"handle #1 \('root/quiet.1'\) has state 'sleeping'"):
        await AgentRuntime.from_snapshot(broken, registry=registry([]), transport=scripted(SCRIPTS))
    orphan = json.loads(json.dumps(snap))
    orphan["handles"][1]["parent_id"] = "root/nobody.9"
    with pytest.raises(SnapshotError, match="names parent 'root/nobody.9'"):
        await AgentRuntime.from_snapshot(orphan, registry=registry([]), transport=scripted(SCRIPTS))
    assert snap["format"] == SNAPSHOT_FORMAT


async def test_infinite_budgets_are_strict_json_and_wall_clock_age_is_kept(exits):
    clock = VirtualClock(start=100.0)
    reg = registry([])
    reg["timed"] = AgentDef("timed", "", "", "m-quiet", budget=Budget(max_tokens=math.inf, max_wall_ms=120_000))
    rt = runtime(reg, clock=clock)
    exits.push_async_callback(rt.close, rt.root)
    rt.spawn(rt.root, "timed")
    await clock.advance(60)
    snap = await through_json(rt)  # allow_nan=False: no Infinity in the text

    clock2 = VirtualClock(start=5.0)
    rt2 = await AgentRuntime.from_snapshot(snap, registry=reg, transport=scripted(SCRIPTS), clock=clock2)
    exits.push_async_callback(rt2.close, rt2.root)
    h2 = rt2.root.children[0]
    assert h2.budget.max_tokens == math.inf and h2.eff["max_tokens"] == math.inf
    assert 60 <= clock2.now() - h2.spawned_at < 61  # its age, plus the (tiny) real downtime
