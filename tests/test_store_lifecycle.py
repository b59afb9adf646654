"""The run lifecycle in every store: paged `pending()` / `runs()` with filters and stable cursors
(and the 0.21 listings unchanged), `cancel_run`, `prune`, the SQL stores' use of their indexes for
a page, and SQLite's durability switch (the commits exactly-once rests on are fsynced)."""

from __future__ import annotations

import contextlib
import json
import sqlite3
from datetime import timedelta
from typing import Any

import pytest

from support.fleet_agents import AGENTS, GATEKEEPER, LLM, MODEL, SLEEPER
from support.stores import store_url  # noqa: F401 - fixture
from toolnexus import Answer
from toolnexus.agents import AgentRuntime, resume, resume_run
from toolnexus.durable import AnswerAlreadyApplied, Page, RequestWithdrawn, RunInProgress, RunNotFound
from toolnexus.errors import ToolnexusValueError
from toolnexus.stores import open_store


async def park(store: Any, a: Any, tag: str, run_id: str) -> Any:
    r = await a.run(tag, store=store, run_id=run_id, llm=LLM, transport=MODEL)
    await r.runtime.aclose()
    return r


async def test_pending_pages_by_a_stable_cursor_and_filters(store_url):
    async with open_store(store_url) as store:
        for i in range(5):
            await park(store, GATEKEEPER, f"g{i}", f"g{i}")
        await park(store, SLEEPER, "s0", "s0")
        everything = await store.pending()
        assert isinstance(everything, list) and isinstance(everything, Page) and everything.next is None
        assert [p.run_id for p in everything] == ["g0", "g1", "g2", "g3", "g4", "s0"]  # oldest first, as 0.21
        first = await store.pending(limit=2)
        assert [p.run_id for p in first] == ["g0", "g1"] and first.next
        await resume(store, Answer(id=everything[2].request.id, ok=True), agents=AGENTS, llm=LLM, transport=MODEL)
        await park(store, GATEKEEPER, "g5", "g5")  # answered and added while paging: the cursor does not shift
        second = await store.pending(limit=2, after=first.next)
        assert [p.run_id for p in second] == ["g3", "g4"]
        rest = await store.pending(limit=10, after=second.next)
        assert [p.run_id for p in rest] == ["s0", "g5"] and rest.next is None
        assert [p.run_id for p in await store.pending(kind="timer")] == ["s0"]
        assert [p.run_id for p in await store.pending(agent="sleeper")] == ["s0"]
        assert await store.pending(older_than=timedelta(hours=1)) == []
        assert len(await store.pending(older_than=0)) == 6
        with pytest.raises(ToolnexusValueError, match="not a cursor"):
            await store.pending(after="nonsense")
        with pytest.raises(ToolnexusValueError, match="limit"):
            await store.pending(limit=0)


async def test_runs_pages_newest_created_first_and_filters(store_url):
    async with open_store(store_url) as store:
        for i in range(4):
            await park(store, GATEKEEPER, f"g{i}", f"g{i}")
        r = await SLEEPER.run("s", store=store, run_id="s", llm=LLM, transport=MODEL)
        await r.runtime.aclose()
        await resume(store, Answer(id=(await store.pending(kind="approval"))[0].request.id, ok=True), agents=AGENTS,
                     llm=LLM, transport=MODEL)  # g0 is done now: updated last
        assert [s.run_id for s in await store.runs()][0] == "g0"  # unpaged: newest update first, as 0.21
        page = await store.runs(limit=3)
        assert [s.run_id for s in page] == ["s", "g3", "g2"] and page.next
        more = await store.runs(limit=3, after=page.next)
        assert [s.run_id for s in more] == ["g1", "g0"] and more.next is None
        assert [s.run_id for s in await store.runs("done")] == ["g0"]
        assert sorted(s.run_id for s in await store.runs(["done", "pending"], agent="gatekeeper", limit=10)) == \
            ["g0", "g1", "g2", "g3"]
        assert [s.run_id for s in await store.runs(agent="sleeper", limit=5)] == ["s"]
        assert await store.runs(older_than=3600, limit=5) == []
        parked = (await store.runs("pending", limit=1))[0]
        assert parked.holder is None and parked.lease_expires is None  # parked: nobody holds it


async def test_cancel_withdraws_a_parked_run_s_requests(store_url):
    async with open_store(store_url) as store:
        r = await park(store, GATEKEEPER, "c", "c")
        assert await store.cancel_run("c") == "cancelled"
        assert await store.pending() == []
        assert [(s.run_id, s.status) for s in await store.runs()] == [("c", "cancelled")]
        with pytest.raises(RequestWithdrawn):
            await resume(store, Answer(id=r.pending.id, ok=True), agents=AGENTS, llm=LLM, transport=MODEL)
        assert await store.cancel_run("c") == "cancelled"
        assert any("cancelled" in line for line in (await store.load("c")).trace)


async def test_cancel_of_a_run_a_live_process_holds(store_url):
    async with open_store(store_url) as store, contextlib.AsyncExitStack() as stack:
        r = await park(store, GATEKEEPER, "held", "held")
        rt = await AgentRuntime.restore(store, "held", agents=AGENTS, llm=LLM, transport=MODEL)
        stack.push_async_callback(rt.aclose)
        if store_url.startswith(("memory", "file")):
            with pytest.raises(RunInProgress):  # no worker to deliver it: refused, saying who holds it
                await store.cancel_run("held")
        else:
            assert await store.cancel_run("held") == "requested"
        assert await store.cancel_run("held", force=True) == "cancelled"
        del r


async def test_prune_deletes_only_ended_runs_older_than_asked(store_url):
    async with open_store(store_url) as store:
        await park(store, GATEKEEPER, "parked", "parked")
        r = await park(store, GATEKEEPER, "ended", "ended")
        await resume(store, Answer(id=r.pending.id, ok=True), agents=AGENTS, llm=LLM, transport=MODEL)
        assert await store.prune(older_than=timedelta(days=30)) == 0
        assert await store.prune(older_than=0) == 1
        assert [s.run_id for s in await store.runs()] == ["parked"]
        assert len(await store.pending()) == 1
        with pytest.raises(RunNotFound):
            await store.load("ended")


def _with(url: str, query: str) -> str:
    return url + ("&" if "?" in url else "?") + query


async def test_a_store_s_retention_is_the_age_prune_uses_when_given_none(store_url):
    """`?retention=` in a SQL store's URL: `prune()` with no `older_than` deletes runs that ended
    longer ago; an explicit `older_than` wins; a store without one refuses to guess."""
    if not store_url.startswith(("sqlite", "postgresql")):
        pytest.skip("retention is a SQL store's URL option")
    async with open_store(store_url) as store:
        await park(store, GATEKEEPER, "parked", "parked")
        r = await park(store, GATEKEEPER, "ended", "ended")
        await resume(store, Answer(id=r.pending.id, ok=True), agents=AGENTS, llm=LLM, transport=MODEL)
        assert store.retention is None
        with pytest.raises(ToolnexusValueError, match=r"prune needs older_than= .* \?retention=30d"):
            await store.prune()
    async with open_store(_with(store_url, "retention=30d")) as kept:
        assert kept.retention == 30 * 86400
        assert await kept.prune() == 0  # ended just now: kept for 30 days
    async with open_store(_with(store_url, "retention=0.000001")) as trim:
        assert trim.retention == 1e-6
        assert await trim.prune(older_than=timedelta(days=30)) == 0  # the caller's age wins over the store's
        assert await trim.prune() == 1
        assert [s.run_id for s in await trim.runs()] == ["parked"]
    for bad in ("0", "soon", "-1d"):
        with pytest.raises(ToolnexusValueError, match=f"retention='{bad}' .* must be a duration > 0"):
            open_store(_with(store_url, f"retention={bad}"))


async def test_runs_and_prune_through_the_cli_filter_by_agent_and_age(tmp_path):
    """`toolnexus runs --agent` / `--older-than` and `toolnexus prune` by the store's retention,
    through the installed console script: two runs made two days old in the database itself."""
    from support.cli_run import run_cli

    path = tmp_path / "runs.db"
    url = f"sqlite:///{path}"
    async with open_store(url) as store:
        r = await park(store, GATEKEEPER, "g0", "g0")
        await resume(store, Answer(id=r.pending.id, ok=True), agents=AGENTS, llm=LLM, transport=MODEL)
        await park(store, GATEKEEPER, "g1", "g1")
        await park(store, GATEKEEPER, "g2", "g2")
        await park(store, SLEEPER, "s0", "s0")
    conn = sqlite3.connect(path)
    with conn:
        conn.execute("UPDATE tn_runs SET created_at = created_at - 172800, updated_at = updated_at - 172800 "
                     "WHERE run_id IN ('g0', 'g1')")
    conn.close()

    def ids(*args: str) -> list[str]:
        done = run_cli("runs", "--store", url, *args)
        assert done.returncode == 0, done.stderr
        return [line.split("\t")[0] for line in done.stdout.splitlines()]

    assert ids() == ["s0", "g2", "g1", "g0"]
    assert ids("--agent", "sleeper") == ["s0"]
    assert ids("--agent", "gatekeeper") == ["g2", "g1", "g0"]
    assert ids("--older-than", "1d") == ["g1", "g0"]
    assert ids("--older-than", "3d") == []
    assert ids("--agent", "sleeper", "--older-than", "1d") == []
    listed = json.loads(run_cli("runs", "--store", url, "--agent", "gatekeeper", "--older-than", "36h", "--status",
                                "done", "--json").stdout)
    assert [(r["run_id"], r["status"], r["entry_agent"]) for r in listed["runs"]] == [("g0", "done", "gatekeeper")]
    bad = run_cli("runs", "--store", url, "--older-than", "soon")
    assert bad.returncode == 2 and "--older-than takes a duration" in bad.stderr

    no_age = run_cli("prune", "--store", url)
    assert no_age.returncode == 2 and "?retention=30d" in no_age.stderr
    explicit = run_cli("prune", "--store", url + "?retention=1d", "--older-than", "3d")
    assert (explicit.returncode, explicit.stdout) == (0, "pruned 0 run(s)\n")  # the flag wins over the store's
    by_store = run_cli("prune", "--store", url + "?retention=1d")
    assert (by_store.returncode, by_store.stdout) == (0, "pruned 1 run(s)\n")  # g0: ended two days ago
    assert ids() == ["s0", "g2", "g1"]  # g1 is as old, but parked: never pruned
    bad = run_cli("prune", "--store", url + "?retention=never")
    assert bad.returncode == 2 and "retention='never'" in bad.stderr


async def test_an_interrupted_answer_leaves_the_run_continuable(store_url):
    """Cancelling `resume` (Ctrl-C in `toolnexus answer`) hands the run back as a crash would:
    listed as running, nobody holding it, and `resume_run` continues it — here to an in-doubt
    question about the call that was cut, as the crash rules say."""
    import asyncio

    from toolnexus import ToolResult, define_tool, pending
    from toolnexus.agents import agent

    inside = asyncio.Event()

    async def pay(tag: str, ctx: Any = None) -> ToolResult:
        """Pay (after an approval)."""
        if ctx is None or ctx.answer is None:
            return pending(kind="approval", prompt="pay?")
        inside.set()
        await asyncio.Event().wait()
        return ToolResult(output="paid", is_error=False)

    payer = agent("payer", does="pays", model="fleet-model", uses={"tools": [define_tool(pay)]})
    if store_url == "memory:":
        pytest.skip("a memory store is not shared by a second runtime after the first is gone")
    async with open_store(store_url) as store:
        r = await park(store, payer, "p", "p")
        answering = asyncio.ensure_future(resume(store, Answer(id=r.pending.id, ok=True), agents=[payer], llm=LLM,
                                                 transport=MODEL))
        await inside.wait()
        answering.cancel()
        with pytest.raises(asyncio.CancelledError):
            await answering
        [summary] = await store.runs()
        assert (summary.status, summary.holder) == ("running", None)
        final = await resume_run(store, "p", agents=[payer], llm=LLM, transport=MODEL)
        assert final.status == "pending" and final.pending.kind == "in_doubt"
        assert final.pending.data["tool"] == "pay"


async def test_a_page_is_served_by_an_index_not_a_sort(tmp_path):
    """The query plans of a page on SQLite: an index walk, no sort of the whole table (the
    PostgreSQL planner decides by the table's statistics: `benchmarks/fleet.py` prints its plans
    with 100,000 parked runs)."""
    sql_url = f"sqlite:///{tmp_path / 'runs.db'}"
    async with open_store(sql_url) as store:
        await park(store, GATEKEEPER, "x", "x")
        from toolnexus.durable._paging import PendingQuery, RunsQuery
        from toolnexus.stores._fleet_sql import pending_steps, runs_steps

        queries = []
        for steps in (pending_steps(PendingQuery(limit=50), store.dialect, 0.0),
                      pending_steps(PendingQuery(limit=50, kind="approval"), store.dialect, 0.0),
                      runs_steps(RunsQuery(limit=50), 0.0, store.dialect),
                      runs_steps(RunsQuery(("pending",), limit=50), 0.0, store.dialect),
                      runs_steps(RunsQuery(limit=50, agent="gatekeeper"), 0.0, store.dialect)):
            queries.append(steps.send(None))
        for query in queries:
            plan = await _plan(store, sql_url, query)
            assert "tn_pending_waiting" in plan or "tn_runs_by_" in plan, (query.sql, plan)
            assert "TEMP B-TREE" not in plan.upper() and "Sort" not in plan, (query.sql, plan)


async def _plan(store: Any, url: str, query: Any) -> str:
    conn = sqlite3.connect(url[len("sqlite:///"):])
    try:
        rows = conn.execute("EXPLAIN QUERY PLAN " + query.sql, query.params).fetchall()
    finally:
        conn.close()
    return " | ".join(str(r[-1]) for r in rows)


async def test_sqlite_fsyncs_the_commits_exactly_once_rests_on(tmp_path):
    """`synchronous=critical` (the default): a side-effecting call's start and an answer's claim
    commit with FULL, the rest with NORMAL; `full` and `normal` are the documented switch."""
    from toolnexus.stores._sqlite import SqliteStore

    seen: list[tuple[bool, str]] = []

    class Recording(SqliteStore):
        def _drive(self, steps: Any, write: bool, sync: bool = False) -> Any:
            out = super()._drive(steps, write, sync)
            if write:
                seen.append((sync, self._level))
            return out

    store = Recording(str(tmp_path / "runs.db"))
    async with store:
        r = await _noter().run("note", store=store, run_id="note", llm=LLM, transport=MODEL)
        assert r.status == "done"
        synced = [level for sync, level in seen if sync]
        assert synced and set(synced) == {"FULL"}  # the start of the side-effecting call, before it ran
        assert any(level == "NORMAL" for sync, level in seen if not sync)
        parked = await park(store, GATEKEEPER, "g", "g")
        seen.clear()
        await store.claim(parked.pending.id, _holder(), {"id": parked.pending.id, "ok": True}, ttl=30.0, run_id="g")
        assert seen == [(True, "FULL")]
    for mode, level in (("full", "FULL"), ("normal", "NORMAL")):
        store = open_store(f"sqlite:///{tmp_path / mode}.db?synchronous={mode}")
        async with store:
            await store.pending()
            assert store._level == level  # type: ignore[attr-defined]
    with pytest.raises(ToolnexusValueError, match="synchronous"):
        open_store(f"sqlite:///{tmp_path / 'x.db'}?synchronous=sometimes")


def _holder() -> Any:
    from toolnexus.durable import Holder

    return Holder.here()


def _noter() -> Any:
    from toolnexus import define_tool
    from toolnexus.agents import agent

    async def note(tag: str) -> str:
        """A side effect (not idempotent: its start is committed before it runs)."""
        return "noted"

    return agent("noter", does="notes", model="fleet-model", uses={"tools": [define_tool(note, name="work")]})


async def test_answers_queued_for_a_worker_are_held_by_the_queue_only(store_url):
    if not store_url.startswith(("sqlite", "postgresql")):
        pytest.skip("only the SQL stores have a work queue")
    async with open_store(store_url) as store:
        r = await park(store, GATEKEEPER, "q", "q")
        await store.submit_answer(Answer(id=r.pending.id, ok=True))
        [waiting] = await store.pending()
        assert waiting.status == "queued"
        with pytest.raises(AnswerAlreadyApplied):
            await store.claim(r.pending.id, _holder(), {"id": r.pending.id, "ok": True}, ttl=0.0, run_id="q")
