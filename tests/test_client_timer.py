"""An injected timer owns the §8 retry backoff and the run deadline (agents.md beyond #17).

Everything here runs against a real loopback server; time is a `VirtualClock` that moves only when
the test advances it, so each test proves that nothing finished before the virtual delay elapsed
and that no real waiting was needed.
"""

from __future__ import annotations

import asyncio
import time

import pytest

from support.llm_server import Hang, Json, LlmServer, openai_text
from toolnexus.agents import AgentDef, AgentRuntime
from toolnexus.agents.clock import VirtualClock
from toolnexus.client import RunCancelled, RunTimeout, create_client


class RecordingClock(VirtualClock):
    """A virtual clock that tells the test when someone starts sleeping on it, and for how long."""

    def __init__(self) -> None:
        super().__init__()
        self.sleeps: list[float] = []
        self.sleeping = asyncio.Event()

    async def sleep(self, seconds: float) -> None:
        self.sleeps.append(seconds)
        self.sleeping.set()
        await super().sleep(seconds)

    async def next_sleep(self) -> float:
        await asyncio.wait_for(self.sleeping.wait(), 5)
        self.sleeping.clear()
        return self.sleeps[-1]


@pytest.fixture
def server():
    with LlmServer() as s:
        yield s


def llm(server: LlmServer, timer: RecordingClock, **kw):
    return create_client(base_url=server.base_url, style="openai", model="m", api_key="k", timer=timer, **kw)


async def test_backoff_waits_for_the_virtual_clock(server):
    clock = RecordingClock()
    server.add(Json({"error": "busy"}, status=429), Json(openai_text("ok")))
    async with llm(server, clock, retry_base_ms=500) as client:
        run = asyncio.ensure_future(client.run("hi"))
        slept = await clock.next_sleep()
        assert 0.5 <= slept <= 0.6  # base * 2**0 plus at most 100 ms of jitter
        assert not run.done() and len(server.requests) == 1
        await clock.advance(0.49)
        assert not run.done() and len(server.requests) == 1
        await clock.advance(0.11)
        result = await asyncio.wait_for(run, 5)
    assert result.text == "ok" and len(server.requests) == 2


async def test_retry_after_is_slept_on_the_virtual_clock_without_real_waiting(server):
    clock = RecordingClock()
    server.add(Json({"error": "later"}, status=429, headers={"Retry-After": "30"}), Json(openai_text("ok")))
    started = time.monotonic()
    async with llm(server, clock) as client:
        run = asyncio.ensure_future(client.run("hi"))
        assert await clock.next_sleep() == 30
        await clock.advance(29.9)
        assert not run.done()
        await clock.advance(0.1)
        assert (await asyncio.wait_for(run, 5)).text == "ok"
    assert time.monotonic() - started < 10


async def test_the_deadline_fires_on_the_virtual_clock(server):
    clock = RecordingClock()
    server.add(Hang())
    async with llm(server, clock, timeout_ms=5000) as client:
        run = asyncio.ensure_future(client.run("hi"))
        assert await clock.next_sleep() == 5  # the deadline alarm of the first attempt
        await asyncio.to_thread(server.arrived.wait, 5)
        await clock.advance(4.9)
        assert not run.done()
        await clock.advance(0.1)
        with pytest.raises(RunTimeout):
            await asyncio.wait_for(run, 5)


async def test_a_backoff_is_clipped_to_the_virtual_deadline(server):
    clock = RecordingClock()
    server.add(Json({"error": "later"}, status=429, headers={"Retry-After": "30"}))
    async with llm(server, clock, timeout_ms=2000) as client:
        run = asyncio.ensure_future(client.run("hi"))
        assert await clock.next_sleep() == 2  # first attempt's deadline alarm
        assert await clock.next_sleep() == 2  # Retry-After 30 clipped to the 2 s left
        await clock.advance(2)
        with pytest.raises(RunTimeout):
            await asyncio.wait_for(run, 5)
    assert len(server.requests) == 1


async def test_cancel_interrupts_a_virtual_backoff(server):
    clock = RecordingClock()
    server.add(Json({"error": "busy"}, status=503))
    cancel = asyncio.Event()
    async with llm(server, clock) as client:
        run = asyncio.ensure_future(client.run("hi", cancel=cancel))
        await clock.next_sleep()
        cancel.set()
        with pytest.raises(RunCancelled):
            await asyncio.wait_for(run, 5)
    assert clock.pending_timers == 0  # the abandoned sleep cancelled its timer


def test_a_timer_without_now_and_sleep_is_rejected():
    with pytest.raises(TypeError, match="timer"):
        create_client(base_url="http://x", style="openai", model="m", api_key="k", timer=object())


async def test_an_agent_turn_retries_on_the_runtime_clock(server):
    clock = RecordingClock()
    server.add(Json({"error": "busy"}, status=429), Json(openai_text("done after retry")))
    rt = AgentRuntime(registry={"a": AgentDef("a", "retries", "", "m")}, clock=clock,
                      llm={"base_url": server.base_url, "api_key": "k"})
    try:
        h = rt.spawn(rt.root, "a")
        rt.wake(h, "go")
        waiter = asyncio.ensure_future(rt.wait(h))
        slept = await clock.next_sleep()
        assert 0.5 <= slept <= 0.6
        assert not waiter.done() and h.state == "running" and len(server.requests) == 1
        await clock.advance(0.6)
        result = await asyncio.wait_for(waiter, 5)
        assert (result.status, result.text, result.turns) == ("done", "done after retry", 1)
        assert len(server.requests) == 2
    finally:
        await rt.close(rt.root)
