"""Lifecycle and backpressure: interrupt, close, inbox gate, the concurrency queue, on_spawn,
wait timeouts, cancellation and the error boundary."""

from __future__ import annotations

import asyncio

import pytest

from support.agent_kit import make_runtime, scripted, text, until
from toolnexus.agents import AgentDef, Budget, InboxItem, PostResult, TaskResult
from toolnexus.agents.clock import VirtualClock

SLOW = [{"always": True, "text": "slow-done", "blocksUntil": "released-or-aborted"}]
COUNT = [{"always": True, "text": "processed <count of numbered inbox items in last user msg> items"}]


def slow_runtime(**opts):
    transport = scripted({"m-slow": SLOW, "m-peer": COUNT, "m-fast": text("fast")})
    defs = [
        AgentDef("slow", "slow", "", "m-slow"),
        AgentDef("peer", "peer", "", "m-peer"),
        AgentDef("fast", "fast", "", "m-fast"),
    ]
    return make_runtime(defs, transport, **opts), transport


async def in_flight(transport) -> None:
    assert await asyncio.to_thread(transport.blocked.wait, 10), "the LLM request never started"


async def test_interrupt_during_an_llm_request_settles_before_returning():
    rt, transport = slow_runtime()
    try:
        h = rt.spawn(rt.root, "slow")
        rt.post(h, InboxItem("external", "external", "for later"))
        rt.wake(h, "work slowly")
        waiter = asyncio.ensure_future(rt.wait(h))
        await in_flight(transport)
        assert h.inbox == [] and len(h.drained) == 1

        rt.interrupt(h)

        assert h.state == "idle"  # not "running" until some later loop iteration
        assert [i.text for i in h.inbox] == ["for later"]
        assert f"{h.id}: running→idle (interrupt; inbox intact: 0 items)" in rt.trace
        result = await waiter
        assert (result.status, result.is_error, result.text) == ("interrupted", True, "interrupted")
        # The request was abandoned: nothing of it reaches the stored transcript.
        assert await rt.conversation_store.get(h.id) is None
    finally:
        transport.release()
        await rt.close(rt.root, force=True)


async def test_a_wake_right_after_interrupt_starts_a_fresh_turn_the_aborted_one_cannot_disturb():
    rt, transport = slow_runtime()
    try:
        h = rt.spawn(rt.root, "slow")
        rt.wake(h, "first")
        await in_flight(transport)
        rt.interrupt(h)
        assert rt.wake(h, "second").ok and h.state == "running"
        transport.release()
        result = await rt.wait(h)
        assert (result.status, result.text) == ("done", "slow-done")
        assert h.state == "idle" and rt.root.running_children == 0
        assert [m["content"] for m in await rt.conversation_store.get(h.id) if m["role"] == "user"] == ["second"]
    finally:
        transport.release()
        await rt.close(rt.root, force=True)


async def test_tokens_of_an_aborted_request_are_still_counted():
    rt, transport = slow_runtime()
    try:
        h = rt.spawn(rt.root, "slow")
        rt.wake(h, "work")
        await in_flight(transport)
        rt.interrupt(h)
        assert h.usage_total == 0
        transport.release()
        assert await rt.quiesce(10)
        assert (h.usage_total, h.own_total, h.turns_total) == (40, 40, 1)
        assert rt.root.usage_total == 40
    finally:
        transport.release()
        await rt.close(rt.root, force=True)


async def test_close_cascade_is_leaf_first_and_aborts_a_running_leaf():
    order: list[tuple[str, str]] = []
    rt, transport = slow_runtime()
    for d in rt.registry.values():
        d.on_close = lambda h, reason: order.append((h.id, reason))
    try:
        parent = rt.spawn(rt.root, "peer")
        child = rt.spawn(parent, "peer")
        leaf = rt.spawn(child, "slow")
        sibling = rt.spawn(parent, "fast")
        rt.wake(leaf, "work")
        waiter = asyncio.ensure_future(rt.wait(leaf))
        await in_flight(transport)

        await rt.close(parent, force=True)

        assert [i for i, _ in order] == [leaf.id, child.id, sibling.id, parent.id]
        assert {reason for _, reason in order} == {"interrupted"}
        assert (await waiter).status == "closed"
        assert [leaf.state, child.state, sibling.state, parent.state] == ["closed"] * 4
        assert f"{leaf.id}: idle→closed (interrupted)" in rt.trace
        assert rt.spawn(parent, "peer").error == "parent closed"
        assert rt.wake(leaf) == PostResult(False, "closed")
        assert (await rt.wait(leaf)).status == "closed"
        assert await rt.run_turn(leaf, "x") == TaskResult("closed", True, "closed")
    finally:
        transport.release()
        await rt.close(rt.root, force=True)


async def test_close_waits_the_grace_period_on_the_runtime_clock_before_aborting():
    clock = VirtualClock()
    rt, transport = slow_runtime(clock=clock, shutdown_ms=500)
    try:
        h = rt.spawn(rt.root, "slow")
        rt.wake(h, "work")
        await in_flight(transport)
        closing = asyncio.ensure_future(rt.close(h))
        await until(lambda: clock.pending_timers == 1)  # close() armed its grace timer
        await clock.advance(0.499)
        assert not closing.done() and h.state == "running"
        await clock.advance(0.001)
        await closing
        assert h.state == "closed" and h.last_result.status == "closed"
    finally:
        transport.release()
        await rt.close(rt.root, force=True)


async def test_inbox_overflow_is_rejected_loudly_and_ticks_never_take_a_slot(exits):
    rt, _ = slow_runtime(inbox_cap=2)
    exits.push_async_callback(rt.close, rt.root)
    h = rt.spawn(rt.root, "peer")
    assert rt.post(h, InboxItem("external", "external", "a")).ok
    for _ in range(3):
        assert rt.post(h, InboxItem("clock", "timer", "tick")).ok
    assert len(h.inbox) == 2 and h.inbox[1].ticks == 3
    rejected = rt.post(h, InboxItem("root", "peer", "b"))
    assert rejected == PostResult(False, f"inbox full: {h.id}")
    assert f"{h.id}: post REJECTED (inbox full, cap 2) from root" in rt.trace
    rt.wake(h)
    result = await rt.wait(h)
    assert result.text == "processed 2 items"


async def test_post_to_a_closed_handle_is_refused():
    rt, _ = slow_runtime()
    h = rt.spawn(rt.root, "peer")
    await rt.close(h)
    assert rt.post(h, InboxItem("external", "external", "late")) == PostResult(False, f"inbox closed: {h.id}")


async def test_queued_wakes_are_dequeued_in_arrival_order_across_siblings():
    rt, transport = slow_runtime()
    try:
        parent = rt.spawn(rt.root, "peer", Budget(max_concurrent=1))
        s1, s2, s3 = (rt.spawn(parent, "slow") for _ in range(3))
        rt.wake(s1, "one")
        rt.wake(s3, "three")
        rt.wake(s2, "two")
        assert s3.state == s2.state == "idle" and s3.wake_queue == ["three"]
        await in_flight(transport)
        transport.release()
        for h in (s1, s2, s3):
            assert (await rt.wait(h)).status == "done"
        dequeued = [line.split(":")[0] for line in rt.trace if "DEQUEUED wake (slot freed)" in line]
        assert dequeued == [s3.id, s2.id]
        assert f"{s3.id}: wake QUEUED (parent concurrency 1)" in rt.trace
    finally:
        transport.release()
        await rt.close(rt.root, force=True)


async def test_an_async_on_spawn_finishes_before_the_first_llm_call(exits):
    rt, transport = slow_runtime()
    exits.push_async_callback(rt.close, rt.root)
    events: list[str] = []
    release = asyncio.Event()

    async def on_spawn(h):
        await release.wait()
        events.append(f"on_spawn {h.id} done; llm calls so far: {len(transport.requests)}")

    rt.registry["fast"].on_spawn = on_spawn
    h = rt.spawn(rt.root, "fast")
    rt.wake(h, "go")
    waiting = asyncio.ensure_future(rt.wait(h))
    await until(lambda: len(h._waiters) == 1)
    assert transport.requests == []
    release.set()
    assert (await waiting).status == "done"
    assert events == [f"on_spawn {h.id} done; llm calls so far: 0"]


async def test_wait_timeout_runs_on_the_clock_and_leaves_the_child_running():
    clock = VirtualClock()
    rt, transport = slow_runtime(clock=clock)
    try:
        h = rt.spawn(rt.root, "slow")
        rt.wake(h, "work")
        waiting = asyncio.ensure_future(rt.wait(h, timeout_ms=50))
        await until(lambda: clock.pending_timers == 1)
        await clock.advance(0.05)
        result = await waiting
        assert (result.status, result.limit, result.is_error) == ("timeout", "timeout", True)
        assert result.text == "wait timeout after 50ms (child still running)"
        assert h.state == "running"
        transport.release()
        assert (await rt.wait(h)).status == "done"
    finally:
        transport.release()
        await rt.close(rt.root, force=True)


async def test_ids_are_parent_scoped_and_share_one_counter_per_parent():
    rt, _ = slow_runtime()
    peer, slow = rt.spawn(rt.root, "peer"), rt.spawn(rt.root, "slow")
    inner = rt.spawn(peer, "slow")
    assert (peer.id, slow.id, inner.id) == ("root/peer.1", "root/slow.2", "root/peer.1/slow.1")
    assert peer.conv_id == peer.id and inner.depth == 2
    assert [v.id for v in rt.list()] == ["root/peer.1", "root/peer.1/slow.1", "root/slow.2"]
    assert rt.spawn(rt.root, "nope").error == 'unknown agent "nope" (known: fast, peer, slow)'
    assert "root/peer.1: spawned (depth 1, tokens inf)" in rt.trace


async def test_a_failed_child_run_is_an_error_result_never_an_exception(exits):
    transport = scripted({"m-top": [
        {"whenToolMsgs": 0, "toolCalls": [{"name": "task", "args": {"agent": "broken", "prompt": "x"}}]},
        {"whenToolMsgs": ">=1", "text": "top saw: <last tool msg content>"},
    ]})  # no script for the child's model: its LLM call fails
    defs = [AgentDef("top", "top", "", "m-top", task_targets=["broken"]), AgentDef("broken", "fails", "", "m-missing")]
    rt = make_runtime(defs, transport)
    exits.push_async_callback(rt.close, rt.root)
    top = rt.spawn(rt.root, "top")
    rt.wake(top, "go")
    result = await rt.wait(top)
    assert result.status == "done"
    assert result.text.startswith("top saw: [error] ") and "no script for model 'm-missing'" in result.text
    child = top.children[0]
    assert child.last_result.status == "error" and child.last_result.is_error
    assert any(line.startswith(f"{child.id}: running→idle (error: ") for line in rt.trace)


async def test_cancelling_a_resume_caller_aborts_the_replay_and_propagates():
    rt, transport = slow_runtime()
    try:
        h = rt.spawn(rt.root, "slow")
        turn = asyncio.ensure_future(rt.run_turn(h, "direct"))
        await in_flight(transport)
        turn.cancel()
        with pytest.raises(asyncio.CancelledError):
            await turn
        assert h.state == "idle" and h.last_result.status == "interrupted"
        assert rt.root.running_children == 0
    finally:
        transport.release()
        await rt.close(rt.root, force=True)


async def test_a_store_that_fails_to_rewind_still_settles_the_turn_loudly(exits):
    from support.agent_kit import secret_tool
    from toolnexus.client import InMemoryConversationStore

    class FailingRewind(InMemoryConversationStore):
        saves = 0

        async def save(self, id, messages):
            FailingRewind.saves += 1
            if FailingRewind.saves == 2:  # the runtime's rewind after the client's own save
                raise OSError("disk full")
            await super().save(id, messages)

    transport = scripted({"m-ask": [{"always": True, "toolCalls": [{"name": "check_secret", "args": {}}]}]})
    rt = make_runtime([AgentDef("ask", "asks", "", "m-ask", tools=[secret_tool()])], transport, store=FailingRewind())
    exits.push_async_callback(rt.close, rt.root)
    h = rt.spawn(rt.root, "ask")
    rt.wake(h, "go")
    result = await rt.wait(h)
    assert (result.status, result.text) == ("error", "disk full")
    assert h.state == "idle" and rt.root.running_children == 0
    assert (h.turns_total, h.usage_total) == (1, 40)  # counted once


async def test_interrupting_a_delegating_parent_closes_the_child_it_was_waiting_for():
    transport = scripted({
        "m-boss": [{"whenToolMsgs": 0, "toolCalls": [{"name": "task", "args": {"agent": "slow", "prompt": "work"}}]}],
        "m-slow": SLOW,
    })
    defs = [AgentDef("boss", "delegates", "", "m-boss", task_targets=["slow"]), AgentDef("slow", "slow", "", "m-slow")]
    rt = make_runtime(defs, transport)
    try:
        boss = rt.spawn(rt.root, "boss")
        rt.wake(boss, "go")
        await in_flight(transport)
        child = boss.children[0]
        rt.interrupt(boss)
        assert boss.state == "idle"
        result = await rt.wait(child)
        assert result.status == "closed"  # its aborted turn reports the close to waiters first
        await until(lambda: child.state == "closed")
        assert f"{child.id}: idle→closed (interrupted)" in rt.trace
    finally:
        transport.release()
        await rt.close(rt.root, force=True)


async def test_a_run_starts_and_finishes_while_tools_keep_the_default_workers_busy():
    """Slow plain-function tools of other runs fill the loop's default executor: a run whose own
    tools are coroutines still starts and finishes at once — building its team does not wait for
    a worker thread (a soul file would be read on one)."""
    import threading
    from concurrent.futures import ThreadPoolExecutor

    from support.agent_kit import calls
    from toolnexus import define_tool
    from toolnexus.agents import agent

    async def ping() -> str:
        """Ping."""
        return "pong"

    model = scripted({"m": [{"whenToolMsgs": 0, "toolCalls": calls(("ping", {}))},
                            {"whenToolMsgs": ">=1", "text": "got <last tool msg content>"}]})
    pinger = agent("pinger", does="pings", model="m", uses={"tools": [define_tool(ping)]})
    busy, release = ThreadPoolExecutor(1), threading.Event()
    loop = asyncio.get_running_loop()
    loop.set_default_executor(busy)
    held = loop.run_in_executor(None, release.wait, 30)  # the only default worker, held
    try:
        r = await asyncio.wait_for(pinger.run("go", transport=model,
                                              llm={"base_url": "http://mock.local", "style": "openai",
                                                   "model": "m", "api_key": "k"}), 10)
        assert (r.status, r.text) == ("done", "got pong")
        assert not held.done()
    finally:
        release.set()
        await held
