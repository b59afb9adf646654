"""Time and abort for outbound A2A calls: an injectable clock and an abort-aware await.

`ctx.signal` may be an `asyncio.Event` (or anything with a callable `is_set`), an object with an
`aborted` attribute, or any truthy/falsy value (spec §1.3). `unless_aborted` runs an awaitable
and gives up the moment the signal fires: an `asyncio.Event` wakes us at once; other signals are
checked every `CHECK_EVERY` seconds of real time (the check cadence is not a policy delay, so it
never goes through the injected clock). Giving up cancels and reaps the work (an in-flight HTTP
request closes its socket) and raises `Aborted`.

A clock is any object with `now()` (monotonic seconds) and `async sleep(seconds)`; any
`toolnexus.agents` clock fits. Tests inject one whose `sleep` just advances `now`.
"""

from __future__ import annotations

import asyncio
import time
from typing import Any, Awaitable, Optional, Protocol, TypeVar, runtime_checkable

from ..types import signal_fired

__all__ = ["CHECK_EVERY", "Clock", "SystemClock", "Aborted", "is_aborted", "unless_aborted"]

CHECK_EVERY = 0.02  # seconds
T = TypeVar("T")


@runtime_checkable
class Clock(Protocol):
    """Monotonic seconds and a sleep, the two things polling needs from time."""

    def now(self) -> float: ...

    async def sleep(self, seconds: float) -> None: ...


class SystemClock:
    """Real time: `time.monotonic` and `asyncio.sleep`."""

    def now(self) -> float:
        return time.monotonic()

    async def sleep(self, seconds: float) -> None:
        await asyncio.sleep(max(0.0, seconds))


class Aborted(Exception):
    """The caller's signal fired while we were waiting."""


# `signal.is_set()` if callable, else `signal.aborted`, else `bool(signal)`; `None` → False.
is_aborted = signal_fired


async def _until_aborted(signal: Any) -> None:
    if isinstance(signal, asyncio.Event):
        await signal.wait()
        return
    while not is_aborted(signal):
        await asyncio.sleep(CHECK_EVERY)


async def unless_aborted(work: Awaitable[T], signal: Optional[Any]) -> T:
    """Await `work`, unless `signal` fires first: then cancel it and raise `Aborted`."""
    if signal is None:
        return await work
    if is_aborted(signal):
        if asyncio.iscoroutine(work):
            work.close()
        raise Aborted()
    job = asyncio.ensure_future(work)
    watch = asyncio.ensure_future(_until_aborted(signal))
    try:
        await asyncio.wait({job, watch}, return_when=asyncio.FIRST_COMPLETED)
    finally:
        for t in (job, watch):
            t.cancel()
        await asyncio.gather(job, watch, return_exceptions=True)
    if watch.done() and not watch.cancelled():
        raise Aborted()
    return job.result()
