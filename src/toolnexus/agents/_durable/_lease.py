"""A durable run's lease: held while this runtime works on the run, renewed in the background.

The lease is taken by a commit (the run's creation, or a commit made while it is not held) or by
restore (`DurableRun.adopt`); while held, a task renews it every third of its time to live; it is
given up by the commit that parks the run. A renewal the store refuses (`LeaseLost`: another
process took the run over) ends the lease here; a store that is down is only warned about, as the
next commit will say so.

The renewer waits on a `Timer` of its own: the real clock by default, whatever the runtime's
clock is (a virtual clock drives the agents' time, not the store's leases).
"""

from __future__ import annotations

import asyncio
from typing import Optional

from ..._clock import AsyncioClock, Timer
from ..._diag import warn
from ...durable import Holder, LeaseLost, RunStore


class Lease:
    """One run's lease (see the module docstring)."""

    def __init__(self, store: RunStore, run_id: str, *, ttl: float, holder: Optional[Holder] = None,
                 timer: Optional[Timer] = None) -> None:
        self.store = store
        self.run_id = run_id
        self.ttl = ttl
        self.holder = holder if holder is not None else Holder.here()
        self.held = False
        self._timer: Timer = timer if timer is not None else AsyncioClock()
        self._renewer: Optional[asyncio.Task[None]] = None

    def taken(self) -> None:
        """The store granted the lease: hold it and keep it renewed."""
        self.held = True
        if self._renewer is None or self._renewer.done():
            self._renewer = asyncio.get_running_loop().create_task(self._renew())

    async def _renew(self) -> None:
        while self.held:
            await self._timer.sleep(self.ttl / 3)
            try:
                await self.store.renew(self.run_id, self.holder, self.ttl)
            except LeaseLost as exc:
                warn(f"[toolnexus] agents: {exc}")
                self.held = False
                return
            except Exception as exc:  # the store is down: the next commit will say so
                warn(f"[toolnexus] agents: renewing the lease of run {self.run_id!r} failed: {exc}")

    def gone(self) -> None:
        """The lease was given up (or lost): stop renewing it."""
        self.held = False
        task, self._renewer = self._renewer, None
        if task is not None and task is not asyncio.current_task():
            task.cancel()

    async def close(self) -> None:
        """Stop renewing (the lease itself is left to expire or to the commit that parks the run)."""
        task, self._renewer = self._renewer, None
        if task is not None and not task.done() and task is not asyncio.current_task():
            task.cancel()
            try:
                await task
            except BaseException:
                pass
