"""Task stores: the in-memory store's bounds, the file store's atomic writes, and the selectors."""

from __future__ import annotations

import asyncio
import json
import os

import pytest

from toolnexus.errors import ToolnexusError
from toolnexus.serve import FileTaskStore, InMemoryTaskStore, TaskStore, register_store_scheme, resolve_store


def _task(id: str, state: str = "working", **extra: object) -> dict:
    return {"id": id, "contextId": "c", "status": {"state": state}, **extra}


class Clock:
    def __init__(self) -> None:
        self.now = 0.0

    def __call__(self) -> float:
        return self.now


async def test_memory_store_round_trips_copies() -> None:
    store = InMemoryTaskStore()
    task = _task("t1", artifacts=[{"artifactId": "a", "parts": [{"kind": "text", "text": "x"}]}])
    await store.save(task)
    got = await store.get("t1")
    assert got == task
    got["status"]["state"] = "mutated"
    assert (await store.get("t1"))["status"]["state"] == "working"
    assert await store.get("nope") is None


async def test_memory_store_forgets_finished_tasks_after_the_ttl_but_keeps_waiting_ones() -> None:
    clock = Clock()
    store = InMemoryTaskStore(terminal_ttl=60.0, clock=clock)
    await store.save(_task("done", "completed"))
    await store.save(_task("asking", "input-required"))
    await store.save(_task("busy", "working"))
    clock.now = 59.0
    assert await store.get("done") is not None
    clock.now = 61.0
    assert await store.get("done") is None
    assert await store.get("asking") is not None and await store.get("busy") is not None


async def test_memory_store_is_bounded_and_evicts_finished_tasks_first() -> None:
    store = InMemoryTaskStore(max_tasks=3)
    await store.save(_task("w1", "working"))
    await store.save(_task("c1", "completed"))
    await store.save(_task("q1", "input-required"))
    await store.save(_task("w2", "working"))  # over the cap: the finished one goes, not the older working one
    assert await store.get("c1") is None
    assert [await store.get(i) is not None for i in ("w1", "q1", "w2")] == [True, True, True]
    await store.save(_task("w3", "working"))  # nothing finished left: the least recently saved goes
    assert await store.get("w1") is None and len(store) == 3


async def test_memory_store_lists_by_state() -> None:
    store = InMemoryTaskStore()
    for i, state in enumerate(["working", "input-required", "auth-required", "completed"]):
        await store.save(_task(f"t{i}", state))
    waiting = await store.list_tasks(states={"input-required", "auth-required"})
    assert sorted(t["id"] for t in waiting) == ["t1", "t2"]
    assert len(await store.list_tasks()) == 4


def test_memory_store_rejects_a_bad_cap() -> None:
    with pytest.raises(ValueError, match="max_tasks must be a positive integer"):
        InMemoryTaskStore(max_tasks=0)


async def test_file_store_writes_one_json_file_per_sanitised_id(tmp_path) -> None:
    store = FileTaskStore(str(tmp_path / "tasks"))
    assert (tmp_path / "tasks").is_dir()
    await store.save(_task("../evil id"))
    files = os.listdir(tmp_path / "tasks")
    assert files == ["___evil_id.json"]
    assert json.loads((tmp_path / "tasks" / files[0]).read_text()) == _task("../evil id")
    assert await store.get("../evil id") == _task("../evil id")
    assert await store.get("___evil_id") is None  # same file name, another id: not this task


async def test_file_store_get_is_none_for_missing_unreadable_or_bad_json(tmp_path) -> None:
    store = FileTaskStore(str(tmp_path))
    (tmp_path / "bad.json").write_text("{not json")
    (tmp_path / "list.json").write_text("[1, 2]")
    assert await store.get("bad") is None
    assert await store.get("list") is None
    assert await store.get("missing") is None


async def test_fifty_concurrent_saves_of_one_id_never_raise_and_the_file_stays_valid(tmp_path) -> None:
    store = FileTaskStore(str(tmp_path))
    reads: list[object] = []

    async def reader() -> None:
        for _ in range(50):
            reads.append(await store.get("t"))

    await store.save(_task("t", n=-1))
    await asyncio.gather(*(store.save(_task("t", n=i)) for i in range(50)), reader())
    final = json.loads((tmp_path / "t.json").read_text())
    assert final["id"] == "t" and final["n"] in range(50)
    assert all(r is not None and r["id"] == "t" for r in reads)  # never half a file
    assert os.listdir(tmp_path) == ["t.json"]  # no temp files left behind


async def test_file_store_survives_a_new_instance_and_lists_tasks(tmp_path) -> None:
    first = FileTaskStore(str(tmp_path))
    await first.save(_task("a", "input-required"))
    await first.save(_task("b", "completed"))
    again = FileTaskStore(str(tmp_path))
    assert (await again.get("a"))["status"]["state"] == "input-required"
    assert [t["id"] for t in await again.list_tasks(states={"input-required"})] == ["a"]


def test_resolve_store_selectors(tmp_path) -> None:
    assert isinstance(resolve_store(None), InMemoryTaskStore)
    assert isinstance(resolve_store("memory"), InMemoryTaskStore)
    assert resolve_store(None) is not resolve_store(None)
    file_store = resolve_store(f"file:{tmp_path}/x")
    assert isinstance(file_store, FileTaskStore) and file_store.dir == f"{tmp_path}/x"
    mine = InMemoryTaskStore()
    assert resolve_store(mine) is mine
    duck = object()
    assert resolve_store(duck) is duck


@pytest.mark.parametrize("selector", ["redis://x", "file:", "nosuch:tasks.db", "Memory"])
def test_an_unknown_selector_raises_the_pinned_value_error(selector: str) -> None:
    with pytest.raises(ValueError) as err:
        resolve_store(selector)
    assert str(err.value) == f'Unknown A2A store: "{selector}" (expected "memory" or "file:<dir>")'
    assert isinstance(err.value, ToolnexusError)


def test_a_registered_scheme_resolves_through_its_factory() -> None:
    made: list[str] = []

    class Custom(InMemoryTaskStore):
        pass

    def factory(rest: str) -> TaskStore:
        made.append(rest)
        return Custom()

    register_store_scheme("testscheme", factory)
    assert isinstance(resolve_store("testscheme:/var/db"), Custom)
    assert made == ["/var/db"]
    with pytest.raises(ValueError, match="plain word"):
        register_store_scheme("bad scheme", factory)


async def test_database_selectors_give_a_durable_task_store_that_outlives_its_object(tmp_path) -> None:
    from toolnexus.serve import DurableTaskStore, resolve_store

    for selector in (f"sqlite:///{tmp_path / 'a.db'}", f"sqlite:{tmp_path / 'b.db'}"):
        store = resolve_store(selector)
        assert isinstance(store, DurableTaskStore)
        await store.save({"id": "t1", "status": {"state": "input-required"}})
        await store.save({"id": "t2", "status": {"state": "completed"}})
        await store.close()
        again = resolve_store(selector)
        assert (await again.get("t1"))["status"]["state"] == "input-required"
        assert [t["id"] for t in await again.list_tasks(states={"input-required"})] == ["t1"]
        await again.close()
    assert isinstance(resolve_store("postgresql://nobody@127.0.0.1:1/x"), DurableTaskStore)  # lazy: no connect yet
