"""Where served A2A tasks live: the `TaskStore` interface, an in-memory and a file store, selectors.

Every read and write of a served task goes through a store, so a host can keep tasks across a
restart by choosing a durable one. Tasks are plain JSON objects in our stored form (lowercase
states, `kind` parts); the wire shape each protocol generation wants is rendered from it on the
way out (`toolnexus.serve._a2a_render`).

- `InMemoryTaskStore` is bounded: at most `max_tasks` tasks (the least recently saved finished
  task goes first, then the least recently saved task of any state), and a finished task
  (`completed`, `failed`, `canceled`, `rejected`) is forgotten `terminal_ttl` seconds after its
  last save. A task waiting for input is never expired by time: its human may answer late.
- `FileTaskStore` keeps one `<dir>/<sanitize(id)>.json` per task (owner-only). A save is the
  library's atomic write (`toolnexus._fs`): a staging file with a unique name in the same
  directory, fsynced, `os.replace`d over the target, the directory fsynced, so a reader never
  sees half a file and concurrent saves of one id never collide.
  File work runs in a worker thread, never on the event loop. A file whose task id differs from
  the one asked for (two ids that sanitise alike) reads as missing.
- `DurableTaskStore` keeps tasks in a durable run store (`toolnexus.stores`: SQLite, PostgreSQL)
  as plain records, so they survive a restart and are shared by every server on that store.
  `run_store` is the store itself: give the serving client the same one as its conversation store
  (`create_client(store=...)`), so an `input-required` task can still be answered after a restart
  — the halted conversation is in it too.
- `resolve_store(selector)`: `None`/`"memory"` → a new `InMemoryTaskStore`, `"file:<dir>"` →
  `FileTaskStore(dir)`, `"sqlite:<path>"` / `"sqlite:///<path>"` / `"postgresql://…"` →
  `DurableTaskStore`, a `TaskStore` (or any object with async `get`/`save`) → itself. Further
  schemes plug in with `register_store_scheme("name", factory)`; the factory gets the text after
  the colon. The CLI's `--store` goes through `resolve_store` too.

Every store also offers `swap(expected, task)`, a compare-and-set: the task is written only if
the stored one is still `expected` (None: none stored). The fulfiller changes a task's state only
through it, so of two servers sharing a store exactly one moves a task out of a state — one answer
is taken, and a terminal state is never overwritten. `InMemoryTaskStore` swaps within the event
loop, `FileTaskStore` under an `flock` on `<dir>/.lock` (a thread lock where `fcntl` is missing),
`DurableTaskStore` in one transaction of its run store. A store written before `swap` existed (or
any object with async `get`/`save`) gets a read-compare-save in its place, which is atomic only
within one server (the fulfiller serialises a task's changes in-process).

Not here: a task's life cycle (`toolnexus.serve._fulfil`), rendering.
"""

from __future__ import annotations

import asyncio
import json
import os
import threading
import time
from abc import ABC, abstractmethod
from collections import OrderedDict
from collections.abc import Callable, Iterable
from typing import Any, Optional, Union

from .._diag import warn_once
from .._fs import write_atomic
from ..errors import ToolnexusValueError, UnsupportedOperation
from ..mcp_serve.errors import UnknownStoreError
from ..types import sanitize

try:
    import fcntl
except ImportError:  # pragma: no cover - Windows: swaps are serialised within the process only
    fcntl = None  # type: ignore[assignment]

A2ATask = dict[str, Any]
StoreFactory = Callable[[str], "TaskStore"]

DEFAULT_MAX_TASKS = 10_000
DEFAULT_TERMINAL_TTL = 3600.0  # seconds
FINISHED_STATES = frozenset({"completed", "failed", "canceled", "rejected"})


def _state(task: A2ATask) -> Optional[str]:
    status = task.get("status")
    return status.get("state") if isinstance(status, dict) else None


def _matches(task: A2ATask, states: Optional[Iterable[str]]) -> bool:
    return states is None or _state(task) in set(states)


class TaskStore(ABC):
    """Async storage of served tasks by id. `save` is an upsert keyed by `task["id"]`."""

    @abstractmethod
    async def get(self, id: str) -> Optional[A2ATask]:
        """The stored task, or None when unknown."""

    @abstractmethod
    async def save(self, task: A2ATask) -> None:
        """Insert or replace the task with this `task["id"]`."""

    async def list_tasks(self, *, states: Optional[Iterable[str]] = None) -> list[A2ATask]:
        """Stored tasks, optionally only those in `states` (e.g. the ones waiting for input)."""
        raise UnsupportedOperation(f"{type(self).__name__} cannot list its tasks")

    async def swap(self, expected: Optional[A2ATask], task: A2ATask) -> bool:
        """Store `task` only if the stored task with its id is `expected` now (None: none); True if
        stored. This default reads, compares and saves — atomic only within one server; the bundled
        stores override it with a real compare-and-set."""
        if await self.get(str(task["id"])) != expected:
            return False
        await self.save(task)
        return True

    async def close(self) -> None:  # noqa: B027 - a no-op default, not abstract: most stores hold nothing
        """Release what the store holds (connections, files). The built-in stores hold nothing."""


class InMemoryTaskStore(TaskStore):
    """Tasks in a dict for the life of the process, bounded by count and by age once finished."""

    def __init__(self, *, max_tasks: Optional[int] = DEFAULT_MAX_TASKS,
                 terminal_ttl: Optional[float] = DEFAULT_TERMINAL_TTL,
                 clock: Callable[[], float] = time.monotonic) -> None:
        if max_tasks is not None and (isinstance(max_tasks, bool) or not isinstance(max_tasks, int) or max_tasks < 1):
            raise ToolnexusValueError(
                f"toolnexus: InMemoryTaskStore max_tasks must be a positive integer or None, got {max_tasks!r}"
            )
        self.max_tasks = max_tasks
        self.terminal_ttl = terminal_ttl
        self._clock = clock
        self._tasks: OrderedDict[str, tuple[float, str]] = OrderedDict()  # id -> (saved at, JSON)

    def _expired(self, saved_at: float, task_json: str) -> bool:
        if self.terminal_ttl is None or self._clock() - saved_at < self.terminal_ttl:
            return False
        return _state(json.loads(task_json)) in FINISHED_STATES

    def _sweep(self) -> None:
        for key in [k for k, (at, raw) in self._tasks.items() if self._expired(at, raw)]:
            del self._tasks[key]
        while self.max_tasks is not None and len(self._tasks) > self.max_tasks:
            finished = next(
                (k for k, (_, raw) in self._tasks.items() if _state(json.loads(raw)) in FINISHED_STATES), None
            )
            self._tasks.pop(finished if finished is not None else next(iter(self._tasks)))

    async def get(self, id: str) -> Optional[A2ATask]:
        entry = self._tasks.get(id)
        if entry is None:
            return None
        if self._expired(*entry):
            del self._tasks[id]
            return None
        return json.loads(entry[1])  # a copy: callers cannot change what is stored

    async def save(self, task: A2ATask) -> None:
        self._put(task)

    def _put(self, task: A2ATask) -> None:
        self._tasks[str(task["id"])] = (self._clock(), json.dumps(task))
        self._tasks.move_to_end(str(task["id"]))
        self._sweep()

    async def swap(self, expected: Optional[A2ATask], task: A2ATask) -> bool:
        entry = self._tasks.get(str(task["id"]))  # compared and written with no await between: atomic
        current = None if entry is None or self._expired(*entry) else json.loads(entry[1])
        if current != expected:
            return False
        self._put(task)
        return True

    async def list_tasks(self, *, states: Optional[Iterable[str]] = None) -> list[A2ATask]:
        self._sweep()
        tasks = [json.loads(raw) for _, raw in self._tasks.values()]
        return [t for t in tasks if _matches(t, states)]

    def __len__(self) -> int:
        return len(self._tasks)


class FileTaskStore(TaskStore):
    """One JSON file per task under `dir`, written atomically (see the module docstring)."""

    def __init__(self, dir: str) -> None:
        if not isinstance(dir, str) or not dir:
            raise ToolnexusValueError(f"toolnexus: FileTaskStore needs a directory path, got {dir!r}")
        self.dir = dir
        self._swapping = threading.Lock()
        os.makedirs(dir, exist_ok=True)

    def path_for(self, id: str) -> str:
        return os.path.join(self.dir, sanitize(str(id)) + ".json")

    def _read(self, path: str) -> Optional[A2ATask]:
        try:
            with open(path, encoding="utf-8") as fh:
                task = json.load(fh)
        except (OSError, ValueError):
            return None
        return task if isinstance(task, dict) else None

    def _get(self, id: str) -> Optional[A2ATask]:
        task = self._read(self.path_for(id))
        return task if task is not None and str(task.get("id")) == str(id) else None

    def _save(self, task: A2ATask) -> None:
        write_atomic(self.path_for(task["id"]), json.dumps(task).encode("utf-8"), mode=0o600)

    def _swap(self, expected: Optional[A2ATask], task: A2ATask) -> bool:
        with self._swapping:  # threads of this process; the flock below serialises processes
            fd = os.open(os.path.join(self.dir, ".lock"), os.O_RDWR | os.O_CREAT, 0o600)
            try:
                if fcntl is not None:
                    fcntl.flock(fd, fcntl.LOCK_EX)
                if self._get(str(task["id"])) != expected:
                    return False
                self._save(task)
                return True
            finally:
                os.close(fd)  # closing releases the flock

    def _list(self, states: Optional[Iterable[str]]) -> list[A2ATask]:
        out = []
        for name in sorted(os.listdir(self.dir)):
            if name.endswith(".json") and not name.startswith("."):
                task = self._read(os.path.join(self.dir, name))
                if task is not None and _matches(task, states):
                    out.append(task)
        return out

    async def get(self, id: str) -> Optional[A2ATask]:
        return await asyncio.to_thread(self._get, id)

    async def save(self, task: A2ATask) -> None:
        await asyncio.to_thread(self._save, dict(task))

    async def swap(self, expected: Optional[A2ATask], task: A2ATask) -> bool:
        return await asyncio.to_thread(self._swap, expected, dict(task))

    async def list_tasks(self, *, states: Optional[Iterable[str]] = None) -> list[A2ATask]:
        wanted = None if states is None else list(states)
        return await asyncio.to_thread(self._list, wanted)

    def __repr__(self) -> str:
        return f"FileTaskStore(dir={self.dir!r})"


class DurableTaskStore(TaskStore):
    """Tasks as records of a durable run store (see the module docstring)."""

    NAMESPACE = "a2a-task"

    def __init__(self, run_store: Any, *, owns: bool = False) -> None:
        self.run_store = run_store
        self._owns = owns

    async def get(self, id: str) -> Optional[A2ATask]:
        return await self.run_store.get_record(self.NAMESPACE, id)

    async def save(self, task: A2ATask) -> None:
        await self.run_store.put_record(self.NAMESPACE, str(task["id"]), dict(task))

    async def list_tasks(self, *, states: Optional[Iterable[str]] = None) -> list[A2ATask]:
        return [t for t in await self.run_store.list_records(self.NAMESPACE) if _matches(t, states)]

    async def swap(self, expected: Optional[A2ATask], task: A2ATask) -> bool:
        try:
            return await self.run_store.swap_record(self.NAMESPACE, str(task["id"]), expected, dict(task))
        except UnsupportedOperation:  # a run store of someone else's without compare-and-set
            warn_once(f"a2a-swap:{type(self.run_store).__name__}",
                      f"[toolnexus] serve: {type(self.run_store).__name__} cannot compare-and-set records; A2A task "
                      "changes are safe within this server only")
            return await super().swap(expected, task)

    async def close(self) -> None:
        if self._owns:
            await self.run_store.aclose()

    def __repr__(self) -> str:
        return f"DurableTaskStore({self.run_store!r})"


def _durable(scheme: str) -> StoreFactory:
    def build(rest: str) -> TaskStore:
        from ..stores import open_store

        return DurableTaskStore(open_store(f"{scheme}:{rest}"), owns=True)

    return build


_SCHEMES: dict[str, StoreFactory] = {"file": FileTaskStore, "sqlite": _durable("sqlite"),
                                     "postgresql": _durable("postgresql"), "postgres": _durable("postgres")}


def register_store_scheme(scheme: str, factory: StoreFactory) -> None:
    """Let `resolve_store("<scheme>:<rest>")` build a store with `factory(<rest>)`."""
    if not scheme or not scheme.isidentifier():
        raise ToolnexusValueError(f"toolnexus: a store scheme must be a plain word, got {scheme!r}")
    _SCHEMES[scheme] = factory


def resolve_store(store: Union[TaskStore, str, None] = None) -> TaskStore:
    """A store from a selector (see the module docstring); an unknown string raises `UnknownStoreError`."""
    if store is None or store == "memory":
        return InMemoryTaskStore()
    if isinstance(store, str):
        scheme, sep, rest = store.partition(":")
        factory = _SCHEMES.get(scheme) if sep else None
        if factory is None or (scheme == "file" and not rest):
            raise UnknownStoreError(f'Unknown A2A store: "{store}" (expected "memory" or "file:<dir>")')
        return factory(rest)
    return store  # duck-typed: anything with async get/save
