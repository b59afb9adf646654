"""A tool call's start, written on the worker thread that runs the tool.

A durable run writes a call's start before the tool's side effect, so a crash while the tool runs
is known (the call is *in doubt*, never silently run twice). Awaiting that commit on the event
loop, then handing a plain function to a worker thread, costs two thread round trips per call. A
store that can commit from any thread (SQLite) instead *prepares* the commit on the loop, and the
thread that runs the function writes it first: one round trip, and the write still lands before
the function is called, on a thread, never on the loop.

- `WriteAhead`: a prepared start. `write()` (blocking, on a worker thread) and `written()` (on the
  loop) make it durable exactly once between them, whichever comes first; both raise its failure.
- The tool runner offers it for one execution (`offered`). A tool whose `execute` says it takes it
  (`taking`: the native tools of plain functions) runs it through `to_thread`, which writes it on
  the function's thread and calls the function only if that write landed. Any other tool gets
  `written()` on the loop before it runs, as without this module. The runner awaits `written()`
  after every execution, so an offer nobody took (arguments refused before the function ran) is
  written too, and a failed write fails the turn exactly as a failed commit on the loop does.
"""

from __future__ import annotations

import asyncio
from contextvars import ContextVar
from typing import Any, Callable, Optional, Protocol, TypeVar

T = TypeVar("T")

_TAKES = "_toolnexus_takes_write_ahead"


class WriteAhead(Protocol):
    def write(self) -> None:
        """Make the start durable now (blocking; a worker thread). Raises the write's failure."""

    async def written(self) -> None:
        """Make sure the start is durable (writes it, unless a thread did). Raises its failure."""


_offer: ContextVar[Optional[WriteAhead]] = ContextVar("toolnexus_write_ahead", default=None)


class offered:
    """`with offered(ahead):` offers `ahead` to the tool executed inside the block (in this task).
    A plain class, not a generator-based context manager: it sits on every side-effecting call."""

    __slots__ = ("_ahead", "_token")

    def __init__(self, ahead: WriteAhead) -> None:
        self._ahead = ahead

    def __enter__(self) -> None:
        self._token = _offer.set(self._ahead)

    def __exit__(self, *exc: Any) -> None:
        _offer.reset(self._token)


class _WritingFirst:
    """The function's thread job: write the start, then call the function — unless the write
    failed, or the caller stopped waiting meanwhile (cancelled, timed out)."""

    def __init__(self, ahead: WriteAhead, fn: Callable[..., Any]) -> None:
        self.ahead = ahead
        self.fn = fn
        self.abandoned = False

    def __call__(self, *args: Any, **kwargs: Any) -> Any:
        if not self.abandoned:  # (abandoned before it started: the run's next commit writes the start)
            self.ahead.write()
        if self.abandoned:
            raise asyncio.CancelledError()
        return self.fn(*args, **kwargs)


async def to_thread(fn: Callable[..., T], /, *args: Any, **kwargs: Any) -> T:
    """`asyncio.to_thread(fn, ...)`; an offered start is written on that thread before `fn` runs."""
    ahead = _offer.get()
    if ahead is None:
        return await asyncio.to_thread(fn, *args, **kwargs)
    _offer.set(None)  # taken: this execution writes it
    job = _WritingFirst(ahead, fn)
    try:
        return await asyncio.to_thread(job, *args, **kwargs)
    except asyncio.CancelledError:
        job.abandoned = True
        raise


def taking(execute: Callable[..., Any]) -> Callable[..., Any]:
    """Mark a tool's `execute` as one that writes an offered start itself (through `to_thread`)."""
    setattr(execute, _TAKES, True)
    return execute


def takes_write_ahead(tool: Any) -> bool:
    """Whether `tool`'s execute writes an offered start itself, before any side effect."""
    return bool(getattr(getattr(tool, "execute", None), _TAKES, False))
