"""The parts of a durable run, each exercised alone: the staging, the conversation view, the commit
scheduler, the lease, the turn journal, the turn store — and `DurableRun` composing them.

The parts that meet the store run on real ones (file, SQLite, PostgreSQL when
`TOOLNEXUS_TEST_POSTGRES` is set); the scheduler is driven by fake commits it cannot tell apart
from real ones; the lease renews on a virtual clock.
"""

from __future__ import annotations

import asyncio
import contextlib
from typing import Any, Optional

import pytest

from support.stores import shared_store_url  # noqa: F401 - fixture
from toolnexus._clock import AsyncioClock, VirtualClock
from toolnexus.agents._defs import AgentDef
from toolnexus.agents._durable import (
    CommitScheduler,
    ConversationView,
    DurableRun,
    Lease,
    Staging,
    TurnJournal,
    TurnStore,
)
from toolnexus.agents._handle import Handle
from toolnexus.client._journal import FINISHED, STARTED
from toolnexus.client._memory import LockingStore
from toolnexus.client._wire.base import ToolCall
from toolnexus.durable import Changes, ConversationOps, Holder, LeaseLost, RunStore, StoreUnavailable
from toolnexus.durable._model import dumps
from toolnexus.errors import ToolnexusRuntimeError
from toolnexus.stores import open_store
from toolnexus.types import Request, ToolResult

TTL = 30.0
WAIT = 10.0  # a bound on waiting for an event that must come (a hang fails the test instead of blocking it)


def handle(hid: str = "h1", *, clock: Any = None) -> Handle:
    defn = AgentDef(hid, "a test agent", "", "none")
    return Handle(hid, defn, None, spawned_at=(clock or AsyncioClock()).now())


def msg(text: str) -> dict[str, Any]:
    return {"role": "user", "content": text}


async def new_run(store: RunStore, run_id: str, holder: Holder, *, lease_ttl: float = TTL) -> int:
    return await store.start_run(run_id, kind="agents", entry_agent="a", holder=holder, lease_ttl=lease_ttl,
                                 state={}, changes=Changes())


# -- the staging -----------------------------------------------------------------------------------


async def test_staging_writes_a_transcript_append_only_and_a_rewind_drops_only_what_it_drops(shared_store_url):
    staging = Staging("r1", AsyncioClock())
    me = Holder.here()
    async with open_store(shared_store_url) as store:
        await new_run(store, "r1", me)

        staging.stage_conversation("c", [msg("1"), msg("2")])
        changes, _ = staging.take("running")
        assert changes.conversations == {"c": ConversationOps(0, [dumps(msg("1")), dumps(msg("2"))], 0)}
        await store.commit("r1", me, changes, lease_ttl=TTL)

        staging.stage_conversation("c", [msg("1"), msg("2"), msg("3")])
        changes, _ = staging.take("running")
        assert changes.conversations == {"c": ConversationOps(2, [dumps(msg("3"))], 2)}  # the new message only
        await store.commit("r1", me, changes, lease_ttl=TTL)

        staging.stage_conversation("c", [msg("1"), msg("4")])  # a rewind past the second message
        changes, _ = staging.take("running")
        assert changes.conversations == {"c": ConversationOps(1, [dumps(msg("4"))], 3)}
        await store.commit("r1", me, changes, lease_ttl=TTL)

        assert (await store.load("r1")).conversations["c"] == [msg("1"), msg("4")]
        assert staging.conversation("c") == [msg("1"), msg("4")]
        staging.stage_conversation("c", [msg("1"), msg("4")])  # unchanged: nothing to write
        assert staging.take("running")[0].conversations == {}


async def test_staging_puts_back_what_a_refused_commit_took_ahead_of_what_came_after(shared_store_url):
    staging = Staging("r1", AsyncioClock())
    me, intruder = Holder.here(), Holder.here()
    h = handle()
    async with open_store(shared_store_url) as store:
        await new_run(store, "r1", me)
        staging.touch(h)
        staging.trace("first")
        staging.stage_conversation("c", [msg("1")])
        staging.set_state(step=1)
        changes, taken = staging.take("running")
        staging.trace("second")  # staged while that commit was on its way
        with pytest.raises(LeaseLost):  # not the holder: the store refuses the whole commit
            await store.commit("r1", intruder, changes, lease_ttl=TTL)
        staging.put_back(taken)

        changes, _ = staging.take("running")
        assert changes.trace == ["first", "second"]
        assert set(changes.handles) == {"h1"}
        assert changes.conversations == {"c": ConversationOps(0, [dumps(msg("1"))], 0)}
        assert changes.state == {"step": 1}
        assert changes.status == "running"  # the refused commit's status was never written
        await store.commit("r1", me, changes, lease_ttl=TTL)

        loaded = await store.load("r1")
        assert loaded.trace[-2:] == ["first", "second"]
        assert loaded.conversations["c"] == [msg("1")]
        assert loaded.state == {"step": 1}
        assert loaded.handles["h1"]["id"] == "h1"
        assert staging.take("running")[0].empty()  # all of it landed; the status is unchanged


def test_staging_compares_a_restored_transcript_by_its_text() -> None:
    staging = Staging("r1", AsyncioClock())
    staging.load_conversation("c", [msg("1"), msg("2")])  # as committed: no messages handed out yet
    staging.stage_conversation("c", [msg("1"), msg("2"), msg("3")])
    assert staging.take("running")[0].conversations == {"c": ConversationOps(2, [dumps(msg("3"))], 2)}
    staging.load_conversation("d", [msg("1"), msg("2")])
    staging.stage_conversation("d", [msg("1"), msg("x")])
    assert staging.take("running")[0].conversations == {"d": ConversationOps(1, [dumps(msg("x"))], 2)}


def test_staging_restates_the_status_only_when_it_changed() -> None:
    staging = Staging("r1", AsyncioClock())
    assert staging.take("running")[0].status == "running"
    assert staging.take("running")[0].status is None
    staging.mark_status("pending")  # what restore found in the store
    assert staging.take("pending")[0].status is None
    assert staging.take("done")[0].status == "done"


def test_staging_keeps_a_turns_journal_in_its_handles_record_and_drops_the_stores_own_rows() -> None:
    clock = VirtualClock(100.0)
    staging = Staging("r1", clock)
    h = handle(clock=clock)
    staging.load_calls({("h1", "old"): {"status": STARTED}}, {})  # a row an earlier version wrote
    staging.stage_call(h, "c1", {"status": STARTED, "name": "t", "args": {}})
    changes, _ = staging.take("running")
    assert changes.handles["h1"]["calls"] == {"c1": {"status": STARTED, "name": "t", "args": {}}}
    assert changes.calls == {}

    staging.stage_call(h, "old", None)  # that call moved on: its row goes
    staging.stage_call(h, "c1", None)
    changes, _ = staging.take("running")
    assert "calls" not in changes.handles["h1"]
    assert changes.calls == {("h1", "old"): None}
    staging.committed(changes)
    staging.drop_calls(h)
    assert staging.take("running")[0].calls == {}  # the row is known gone: not deleted twice


async def test_a_staged_handle_record_counts_its_age_on_the_wall_clock() -> None:
    clock = VirtualClock(1000.0)
    staging = Staging("r1", clock)
    h = handle(clock=clock)
    record_now = staging.record_of(h)["spawned_epoch"]
    await clock.advance(60.0)  # a minute of the runtime's time passes
    assert staging.record_of(h)["spawned_epoch"] == pytest.approx(record_now - 60.0, abs=1.0)


# -- the conversation view -------------------------------------------------------------------------


async def test_the_conversation_view_reads_and_stages_through_the_staging() -> None:
    staging = Staging("r1", AsyncioClock())
    view = ConversationView(staging)
    assert await view.get("c") is None
    await view.save("c", [msg("1")])
    assert await view.get("c") == [msg("1")]
    assert staging.take("running")[0].conversations == {"c": ConversationOps(0, [dumps(msg("1"))], 0)}
    staging.load_conversation("d", [msg("x")])  # as restored: nothing to write
    assert await view.get("d") == [msg("x")]
    assert staging.take("running")[0].conversations == {}


async def test_the_conversation_view_serialises_each_conversation_on_its_own() -> None:
    view = ConversationView(Staging("r1", AsyncioClock()))
    assert isinstance(view, LockingStore)
    order: list[str] = []
    inside, release = asyncio.Event(), asyncio.Event()

    async def first() -> None:
        async with view.lock("c"):
            order.append("first in")
            inside.set()
            await release.wait()
            order.append("first out")

    async def second() -> None:
        async with view.lock("c"):
            order.append("second in")

    task = asyncio.create_task(first())
    await inside.wait()
    waiting = asyncio.create_task(second())
    async with view.lock("other"):  # another conversation is not held up
        order.append("other")
    release.set()
    await asyncio.wait_for(asyncio.gather(task, waiting), WAIT)
    assert order == ["first in", "other", "first out", "second in"]


# -- the commit scheduler --------------------------------------------------------------------------


class Commits:
    """Stands in for a run's `flush`: counts commits, can hold one open, can fail."""

    def __init__(self) -> None:
        self.count = 0
        self.log: list[str] = []
        self.failures: list[Exception] = []
        self.fail: Optional[Exception] = None
        self.gate: Optional[asyncio.Event] = None
        self.entered = asyncio.Event()
        self.stopped = False
        self._running = False

    async def flush(self) -> None:
        assert not self._running, "two commits at once"
        self._running = True
        try:
            self.count += 1
            self.log.append(f"flush {self.count}")
            self.entered.set()
            if self.gate is not None:
                gate, self.gate = self.gate, None
                await gate.wait()
            if self.fail is not None:
                raise self.fail
        finally:
            self._running = False

    async def before(self) -> None:
        self.log.append("before")

    def scheduler(self, delay: float = 0.0) -> CommitScheduler:
        return CommitScheduler(self.flush, before=self.before, stopped=lambda: self.stopped,
                               on_failure=self.failures.append, delay=delay)


async def until(condition: Any) -> None:
    """Let the loop run until `condition()` holds (a bounded number of turns, never a timed wait)."""
    for _ in range(1000):
        if condition():
            return
        await asyncio.sleep(0)
    raise AssertionError("the condition never held")


async def finished(scheduler: CommitScheduler) -> None:
    task = scheduler.task
    assert task is not None
    await asyncio.wait_for(task, WAIT)


async def test_the_scheduler_coalesces_requests_into_one_commit() -> None:
    commits = Commits()
    scheduler = commits.scheduler()
    for _ in range(3):
        scheduler.schedule()
    await finished(scheduler)
    assert commits.log == ["before", "flush 1"]


async def test_an_earlier_deadline_replaces_a_later_one_and_a_later_one_waits_for_it() -> None:
    commits = Commits()
    scheduler = commits.scheduler()
    scheduler.schedule(3600.0)
    late = scheduler.task
    scheduler.schedule(0.0)  # sooner: the hour-long wait is cancelled
    assert late is not None and scheduler.task is not late
    scheduler.schedule(3600.0)  # later than what is scheduled: changes nothing
    await finished(scheduler)
    assert late.cancelled()
    assert commits.count == 1


async def test_a_request_during_a_commit_commits_once_more_after_it() -> None:
    commits = Commits()
    scheduler = commits.scheduler()
    gate = commits.gate = asyncio.Event()
    scheduler.schedule()
    running = scheduler.task
    await asyncio.wait_for(commits.entered.wait(), WAIT)
    scheduler.schedule()  # staged while the first commit is writing: it took its changes already
    assert scheduler.task is running
    gate.set()
    await finished(scheduler)
    assert commits.log == ["before", "flush 1", "flush 2"]  # one after the other, never at once


async def test_a_stopped_run_is_not_committed_once_more() -> None:
    commits = Commits()
    scheduler = commits.scheduler()
    gate = commits.gate = asyncio.Event()
    scheduler.schedule()
    await asyncio.wait_for(commits.entered.wait(), WAIT)
    scheduler.schedule()
    commits.stopped = True
    gate.set()
    await finished(scheduler)
    assert commits.count == 1


async def test_a_failed_background_commit_is_reported_and_the_next_request_commits_again() -> None:
    commits = Commits()
    scheduler = commits.scheduler()
    commits.fail = StoreUnavailable("the store is down")
    scheduler.schedule()
    await finished(scheduler)  # the task itself does not raise
    assert [str(e) for e in commits.failures] == ["the store is down"]
    commits.fail = None
    scheduler.schedule()
    await finished(scheduler)
    assert commits.count == 2 and len(commits.failures) == 1


async def test_a_commit_that_took_everything_pushes_a_scheduled_one_back(exits) -> None:
    commits = Commits()
    scheduler = commits.scheduler(delay=3600.0)
    exits.push_async_callback(scheduler.close)  # the close below is under test; this is for a failure before it
    scheduler.schedule(0.0)
    scheduler.restart_wait()  # an awaited commit just took what was staged
    for _ in range(5):
        await asyncio.sleep(0)  # let the loop run: a commit due now would start
    assert commits.count == 0
    await scheduler.close()
    assert scheduler.task is None and commits.count == 0


def test_scheduling_without_a_running_loop_is_left_to_the_next_awaited_commit() -> None:
    scheduler = CommitScheduler(lambda: asyncio.sleep(0), before=lambda: asyncio.sleep(0), stopped=lambda: False,
                                on_failure=lambda exc: None)
    scheduler.schedule()
    assert scheduler.task is None


# -- the lease -------------------------------------------------------------------------------------


class Renewals:
    """Wraps a store's `renew`: counts the renewals and wakes whoever waits for the next one."""

    def __init__(self, store: RunStore) -> None:
        self.real = store.renew
        self.count = 0  # renewals over
        self.started = 0
        self.errors: list[BaseException] = []
        self.done = asyncio.Event()
        store.renew = self.renew  # type: ignore[method-assign]

    async def renew(self, run_id: str, holder: Holder, lease_ttl: float) -> None:
        self.started += 1
        try:
            await self.real(run_id, holder, lease_ttl)
        except BaseException as exc:
            self.errors.append(exc)
            raise
        finally:
            self.count += 1
            self.done.set()

    async def next(self) -> None:
        await asyncio.wait_for(self.done.wait(), WAIT)
        self.done.clear()


async def test_the_lease_is_renewed_every_third_of_its_time_to_live(shared_store_url):
    clock = VirtualClock()
    me = Holder.here()
    async with open_store(shared_store_url) as store, contextlib.AsyncExitStack() as stack:
        await new_run(store, "r1", me, lease_ttl=1.0)
        before = (await store.load("r1")).lease_expires
        renewals = Renewals(store)
        lease = Lease(store, "r1", ttl=TTL, holder=me, timer=clock)
        stack.push_async_callback(lease.close)
        lease.taken()
        await until(lambda: clock.pending_timers == 1)  # the renewer waits on the clock
        await clock.advance(TTL / 3 - 0.1)
        assert renewals.started == 0
        await clock.advance(0.1)
        await renewals.next()
        assert renewals.count == 1 and lease.held
        after = (await store.load("r1")).lease_expires
        assert before is not None and after is not None and after > before + TTL / 2
        await clock.advance(TTL / 3)
        await renewals.next()
        assert renewals.count == 2

        lease.gone()
        assert not lease.held
        await clock.advance(TTL)
        assert renewals.started == 2 and clock.pending_timers == 0


async def test_a_lease_taken_over_by_another_holder_ends_here(shared_store_url):
    clock = VirtualClock()
    me, other = Holder.here(), Holder.here()
    async with open_store(shared_store_url) as store, contextlib.AsyncExitStack() as stack:
        await new_run(store, "r1", me)
        renewals = Renewals(store)
        lease = Lease(store, "r1", ttl=TTL, holder=me, timer=clock)
        stack.push_async_callback(lease.close)
        lease.taken()
        await until(lambda: clock.pending_timers == 1)
        await store.acquire("r1", other, lease_ttl=TTL, takeover=True)
        await clock.advance(TTL / 3)
        await renewals.next()
        assert [type(e) for e in renewals.errors] == [LeaseLost]
        assert not lease.held
        await clock.advance(TTL)
        assert renewals.started == 1  # it stopped trying


async def test_a_store_that_is_down_does_not_end_the_lease(shared_store_url):
    clock = VirtualClock()
    me = Holder.here()
    async with open_store(shared_store_url) as store, contextlib.AsyncExitStack() as stack:
        await new_run(store, "r1", me)
        renewals = Renewals(store)
        real = renewals.real

        async def down(run_id: str, holder: Holder, lease_ttl: float) -> None:
            raise StoreUnavailable("the store is down")

        renewals.real = down
        lease = Lease(store, "r1", ttl=TTL, holder=me, timer=clock)
        stack.push_async_callback(lease.close)
        lease.taken()
        await until(lambda: clock.pending_timers == 1)
        await clock.advance(TTL / 3)
        await renewals.next()
        assert lease.held  # the next commit will say what is wrong
        renewals.real = real
        await clock.advance(TTL / 3)
        await renewals.next()
        assert [type(e) for e in renewals.errors] == [StoreUnavailable] and renewals.count == 2
        lease.held = False  # abandoned (a refused restore): the renewer stops by itself
        await clock.advance(TTL / 3)  # the wait it was in ends with one last renewal ...
        await renewals.next()
        assert clock.pending_timers == 0  # ... and no further wait
        await clock.advance(TTL)
        assert renewals.started == 3
        await lease.close()
        assert clock.pending_timers == 0


# -- the turn journal ------------------------------------------------------------------------------


async def stored_calls(store: RunStore, run_id: str, hid: str) -> dict[str, Any]:
    calls: dict[str, Any] = (await store.load(run_id)).handles[hid].get("calls") or {}
    return calls


async def test_the_journal_puts_a_calls_start_on_disk_before_the_call_runs(shared_store_url):
    async with open_store(shared_store_url) as store, contextlib.AsyncExitStack() as stack:
        durable = DurableRun(store, "r1", clock=AsyncioClock())
        stack.push_async_callback(durable.close)
        await durable.start("a")
        h = handle()
        journal = TurnJournal(durable, h, on_checkpoint=lambda: durable.touch(h))
        call = ToolCall("c1", "effect", {"x": 1})
        messages = [msg("go")]

        ahead = await journal.call_started(messages, call, {"x": 1})
        if ahead is not None:  # prepared for the tool's thread: it writes the start before running the tool
            await asyncio.to_thread(ahead.write)
            await ahead.written()
        calls = await stored_calls(store, "r1", "h1")
        assert calls["c1"]["status"] == STARTED and calls["c1"]["args"] == {"x": 1}
        assert (await store.load("r1")).conversations["h1"] == messages

        await journal.call_finished(call, ToolResult("done", False))
        await durable.flush()
        assert (await stored_calls(store, "r1", "h1"))["c1"]["status"] == FINISHED

        journal.results_written(messages + [msg("result")], ["c1"])
        await durable.flush()
        assert await stored_calls(store, "r1", "h1") == {}
        assert (await store.load("r1")).conversations["h1"] == messages + [msg("result")]


async def test_an_idempotent_calls_start_is_not_waited_for(shared_store_url):
    async with open_store(shared_store_url) as store, contextlib.AsyncExitStack() as stack:
        durable = DurableRun(store, "r1", clock=AsyncioClock())
        stack.push_async_callback(durable.close)
        await durable.start("a")
        h = handle()
        written: list[Changes] = []
        real_commit = store.commit

        async def commit(*args: Any, **kwargs: Any) -> int:
            written.append(args[2])
            return await real_commit(*args, **kwargs)

        store.commit = commit  # type: ignore[method-assign]
        journal = TurnJournal(durable, h, on_checkpoint=lambda: durable.touch(h), idempotent=lambda name: True)
        assert await journal.call_started([msg("go")], ToolCall("c1", "lookup", {}), {}) is None
        assert written == []  # scheduled in the background, not committed before the call
        assert durable.scheduler.task is not None
        await asyncio.wait_for(durable.scheduler.task, WAIT)
        assert (await stored_calls(store, "r1", "h1"))["c1"]["status"] == STARTED


async def test_without_a_store_the_journal_still_names_the_call_a_suspension_came_from() -> None:
    h = handle()
    checkpoints: list[int] = []
    journal = TurnJournal(None, h, on_checkpoint=lambda: checkpoints.append(1))
    call = ToolCall("c1", "approve", {})
    parked = ToolResult("waiting", False, metadata={"pending": Request("req-1", "approval", "ok?")})
    assert await journal.call_started([], call, {}) is None
    await journal.call_finished(call, parked)
    await journal.call_finished(ToolCall("c2", "plain", {}), ToolResult("ok", False))
    assert journal.halted == {"req-1": call}
    assert checkpoints == []  # nothing is staged without a store
    assert journal.journal("h1") is journal and journal.journal("other") is None


# -- the turn store --------------------------------------------------------------------------------


class PlainStore:
    """A conversation store with no lock of its own."""

    def __init__(self) -> None:
        self.saved: dict[str, list[dict[str, Any]]] = {}

    async def get(self, id: str) -> Optional[list[dict[str, Any]]]:
        return self.saved.get(id)

    async def save(self, id: str, messages: list[dict[str, Any]]) -> None:
        self.saved[id] = messages


async def test_the_turn_store_passes_a_stores_lock_on_and_has_none_otherwise() -> None:
    h = handle()
    journal = TurnJournal(None, h, on_checkpoint=lambda: None)
    view = ConversationView(Staging("r1", AsyncioClock()))
    locking = TurnStore(view, journal)
    assert isinstance(locking, LockingStore)
    assert locking.lock == view.lock  # the view's own per-conversation locks
    plain = TurnStore(PlainStore(), journal)
    assert not isinstance(plain, LockingStore)  # the client keeps its own per-id locks


async def test_the_turn_store_holds_the_final_transcript_for_the_settle_when_asked_to() -> None:
    h = handle()
    journal = TurnJournal(None, h, on_checkpoint=lambda: None)
    inner, held = PlainStore(), []
    saving = TurnStore(inner, journal)
    await saving.save("h1", [msg("1")])
    assert await saving.get("h1") == [msg("1")]
    holding = TurnStore(inner, journal, hold=held.append)
    await holding.save("h1", [msg("1"), msg("2")])
    assert held == [[msg("1"), msg("2")]] and inner.saved["h1"] == [msg("1")]
    assert holding.journal("h1") is journal and holding.journal("h2") is None


# -- the composition -------------------------------------------------------------------------------


class Host:
    """A runtime as a durable run sees it (`DurableHost`)."""

    def __init__(self, status: str = "running", busy: bool = False) -> None:
        self.root = handle("root")
        self.registry: dict[str, AgentDef] = {"a": AgentDef("a", "an agent", "", "none")}
        self.status = status
        self.is_busy = busy
        self.told: list[Any] = []
        self.on_pending = self.told.append

    def tell_pending(self, pending: Any) -> None:
        assert self.on_pending is not None
        self.on_pending(pending)

    def busy(self) -> bool:
        return self.is_busy

    def run_status(self) -> str:
        return self.status


async def test_a_durable_run_is_attached_once_and_commits_its_hosts_state(shared_store_url):
    async with open_store(shared_store_url) as store, contextlib.AsyncExitStack() as stack:
        durable = DurableRun(store, "r1", clock=AsyncioClock())
        stack.push_async_callback(durable.close)
        host = Host(status="pending")
        durable.attach(host)
        with pytest.raises(ToolnexusRuntimeError):
            durable.attach(Host())
        child = handle("a-1")
        durable.open_request(child, {"id": "req-1", "kind": "approval", "prompt": "ok?"}, None)
        durable.touch(child)
        await durable.flush()
        loaded = await store.load("r1")
        assert loaded.status == "pending"
        assert set(loaded.handles) == {"root", "a-1"}
        assert loaded.state is not None and loaded.state["registry"]["names"] == ["a"]
        assert [p.request.id for p in host.told] == ["req-1"]  # told once the store holds it


async def test_a_parked_run_gives_its_lease_up_and_takes_it_again_only_to_keep_it_while_busy(shared_store_url):
    async with open_store(shared_store_url) as store, contextlib.AsyncExitStack() as stack:
        durable = DurableRun(store, "r1", clock=AsyncioClock())
        stack.push_async_callback(durable.close)
        host = Host()
        durable.attach(host)
        await durable.flush()
        assert durable.held
        durable.park()  # nothing runs: the next commit gives the lease up
        await durable.flush()
        assert not durable.held
        assert (await store.load("r1")).lease is None

        durable.touch(host.root)  # a change while parked: written under the lease, given up again
        await durable.flush()
        assert not durable.held and (await store.load("r1")).lease is None

        host.is_busy = True  # a turn is live: the lease taken for this commit is kept
        durable.touch(host.root)
        await durable.flush()
        assert durable.held and (await store.load("r1")).lease is not None


async def test_an_unattached_run_commits_as_running(shared_store_url):
    async with open_store(shared_store_url) as store, contextlib.AsyncExitStack() as stack:
        durable = DurableRun(store, "r1", clock=AsyncioClock())
        stack.push_async_callback(durable.close)
        await durable.start("a")
        loaded = await store.load("r1")
        assert (loaded.status, loaded.entry_agent) == ("running", "a")
