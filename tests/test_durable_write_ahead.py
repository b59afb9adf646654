"""A tool call's start is durable before the tool acts — on SQLite, written by the worker thread
that runs a plain-function tool, just before it calls the function (one thread round trip per
call, not two).

Real SQLite files; each tool reads the database through its own connection, as another process
would, to see what is durable when it runs. The model is scripted behind the transport seam.
"""

from __future__ import annotations

import asyncio
import sqlite3
import threading
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

import pytest

from toolnexus import define_tool
from toolnexus.agents import AgentRuntime, agent
from toolnexus.durable import LeaseLost, RunInProgress
from toolnexus.stores import open_store
from toolnexus.stores.sqlite import SqliteStore

from support.agent_kit import calls, scripted, until
from support.durable_app import LLM


def stored_calls(path: Path, run_id: str) -> dict[str, str]:
    """The call journal of `run_id` as another connection sees it: call id → status."""
    import json

    conn = sqlite3.connect(path)
    try:
        rows = conn.execute("SELECT call_id, entry FROM tn_calls WHERE run_id = ?", (run_id,)).fetchall()
    finally:
        conn.close()
    return {call_id: json.loads(entry)["status"] for call_id, entry in rows}


def model_calling(*names: str, parallel: bool = False) -> Any:
    """A model that calls `names` (one per turn, or all in one turn), then answers."""
    if parallel:
        turns = [{"whenToolMsgs": 0, "toolCalls": calls(*((n, {}) for n in names))}]
    else:
        turns = [{"whenToolMsgs": i, "toolCalls": calls((n, {}))} for i, n in enumerate(names)]
    return scripted({"m": [*turns, {"whenToolMsgs": f">={len(names)}", "text": "done: <last tool msg content>"}]})


async def test_a_plain_function_finds_its_start_durable_written_on_its_own_thread(tmp_path):
    path = tmp_path / "runs.db"
    seen: list[tuple[dict[str, str], int]] = []
    writers: list[int] = []
    real_drive = SqliteStore._drive

    def drive(self, steps, write):
        writers.append(threading.get_ident())
        return real_drive(self, steps, write)

    def effect() -> str:
        """Acts once."""
        seen.append((stored_calls(path, "wa"), threading.get_ident()))
        return "acted"

    worker = agent("worker", does="acts", model="m", uses={"tools": [define_tool(effect, name="effect")]})
    async with open_store(f"sqlite:///{path}") as store:
        SqliteStore._drive = drive  # type: ignore[method-assign]
        try:
            r = await worker.run("go", transport=model_calling("effect", "effect"), llm=LLM, store=store,
                                 run_id="wa")
        finally:
            SqliteStore._drive = real_drive  # type: ignore[method-assign]
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

    class Thief:
        """The model's reply is sent after another holder has taken the run's lease."""

        def __init__(self) -> None:
            self.inner = model_calling("effect")

        def post(self, url, headers, payload, timeout):
            if not any(m.get("role") == "tool" for m in payload["messages"]):
                conn = sqlite3.connect(path)
                try:
                    conn.execute("UPDATE tn_runs SET lease = ?, lease_id = 'thief', lease_expires = 9e18 "
                                 "WHERE run_id = 'stolen'", ('{"id": "thief", "host": "elsewhere", "pid": 1}',))
                    conn.commit()
                finally:
                    conn.close()
            return self.inner.post(url, headers, payload, timeout)

        def open(self, *args):
            raise NotImplementedError

    worker = agent("worker", does="acts", model="m", uses={"tools": [define_tool(effect, name="effect")]})
    async with open_store(f"sqlite:///{path}") as store:
        with pytest.raises((LeaseLost, RunInProgress), match="elsewhere"):
            r = await worker.run("go", transport=Thief(), llm=LLM, store=store, run_id="stolen")
            raise AssertionError(f"the run went on: {r.status} {r.text!r}")
    assert acted == []
    assert stored_calls(path, "stolen") == {}  # nothing of the refused start was written


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


async def test_a_commit_does_not_wait_behind_a_tool_thread_still_queued(tmp_path):
    """With every worker thread busy, a call's start waits in the queue; a commit the run needs
    meanwhile writes that start itself (in order, first) instead of waiting for a free thread,
    and the function, once it runs, finds it durable and runs once."""
    path = tmp_path / "runs.db"
    entered, release = threading.Event(), threading.Event()
    effects: list[dict[str, str]] = []

    def block() -> str:
        """Holds the only worker thread."""
        entered.set()
        release.wait(30)
        return "unblocked"

    def effect() -> str:
        """Acts once."""
        effects.append(stored_calls(path, "queued"))
        return "acted"

    tools = [define_tool(block, name="block"), define_tool(effect, name="effect")]
    worker = agent("worker", does="acts", model="m", uses={"tools": tools})
    class OneThread(ThreadPoolExecutor):
        """The loop's only worker thread for tools: `effect` queues behind `block`."""

        def __init__(self) -> None:
            super().__init__(1)
            self.jobs = 0

        def submit(self, *args: Any, **kwargs: Any) -> Any:
            self.jobs += 1
            return super().submit(*args, **kwargs)

    loop = asyncio.get_running_loop()
    waiter, pool = ThreadPoolExecutor(1), OneThread()
    loop.set_default_executor(pool)
    try:
        async with open_store(f"sqlite:///{path}") as store:
            rt = AgentRuntime(registry=worker.registry(), transport=model_calling("block", "effect", parallel=True),
                              llm=LLM, store=store, run_id="queued")
            h = rt.spawn(rt.root, "worker")
            await rt.flush()  # the run exists and its lease is held before the turn starts (as `Agent.run` does)
            rt.wake(h, "go")
            await loop.run_in_executor(waiter, entered.wait, 30)
            await until(lambda: pool.jobs == 2)  # `effect`'s thread job is queued behind `block`
            assert sorted(stored_calls(path, "queued").values()) == ["started"]  # `block`'s only, so far
            await asyncio.wait_for(rt.flush(), 10)  # returns although no worker thread is free
            assert sorted(stored_calls(path, "queued").values()) == ["started", "started"]
            release.set()
            r = await asyncio.wait_for(rt.wait(h), 30)
            assert (r.status, r.text) == ("done", "done: acted")
            await rt.close(rt.root)
    finally:
        release.set()
        waiter.shutdown()
    assert len(effects) == 1 and sorted(effects[0].values()) == ["started", "started"]
