"""Giving a durable run's state and lease to the store leaves nothing behind: what is staged while a
background commit is already on its way is written by that same task, and `aclose()` gives the
lease up even when the last turn is still tearing down."""

import asyncio
import contextlib

from support.stores import sqlite_records
from toolnexus.agents._durable import DurableRun
from toolnexus.agents.clock import AsyncioClock
from toolnexus.stores import open_store


async def test_a_change_staged_during_a_background_commit_is_committed_after_it():
    async with open_store("memory:") as store, contextlib.AsyncExitStack() as stack:
        durable = DurableRun(store, "run-1", clock=AsyncioClock())
        stack.push_async_callback(durable.close)
        await durable.flush(hold=True)  # creates the run and holds its lease

        real_commit, entered, gate = store.commit, asyncio.Event(), asyncio.Event()

        async def slow_commit(*args, **kwargs):
            entered.set()
            await gate.wait()
            return await real_commit(*args, **kwargs)

        store.commit = slow_commit
        durable.set_state(first=1)
        durable.schedule()
        await entered.wait()  # the background commit has taken {first} and is writing it
        durable.set_state(second=2)
        durable.schedule()  # staged while that commit is in flight
        gate.set()
        await durable.scheduler.task

        assert (await store.load("run-1")).state == {"first": 1, "second": 2}


async def test_aclose_right_after_a_run_waits_for_its_turn_teardown_and_gives_the_lease_up(monkeypatch):
    """`run()` returns when the result is published; the turn may still be closing its toolkit.
    `aclose()` then waits for that teardown, so the run is parked and another runtime may take it."""
    from support.durable_app import LLM, WORKER, SeedModel
    from toolnexus.agents import AgentRuntime
    from toolnexus.toolkit import Toolkit

    torn_down = asyncio.Event()
    real_close = Toolkit.close

    async def slow_close(self):
        await torn_down.wait()  # a teardown that takes a while (an MCP server stopping, say)
        await real_close(self)

    monkeypatch.setattr(Toolkit, "close", slow_close)
    async with open_store("memory:") as store, contextlib.AsyncExitStack() as stack:
        r = await WORKER.run("do the gated thing", transport=SeedModel(), llm=LLM, store=store, run_id="slow")
        stack.push_async_callback(r.runtime.aclose)  # for a failure before the aclose under test (then a no-op)
        assert r.status == "pending"
        asyncio.get_running_loop().call_soon(torn_down.set)
        await r.runtime.aclose()

        rt = await AgentRuntime.restore(store, "slow", agents=[WORKER], transport=SeedModel(), llm=LLM)
        stack.push_async_callback(rt.aclose)
        assert [p.run_id for p in await store.pending()] == ["slow"]


async def test_the_entry_agent_and_its_prompt_are_stored_before_its_first_model_call(tmp_path):
    """Even when the store is slow, `Agent.run` holds the first turn until the entry agent and its
    prompt are committed: a crash at the first model call always leaves a run that can be restored."""
    import sqlite3

    from support.durable_app import LLM, WORKER, SeedModel
    from toolnexus.stores._sqlite import SqliteStore

    path = tmp_path / "runs.db"
    seen_at_first_call: list[list[str]] = []

    class Watching(SeedModel):
        def post(self, url, headers, payload, timeout):  # runs on a worker thread: read the file directly
            if not seen_at_first_call:
                conn = sqlite3.connect(path)
                try:
                    seen_at_first_call.append([row[0] for row in sqlite_records(conn, "slow-store")])
                finally:
                    conn.close()
            return super().post(url, headers, payload, timeout)

    async with open_store(f"sqlite:///{path}") as store, contextlib.AsyncExitStack() as stack:
        assert isinstance(store, SqliteStore)
        real_commit = store.commit

        async def slow_commit(*args, **kwargs):
            for _ in range(200):  # yield to everything else first: a turn that is not held runs ahead
                await asyncio.sleep(0)
            return await real_commit(*args, **kwargs)

        store.commit = slow_commit
        r = await WORKER.run("do the gated thing", transport=Watching(), llm=LLM, store=store, run_id="slow-store")
        stack.push_async_callback(r.runtime.aclose)
        assert r.status == "pending", r.text
    assert seen_at_first_call == [["root", "root/worker.1"]]
