"""Served A2A tasks change state by compare-and-set, so servers sharing a store agree on one truth.

The store primitive (`swap_record` on every run store, `TaskStore.swap` on every task store) is
exactly-once under contention; two fulfillers on one store (two servers) made to read the same
question at once take one answer between them; a terminal state is final — a cancel from another
server is never overwritten by the run it stopped. The two-process version of the answer race, with
real `toolnexus serve` processes, is `test_a2a_serve_race.py`.
"""

from __future__ import annotations

import asyncio
from types import SimpleNamespace
from typing import Any, Optional

import pytest

from support.stores import shared_store_url, store_url  # noqa: F401 - fixtures
from toolnexus import Request
from toolnexus.serve._fulfil import Fulfiller, TaskBusy
from toolnexus.serve._tasks import DurableTaskStore, FileTaskStore, InMemoryTaskStore, TaskStore, resolve_store
from toolnexus.stores import open_store


async def test_swap_record_writes_only_over_what_the_caller_saw(store_url: str) -> None:
    async with open_store(store_url) as store:
        assert await store.swap_record("tasks", "t1", None, {"n": 1})
        assert not await store.swap_record("tasks", "t1", None, {"n": 2})  # it exists now
        assert not await store.swap_record("tasks", "t1", {"n": 7}, {"n": 3})  # not what is stored
        assert await store.swap_record("tasks", "t1", {"n": 1}, {"n": 4})
        assert await store.get_record("tasks", "t1") == {"n": 4}


async def test_of_many_swaps_from_one_state_across_store_objects_exactly_one_lands(shared_store_url: str) -> None:
    stores = [open_store(shared_store_url) for _ in range(2)]  # two processes' views of one store
    try:
        await stores[0].put_record("tasks", "t1", {"state": "input-required"})
        wins = await asyncio.gather(*(stores[n % 2].swap_record("tasks", "t1", {"state": "input-required"},
                                                                {"state": "working", "by": n}) for n in range(10)))
        fresh = await asyncio.gather(*(stores[n % 2].swap_record("tasks", "t2", None, {"by": n}) for n in range(10)))
        assert sum(wins) == 1 and sum(fresh) == 1
        by = (await stores[1].get_record("tasks", "t1"))["by"]
        assert wins.index(True) == by
    finally:
        for store in stores:
            await store.aclose()


@pytest.mark.parametrize("kind", ["memory", "file", "sqlite"])
async def test_every_task_store_swaps(kind: str, tmp_path) -> None:
    store: TaskStore = {"memory": lambda: InMemoryTaskStore(), "file": lambda: FileTaskStore(str(tmp_path / "f")),
                        "sqlite": lambda: resolve_store(f"sqlite:///{tmp_path / 't.db'}")}[kind]()
    try:
        task = {"id": "t1", "status": {"state": "submitted"}}
        assert await store.swap(None, task) and not await store.swap(None, task)
        moved = {"id": "t1", "status": {"state": "working"}}
        results = await asyncio.gather(*(store.swap(task, dict(moved, n=n)) for n in range(5)))
        assert sum(results) == 1 and (await store.get("t1"))["status"]["state"] == "working"
    finally:
        await store.close()


class GatedStore(DurableTaskStore):
    """A server's view of a shared SQLite task store whose reads, once `gate` holds a barrier, wait
    until every server has read: they all see the same state before any writes."""

    def __init__(self, url: str, gate: list[Optional[asyncio.Barrier]]) -> None:
        super().__init__(open_store(url), owns=True)
        self.gate = gate

    async def get(self, id: str) -> Any:
        found = await super().get(id)
        barrier = self.gate[0]
        if barrier is not None:
            await barrier.wait()
            self.gate[0] = None  # one meeting only
        return found


async def test_two_servers_reading_one_question_at_once_take_one_answer(tmp_path) -> None:
    applied: list[str] = []
    release = asyncio.Event()

    async def run_task(text: str, context: object) -> object:
        return SimpleNamespace(status="pending", pending=Request(id="q-1", kind="input", prompt="Amount?"))

    async def resume_task(context: object, request: Request, answer: Any) -> object:
        applied.append(answer.data["text"])
        await release.wait()  # the answer is still running when the other server re-reads the task
        return SimpleNamespace(status="done", text="refunded")

    url = f"sqlite:///{tmp_path / 'tasks.db'}"
    gate: list[Optional[asyncio.Barrier]] = [None]
    one, two = (Fulfiller(GatedStore(url, gate), run_task, resume_task=resume_task) for _ in range(2))
    try:
        task = await one.submit("refund order 7", None)
        await one.wait_settled(task["id"], 10)
        gate[0] = asyncio.Barrier(2)  # both servers read the question before either writes
        replies = await asyncio.gather(one.follow_up(task["id"], "12"), two.follow_up(task["id"], "13"),
                                       return_exceptions=True)
        release.set()
        winner = one if isinstance(replies[0], dict) else two
        await winner.wait_settled(task["id"], 10)
        done = await two.store.get(task["id"])
    finally:
        await one.store.close()
        await two.store.close()
    assert sorted(type(r).__name__ for r in replies) == ["TaskBusy", "dict"]
    busy = next(r for r in replies if isinstance(r, TaskBusy))
    assert "working on an answer" in str(busy)
    assert len(applied) == 1 and done["status"]["state"] == "completed"
    assert [m["parts"][0]["text"] for m in done["history"] if m["role"] == "user"] == ["refund order 7", applied[0]]


async def test_a_cancel_from_another_server_is_final_and_stops_the_run_there(tmp_path) -> None:
    release, started, stopped = asyncio.Event(), asyncio.Event(), asyncio.Event()
    events: list[str] = []

    async def slow(text: str, context: object) -> object:
        started.set()
        try:
            await release.wait()
        except asyncio.CancelledError:
            stopped.set()
            raise
        return SimpleNamespace(status="done", text="finished anyway")

    url = f"sqlite:///{tmp_path / 'tasks.db'}"
    quiet = Fulfiller(resolve_store(url), slow, on_task=lambda e: events.append(e["state"]), watch_every=60)
    watching = Fulfiller(resolve_store(url), slow, on_task=lambda e: events.append(e["state"]), watch_every=0.02)
    other = Fulfiller(resolve_store(url), slow)
    try:
        # the run finishes after the cancel: its outcome is discarded, the cancel stands
        first = await quiet.submit("work", None)
        await started.wait()
        canceled = await other.cancel(first["id"])
        release.set()
        await quiet.wait_settled(first["id"], 10)
        # a server that watches stops its run once it sees the cancel
        started.clear()
        release.clear()
        second = await watching.submit("work", None)
        await started.wait()
        await other.cancel(second["id"])
        await asyncio.wait_for(stopped.wait(), 10)
        await watching.wait_settled(second["id"], 10)
        states = [(await other.store.get(t["id"]))["status"]["state"] for t in (first, second)]
    finally:
        for f in (quiet, watching, other):
            await f.store.close()
    assert canceled["status"]["state"] == "canceled"
    assert states == ["canceled", "canceled"] and events == []  # neither run reported an outcome
