"""Racing work against an advisory `ToolContext.signal`: give up the moment it fires.

`toolnexus.types.signal_fired` is the one rule for *whether* a signal fired; `unless_aborted` is
the one way to wait on it while something else runs (HTTP tools, MCP calls, A2A calls). A signal
whose `wait` is a coroutine function (an `asyncio.Event`) wakes us at once; any other signal (a
`threading.Event`, an object with `aborted`, a plain flag) is checked every `CHECK_EVERY` seconds
of real time — a check cadence, not a policy delay, so it never goes through an injected clock.
Giving up cancels and reaps the work (an in-flight HTTP request drops its connection) and raises
`Aborted`. Cancelling the awaiting task cancels the work too and propagates.
Not here: what a call that gave up returns — each caller has its own pinned text.
"""

from __future__ import annotations

import asyncio
import inspect
from collections.abc import Awaitable
from typing import Any, Optional, TypeVar

from .types import signal_fired
from .errors import ToolnexusError

__all__ = ["CHECK_EVERY", "Aborted", "unless_aborted"]

CHECK_EVERY = 0.02  # seconds
T = TypeVar("T")


class Aborted(ToolnexusError):
    """The caller's signal fired before the work finished."""


async def _fired(signal: Any) -> None:
    wait = getattr(signal, "wait", None)
    if inspect.iscoroutinefunction(wait):
        await wait()
        return
    while not signal_fired(signal):
        await asyncio.sleep(CHECK_EVERY)


async def unless_aborted(work: Awaitable[T], signal: Optional[Any]) -> T:
    """Await `work`, unless `signal` fires first: then cancel it and raise `Aborted`.

    A signal that already fired means `work` never starts. If the work finishes in the same
    moment the signal fires, its outcome wins.
    """
    if signal is None:
        return await work
    if signal_fired(signal):
        if inspect.iscoroutine(work):
            work.close()  # never started: no "never awaited" warning
        raise Aborted()
    job = asyncio.ensure_future(work)
    watch = asyncio.ensure_future(_fired(signal))
    try:
        await asyncio.wait({job, watch}, return_when=asyncio.FIRST_COMPLETED)
    finally:
        for task in (job, watch):
            task.cancel()
        await asyncio.gather(job, watch, return_exceptions=True)
    if job.cancelled() and watch.done() and not watch.cancelled():
        raise Aborted()
    return job.result()
