"""What a verb says about its commit is true (issue #31).

- **Told "failed" for an applied answer.** With the PostgreSQL connection killed inside the
  resumed tool, `resume()` raised `StoreUnavailable` though the run then finished `done` with the
  side effect once. A pooled connection found dead before a transaction sent anything is now
  replaced and the transaction run again; and once an answer's application has committed, a later
  store failure no longer makes `resume()` raise: it returns what the run did, warns, and the run
  waits in the store, answer applied, for a restore.
- **Two verbs, two durability promises.** `rt.resume()` returned with its last commit only
  scheduled; `close(h)` and `run_turn()` too. All three now await it. The synchronous verbs (`spawn`, `post`, `wake`,
  `interrupt`) cannot await one: they schedule it (their docstrings say so; `await rt.flush()`
  waits for it) — and with no running event loop, where nothing could ever run it, a durable
  runtime refuses them before changing anything instead of skipping the commit silently.

Real processes (the resume runs in a fresh `support.durable_app` process) and real stores.
"""

from __future__ import annotations

import contextlib
import json
import logging
import sqlite3
import uuid
from pathlib import Path
from typing import Any

import pytest

from support.durable_app import SeedModel
from support.stores import postgres_url, run_app, sqlite_records, sqlite_transcript  # noqa: F401 - a fixture
from toolnexus import Answer, ToolResult, define_tool, pending
from toolnexus.agents import AgentDef, AgentRuntime, agent, resume
from toolnexus.stores import open_store

LLM = {"base_url": "http://mock.local", "style": "openai", "model": "stub-model", "api_key": "unused"}


def test_a_store_connection_killed_inside_the_resumed_tool_still_reports_done(postgres_url: str,
                                                                             tmp_path: Path) -> None:
    app = f"tn_kill_{uuid.uuid4().hex[:10]}"
    url = f"{postgres_url}&application_name={app}"
    effects = tmp_path / "effects.jsonl"
    started = run_app("start", "--store", url, "--run-id", "kill-1")
    assert started["status"] == "pending"
    answered = run_app("answer", "--store", url, "--id", started["pending"]["id"], "--effects", str(effects),
                       "--kill-store-app", app)  # before: exit 5, StoreUnavailable
    assert (answered["status"], answered["text"]) == ("done", "done.")
    assert len(effects.read_text().splitlines()) == 1
    listed = run_app("inbox", "--store", url)
    assert listed == {"pending": [], "runs": [{"run_id": "kill-1", "status": "done"}]}


EFFECTS: list[str] = []
BREAK = {"db": ""}


def refuse_run_updates() -> None:
    conn = sqlite3.connect(BREAK["db"], isolation_level=None)
    try:
        conn.execute("CREATE TRIGGER tn_test_down BEFORE UPDATE ON tn_runs BEGIN SELECT RAISE(ABORT, 'disk I/O "
                     "error (test)'); END")
    finally:
        conn.close()


async def gate(args: Any = None, ctx: Any = None) -> ToolResult:
    """Ask first; once approved, do the side effect — and then the store breaks for good."""
    if ctx is None or ctx.answer is None:
        return pending(kind="approval", prompt="open the gate?")
    EFFECTS.append("opened")
    if BREAK["db"]:
        refuse_run_updates()
    return ToolResult("through the gate", False)


GATED = agent("worker", does="does gated work", uses={"tools": [define_tool(gate, name="gate")]})


async def test_an_applied_answer_is_reported_applied_when_a_later_commit_fails(
        tmp_path: Path, caplog: pytest.LogCaptureFixture) -> None:
    EFFECTS.clear()
    BREAK["db"] = str(tmp_path / "runs.db")
    url = f"sqlite:///{BREAK['db']}"
    async with open_store(url) as store:
        r = await GATED.run("go", store=store, transport=SeedModel(), llm=LLM, run_id="gate-1")
        await r.runtime.aclose()
        caplog.set_level(logging.WARNING, logger="toolnexus")
        final = await resume(store, Answer(id=r.pending.id, ok=True), agents=[GATED], transport=SeedModel(), llm=LLM)
        # before: StoreUnavailable, as if the answer had not been applied
        assert (final.status, final.text, EFFECTS) == ("done", "done.", ["opened"])
        said = [rec.getMessage() for rec in caplog.records if "was applied" in rec.getMessage()]
        assert said and "'gate-1'" in said[0] and repr(r.pending.id) in said[0] and "disk I/O error" in said[0]
        row = await store.find_request(r.pending.id)
        assert row is not None and row.status == "applied"  # the application committed before the tool ran


async def test_rt_resume_returns_with_its_last_commit_written(tmp_path: Path) -> None:
    path = tmp_path / "runs.db"
    async with open_store(f"sqlite:///{path}") as store, contextlib.AsyncExitStack() as stack:
        r = await GATED.run("go", store=store, transport=SeedModel(), llm=LLM, run_id="gate-2")
        stack.push_async_callback(r.runtime.close, r.runtime.root)
        BREAK["db"] = ""  # the store stays healthy here
        final = await r.runtime.resume(Answer(id=r.pending.id, ok=True))
        # Read with another connection before this loop runs anything else: what resume() promised is on disk.
        conn = sqlite3.connect(path)
        try:
            stored = conn.execute("SELECT status FROM tn_runs WHERE run_id = 'gate-2'").fetchone()[0]
            ledger = conn.execute("SELECT status FROM tn_pending").fetchone()[0]
        finally:
            conn.close()
        assert (final.status, stored, ledger) == ("done", "done", "applied")  # before: "pending", "claimed"


async def test_close_of_a_handle_returns_with_its_commit_written(tmp_path: Path) -> None:
    path = tmp_path / "runs.db"
    async with open_store(f"sqlite:///{path}") as store, contextlib.AsyncExitStack() as stack:
        rt = AgentRuntime(registry={"w": AgentDef("w", "worker", "", "stub-model")}, store=store, run_id="close-1",
                          transport=SeedModel(), llm=LLM)
        stack.push_async_callback(rt.close, rt.root)
        child = rt.spawn(rt.root, "w")
        await rt.flush()
        await rt.close(child)
        conn = sqlite3.connect(path)
        try:
            records = {hid: json.loads(text) for hid, text, _ in sqlite_records(conn, "close-1")}
        finally:
            conn.close()
        assert records[child.id]["state"] == "closed"  # before: "idle", the close only scheduled


def test_sync_verbs_with_no_running_loop_refuse_instead_of_skipping_their_commit(tmp_path: Path) -> None:
    import asyncio

    from toolnexus.agents import InboxItem

    store = open_store(f"sqlite:///{tmp_path / 'runs.db'}")
    rt = AgentRuntime(registry={"w": AgentDef("w", "worker", "", "stub-model")}, store=store, run_id="sync-1",
                      transport=SeedModel(), llm=LLM)

    async def spawn_and_commit() -> Any:
        h = rt.spawn(rt.root, "w")
        await rt.flush()
        return h

    child = asyncio.run(spawn_and_commit())
    for verb in (lambda: rt.spawn(rt.root, "w"), lambda: rt.post(child, InboxItem("user", "note", "hi")),
                 lambda: rt.wake(child, "go"), lambda: rt.interrupt(child)):
        with pytest.raises(RuntimeError, match="no running event loop"):  # before: the change was never committed
            verb()
    assert [h.id for h in rt.root.children] == [child.id] and child.inbox == [] and child.state == "idle"

    async def finish() -> None:
        await rt.close(rt.root)
        await store.aclose()

    asyncio.run(finish())


async def test_run_turn_returns_with_its_commit_written(tmp_path: Path) -> None:
    path = tmp_path / "runs.db"
    async with open_store(f"sqlite:///{path}") as store, contextlib.AsyncExitStack() as stack:
        rt = AgentRuntime(registry={"w": AgentDef("w", "worker", "", "stub-model")}, store=store, run_id="turn-1",
                          transport=SeedModel(), llm=LLM)
        stack.push_async_callback(rt.close, rt.root)
        child = rt.spawn(rt.root, "w")
        await rt.flush()
        result = await rt.run_turn(child, "go")
        # Read with another connection before this loop runs anything else: what run_turn() promised is on disk.
        conn = sqlite3.connect(path)
        try:
            records = {hid: json.loads(text) for hid, text, _ in sqlite_records(conn, "turn-1")}
            transcript = sqlite_transcript(conn, "turn-1", child.id)
        finally:
            conn.close()
        assert (result.status, result.text) == ("done", "done.")
        assert records[child.id]["state"] == "idle"
        assert [m.get("role") for m in transcript] == ["user", "assistant", "tool", "assistant"]  # before: 2 rows
        assert transcript[-1].get("content") == "done."
