"""`RunSignal`: the `ToolContext.signal` the tool calls of a run receive.

A tool cannot see the run's `cancel` event or deadline, and a tool running in a worker thread
does not even see its task being cancelled. So each call gets a signal that fires when
- the run's `cancel` event is set (`client.run(..., cancel=event)`): reason `"cancelled"`;
- the run's deadline (`timeout_ms`, on the client's `timer` when it has one) has passed:
  reason `"timeout"`;
- the call itself was abandoned — its task cancelled, which is how the agent runtime interrupts or
  closes a handle mid-turn, and how a failing sibling call ends the turn: reason `"interrupted"`.

It follows the `signal_fired` rule the tool sources already race (`toolnexus._abort`): `is_set()`
(safe to call from a worker thread: it only reads), `aborted` (the same, AbortSignal-style), and
`async wait()`, which returns once it fired — so an MCP, HTTP or A2A call is abandoned at once and
a native tool can `await ctx.signal.wait()`. `reason` says why, None while it has not fired.

Who gets it: every `ToolContext` the client hands a tool carries the signal — the retry with an
answer, and any context a caller passes (a signal already in it is kept). A *first* execution gets
`ctx=None` as it always has, because tool authors tell a first run by `ctx is None`. A tool that
wants the signal there says so by being a `SignalTool` (`wants_signal(tool)` makes one of any tool,
e.g. of a `define_tool` function that awaits `ctx.signal`). It is a subclass with the same fields,
not a new `Tool` field, so `Tool`'s shape stays exactly the contract's, and it survives the
`dataclasses.replace` copies the agent runtime wraps tools with. The library's MCP, HTTP and A2A
tools (`SIGNAL_SOURCES`) race the signal and handle a first-run context, so they always get it.

The signal is advisory, as `ToolContext.signal` always was: the client still does not interrupt a
tool on cancel or deadline (that is `race_tools=True`); it tells the tool, and the tool decides.
Not here: building the `ToolContext` (_tool_calls.py) or the run's abort conditions (_retry.py's
`Abort`).
"""

from __future__ import annotations

import asyncio
import dataclasses
from typing import Any, ClassVar, Optional

from .._abort import race
from ..errors import ToolnexusTypeError
from ..types import Tool
from ._retry import Abort

REASON_CANCELLED = "cancelled"
REASON_TIMEOUT = "timeout"
REASON_INTERRUPTED = "interrupted"
SIGNAL_SOURCES = frozenset({"mcp", "http", "a2a"})  # the library's tools that race `ctx.signal`


@dataclasses.dataclass
class SignalTool(Tool):
    """A `Tool` whose first execution gets `ToolContext(signal=...)` instead of `ctx=None`."""

    takes_signal: ClassVar[bool] = True


def wants_signal(tool: Tool) -> SignalTool:
    """A copy of `tool` that takes the run's cancel signal on its first execution too."""
    if not isinstance(tool, Tool):
        raise ToolnexusTypeError(f"toolnexus: wants_signal needs a Tool, got {type(tool).__name__}")
    return SignalTool(**{f.name: getattr(tool, f.name) for f in dataclasses.fields(Tool)})


def takes_signal(tool: Optional[Tool]) -> bool:
    """Whether `tool`'s first execution gets a `ToolContext` (with the signal) rather than None."""
    return isinstance(tool, SignalTool) or (tool is not None and tool.source in SIGNAL_SOURCES)


class RunSignal:
    """Fires when the run is cancelled, runs out of time, or the call is abandoned (see module)."""

    __slots__ = ("_abort", "_interrupted")

    def __init__(self, abort: Optional[Abort] = None) -> None:
        self._abort = abort
        self._interrupted = asyncio.Event()

    @property
    def reason(self) -> Optional[str]:
        """`"cancelled"`, `"timeout"` or `"interrupted"` once fired; None before."""
        abort = self._abort
        if abort is not None:
            if abort.cancel is not None and abort.cancel.is_set():
                return REASON_CANCELLED
            if abort.timed_out():
                return REASON_TIMEOUT
        return REASON_INTERRUPTED if self._interrupted.is_set() else None

    def is_set(self) -> bool:
        """Whether the signal fired."""
        return self.reason is not None

    @property
    def aborted(self) -> bool:
        """`is_set()`, under the name an AbortSignal-like object uses."""
        return self.is_set()

    def fires_apart(self) -> bool:
        """Whether anything but cancelling the call's own task can fire this signal: the run's
        cancel event or its deadline. When nothing can, a wait in that task needs no watcher (see
        `toolnexus._abort.unless_aborted`): the one way it fires is a cancellation that reaches the
        wait anyway."""
        abort = self._abort
        return abort is not None and (abort.cancel is not None or abort.remaining() is not None)

    def interrupt(self) -> None:
        """Fire for the call itself (its task was cancelled). Call from the event loop's thread."""
        self._interrupted.set()

    async def wait(self) -> None:
        """Return once the signal fired."""
        while not self.is_set():
            await race(self._interrupted.wait(), *self._stoppers())

    def _stoppers(self) -> list[Any]:
        abort = self._abort
        if abort is None:
            return []
        stoppers: list[Any] = []
        if abort.cancel is not None:
            stoppers.append(abort.cancel.wait())
        left = abort.remaining()
        if left is not None:  # the alarm runs on the clock the deadline is read on
            timer = abort.timer if abort.timer is not None and not abort.real_time else None
            stoppers.append(timer.sleep(max(left, 0)) if timer is not None else asyncio.sleep(max(left, 0)))
        return stoppers

    def __repr__(self) -> str:
        return f"RunSignal(reason={self.reason!r})"
