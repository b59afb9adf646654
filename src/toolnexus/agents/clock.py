"""The runtime's notion of time: a `Clock` protocol, the real one, and a virtual one for tests.

Everything in the agent runtime that waits or measures (wait timeouts, the close grace period,
`max_wall_ms`, heartbeats, and — through each turn's client `timer` — §8 retry backoff and run
deadlines) goes through one injected `Clock`, so a test can drive time by hand with
`VirtualClock.advance(...)` instead of sleeping.

A clock may also offer `utc_now()` (an aware `datetime`): then that is the wall time the runtime
checks a request's `expiresAt` against, in `resume` and in each turn's client, instead of the
machine's. A clock that follows a Temporal workflow's time does (`toolnexus.temporal`), so an
expiry decision replays the same way it was first made. `wall_now(clock)` reads it.

This module does not schedule turns or know about handles; it only tells time and fires timers.
"""

from __future__ import annotations

import asyncio
import heapq
import itertools
import time
from typing import Any, Callable, Protocol, runtime_checkable

__all__ = ["Clock", "AsyncioClock", "VirtualClock", "wall_now"]


@runtime_checkable
class Clock(Protocol):
    """What the runtime needs from time: a monotonic reading, a sleep, and a cancellable timer."""

    def now(self) -> float:
        """Monotonic seconds."""
        ...

    async def sleep(self, seconds: float) -> None:
        """Suspend the calling task for `seconds` of this clock's time."""
        ...

    def call_later(self, seconds: float, cb: Callable[[], Any]) -> Any:
        """Run `cb()` after `seconds`; the returned object has `.cancel()`."""
        ...


def wall_now(clock: Any) -> Any:
    """The wall time (aware UTC `datetime`) by `clock`'s `utc_now()` if it has one, else the machine's."""
    read = getattr(clock, "utc_now", None)
    if callable(read):
        return read()
    from ..client.tool_calls import utc_now

    return utc_now()


class AsyncioClock:
    """Real time: `time.monotonic`, `asyncio.sleep`, and the running loop's `call_later`."""

    def now(self) -> float:
        return time.monotonic()

    async def sleep(self, seconds: float) -> None:
        await asyncio.sleep(max(0.0, seconds))

    def call_later(self, seconds: float, cb: Callable[[], Any]) -> asyncio.TimerHandle:
        return asyncio.get_running_loop().call_later(max(0.0, seconds), cb)


class _VirtualTimer:
    """A pending virtual timer; ordered by (deadline, insertion sequence)."""

    __slots__ = ("deadline", "seq", "cb", "cancelled")

    def __init__(self, deadline: float, seq: int, cb: Callable[[], Any]) -> None:
        self.deadline = deadline
        self.seq = seq
        self.cb = cb
        self.cancelled = False

    def cancel(self) -> None:
        self.cancelled = True

    def __lt__(self, other: "_VirtualTimer") -> bool:
        return (self.deadline, self.seq) < (other.deadline, other.seq)


class VirtualClock:
    """Test time that moves only when `advance` is awaited.

    `call_later` pushes `(deadline, seq, cb)` onto a heap; `sleep` awaits a future that a timer
    resolves; `advance(dt)` fires every due timer in deadline order, yielding to the event loop
    (`await asyncio.sleep(0)`) after each so the woken tasks run before the next timer fires.
    """

    def __init__(self, start: float = 0.0) -> None:
        self._now = float(start)
        self._heap: list[_VirtualTimer] = []
        self._seq = itertools.count()

    def now(self) -> float:
        return self._now

    def call_later(self, seconds: float, cb: Callable[[], Any]) -> _VirtualTimer:
        timer = _VirtualTimer(self._now + max(0.0, seconds), next(self._seq), cb)
        heapq.heappush(self._heap, timer)
        return timer

    async def sleep(self, seconds: float) -> None:
        fut: asyncio.Future[None] = asyncio.get_running_loop().create_future()

        def wake() -> None:
            if not fut.done():
                fut.set_result(None)

        timer = self.call_later(seconds, wake)
        try:
            await fut
        finally:
            timer.cancel()

    @property
    def pending_timers(self) -> int:
        """How many live (not cancelled) timers are waiting; handy for test synchronisation."""
        return sum(1 for t in self._heap if not t.cancelled)

    async def advance(self, dt: float) -> None:
        """Move time forward by `dt` seconds, firing due timers in order."""
        target = self._now + max(0.0, dt)
        while self._heap and self._heap[0].deadline <= target:
            timer = heapq.heappop(self._heap)
            if timer.cancelled:
                continue
            self._now = max(self._now, timer.deadline)
            timer.cb()
            await asyncio.sleep(0)
        self._now = target
        await asyncio.sleep(0)
