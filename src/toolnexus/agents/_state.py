"""`RunState`: the data of one agent runtime, as the modules that only read or rebuild it see it.

`RuntimeCore` (_core.py) owns this state and implements the protocol; a module that converts or
rebuilds the state (`snapshot`, the durable view) takes a `RunState` instead of the core, so it
stays a leaf of `agents/` — it never imports the module that drives turns. The fields: the
registry, the handle tree under `root`, the clock, the turn gate, the conversation store, the
trace and structured events, the answer ledger of a store-less runtime (`resumes`), and the
bookkeeping verb every state change goes through (`transition`).
"""

from __future__ import annotations

import asyncio
from typing import Any, Protocol

from ._defs import AgentDef
from ._gate import TurnGate
from ._handle import Handle, TaskResult
from ._trace import TraceRing
from .clock import Clock


class RunState(Protocol):
    """One runtime's data (see the module docstring); `RuntimeCore` is the implementation."""

    root: Handle
    registry: dict[str, AgentDef]
    clock: Clock
    gate: TurnGate
    store: Any  # the conversation store (a durable run's view of its store)
    trace: TraceRing
    events: TraceRing
    resumes: dict[str, asyncio.Future[TaskResult]]

    def transition(self, h: Handle, to: str, detail: str) -> None:
        """Set `h.state`, trace it, emit the structured event, stage the change."""
        ...
