"""`AheadCommit`: a durable run's commit prepared before a side effect, written exactly once.

The commit that records a tool call's start is prepared on the event loop (its changes taken from
staging, its JSON encoded) and then written by whichever comes first:

- the worker thread about to run the tool (`write`, blocking; the function is called only if the
  write landed — see `toolnexus._write_ahead`);
- the event loop (`written`): the tool runner, for a tool that does not write it itself, and after
  every execution; or a later awaited commit of the same run, which must not overtake it
  (`settled`). A tool thread still queued behind busy workers therefore never holds the run's
  other commits up. A background commit first waits a moment for it (`landing`), so it does not
  snatch the write from the thread that is about to make it.

Either way the outcome is handed to the store and to the run on the event loop, once: a commit
that failed puts its changes back into staging, exactly as a failed commit on the loop does.
"""

from __future__ import annotations

import asyncio
import threading
from typing import Any, Callable, Optional

from ..durable import PreparedCommit
from ..errors import ToolnexusRuntimeError


class AheadCommit:
    """One prepared commit; see the module docstring. Implements `toolnexus._write_ahead.WriteAhead`.

    A write on a worker thread wakes the event loop only if something there is waiting for it; the
    tool runner, which always asks after the tool returned, finds it written and lands it then —
    one loop wake-up per call, not two."""

    def __init__(self, prepared: PreparedCommit,
                 landed: Callable[["AheadCommit", Optional[int], Optional[BaseException]], None]) -> None:
        self._prepared = prepared
        self._on_landed = landed
        self._loop = asyncio.get_running_loop()
        self._flags = threading.Lock()  # guards the three flags below, across threads
        self._claimed = False
        self._finished = False  # the write is over, either way
        self._waiting = False  # the loop awaits `_wake`: the writer must wake it
        self._over = threading.Lock()  # held until the write is over: a thread that found it taken waits here
        self._over.acquire()
        self._version: Optional[int] = None
        self._error: Optional[BaseException] = None
        self._wake: Optional[asyncio.Future[None]] = None
        self._landed = False

    def _take(self) -> bool:
        with self._flags:
            if self._claimed:
                return False
            self._claimed = True
            return True

    def _finish(self, version: Optional[int], error: Optional[BaseException]) -> bool:
        """Record the outcome; whether the loop is waiting for it."""
        self._version, self._error = version, error
        with self._flags:
            self._finished = True
            waiting = self._waiting
        self._over.release()
        return waiting

    def write(self) -> None:
        if self._take():
            try:
                version, error = self._prepared.run(), None
            except BaseException as exc:
                version, error = None, exc
            if self._finish(version, error):
                try:
                    self._loop.call_soon_threadsafe(self._land)
                except RuntimeError:  # the loop is gone (the process is stopping): nobody is left to tell
                    pass
        else:
            with self._over:
                pass
        if self._error is not None:  # seen by no one: the runner raises the error itself (`written`)
            raise ToolnexusRuntimeError(f"toolnexus: the tool call's start could not be written, so it did not "
                                        f"run: {self._error}") from self._error

    async def written(self) -> None:
        if self._finished:  # the usual case: the tool's thread wrote it before it ran the tool
            self._land()
        else:
            await self.settled()
        if self._error is not None:
            raise self._error

    async def settled(self) -> None:
        """Written by now, one way or the other (never raises its failure)."""
        if self._take():
            task = asyncio.ensure_future(self._prepared.run_async())
            task.add_done_callback(self._ran)
        await self.landing()

    async def landing(self) -> None:
        """Wait until whoever took it has written it (takes nothing; never raises its failure)."""
        with self._flags:
            finished = self._finished
            if not finished:
                self._waiting = True
                if self._wake is None:
                    self._wake = self._loop.create_future()
        if finished:
            self._land()
        else:
            assert self._wake is not None
            await asyncio.shield(self._wake)  # a caller that gives up does not stop the write

    def _ran(self, task: "asyncio.Future[Any]") -> None:
        if task.cancelled():
            self._finish(None, asyncio.CancelledError())
        elif task.exception() is not None:
            self._finish(None, task.exception())
        else:
            self._finish(task.result(), None)
        self._land()

    def _land(self) -> None:
        """Hand the outcome to the run, once (on the event loop)."""
        if not self._landed:
            self._landed = True
            if self._error is None:
                self._prepared.landed()
            self._on_landed(self, self._version, self._error)
        if self._wake is not None and not self._wake.done():
            self._wake.set_result(None)
