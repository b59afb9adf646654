"""Durable agent runs in one process, on every store: park, list, answer exactly once, restore.

Each test runs once per backend (memory, file, SQLite, PostgreSQL — the last skips without
TOOLNEXUS_TEST_POSTGRES). The model is scripted behind the transport seam; the store is real.
"""

from __future__ import annotations

import contextlib
import dataclasses
import re
from datetime import UTC, datetime, timedelta
from typing import Any

import pytest

from support.agent_kit import calls, delegate, scripted
from support.durable_app import FAN, LLM, TEAM_MODEL, TOP, WORKER, SeedModel, team_model
from support.llm_server import RecordingTransport, openai_calls, openai_text, tool_from, toolkit_of
from support.stores import store_url  # noqa: F401 - fixture
from toolnexus import Answer, ToolResult, define_tool, pending
from toolnexus.agents import AgentRuntime, agent, resume
from toolnexus.client import ResumeError, create_client
from toolnexus.durable import (
    AnswerAlreadyApplied,
    RequestWithdrawn,
    RestoreError,
    RunExists,
    RunInProgress,
    StoreUnavailable,
)
from toolnexus.stores import open_store


class Counting:
    """A transport that counts model calls (wrapping another)."""

    def __init__(self, inner: Any) -> None:
        self.inner, self.calls = inner, 0

    def post(self, url, headers, payload, timeout):
        self.calls += 1
        return self.inner.post(url, headers, payload, timeout)

    def open(self, *args):
        raise NotImplementedError


def gated(log: list[Any], *, schema: dict[str, Any] | None = None, expires: str | None = None):
    async def gate(args=None, ctx=None):
        answer = getattr(ctx, "answer", None)
        log.append(answer)
        if answer is not None and answer.ok:
            return ToolResult(f"through with {answer.data}", False)
        data = {"schema": schema} if schema else None
        return pending(kind="approval", prompt="let it through?", data=data, expiresAt=expires)

    return agent("worker", does="gated", uses={"tools": [define_tool(gate, name="gate", description="g")]})


async def test_a_parked_run_is_listed_and_answered_exactly_once_from_the_store(store_url):
    async with open_store(store_url) as store, contextlib.AsyncExitStack() as stack:
        model = Counting(SeedModel())
        r = await WORKER.run("do the gated thing", transport=model, llm=LLM, store=store, run_id="r-1")
        stack.push_async_callback(r.runtime.aclose)  # for a failure before the aclose below (a second one is a no-op)
        assert (r.status, r.run_id, r.runtime.run_id) == ("pending", "r-1", "r-1")
        await r.runtime.aclose()
        [waiting] = await store.pending()
        assert (waiting.run_id, waiting.request.id, waiting.path) == ("r-1", r.pending.id, ["root", "worker.1"])
        assert waiting.request.data["path"] == ["root", "worker.1"] and waiting.expires_at is None
        assert [(s.run_id, s.status, s.entry_agent) for s in await store.runs()] == [("r-1", "pending", "worker")]

        final = await resume(store, Answer(id=waiting.request.id, ok=True), agents=[WORKER], transport=model, llm=LLM)

        # continue mode (the default with a store): the halted call is filled from the answer, the model
        # is asked only for what comes after it — 2 calls in all, not the replay's 3
        assert (final.status, final.text, final.turns, final.total_tokens, final.run_id) == (
            "done",
            "done.",
            2,
            12,
            "r-1",
        )
        assert model.calls == 2
        assert await store.pending() == []
        assert [s.status for s in await store.runs()] == ["done"]
        with pytest.raises(AnswerAlreadyApplied, match="was already answered") as caught:
            await resume(store, Answer(id=waiting.request.id, ok=True), agents=[WORKER], transport=model, llm=LLM)
        assert caught.value.run_id == "r-1" and model.calls == 2


async def test_replay_mode_with_a_store_keeps_the_founding_examples_numbers(store_url):
    async with open_store(store_url) as store:
        r = await WORKER.run("go", transport=SeedModel(), llm=LLM, store=store, resume_mode="replay")
        await r.runtime.aclose()
        final = await resume(store, Answer(id=r.pending.id, ok=True), agents=[WORKER], transport=SeedModel(), llm=LLM,
                             resume_mode="replay")
        assert (final.status, final.text, final.turns, final.total_tokens) == ("done", "done.", 3, 20)


async def test_the_live_runtime_resumes_in_place_and_a_second_answer_is_refused(store_url):
    log: list[Any] = []
    worker = gated(log)
    async with open_store(store_url) as store, contextlib.AsyncExitStack() as stack:
        r = await worker.run("go", transport=SeedModel(), llm=LLM, store=store)
        stack.push_async_callback(r.runtime.close, r.runtime.root)
        answer = Answer(id=r.pending.id, ok=True, data={"n": 1})
        final = await r.runtime.resume(answer)
        assert final.status == "done" and [a.data if a else None for a in log] == [None, {"n": 1}]
        with pytest.raises(AnswerAlreadyApplied):
            await r.runtime.resume(answer)
        assert len(log) == 2  # the tool ran once with the answer


async def test_a_used_run_id_is_refused_before_any_model_call(store_url):
    async with open_store(store_url) as store:
        r = await WORKER.run("go", transport=SeedModel(), llm=LLM, store=store, run_id="same")
        await r.runtime.aclose()
        model = Counting(SeedModel())
        with pytest.raises(RunExists, match="'same' is already used"):
            await WORKER.run("go again", transport=model, llm=LLM, store=store, run_id="same")
        assert model.calls == 0


def test_generated_run_ids_sort_by_creation_time_and_stay_unguessable(monkeypatch):
    """A generated id begins with its creation time, so a new run's rows are appended to the end of
    every index keyed by run id; the rest is random."""
    from toolnexus.durable import _model as model

    now = [1_796_313_113_744_000_000]
    monkeypatch.setattr(model.time, "time_ns", lambda: now[0])
    first = model.new_run_id()
    now[0] += 1_000_000  # a millisecond later
    later = [model.new_run_id() for _ in range(50)]
    assert all(first < other for other in later)
    assert len(set(later)) == 50  # the same millisecond: told apart by the random part
    assert all(re.fullmatch(r"run-[0-9a-f]{32}", i) for i in [first, *later])


def test_a_run_id_needs_a_durable_store():
    with pytest.raises(ValueError, match="run_id needs a durable store"):
        AgentRuntime(registry=WORKER.registry(), run_id="x")


async def test_restore_names_a_missing_definition(store_url):
    async with open_store(store_url) as store, contextlib.AsyncExitStack() as stack:
        r = await TOP.run("go", transport=team_model(), llm=LLM, store=store, run_id="team")
        await r.runtime.aclose()
        with pytest.raises(RestoreError, match=r"needs the agent definition\(s\) 'leaf', 'mid'"):
            await AgentRuntime.restore(store, "team", agents=[agent("top", does="x", model="m-top")],
                                       transport=team_model(), llm=LLM)
        # the refused restore gave the lease back: a correct one works
        rt = await AgentRuntime.restore(store, "team", agents=[TOP], transport=team_model(), llm=LLM)
        stack.push_async_callback(rt.aclose)


async def test_a_live_holder_keeps_others_out_until_it_parks(store_url):
    async with open_store(store_url) as store, contextlib.AsyncExitStack() as stack:
        rt = AgentRuntime(registry=WORKER.registry(), transport=SeedModel(), llm=LLM, store=store, run_id="held")
        stack.push_async_callback(rt.aclose)
        await rt.run_state.durable.start("worker")  # created and leased, nothing parked yet
        with pytest.raises(RunInProgress, match="is being run by process"):
            await AgentRuntime.restore(store, "held", agents=[WORKER], transport=SeedModel(), llm=LLM)
        other = await AgentRuntime.restore(store, "held", agents=[WORKER], transport=SeedModel(), llm=LLM,
                                           takeover=True)
        stack.push_async_callback(other.aclose)


async def test_three_levels_park_at_the_leaf_and_resume_from_a_restored_runtime(store_url):
    async with open_store(store_url) as store, contextlib.AsyncExitStack() as stack:
        r = await TOP.run("go", transport=team_model(), llm=LLM, store=store, run_id="three")
        stack.push_async_callback(r.runtime.aclose)  # for a failure before the aclose below (a second one is a no-op)
        assert r.status == "pending" and r.pending.data["path"] == ["root", "top.1"]
        before = {h.id: (h.turns_total, h.usage_total) for h in _tree(r.runtime)}
        await r.runtime.aclose()

        rt = await AgentRuntime.restore(store, "three", agents=[TOP], transport=team_model(), llm=LLM)
        stack.push_async_callback(rt.close, rt.root)
        assert [h.id for h in _tree(rt)] == list(before) and all(h.state == "suspended" for h in _tree(rt))
        assert {h.id: (h.turns_total, h.usage_total) for h in _tree(rt)} == before
        final = await rt.resume(Answer(id=r.pending.id, ok=True))
        assert (final.status, final.text) == ("done", "top: mid: leaf: secret-token")
        assert [h.id for h in _tree(rt)] == list(before)  # no duplicate child
        for h in _tree(rt):
            assert h.turns_total > before[h.id][0] and h.usage_total > before[h.id][1]


async def test_two_parallel_pending_children_are_answered_one_at_a_time(store_url):
    async with open_store(store_url) as store, contextlib.AsyncExitStack() as stack:
        r = await FAN.run("go", transport=team_model(), llm=LLM, store=store, run_id="fan")
        await r.runtime.aclose()
        ids = [p.request.id for p in await store.pending()]
        assert len(ids) == 2
        first = await resume(store, Answer(id=ids[0], ok=True), agents=[FAN], transport=team_model(), llm=LLM)
        assert first.status == "pending" and first.pending.id == ids[1]
        assert [p.request.id for p in await store.pending()] == [ids[1]]
        final = await resume(store, Answer(id=ids[1], ok=True), agents=[FAN], transport=team_model(), llm=LLM)
        assert final.status == "done"
        assert final.text == "fan: child: through the gate + child: through the gate"
        rt = await AgentRuntime.restore(store, "fan", agents=[FAN], transport=team_model(), llm=LLM)
        stack.push_async_callback(rt.aclose)
        assert [h.id for h in _tree(rt)] == ["root/fan.1", "root/fan.1/left.1", "root/fan.1/right.2"]


async def test_an_expired_request_never_runs_its_tool_on_any_path(store_url, exits):
    past = (datetime.now(UTC) - timedelta(minutes=5)).isoformat()
    for mode in ("continue", "replay"):
        log: list[Any] = []
        worker = gated(log, expires=past)
        async with open_store(store_url) as store, contextlib.AsyncExitStack() as stack:
            r = await worker.run("go", transport=SeedModel(), llm=LLM, store=store, resume_mode=mode)
            await r.runtime.aclose()
            final = await resume(store, Answer(id=r.pending.id, ok=True), agents=[worker], transport=SeedModel(),
                                 llm=LLM, resume_mode=mode)
            assert final.status == "done", mode
            assert all(a is None for a in log), (mode, log)  # never run with the answer
            assert (await store.find_request(r.pending.id)).status == "applied"
            # in process too
            r2 = await worker.run("go", transport=SeedModel(), llm=LLM, store=store, resume_mode=mode)
            stack.push_async_callback(r2.runtime.close, r2.runtime.root)
            log.clear()
            await r2.runtime.resume(Answer(id=r2.pending.id, ok=True))
            assert all(a is None for a in log), (mode, log)
    # and without a store (replay, the founding page's default path)
    log = []
    worker = gated(log, expires=past)
    r3 = await worker.run("go", transport=SeedModel(), llm=LLM)
    exits.push_async_callback(r3.runtime.close, r3.runtime.root)
    await r3.runtime.resume(Answer(id=r3.pending.id, ok=True))
    assert all(a is None for a in log)


async def test_an_answer_that_violates_the_requests_schema_is_refused_on_every_path(store_url, exits):
    schema = {"type": "object", "properties": {"amount": {"type": "number"}}, "required": ["amount"]}
    bad, good = {"amount": "lots"}, {"amount": 40}
    for mode in ("continue", "replay"):
        log: list[Any] = []
        worker = gated(log, schema=schema)
        async with open_store(store_url) as store:
            r = await worker.run("go", transport=SeedModel(), llm=LLM, store=store, resume_mode=mode)
            await r.runtime.aclose()
            with pytest.raises(ResumeError, match="does not match the request's schema"):
                await resume(store, Answer(id=r.pending.id, ok=True, data=bad), agents=[worker],
                             transport=SeedModel(), llm=LLM, resume_mode=mode)
            assert [p.request.id for p in await store.pending()] == [r.pending.id]  # nothing consumed
            with pytest.raises(ResumeError, match="does not match the request's schema"):
                rt = await AgentRuntime.restore(store, r.run_id, agents=[worker], transport=SeedModel(), llm=LLM,
                                                resume_mode=mode)
                try:
                    await rt.resume(Answer(id=r.pending.id, ok=True, data=bad))
                finally:
                    await rt.aclose()
            final = await resume(store, Answer(id=r.pending.id, ok=True, data=good), agents=[worker],
                                 transport=SeedModel(), llm=LLM, resume_mode=mode)
            assert final.status == "done"
            assert [a.data for a in log if a is not None] == [good], mode
    log = []
    worker = gated(log, schema=schema)
    r3 = await worker.run("go", transport=SeedModel(), llm=LLM)  # no store: the replay path
    exits.push_async_callback(r3.runtime.close, r3.runtime.root)
    with pytest.raises(ResumeError, match="does not match the request's schema"):
        await r3.runtime.resume(Answer(id=r3.pending.id, ok=True, data=bad))
    assert all(a is None for a in log)


async def test_an_interrupted_parked_handle_withdraws_its_request(store_url):
    async with open_store(store_url) as store, contextlib.AsyncExitStack() as stack:
        r = await WORKER.run("go", transport=SeedModel(), llm=LLM, store=store)
        rt = r.runtime
        stack.push_async_callback(rt.close, rt.root)
        rt.interrupt(rt.entry)
        await rt.flush()
        assert await store.pending() == []
        with pytest.raises(RequestWithdrawn, match="withdrawn"):
            await resume(store, Answer(id=r.pending.id, ok=True), agents=[WORKER], transport=SeedModel(), llm=LLM)


async def test_transcripts_are_written_append_only(exits):
    """Every commit of a many-turn run writes only the new messages of each transcript."""
    store = open_store("memory:")
    seen: list[tuple[str, int, int]] = []
    real_start, real_commit = store.start_run, store.commit

    def note(changes):
        for conv, ops in changes.conversations.items():
            seen.append((conv, ops.start, len(ops.append)))

    async def start_spy(run_id, **kw):
        note(kw["changes"])
        return await real_start(run_id, **kw)

    async def commit_spy(run_id, holder, changes, **kw):
        note(changes)
        return await real_commit(run_id, holder, changes, **kw)

    store.start_run, store.commit = start_spy, commit_spy  # type: ignore[method-assign]
    script = [{"whenToolMsgs": n, "toolCalls": calls(("lookup", {"q": str(n)}))} for n in range(8)]
    script.append({"always": True, "text": "looked up"})
    from support.agent_kit import lookup_tool
    from toolnexus.agents import Budget

    looker = agent("looker", does="looks", model="m", uses={"tools": [lookup_tool()]}, budget=Budget(max_turns=20))
    r = await looker.run("go", transport=scripted({"m": script}), llm=LLM, store=store)
    exits.push_async_callback(r.runtime.aclose)
    assert r.status == "done" and r.turns == 9
    length = 0
    for _conv, start, appended in seen:
        assert start == length, seen  # never rewrites what is stored
        length = start + appended
    assert length == len(await r.runtime.conversation_store.get("root/looker.1"))


async def test_an_unreachable_store_is_a_clear_error_before_any_model_call():
    model = Counting(SeedModel())
    store = open_store("postgresql://postgres@127.0.0.1:1/none?timeout=1")
    with pytest.raises(StoreUnavailable, match="cannot reach the PostgreSQL store"):
        await WORKER.run("go", transport=model, llm=LLM, store=store)
    assert model.calls == 0


class SqliteBlocker:
    """Another writer on the run's SQLite file: `lock_once()` takes an exclusive lock (the first
    time only), `unlock()` gives it up."""

    def __init__(self, path: Any) -> None:
        self.path = path
        self.conn: Any = None

    def lock_once(self) -> None:
        import sqlite3

        if self.conn is None:
            self.conn = sqlite3.connect(self.path, isolation_level=None, check_same_thread=False)
            self.conn.execute("BEGIN EXCLUSIVE")

    def unlock(self) -> None:
        self.conn.execute("ROLLBACK")
        self.conn.close()


async def test_a_store_failing_mid_run_loses_nothing_committed(tmp_path):
    """The SQLite file is locked by another writer while the run is inside its tool (its start is
    committed by then): the run reports the store error; once the lock is gone the run is restored
    from its last commit, the (idempotent) tool runs again, and the run parks and finishes."""
    path = tmp_path / "r.db"
    blocker = SqliteBlocker(path)

    async def gate(args=None, ctx=None):
        answer = getattr(ctx, "answer", None)
        if answer is not None and answer.ok:
            return ToolResult("through", False)
        blocker.lock_once()  # the first run: lock the file before the run can park
        return pending(kind="approval", prompt="let it through?")

    worker = agent("worker", does="gated",
                   uses={"tools": [define_tool(gate, name="gate", description="g", idempotent=True)]})
    async with open_store(f"sqlite:///{path}?timeout=0.2") as store, contextlib.AsyncExitStack() as stack:
        with pytest.raises(StoreUnavailable, match="holds a write lock"):
            await worker.run("go", transport=SeedModel(), llm=LLM, store=store, run_id="locked")
        blocker.unlock()
        assert {s.run_id: s.status for s in await store.runs()} == {"locked": "running"}  # nothing parked yet
        rt = await AgentRuntime.restore(store, "locked", agents=[worker], transport=SeedModel(), llm=LLM,
                                        takeover=True)
        stack.push_async_callback(rt.aclose)  # for a failure before the aclose below (a second one is a no-op)
        result = await rt.wait(rt.entry)
        assert result.status == "pending" and result.pending.kind == "approval"
        await rt.aclose()
        final = await resume(store, Answer(id=result.pending.id, ok=True), agents=[worker], transport=SeedModel(),
                             llm=LLM)
        assert (final.status, final.text) == ("done", "done.")


async def test_a_run_whose_final_commit_fails_raises_instead_of_reporting_an_unstored_result(tmp_path):
    """The run finishes while another writer holds the SQLite file: its result cannot be stored,
    so `run` raises the store's error (a result is reported only once durable); after the lock is
    gone the store still shows the run as running, and a restore finishes it."""
    path = tmp_path / "r.db"
    blocker = SqliteBlocker(path)

    async def gate(args=None, ctx=None):
        blocker.lock_once()  # the first run: held until the run has tried to commit its end
        return ToolResult("through", False)

    worker = agent("worker", does="gated",
                   uses={"tools": [define_tool(gate, name="gate", description="g", idempotent=True)]})
    async with open_store(f"sqlite:///{path}?timeout=0.2") as store, contextlib.AsyncExitStack() as stack:
        with pytest.raises(StoreUnavailable, match="holds a write lock"):
            await worker.run("go", transport=SeedModel(), llm=LLM, store=store, run_id="late")
        blocker.unlock()
        assert {s.run_id: s.status for s in await store.runs()} == {"late": "running"}
        rt = await AgentRuntime.restore(store, "late", agents=[worker], transport=SeedModel(), llm=LLM, takeover=True)
        stack.push_async_callback(rt.close, rt.root)  # the close below is a step: this is for a failure before it
        result = await rt.wait(rt.entry)
        await rt.close(rt.root)
        assert (result.status, result.text) == ("done", "done.")
        assert {s.run_id: s.status for s in await store.runs()} == {"late": "done"}


async def test_the_client_claims_answers_through_a_durable_store(store_url):
    async def gate(args=None, ctx=None):
        if ctx is not None and ctx.answer is not None and ctx.answer.ok:
            return ToolResult("opened", False)
        return pending(kind="approval", prompt="open?")

    toolkit = toolkit_of(tool_from("gate", gate))
    async with open_store(store_url) as store:
        one = create_client(base_url="http://x", style="openai", model="m", api_key="k", store=store,
                            http_transport=RecordingTransport(openai_calls(("c1", "gate", {}))))
        halted = await one.ask("go", toolkit, id="chat")
        assert halted.status == "pending"
        [waiting] = await store.pending()
        assert (waiting.run_id, waiting.request.id) == ("conversation:chat", halted.pending.id)
        answer = Answer(id=halted.pending.id, ok=True)
        two = create_client(base_url="http://x", style="openai", model="m", api_key="k", store=store,
                            http_transport=RecordingTransport(openai_text("all open")))
        done = await two.ask_with_answer(toolkit, "chat", halted.pending, answer)
        assert done.text == "all open" and await store.pending() == []
        three = create_client(base_url="http://x", style="openai", model="m", api_key="k", store=store,
                              http_transport=RecordingTransport(openai_text("again")))
        with pytest.raises(AnswerAlreadyApplied):
            await three.ask_with_answer(toolkit, "chat", halted.pending, answer)
        with pytest.raises(AnswerAlreadyApplied):
            await three.run_with_answer(toolkit, halted.messages, halted.pending, answer)


def _tree(rt: AgentRuntime) -> list[Any]:
    out, stack = [], list(reversed(rt.root.children))
    while stack:
        h = stack.pop()
        out.append(h)
        stack.extend(reversed(h.children))
    return out


_ = (dataclasses, delegate, TEAM_MODEL)
