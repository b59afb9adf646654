"""When a durable run's background commits happen: at most one scheduled at a time, coalesced.

A checkpoint that need not precede a side effect (a finished call's result, a state change, a
parked run giving its lease up) is written within `BACKGROUND_COMMIT_DELAY` seconds, or sooner
with the next commit that must be awaited: a fast model's next tool call takes it along (one commit
per turn instead of two); a slow one's LLM call overlaps it. A crash inside the window only makes
recovery more careful, never wrong.

The scheduler knows nothing of what a commit writes: it calls the run's `flush` and reports a
failure to `on_failure` (the changes stay staged; the next commit writes them).
"""

from __future__ import annotations

import asyncio
from typing import Awaitable, Callable, Optional

BACKGROUND_COMMIT_DELAY = 0.005


class CommitScheduler:
    """One run's background commit (see the module docstring).

    `flush` commits everything staged; `before` is awaited first (a commit prepared for a tool's
    thread gets its chance to land); `stopped` says the run is no longer written from here."""

    def __init__(self, flush: Callable[[], Awaitable[None]], *, before: Callable[[], Awaitable[None]],
                 stopped: Callable[[], bool], on_failure: Callable[[Exception], None],
                 delay: float = BACKGROUND_COMMIT_DELAY) -> None:
        self._flush = flush
        self._before = before
        self._stopped = stopped
        self._on_failure = on_failure
        self.delay = delay
        self._task: Optional[asyncio.Task[None]] = None
        self._due = 0.0
        self._flushing = False  # the task has started: what it commits is taken already
        self._again = False  # something was staged (or parked) since: it goes round once more

    @property
    def task(self) -> Optional[asyncio.Task[None]]:
        """The scheduled (or running) background commit, if any."""
        return self._task

    def schedule(self, delay: Optional[float] = None) -> None:
        """Commit in the background within `delay` seconds (the scheduler's own delay by default) —
        sooner if an awaited commit comes first and takes the staged changes along (a run that ends
        in `Agent.run` writes its last turn, its result and its lease in one commit, not three).
        Each commit that takes what is staged restarts the wait (`restart_wait`), so a fast run's
        background commits are all taken along by its awaited ones.

        A background commit that has already started took its changes before this call: it then
        commits once more, so a change (or a park) staged during its commit is never left behind."""
        try:
            loop = asyncio.get_running_loop()
        except RuntimeError:
            return  # no loop (a verb called from sync code): the next awaited flush writes it
        due = loop.time() + (self.delay if delay is None else delay)
        current = self._task
        if current is not None and not current.done():
            if self._flushing:
                self._again = True
                return
            if self._due <= due:
                return
            current.cancel()
        self._due = due
        self._task = loop.create_task(self._run())

    def restart_wait(self) -> None:
        """Everything staged was just taken by a commit: a scheduled background commit waits a full
        delay from now (anything staged later is written by then, or by the next awaited commit)."""
        current = self._task
        if current is not None and not current.done() and not self._flushing:
            self._due = max(self._due, asyncio.get_running_loop().time() + self.delay)

    async def _run(self) -> None:
        try:
            loop = asyncio.get_running_loop()
            while (wait := self._due - loop.time()) > 0:
                await asyncio.sleep(wait)
            await self._before()
            self._flushing = True
            try:
                await self._flush()
                while self._again and not self._stopped():
                    self._again = False
                    await self._flush()
            finally:
                self._flushing = self._again = False
        except asyncio.CancelledError:
            raise
        except Exception as exc:
            self._on_failure(exc)

    async def close(self) -> None:
        """Cancel a scheduled commit (and wait until it has stopped)."""
        task, self._task = self._task, None
        await _cancelled(task)


async def _cancelled(task: Optional[asyncio.Task[None]]) -> None:
    if task is not None and not task.done() and task is not asyncio.current_task():
        task.cancel()
        try:
            await task
        except BaseException:
            pass
