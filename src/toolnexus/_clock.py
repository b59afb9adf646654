"""Time, once for the whole library: the clock protocols, the real clock and a virtual one.

Everything that measures or waits can be handed a clock instead of reading the machine's time:
the client (retry backoff, `Retry-After`, the run deadline), A2A polling (the call budget, the
poll sleeps) and the agent runtime (wait timeouts, the close grace period, `max_wall_ms`,
heartbeats). A test then drives time by hand (`VirtualClock.advance`) instead of sleeping, and a
durable host can make time follow its own history.

Two shapes, one a part of the other, because the users need different amounts of time:
- `Timer`: `now()` (monotonic seconds) and `async sleep(seconds)`. That is all a retry loop or a
  polling loop needs, so that is all they ask of a clock a user hands them.
- `Clock`: a `Timer` that can also schedule a callback, `call_later(seconds, cb)` returning an
  object with `cancel()`. The agent runtime needs it (a wait with a timeout is a timer, not a
  task per wait).
A clock may also offer `utc_now()` (an aware `datetime`); `wall_now(clock)` then reads the wall
time from it instead of the machine, so an expiry decision made on a workflow's time replays the
same way.

`AsyncioClock` (real time: `time.monotonic`, `asyncio.sleep`, the running loop's `call_later`) and
`VirtualClock` (time that moves only when `advance` is awaited) implement `Clock`, so they fit
everywhere.

One public name each: `toolnexus.agents.Clock` and `toolnexus.agents.AsyncioClock` (both pinned
0.21 names; `toolnexus.agents.clock` also holds `VirtualClock` and `wall_now`), and
`toolnexus.client.Timer` for the smaller shape the client's `timer=` and A2A's `clock=` accept. The
A2A package's own aliases (`Clock` for `Timer`, `SystemClock` for `AsyncioClock`) are gone.

What this module deliberately does not do: read a clock for anyone (each user decides
whether a missing clock means real time), or know what the waits are for.
"""

from __future__ import annotations

import asyncio
import heapq
import itertools
import time
from datetime import UTC, datetime
from typing import Any, Callable, Protocol, runtime_checkable


@runtime_checkable
class Timer(Protocol):
    """The part of a clock that measures and waits: a monotonic reading and a sleep."""

    def now(self) -> float:
        """Monotonic seconds."""
        ...

    async def sleep(self, seconds: float) -> None:
        """Suspend the calling task for `seconds` of this clock's time."""
        ...


@runtime_checkable
class Clock(Timer, Protocol):
    """A `Timer` that can also run a callback later (what the agent runtime needs from time)."""

    def call_later(self, seconds: float, cb: Callable[[], Any]) -> Any:
        """Run `cb()` after `seconds`; the returned object has `.cancel()`."""
        ...


def has_timer_shape(clock: Any) -> bool:
    """Whether `clock` has a callable `now` and `sleep` (what every user of a clock reads)."""
    return callable(getattr(clock, "now", None)) and callable(getattr(clock, "sleep", None))


def wall_now(clock: Any) -> datetime:
    """The wall time (aware UTC `datetime`) by `clock`'s `utc_now()` if it has one, else the machine's."""
    read = getattr(clock, "utc_now", None)
    if callable(read):
        return read()
    return datetime.now(UTC)


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
