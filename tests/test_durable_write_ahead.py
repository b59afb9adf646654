"""A tool call's start is durable before the tool acts — on SQLite, written by the worker thread
that runs a plain-function tool, just before it calls the function (one thread round trip per
call, not two).

Real SQLite files; each tool reads the database through its own connection, as another process
would, to see what is durable when it runs. The model is scripted behind the transport seam.
"""

from __future__ import annotations

import asyncio
import json
import sqlite3
import threading
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

import pytest

from support.agent_kit import calls, scripted, until
from support.durable_app import LLM
from support.stores import sqlite_records
from toolnexus import define_tool
from toolnexus.agents import AgentRuntime, agent
from toolnexus.durable import LeaseLost, RunChanged, RunInProgress, StoreUnavailable
from toolnexus.stores import open_store
from toolnexus.stores._sqlite import SqliteStore


def stored_calls(path: Path, run_id: str) -> dict[str, str]:
    """The call journal of `run_id` as another connection sees it (in its handles' records): call
    id → status."""
    conn = sqlite3.connect(path)
    try:
        rows = sqlite_records(conn, run_id)
    finally:
        conn.close()
    return {call_id: entry["status"] for (_, record, _) in rows
            for call_id, entry in (json.loads(record).get("calls") or {}).items()}


def model_calling(*names: str, parallel: bool = False) -> Any:
    """A model that calls `names` (one per turn, or all in one turn), then answers."""
    if parallel:
        turns = [{"whenToolMsgs": 0, "toolCalls": calls(*((n, {}) for n in names))}]
    else:
        turns = [{"whenToolMsgs": i, "toolCalls": calls((n, {}))} for i, n in enumerate(names)]
    return scripted({"m": [*turns, {"whenToolMsgs": f">={len(names)}", "text": "done: <last tool msg content>"}]})


class WriteBeforeReply:
    """A scripted model whose reply to the request carrying `tool_msgs` tool results is sent only
    after another connection — as another process would — has run `sql` on the database."""

    def __init__(self, inner: Any, path: Path, tool_msgs: int, sql: str, params: tuple[Any, ...] = ()) -> None:
        self.inner, self.path, self.tool_msgs, self.sql, self.params = inner, path, tool_msgs, sql, params

    def post(self, url, headers, payload, timeout):
        if sum(m.get("role") == "tool" for m in payload["messages"]) == self.tool_msgs:
            conn = sqlite3.connect(self.path)
            try:
                conn.execute(self.sql, self.params)
                conn.commit()
            finally:
                conn.close()
        return self.inner.post(url, headers, payload, timeout)

    def open(self, *args):
        raise NotImplementedError


async def test_a_plain_function_finds_its_start_durable_written_on_its_own_thread(tmp_path):
    path = tmp_path / "runs.db"
    seen: list[tuple[dict[str, str], int]] = []
    writers: list[int] = []
    real_drive = SqliteStore._drive_here

    def drive(self, steps, write, *rest):
        writers.append(threading.get_ident())
        return real_drive(self, steps, write, *rest)

    def effect() -> str:
        """Acts once."""
        seen.append((stored_calls(path, "wa"), threading.get_ident()))
        return "acted"

    worker = agent("worker", does="acts", model="m", uses={"tools": [define_tool(effect, name="effect")]})
    async with open_store(f"sqlite:///{path}") as store:
        SqliteStore._drive_here = drive  # type: ignore[method-assign]
        try:
            r = await worker.run("go", transport=model_calling("effect", "effect"), llm=LLM, store=store,
                                 run_id="wa")
        finally:
            SqliteStore._drive_here = real_drive  # type: ignore[method-assign]
        assert (r.status, r.text) == ("done", "done: acted")
    assert len(seen) == 2
    for journal, tool_thread in seen:
        assert "started" in journal.values()  # durable before the function ran
        assert tool_thread in writers  # ... and written by the thread that then ran it
    assert stored_calls(path, "wa") == {}  # the results are in the transcript: the journal rows are gone


async def test_a_start_that_cannot_be_written_is_never_acted_on(tmp_path):
    """Another process took the run over between the model's answer and the tool: the start is
    refused by the lease, the function is not called, and the run fails with the store's word."""
    path = tmp_path / "runs.db"
    acted: list[str] = []

    def effect() -> str:
        """Acts once."""
        acted.append("acted")
        return "acted"

    thief = WriteBeforeReply(  # another holder takes the lease before the model's reply is sent
        model_calling("effect"), path, 0,
        "UPDATE tn_runs SET lease = ?, lease_id = 'thief', lease_expires = 9e18 WHERE run_id = 'stolen'",
        ('{"id": "thief", "host": "elsewhere", "pid": 1}',))
    worker = agent("worker", does="acts", model="m", uses={"tools": [define_tool(effect, name="effect")]})
    async with open_store(f"sqlite:///{path}") as store:
        with pytest.raises((LeaseLost, RunInProgress), match="elsewhere"):
            r = await worker.run("go", transport=thief, llm=LLM, store=store, run_id="stolen")
            raise AssertionError(f"the run went on: {r.status} {r.text!r}")
    assert acted == []
    assert stored_calls(path, "stolen") == {}  # nothing of the refused start was written


async def test_a_run_written_behind_the_runtimes_back_under_its_lease_is_not_overwritten(tmp_path):
    """Each commit is fenced on the version the runtime's last commit left: when something else
    wrote the run meanwhile (the lease untouched), the next start is refused, the function is not
    called again, and the run fails saying what happened."""
    path = tmp_path / "runs.db"
    acted: list[str] = []

    def effect() -> str:
        """Acts once."""
        acted.append("acted")
        return "acted"

    meddler = WriteBeforeReply(  # another writer bumps the run's version before the second reply
        model_calling("effect", "effect"), path, 1, "UPDATE tn_runs SET version = version + 1 WHERE run_id = 'moved'")
    worker = agent("worker", does="acts", model="m", uses={"tools": [define_tool(effect, name="effect")]})
    async with open_store(f"sqlite:///{path}") as store:
        with pytest.raises(RunChanged, match="'moved' was changed by another process"):
            r = await worker.run("go", transport=meddler, llm=LLM, store=store, run_id="moved")
            raise AssertionError(f"the run went on: {r.status} {r.text!r}")
    assert acted == ["acted"]  # the first call only
    # nothing of the refused commit landed (the first call's finish, the second call's start)
    assert list(stored_calls(path, "moved").values()) == ["started"]


async def test_a_start_offered_to_a_tool_that_refused_its_arguments_is_still_written(tmp_path):
    path = tmp_path / "runs.db"

    def lookup(q: int) -> str:
        """Look up q."""
        return f"found {q}"

    model = scripted({"m": [{"whenToolMsgs": 0, "toolCalls": calls(("lookup", {"q": "not a number"}))},
                            {"whenToolMsgs": ">=1", "text": "said: <last tool msg content>"}]})
    worker = agent("worker", does="looks up", model="m", uses={"tools": [define_tool(lookup, name="lookup")]})
    async with open_store(f"sqlite:///{path}") as store:
        r = await worker.run("go", transport=model, llm=LLM, store=store, run_id="refused")
        assert r.status == "done" and r.text.startswith("said: invalid arguments for lookup")
        loaded = await store.load("refused")
    transcript = loaded.conversations["root/worker.1"]
    assert [m["role"] for m in transcript] == ["user", "assistant", "tool", "assistant"]


class OneWorker:
    """The event loop's tool threads cut to one, and a `block` tool that holds it until released:
    a second plain-function call queues behind it."""

    def __init__(self) -> None:
        self.entered, self.release = threading.Event(), threading.Event()
        self.jobs = 0
        outer = self

        class Pool(ThreadPoolExecutor):
            def submit(self, *args: Any, **kwargs: Any) -> Any:
                outer.jobs += 1
                return super().submit(*args, **kwargs)

        self.pool = Pool(1)
        self.waiter = ThreadPoolExecutor(1)  # for waiting on threading events off the loop

        def block() -> str:
            """Holds the only worker thread."""
            self.entered.set()
            self.release.wait(30)
            return "unblocked"

        self.block = define_tool(block, name="block")

    async def run_until_queued(self, store: Any, effect: Any, run_id: str) -> tuple[AgentRuntime, Any]:
        """A run whose model calls `block` and `effect` in one turn, left where `block` holds the
        worker thread and `effect`'s thread job waits behind it."""
        worker = agent("worker", does="acts", model="m", uses={"tools": [self.block, define_tool(effect)]})
        rt = AgentRuntime(registry=worker.registry(), transport=model_calling("block", "effect", parallel=True),
                          llm=LLM, store=store, run_id=run_id)
        h = rt.spawn(rt.root, "worker")
        await rt.flush()  # the run exists and its lease is held before the turn starts (as `Agent.run` does)
        rt.wake(h, "go")
        await asyncio.get_running_loop().run_in_executor(self.waiter, self.entered.wait, 30)
        await until(lambda: self.jobs == 2)
        return rt, h


@pytest.fixture
async def one_worker():
    worker = OneWorker()
    asyncio.get_running_loop().set_default_executor(worker.pool)
    yield worker
    worker.release.set()
    worker.waiter.shutdown()


async def test_a_commit_does_not_wait_behind_a_tool_thread_still_queued(tmp_path, one_worker):
    """With every worker thread busy, a call's start waits in the queue; a commit the run needs
    meanwhile writes that start itself (in order, first) instead of waiting for a free thread,
    and the function, once it runs, finds it durable and runs once."""
    path = tmp_path / "runs.db"
    effects: list[dict[str, str]] = []

    def effect() -> str:
        """Acts once."""
        effects.append(stored_calls(path, "queued"))
        return "acted"

    async with open_store(f"sqlite:///{path}") as store:
        try:
            rt, h = await one_worker.run_until_queued(store, effect, "queued")
            await asyncio.wait_for(rt.flush(), 10)  # returns although no worker thread is free
            assert sorted(stored_calls(path, "queued").values()) == ["started", "started"]
            one_worker.release.set()
            r = await asyncio.wait_for(rt.wait(h), 30)
            assert (r.status, r.text) == ("done", "done: acted")
            await rt.close(rt.root)
        finally:
            one_worker.release.set()
    assert len(effects) == 1 and sorted(effects[0].values()) == ["started", "started"]


async def test_parallel_plain_functions_each_find_their_own_start_durable(tmp_path):
    """Two plain functions called in one turn: the second call's commit must not overtake the
    first's start, and each function, when it runs, finds its own start on disk."""
    path = tmp_path / "runs.db"
    seen: dict[str, dict[str, str]] = {}

    def tool(name: str) -> Any:
        def act() -> str:
            seen[name] = stored_calls(path, "pair")
            return name

        act.__doc__ = f"Acts as {name}."
        return define_tool(act, name=name)

    worker = agent("worker", does="acts", model="m", uses={"tools": [tool("left"), tool("right")]})
    async with open_store(f"sqlite:///{path}") as store:
        r = await worker.run("go", transport=model_calling("left", "right", parallel=True), llm=LLM, store=store,
                             run_id="pair")
        assert r.status == "done"
        transcript = (await store.load("pair")).conversations["root/worker.1"]
    calls_made = transcript[1]["tool_calls"]
    ids = {c["function"]["name"]: c["id"] for c in calls_made}
    assert set(seen) == {"left", "right"}
    for name, journal in seen.items():
        assert journal.get(ids[name]) == "started", (name, journal)


async def test_a_call_interrupted_while_its_thread_is_queued_never_runs_and_the_run_stays_whole(tmp_path, one_worker):
    """The run is interrupted while a call's thread job still waits for a free worker: the
    function is never called, and what the run staged is still committed (nothing is left
    half-written or lost)."""
    path = tmp_path / "runs.db"
    effects: list[str] = []

    def effect() -> str:
        """Acts once."""
        effects.append("acted")
        return "acted"

    async with open_store(f"sqlite:///{path}") as store:
        try:
            rt, h = await one_worker.run_until_queued(store, effect, "cut")
            rt.interrupt(h)
            await rt.flush()
            one_worker.release.set()
            await asyncio.get_running_loop().run_in_executor(
                one_worker.pool, lambda: None
            )  # in order: `effect`'s job is over
            await rt.close(rt.root)
            loaded = await store.load("cut")
        finally:
            one_worker.release.set()
    assert effects == []  # interrupted before its thread was free: never called
    assert (loaded.status, loaded.handles["root/worker.1"]["state"]) == ("interrupted", "closed")
    # no start left behind for a later restore to mistake for a call in doubt
    assert loaded.calls == {} and not any(rec.get("calls") for rec in loaded.handles.values())


# -- a run whose id is generated -------------------------------------------------------------------


def stored_runs(path: Path) -> list[tuple[str, str]]:
    conn = sqlite3.connect(path)
    try:
        return conn.execute("SELECT run_id, status FROM tn_runs").fetchall()
    finally:
        conn.close()


async def test_a_generated_run_is_created_with_its_first_calls_start_on_the_tools_thread(tmp_path, monkeypatch):
    """No run id given, so none can be in use: the run is not created by a round trip of its own
    before the first LLM call. With no background commit in the way, its first commit is the
    first call's start — the run, its entry and that start in one transaction, written by the
    tool's thread — and the function finds all of it durable."""
    from toolnexus.agents._durable import DurableRun

    monkeypatch.setattr(DurableRun, "schedule", lambda self, delay=0.0: None)
    path = tmp_path / "runs.db"
    seen: list[tuple[list[tuple[str, str]], list[str], int]] = []
    on_store_thread: list[str] = []
    real_start = SqliteStore.start_run

    async def start_run(self, run_id, **kw):
        on_store_thread.append(run_id)
        return await real_start(self, run_id, **kw)

    monkeypatch.setattr(SqliteStore, "start_run", start_run)

    def effect() -> str:
        """Acts once."""
        runs = stored_runs(path)
        seen.append((runs, sorted(stored_calls(path, runs[0][0]).values()) if runs else [], threading.get_ident()))
        return "acted"

    worker = agent("worker", does="acts", model="m", uses={"tools": [define_tool(effect, name="effect")]})
    async with open_store(f"sqlite:///{path}") as store:
        r = await worker.run("go", transport=model_calling("effect"), llm=LLM, store=store)
        assert (r.status, r.text) == ("done", "done: acted")
        loaded = await store.load(r.run_id)
    assert seen[0][:2] == ([(r.run_id, "running")], ["started"])
    assert on_store_thread == []  # created on the tool's thread, not by a round trip of its own
    assert loaded.status == "done" and loaded.entry_agent == "worker"
    assert loaded.conversations["root/worker.1"][0] == {"role": "user", "content": "go"}


async def test_a_generated_run_is_stored_while_its_first_llm_call_is_out(tmp_path):
    """A slow first LLM call does not leave the run unstored: it is created in the background
    while the call is out (here the model answers only once it has been)."""
    path = tmp_path / "runs.db"
    created = threading.Event()
    real_start = SqliteStore.start_run

    async def start_run(self, run_id, **kw):
        version = await real_start(self, run_id, **kw)
        created.set()
        return version

    class Slow:
        def post(self, url, headers, payload, timeout):
            assert created.wait(30), "the run was not stored while its first LLM call was out"
            return {"choices": [{"message": {"role": "assistant", "content": "answered"}}]}

        def open(self, *args):
            raise NotImplementedError

    worker = agent("worker", does="answers", model="m")
    SqliteStore.start_run = start_run  # type: ignore[method-assign]
    try:
        async with open_store(f"sqlite:///{path}") as store:
            r = await worker.run("go", transport=Slow(), llm=LLM, store=store)
    finally:
        SqliteStore.start_run = real_start  # type: ignore[method-assign]
    assert (r.status, r.text) == ("done", "answered")
    assert stored_runs(path) == [(r.run_id, "done")]


async def test_a_generated_run_that_cannot_be_created_acts_on_nothing_and_says_why(tmp_path):
    """The store is reachable when the run starts, then another writer locks the file while the
    first LLM call is out: the run cannot be created, so no tool runs, and `Agent.run` raises the
    store's error; nothing half-written is left behind."""
    path = tmp_path / "runs.db"
    acted: list[str] = []
    locker: list[sqlite3.Connection] = []

    def effect() -> str:
        """Acts once."""
        acted.append("acted")
        return "acted"

    class Locking:
        def __init__(self) -> None:
            self.inner = model_calling("effect")

        def post(self, url, headers, payload, timeout):
            if not locker:
                conn = sqlite3.connect(path, isolation_level=None, check_same_thread=False)
                conn.execute("BEGIN EXCLUSIVE")
                locker.append(conn)
            return self.inner.post(url, headers, payload, timeout)

        def open(self, *args):
            raise NotImplementedError

    worker = agent("worker", does="acts", model="m", uses={"tools": [define_tool(effect, name="effect")]})
    async with open_store(f"sqlite:///{path}?timeout=0.2") as store:
        try:
            with pytest.raises(StoreUnavailable, match="holds a write lock"):
                await worker.run("go", transport=Locking(), llm=LLM, store=store)
        finally:
            for conn in locker:
                conn.execute("ROLLBACK")
                conn.close()
        assert acted == []
        assert await store.runs() == []
