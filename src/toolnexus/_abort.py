"""Racing work against whatever should stop it: written once, used by every abortable wait.

`race(work, *stoppers)` is the one primitive. It runs `work` and the stoppers (awaitables that
complete when the work should be given up: an event's `wait()`, a clock's `sleep()`, a signal
firing), optionally with a real-time `timeout`, and:
- the work finishing first (or in the same moment as a stopper) wins: its value is returned, its
  exception raised;
- otherwise the work is given up: cancelled, `on_abandon` awaited (e.g. close a stream so a read
  stuck in a socket returns), and reaped (with a timeout and no stopper — the usual deadline —
  the work runs in the caller's task under `asyncio.timeout`, so it has unwound at once), and `STOPPED` is returned.
  Reaped means: awaited until it has unwound (`grace=None`), or for at most `grace` real seconds, after which it is left
  to finish on its own with its outcome retrieved (a worker thread cannot be interrupted, and its
  caller must not wait for it);
- every stopper is cancelled and awaited before `race` returns, whichever way it ends;
- cancelling the task awaiting `race` gives up the work the same way and propagates.
Deciding what a stop *means* (which error, which pinned text) stays with the two entry points
built on it: the client's `retry.race` (the run's cancel event and deadline) and
`unless_aborted` here (an advisory `ToolContext.signal`, for HTTP tools, MCP calls, A2A calls).

`toolnexus.types.signal_fired` is the one rule for *whether* a signal fired; `unless_aborted`
waits on it: a signal whose `wait` is a coroutine function (an `asyncio.Event`, the client's run
signal) wakes us at once; any other signal (a `threading.Event`, an object with `aborted`, a plain
flag) is checked every `CHECK_EVERY` seconds of real time — a check cadence, not a policy delay,
so it never goes through an injected clock. A signal whose `fires_apart()` says that only
cancelling the awaiting task can fire it (the client's run signal when the run has no cancel
event and no deadline) is not watched at all: the work is simply awaited, so a tool call does not
pay two tasks and a wait for a watcher that could never fire first. A signal that already fired
means the work never starts. Not here: what a call that gave up returns — each caller has its
own pinned text.
"""

from __future__ import annotations

import asyncio
import enum
import inspect
from collections.abc import Awaitable, Callable
from typing import Any, Literal, Optional, TypeVar, Union

from .errors import ToolnexusError
from .types import signal_fired

CHECK_EVERY = 0.02  # seconds
T = TypeVar("T")


class Aborted(ToolnexusError):
    """The caller's signal fired before the work finished."""


class _Outcome(enum.Enum):
    STOPPED = "stopped"


STOPPED: Literal[_Outcome.STOPPED] = _Outcome.STOPPED
"""What `race` returns when the work was given up."""


def discard(work: Awaitable[Any]) -> None:
    """Drop work that will never run; a coroutine is closed so it warns of nothing."""
    if inspect.iscoroutine(work):
        work.close()


def _retrieve(task: asyncio.Future[Any]) -> None:
    """Read an abandoned task's outcome so asyncio does not report it as never retrieved."""
    if not task.cancelled():
        task.exception()


async def race(work: Awaitable[T], *stoppers: Awaitable[Any], timeout: Optional[float] = None,
               on_abandon: Optional[Callable[[], Awaitable[Any]]] = None,
               grace: Optional[float] = None) -> Union[T, Literal[_Outcome.STOPPED]]:
    """`work`'s outcome, unless a stopper completes (or `timeout` real seconds pass) first: then
    give it up (see the module docstring) and return `STOPPED`."""
    if not stoppers:
        if timeout is None:
            return await work
        return await _within(work, timeout, on_abandon)
    job = asyncio.ensure_future(work)
    watchers = [asyncio.ensure_future(s) for s in stoppers]
    try:
        done, _ = await asyncio.wait([job, *watchers], timeout=timeout, return_when=asyncio.FIRST_COMPLETED)
        if job in done:
            return job.result()
    finally:
        for watcher in watchers:
            watcher.cancel()
        if not job.done():
            job.cancel()
            job.add_done_callback(_retrieve)
            if on_abandon is not None:
                await on_abandon()
            await asyncio.wait([job], timeout=grace)
        if watchers:
            await asyncio.gather(*watchers, return_exceptions=True)
    return STOPPED


async def _within(work: Awaitable[T], timeout: float,
                  on_abandon: Optional[Callable[[], Awaitable[Any]]]) -> Union[T, Literal[_Outcome.STOPPED]]:
    """`race` with a timeout and no stopper: the work runs in this task under a timer that cancels
    it — no extra task, no `asyncio.wait` — so it has unwound when this returns. A `TimeoutError`
    the work raises itself is its own, not the timeout's."""
    try:
        async with asyncio.timeout(max(timeout, 0)) as scope:
            return await work
    except TimeoutError:
        if not scope.expired():
            raise
    if on_abandon is not None:
        await on_abandon()
    return STOPPED


async def _fired(signal: Any) -> None:
    wait = getattr(signal, "wait", None)
    if inspect.iscoroutinefunction(wait):
        await wait()
        return
    while not signal_fired(signal):
        await asyncio.sleep(CHECK_EVERY)


async def unless_aborted(work: Awaitable[T], signal: Optional[Any]) -> T:
    """Await `work`, unless `signal` fires first: then cancel and reap it and raise `Aborted`.

    A signal that already fired means `work` never starts. If the work finishes in the same
    moment the signal fires, its outcome wins.
    """
    if signal is None:
        return await work
    if signal_fired(signal):
        discard(work)
        raise Aborted()
    fires_apart = getattr(signal, "fires_apart", None)
    if callable(fires_apart) and not fires_apart():
        return await work  # only this task's own cancellation can fire it: no watcher, no race
    outcome = await race(work, _fired(signal))
    if outcome is STOPPED:
        raise Aborted()
    return outcome
