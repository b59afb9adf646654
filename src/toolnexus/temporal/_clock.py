"""`WorkflowClock`: the agent runtime's `Clock`, following a Temporal workflow's time.

Inside a workflow, time is what the workflow's history says it is, so a replay on another worker
makes the same decisions: `now()` is the workflow's monotonic reading, `sleep()` and
`call_later()` become durable timers (they fire even while no worker holds the run), and
`utc_now()` — which the runtime checks `expiresAt` against — is the workflow's wall time, not
the machine's. Use it only inside workflow code; outside one, the workflow APIs refuse.
"""

from __future__ import annotations

import asyncio
from datetime import datetime
from typing import Any, Callable

from temporalio import workflow


class WorkflowClock:
    """The runtime's clock inside a workflow (see the module docstring)."""

    def now(self) -> float:
        return workflow.time()

    async def sleep(self, seconds: float) -> None:
        await asyncio.sleep(max(0.0, seconds))  # the workflow's event loop turns this into a timer

    def call_later(self, seconds: float, cb: Callable[[], Any]) -> Any:
        loop = asyncio.get_running_loop()
        if seconds <= 0:
            return loop.call_soon(cb)  # no timer command for "now"
        return loop.call_later(seconds, cb)

    def utc_now(self) -> datetime:
        return workflow.now()
