"""A durable run's background commit never leaves a change behind: what is staged while a commit is
already on its way to the store is written by that same background task, without another trigger."""

import asyncio

from toolnexus.agents.clock import AsyncioClock
from toolnexus.agents.durable import DurableRun
from toolnexus.stores import open_store


async def test_a_change_staged_during_a_background_commit_is_committed_after_it():
    async with open_store("memory:") as store:
        durable = DurableRun(store, "run-1", run_status=lambda: "running", clock=AsyncioClock())
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
        await durable._scheduled

        assert (await store.load("run-1")).state == {"first": 1, "second": 2}
        await durable.close()
