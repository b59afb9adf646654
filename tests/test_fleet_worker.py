"""The fleet's `Worker` in process, on real SQLite and PostgreSQL stores: the work queue, per-agent
limits across workers, expiry and timers fired while nothing runs, takeover of a dead holder's
run, cancel delivered to a running run, a stop that hands runs back, and the two wake-ups
(LISTEN/NOTIFY on PostgreSQL, the poll everywhere). The same with real processes, SIGKILL and
SIGTERM: `test_fleet_processes.py`.

Synchronisation is by the worker's own steps (`step()` then `wait_idle()`), events and the
injectable clock; nothing sleeps to wait for something.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import re
from datetime import UTC, datetime, timedelta
from typing import Any, Iterator

import pytest

from support.fleet_agents import AGENTS, GATEKEEPER, LLM, MODEL, SLEEPER, effects
from support.stores import _url, postgres_url  # noqa: F401 - fixture
from toolnexus import Answer, ApprovalRule, Escalate, define_tool
from toolnexus.agents import AgentRuntime, agent, resume
from toolnexus.agents.clock import AsyncioClock, VirtualClock
from toolnexus.approvals import approval_of
from toolnexus.durable import AnswerAlreadyApplied, RunExists
from toolnexus.fleet import Worker
from toolnexus.stores import open_store


@pytest.fixture(params=["sqlite", "postgres"])
def fleet_url(request: Any, tmp_path: Any) -> Iterator[str]:
    yield from _url(request.param, tmp_path)


def worker(store: Any, **kw: Any) -> Worker:
    kw.setdefault("agents", AGENTS)
    return Worker(store, llm=LLM, transport=MODEL, **kw)


async def park(store: Any, a: Any, tag: str, run_id: str) -> Any:
    r = await a.run(tag, store=store, run_id=run_id, llm=LLM, transport=MODEL)
    await r.runtime.aclose()
    return r


async def test_submitted_runs_start_and_submitted_answers_apply(fleet_url, tmp_path, monkeypatch):
    monkeypatch.setenv("FLEET_EFFECTS", str(tmp_path / "fx.jsonl"))
    async with open_store(fleet_url) as store:
        ids = [(await store.submit_run("gatekeeper", f"g{i}", run_id=f"g{i}")).run_id for i in range(3)]
        with pytest.raises(RunExists):
            await store.submit_run("gatekeeper", "again", run_id="g0")
        assert {s.run_id: s.status for s in await store.runs()} == dict.fromkeys(ids, "queued")
        w = worker(store)
        await w.start()
        assert await w.step() == 3
        await w.wait_idle()
        inbox = await store.pending()
        assert sorted(p.run_id for p in inbox) == ids and {p.status for p in inbox} == {"open"}
        for p in inbox[:2]:
            queued = await store.submit_answer(Answer(id=p.request.id, ok=True))
            assert (queued.kind, queued.run_id) == ("answer", p.run_id)
        assert {p.status for p in await store.pending()} == {"open", "queued"}
        assert await w.step() == 2
        await w.wait_idle()
        statuses = {s.run_id: s.status for s in await store.runs()}
        assert sorted(statuses.values()) == ["done", "done", "pending"]
        assert sorted(e["tag"] for e in effects(tmp_path / "fx.jsonl") if e["event"] == "opened") == \
            sorted(p.run_id for p in inbox[:2])
        assert w.metrics_registry.value("toolnexus_fleet_jobs_total", kind="answer", outcome="done") == 2
        await w.drain()


async def test_an_answer_in_the_queue_is_the_only_one_ever_applied(fleet_url):
    async with open_store(fleet_url) as store:
        r = await park(store, GATEKEEPER, "once", "once")
        answer = Answer(id=r.pending.id, ok=True)
        await store.submit_answer(answer)
        with pytest.raises(AnswerAlreadyApplied, match="work queue"):
            await store.submit_answer(Answer(id=r.pending.id, ok=False))
        with pytest.raises(AnswerAlreadyApplied):  # the stateless verb is refused too, before anything runs
            await resume(store, answer, agents=AGENTS, llm=LLM, transport=MODEL)
        w = worker(store)
        await w.start()
        await w.step()
        await w.wait_idle()
        assert [s.status for s in await store.runs()] == ["done"]
        with pytest.raises(AnswerAlreadyApplied):
            await store.submit_answer(answer)
        await w.drain()


def _blocking_agents(release: asyncio.Event, inside: asyncio.Queue) -> list[Any]:
    made = []
    for name in ("alpha", "beta"):
        async def work(tag: str, _name: str = name) -> str:
            """Work until released."""
            inside.put_nowait((_name, tag))
            await release.wait()
            return f"worked on {tag}"

        made.append(agent(name, does="works", model="fleet-model",
                          uses={"tools": [define_tool(work, name="work", idempotent=True)]}))
    return made


async def test_a_per_agent_limit_holds_across_two_workers_and_others_go_on(fleet_url):
    release, inside = asyncio.Event(), asyncio.Queue()
    team = _blocking_agents(release, inside)
    async with open_store(fleet_url) as one, open_store(fleet_url) as two:
        for i in range(3):
            await one.submit_run("alpha", f"a{i}", run_id=f"a{i}")
        await one.submit_run("beta", "b0", run_id="b0")
        w1 = worker(one, agents=team, limits={"alpha": 1})
        w2 = worker(two, agents=team, limits={"alpha": 1})
        await w1.start()
        await w2.start()
        assert await w1.step() == 2  # the oldest alpha, and beta: round-robin across agents
        assert await w2.step() == 0  # alpha is at its limit fleet-wide; nothing else waits
        assert sorted([await inside.get(), await inside.get()]) == [("alpha", "a0"), ("beta", "b0")]
        release.set()
        await w1.wait_idle()
        assert await w2.step() == 1  # the next alpha, and only one
        await w2.wait_idle()
        assert await w1.step() == 1
        await w1.wait_idle()
        assert {s.run_id: s.status for s in await one.runs()} == dict.fromkeys(["a0", "a1", "a2", "b0"], "done")
        await w1.drain()
        await w2.drain()


async def test_an_expiry_fires_while_nothing_runs(fleet_url, tmp_path, monkeypatch):
    monkeypatch.setenv("FLEET_EFFECTS", str(tmp_path / "fx.jsonl"))
    monkeypatch.setenv("FLEET_EXPIRES_S", "-1")  # already due when it is asked
    async with open_store(fleet_url) as store:
        await park(store, GATEKEEPER, "late", "late")
        w = worker(store)
        await w.start()
        assert await w.step() == 1
        await w.wait_idle()
        [run] = await store.runs()
        assert run.status == "done"
        loaded = await store.load("late")
        assert [(p.status, p.answer["reason"]) for p in loaded.pending] == [("applied", "expired")]
        assert "declined/expired" in json.dumps(loaded.conversations)
        assert not [e for e in effects(tmp_path / "fx.jsonl") if e["event"] == "opened"]  # the tool never ran again
        assert w.metrics_registry.value("toolnexus_fleet_expiries_total") == 1
        await w.drain()


class _AnHourAgo(AsyncioClock):
    """Real time, but the run's wall clock an hour behind: the requests it makes are due at once."""

    def utc_now(self) -> datetime:
        return datetime.now(UTC) - timedelta(hours=1)


def release(tag: str) -> str:
    """Release a service."""
    RELEASED.append(tag)
    return f"{tag} released"


RELEASED: list[str] = []
ESCALATING = agent("gatekeeper", does="releases", model="fleet-model", uses={"tools": [
    define_tool(release, name="gate", needs_approval=ApprovalRule(expires_in=600, group="leads",
                                                                 on_expiry=Escalate("oncall", expires_in=3600)))]})


async def test_a_worker_s_expiry_of_an_approval_escalates_as_its_rule_says(tmp_path):
    """The one expiry path: the worker fires `expiry_answer` (a decline, reason `expired`) and the
    approval's rule turns it into the same question asked of the escalation group — not a decline.
    (A request with no such rule is declined: `test_an_expiry_fires_while_nothing_runs`.)"""
    RELEASED.clear()
    async with open_store(f"sqlite:///{tmp_path / 'runs.db'}") as store:
        r = await ESCALATING.run("api", store=store, run_id="esc", llm=LLM, transport=MODEL, clock=_AnHourAgo())
        await r.runtime.aclose()
        asked = r.pending
        assert approval_of(asked)["group"] == "leads" and asked.expiresAt
        w = worker(store, agents=[ESCALATING])
        await w.start()
        assert await w.step() == 1  # the due expiry, queued by the scan and taken
        await w.wait_idle()
        [waiting] = await store.pending()
        a = approval_of(waiting.request)
        assert (waiting.run_id, a["group"], a["escalated_from"]) == ("esc", "oncall", asked.id)
        assert waiting.request.prompt.endswith("[escalated to oncall]") and waiting.request.expiresAt
        loaded = await store.load("esc")
        assert {p.request_id: (p.status, (p.answer or {}).get("reason")) for p in loaded.pending} == {
            asked.id: ("applied", "expired"), waiting.request.id: ("open", None)}
        assert [s.status for s in await store.runs()] == ["pending"] and RELEASED == []
        assert w.metrics_registry.value("toolnexus_fleet_expiries_total") == 1
        # the escalation group approves: the call runs
        await store.submit_answer(Answer(id=waiting.request.id, ok=True, by="oncall-olga"))
        assert await w.step() == 1
        await w.wait_idle()
        assert [s.status for s in await store.runs()] == ["done"] and RELEASED == ["api"]
        await w.drain()


async def test_a_tool_s_timer_fires_and_calls_it_again(fleet_url, tmp_path, monkeypatch):
    monkeypatch.setenv("FLEET_EFFECTS", str(tmp_path / "fx.jsonl"))
    async with open_store(fleet_url) as store:
        r = await park(store, SLEEPER, "nap", "nap")
        assert r.pending.kind == "timer" and r.pending.expiresAt
        w = worker(store)
        await w.start()
        await w.step()
        await w.wait_idle()
        assert [s.status for s in await store.runs()] == ["done"]
        assert [e["tag"] for e in effects(tmp_path / "fx.jsonl") if e["event"] == "woke"] == ["nap"]
        await w.drain()


async def test_a_run_whose_holder_died_is_taken_over_from_its_last_commit(fleet_url):
    release, inside = asyncio.Event(), asyncio.Queue()
    team = _blocking_agents(release, inside)
    async with open_store(fleet_url) as store, contextlib.AsyncExitStack() as stack:
        rt = AgentRuntime(registry=team[0].registry(), store=store, run_id="crash", llm=LLM, transport=MODEL)
        stack.push_async_callback(rt.aclose)  # for a failure before the aclose below (a second one is a no-op)
        rt.wake(rt.spawn(rt.root, "alpha"), "crash")
        assert await inside.get() == ("alpha", "crash")
        await rt.flush()
        [summary] = await store.runs()
        assert summary.status == "running" and summary.holder
        rt.run_state.durable.abandon()  # the holder dies: nothing more of it is written ...
        await rt.aclose()
        await _expire_lease(store, fleet_url, "crash")  # ... and its lease, on another machine, runs out
        release.set()
        w = worker(store, agents=team)
        await w.start()
        assert await w.step(scan=True) == 1
        await w.wait_idle()
        assert {s.run_id: s.status for s in await store.runs()} == {"crash": "done"}
        assert w.metrics_registry.value("toolnexus_fleet_recoveries_total") == 1
        assert w.metrics_registry.value("toolnexus_fleet_lease_takeovers_total") == 1
        await w.drain()


async def test_a_run_row_that_cannot_be_read_does_not_stop_the_scan_or_the_listing(tmp_path, monkeypatch, caplog):
    """A damaged lease (a hand edit, a bad disk) on one running run: the worker's scan skips that
    run and still fires another run's expiry; `runs()` lists the healthy runs and names the damaged
    one in a warning (`toolnexus doctor` finds it), as every listing does."""
    import logging
    import sqlite3

    monkeypatch.setenv("FLEET_EXPIRES_S", "-1")
    path = tmp_path / "runs.db"
    async with open_store(f"sqlite:///{path}") as store:
        await park(store, GATEKEEPER, "late", "late")
        await park(store, GATEKEEPER, "torn", "torn")
        conn = sqlite3.connect(path)
        with conn:
            conn.execute("UPDATE tn_runs SET lease = '{\"id\": \"go', status = 'running', lease_expires = 1 "
                         "WHERE run_id = 'torn'")
            conn.execute("UPDATE tn_pending SET expires_at = NULL WHERE run_id = 'torn'")
        conn.close()
        caplog.set_level(logging.WARNING, logger="toolnexus")
        w = worker(store)
        await w.start()
        assert await w.step(scan=True) == 1  # the expiry of "late"; "torn" is skipped, not fatal
        await w.wait_idle()
        assert {s.run_id: s.status for s in await store.runs()} == {"late": "done"}
        assert any("'torn'" in r.getMessage() and "lease" in r.getMessage() for r in caplog.records)
        [damaged] = await store.check()
        assert damaged.run_id == "torn" and [row.part for row in damaged.rows] == ["lease"]
        await w.drain()


async def _expire_lease(store: Any, url: str, run_id: str) -> None:
    """Make the run's lease look like that of a holder on another machine whose time ran out."""
    lease = json.dumps({"id": "gone", "host": "another-machine", "pid": 4242, "started": 1})
    if url.startswith("sqlite"):
        import sqlite3

        conn = sqlite3.connect(url[len("sqlite:///"):])
        with conn:
            conn.execute("UPDATE tn_runs SET lease = ?, lease_id = 'gone', lease_expires = 1, status = 'running' "
                         "WHERE run_id = ?", (lease, run_id))
        conn.close()
    else:
        from urllib.parse import parse_qsl, urlsplit

        import psycopg

        schema = dict(parse_qsl(urlsplit(url).query))["schema"]
        base = url.split("?")[0]
        with psycopg.connect(base, autocommit=True) as conn:
            conn.execute(f'UPDATE "{schema}".tn_runs SET lease = %s, lease_id = %s, lease_expires = 1, '
                         "status = 'running' WHERE run_id = %s", (lease, "gone", run_id))


async def test_cancel_reaches_a_run_a_worker_is_running(fleet_url):
    release, inside = asyncio.Event(), asyncio.Queue()
    team = _blocking_agents(release, inside)
    async with open_store(fleet_url) as store:
        await store.submit_run("alpha", "stop me", run_id="stop")
        w = worker(store, agents=team)
        await w.start()
        await w.step()
        await inside.get()
        assert await store.cancel_run("stop") == "requested"
        await w.step(scan=True)  # delivers it: the job hands the run back and cancels it
        await w.wait_idle()
        assert [s.status for s in await store.runs()] == ["cancelled"]
        assert await store.cancel_run("stop") == "cancelled"
        assert w.active == 0
        await w.drain()


async def test_a_stopped_worker_hands_its_run_to_another(fleet_url):
    release, inside = asyncio.Event(), asyncio.Queue()
    team = _blocking_agents(release, inside)
    async with open_store(fleet_url) as one, open_store(fleet_url) as two:
        await one.submit_run("alpha", "move", run_id="move")
        w1 = worker(one, agents=team, drain_timeout=0)
        await w1.start()
        await w1.step()
        await inside.get()
        w1.stop()
        await w1.drain()
        [summary] = await one.runs()
        assert (summary.status, summary.holder) == ("running", None)  # handed back: free for anyone, at once
        release.set()
        w2 = worker(two, agents=team)
        await w2.start()
        assert await w2.step() >= 1
        await w2.wait_idle()
        while w2.active or (await two.runs())[0].status != "done":  # the run item was started already: recovered
            assert await w2.step(scan=True) >= 0
            await w2.wait_idle()
        assert w1.metrics_registry.value("toolnexus_fleet_handbacks_total") == 1
        await w2.drain()


async def test_the_poll_finds_new_work_when_nothing_notifies(fleet_url):
    clock = VirtualClock()
    took = asyncio.Event()
    async with open_store(fleet_url) as store:
        w = worker(store, clock=clock, listen=False, poll_interval=5.0,
                   on_event=lambda line: took.set() if line.startswith("worker: took run") else None)
        serving = asyncio.ensure_future(w.run())
        try:
            while clock.pending_timers == 0:  # idle: waiting for the poll (and nothing else can wake it)
                await asyncio.sleep(0)
            await store.submit_run("alpha", "polled", run_id="polled")
            assert not took.is_set()
            await clock.advance(5.0)
            await asyncio.wait_for(took.wait(), 30)
        finally:
            w.stop()
            await serving


async def test_listen_notify_wakes_a_postgres_worker_at_once(postgres_url):
    took = asyncio.Event()
    events: list[str] = []

    def seen(line: str) -> None:
        events.append(line)
        if line.startswith("worker: took run"):
            took.set()

    async with open_store(postgres_url) as store:
        clock = VirtualClock()  # the poll never comes: only a notification can wake it
        w = worker(store, clock=clock, poll_interval=3600.0, on_event=seen)
        serving = asyncio.ensure_future(w.run())
        try:
            while clock.pending_timers == 0:
                await asyncio.sleep(0)
            assert "listening" in events[0]
            await store.submit_run("alpha", "notified", run_id="notified")
            await asyncio.wait_for(took.wait(), 30)
        finally:
            w.stop()
            await serving


async def test_a_restored_run_waited_on_from_root_gives_the_entry_result(fleet_url):
    async with open_store(fleet_url) as store:
        await park(store, GATEKEEPER, "root", "root")
        rt = await AgentRuntime.restore(store, "root", agents=AGENTS, llm=LLM, transport=MODEL)
        try:
            result = await rt.wait(rt.root)
            assert result.status == "pending" and result.pending is not None  # never "root never runs a turn"
        finally:
            await rt.aclose()


async def test_each_item_is_a_span_the_run_nests_under_and_metrics_render(tmp_path):
    from opentelemetry.sdk.trace import TracerProvider
    from opentelemetry.sdk.trace.export import SimpleSpanProcessor
    from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter

    from toolnexus import otel

    exporter = InMemorySpanExporter()
    provider = TracerProvider()
    provider.add_span_processor(SimpleSpanProcessor(exporter))
    otel.instrument(tracer_provider=provider)
    try:
        async with open_store(f"sqlite:///{tmp_path / 'runs.db'}") as store:
            await store.submit_run("alpha", "traced", run_id="traced")
            w = worker(store)
            await w.start()
            await w.step()
            await w.wait_idle()
            await w.drain()
    finally:
        otel.uninstrument()
    spans = exporter.get_finished_spans()
    [job] = [s for s in spans if s.name == "toolnexus.fleet.run"]
    assert job.attributes["toolnexus.run.id"] == "traced" and job.attributes["toolnexus.fleet.takeover"] is False
    runs = [s for s in spans if s.name.startswith("invoke_agent")]
    assert runs and all(s.parent is not None and s.parent.span_id == job.context.span_id for s in runs)
    text = w.metrics()
    assert 'toolnexus_fleet_jobs_total{kind="run",outcome="done"} 1' in text
    assert "# TYPE toolnexus_fleet_queue_depth gauge" in text and 'toolnexus_fleet_queue_depth{kind="run"} 0' in text


async def test_an_interrupted_run_is_listed_and_continued(fleet_url):
    from toolnexus.agents import resume_run

    release, inside = asyncio.Event(), asyncio.Queue()
    team = _blocking_agents(release, inside)
    async with open_store(fleet_url) as store:
        rt = AgentRuntime(registry=team[0].registry(), store=store, run_id="int", llm=LLM, transport=MODEL)
        h = rt.spawn(rt.root, "alpha")
        rt.wake(h, "int")
        await inside.get()
        rt.interrupt(h)
        await rt.aclose()
        assert [s.run_id for s in await store.runs("interrupted")] == ["int"]
        release.set()
        final = await resume_run(store, "int", agents=team, llm=LLM, transport=MODEL)
        assert (final.status, final.text) == ("done", "done continue: worked on continue")
        assert [s.status for s in await store.runs()] == ["done"]


async def test_an_answer_for_a_run_held_elsewhere_goes_back_to_the_queue_with_its_claim(fleet_url):
    async with open_store(fleet_url) as store:
        r = await park(store, GATEKEEPER, "held", "held")
        # a live host has the run
        holder = await AgentRuntime.restore(store, "held", agents=AGENTS, llm=LLM, transport=MODEL)
        try:
            await store.submit_answer(Answer(id=r.pending.id, ok=True))
            w = worker(store)
            await w.start()
            assert await w.step() == 1
            await w.wait_idle()
            [waiting] = await store.pending()
            assert waiting.status == "queued"  # still the queue's: no other answer can get in meanwhile
            with pytest.raises(AnswerAlreadyApplied):
                await store.submit_answer(Answer(id=r.pending.id, ok=False))
            assert w.metrics_registry.value("toolnexus_fleet_jobs_total", kind="answer", outcome="held") == 1
        finally:
            await holder.aclose()
        await w.drain()


async def test_a_worker_with_retention_prunes_ended_runs_only(fleet_url):
    async with open_store(fleet_url) as store:
        await park(store, GATEKEEPER, "kept", "kept")
        r = await park(store, GATEKEEPER, "ended", "ended")
        await resume(store, Answer(id=r.pending.id, ok=True), agents=AGENTS, llm=LLM, transport=MODEL)
        w = worker(store, retention=1e-6)
        await w.start()
        await w.step()
        assert [s.run_id for s in await store.runs()] == ["kept"]
        await w.drain()


async def test_a_worker_without_a_retention_of_its_own_prunes_by_the_store_s(fleet_url, exits):
    """`?retention=` in the store's URL is what a worker prunes by when it is given no
    `retention=`; a worker's own wins."""
    store = open_store(fleet_url + ("&" if "?" in fleet_url else "?") + "retention=0.000001")
    await store.open()
    exits.push_async_callback(store.aclose)
    await park(store, GATEKEEPER, "kept", "kept")
    r = await park(store, GATEKEEPER, "ended", "ended")
    await resume(store, Answer(id=r.pending.id, ok=True), agents=AGENTS, llm=LLM, transport=MODEL)
    own = worker(store, retention=3600)
    assert own.retention == 3600
    await own.start()
    exits.push_async_callback(own.drain)
    await own.step()
    assert sorted(s.run_id for s in await store.runs()) == ["ended", "kept"]  # ended an instant ago, not an hour
    by_store = worker(store)
    assert by_store.retention == 1e-6
    await by_store.start()
    exits.push_async_callback(by_store.drain)
    await by_store.step()
    assert [s.run_id for s in await store.runs()] == ["kept"]


class _WallAt(VirtualClock):
    """Virtual time, and a wall clock the test sets: the gauges' ages are read against it."""

    def __init__(self, wall: float) -> None:
        super().__init__()
        self.wall = wall

    def utc_now(self) -> datetime:
        return datetime.fromtimestamp(self.wall, UTC)


async def test_the_inbox_gauges_count_what_waits_and_age_the_oldest_by_the_worker_s_clock(fleet_url, exits):
    """`toolnexus_fleet_waiting_requests` and `toolnexus_fleet_oldest_pending_seconds` against a
    known inbox: two parked requests, then one (the oldest answered); the age is read on the
    worker's clock, set 125 s and then 40 s after the oldest waiting request was made."""
    store = open_store(fleet_url)
    await store.open()
    exits.push_async_callback(store.aclose)
    first = await park(store, GATEKEEPER, "p0", "p0")
    await park(store, GATEKEEPER, "p1", "p1")
    made = {p.run_id: p.created_at.timestamp() for p in await store.pending()}
    clock = _WallAt(made["p0"] + 125)
    w = worker(store, clock=clock)
    await w.start()  # the first heartbeat reads the gauges
    exits.push_async_callback(w.drain)
    gauge = w.metrics_registry.value
    assert gauge("toolnexus_fleet_waiting_requests") == 2
    assert gauge("toolnexus_fleet_oldest_pending_seconds") == pytest.approx(125, abs=1e-3)
    text = w.metrics()
    assert "# TYPE toolnexus_fleet_waiting_requests gauge\ntoolnexus_fleet_waiting_requests 2\n" in text
    rendered = re.search(r"# TYPE toolnexus_fleet_oldest_pending_seconds gauge\ntoolnexus_fleet_oldest_pending_seconds "
                         r"(\S+)\n", text)
    assert rendered is not None and float(rendered.group(1)) == pytest.approx(125, abs=1e-3), text
    await resume(store, Answer(id=first.pending.id, ok=True), agents=AGENTS, llm=LLM, transport=MODEL)
    clock.wall = made["p1"] + 40
    await clock.advance(w.heartbeat)  # the next heartbeat is due: the next pass reads the gauges again
    assert await w.step() == 0
    assert gauge("toolnexus_fleet_waiting_requests") == 1
    assert gauge("toolnexus_fleet_oldest_pending_seconds") == pytest.approx(40, abs=1e-3)
