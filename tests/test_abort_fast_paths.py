"""The cheap paths of the cancel races keep the race's meaning: a run signal that only the call's own
cancellation can fire is not watched (the work runs in the caller's task), and a real-time deadline
alone runs the work under a timer in the caller's task — still ending in `RunTimeout`, still
closing what `on_abort` closes, and never mistaking the work's own `TimeoutError` for the deadline."""

import asyncio
import time

import pytest

from toolnexus._abort import Aborted, unless_aborted
from toolnexus.client import RunTimeout
from toolnexus.client._retry import Abort, race
from toolnexus.client._run_signal import RunSignal


async def _task_of_work() -> asyncio.Task:
    return asyncio.current_task()


async def test_a_signal_nothing_but_its_own_task_can_fire_is_not_watched():
    signal = RunSignal(Abort())  # no cancel event, no deadline
    assert signal.fires_apart() is False
    assert await unless_aborted(_task_of_work(), signal) is asyncio.current_task()


async def test_a_signal_with_a_cancel_event_is_raced_and_aborts_the_work():
    cancel = asyncio.Event()
    signal = RunSignal(Abort(cancel=cancel))
    assert signal.fires_apart() is True
    assert await unless_aborted(_task_of_work(), signal) is not asyncio.current_task()

    started = asyncio.Event()

    async def hang():
        started.set()
        await asyncio.Event().wait()

    async def fire():
        await started.wait()
        cancel.set()

    firing = asyncio.ensure_future(fire())
    with pytest.raises(Aborted):
        await unless_aborted(hang(), signal)
    await firing


async def test_a_real_time_deadline_alone_ends_a_hung_call_in_place_with_run_timeout():
    closed = []

    async def on_abort():
        closed.append(True)

    async def hang():
        closed.append(asyncio.current_task())
        await asyncio.Event().wait()

    abort = Abort(deadline=time.monotonic() + 0.05, timeout_ms=50, real_time=True)
    caller = asyncio.current_task()
    with pytest.raises(RunTimeout, match="50ms"):
        await race(hang(), abort, on_abort=on_abort)
    assert closed == [caller, True]  # ran in this task; the stream closer ran after the deadline


async def test_the_calls_own_timeout_error_is_not_the_deadline():
    async def times_out_itself():
        raise TimeoutError("read timed out")

    abort = Abort(deadline=time.monotonic() + 60, timeout_ms=60_000, real_time=True)
    with pytest.raises(TimeoutError, match="read timed out") as info:
        await race(times_out_itself(), abort)
    assert not isinstance(info.value, RunTimeout)
