"""An agent from a persona folder, and an agent started on a heartbeat.

- `agent_from_dir(dir)` builds an `Agent` whose soul is `compose_soul(dir)` with the `memory`
  tool (_persona.py);
- `start_agent(agent, every_ms=...)` spawns it under a fresh runtime and, optionally, wakes it on
  a heartbeat driven by the runtime's clock.

Choices of ours (deliberate):

- Heartbeat ticks coalesce at post time: the runtime's `post` folds a tick into a tick already
  waiting in the inbox (its `ticks` count grows) instead of taking another slot, so
  a long turn cannot crowd out real posts; the next idle turn still reads `tick (xK coalesced)`.
- The heartbeat is a chain of `clock.call_later` timers, the first armed inside `start_agent`, so
  beats are anchored at start time (a virtual clock advanced right after `start_agent` fires them).
- `on_report` may be async; an exception it raises is logged as a diagnostic, not lost.
- `start_agent` also rejects a non-positive `every_ms` with `ValueError`.
"""

from __future__ import annotations

import asyncio
import inspect
import os
from typing import TYPE_CHECKING, Any, Callable, Optional

from .._diag import warn
from ..errors import ToolnexusRuntimeError, ToolnexusTypeError, ToolnexusValueError
from ..types import Tool
from ._handle import Handle, InboxItem, SpawnError
from ._persona import HEARTBEAT_OK, HEARTBEAT_PROMPT, compose_soul, memory_tool
from ._surface import Agent, build_runtime
from ._vocab import HandleState

if TYPE_CHECKING:  # pragma: no cover - imports for annotations only
    from ._runtime import AgentRuntime


# --------------------------------------------------------------------------- agent from a directory


def agent_from_dir(
    dir: str,
    *,
    name: Optional[str] = None,
    does: Optional[str] = None,
    memory: bool = True,
    tools: Optional[list[Tool]] = None,
    **opts: Any,
) -> "Agent":
    """An `Agent` whose soul is `compose_soul(dir)`, with the `memory` tool unless `memory=False`.

    Tools are `tools`, then `opts["uses"]["tools"]`, then `memory`. Other `opts` go to `Agent`.
    """
    for taken in ("soul", "soul_file"):
        if taken in opts:
            raise ToolnexusTypeError(f"toolnexus: agent_from_dir composes the soul from {dir}; do not pass `{taken}`")
    uses = dict(opts.pop("uses", None) or {})
    all_tools = [*(tools or []), *(uses.get("tools") or [])]
    if memory:
        all_tools.append(memory_tool(dir))
    uses["tools"] = all_tools
    soul, _found = compose_soul(dir)
    return Agent(
        name or os.path.basename(str(dir).rstrip("/" + os.sep)),
        does=does or f"persona agent from {dir}",
        soul=soul,
        uses=uses,
        **opts,
    )


# --------------------------------------------------------------------------- heartbeat


class StartedAgent:
    """A persona spawned under its own runtime; `stop()` ends the heartbeat and closes the runtime."""

    def __init__(self, handle: "Handle", rt: "AgentRuntime") -> None:
        self.handle = handle
        self.rt = rt
        self._heartbeat: Optional[_Heartbeat] = None

    async def stop(self) -> None:
        """Cancel the heartbeat and any report collectors, then close the whole runtime."""
        if self._heartbeat is not None:
            await self._heartbeat.stop()
        await self.rt.close(self.rt.root)


class _Heartbeat:
    """Beats every `every_s` on the runtime clock: post a tick; wake only an idle agent.

    Each beat is a `clock.call_later` timer armed by the previous one (the first at start), so the
    schedule is anchored at `start_agent` time and never waits on a turn.
    """

    def __init__(self, rt: "AgentRuntime", h: "Handle", every_s: float, on_report: Optional[Callable[[str], Any]]):
        self._rt, self._h, self._every_s, self._on_report = rt, h, every_s, on_report
        self._timer: Any = None
        self._stopped = False
        self._collectors: set[asyncio.Task[None]] = set()

    def start(self) -> None:
        self._timer = self._rt.clock.call_later(self._every_s, self._beat)

    def _beat(self) -> None:
        if self._stopped or self._h.state == HandleState.CLOSED:
            return
        self.start()  # arm the next beat first: nothing below can stall the schedule
        try:
            self._rt.post(self._h, InboxItem("clock", "timer", "tick"))  # folds into a waiting tick
            if self._h.state == HandleState.IDLE and self._rt.wake(self._h, HEARTBEAT_PROMPT).ok:
                collector = asyncio.ensure_future(self._report())
                self._collectors.add(collector)
                collector.add_done_callback(self._collectors.discard)
        except Exception as exc:
            warn(f"[toolnexus] heartbeat of {self._h.id} failed: {exc!r}")

    async def _report(self) -> None:
        result = await self._rt.wait(self._h)
        if self._on_report is None or result.is_error or HEARTBEAT_OK in result.text:
            return
        try:
            out = self._on_report(result.text)
            if inspect.isawaitable(out):
                await out
        except Exception as exc:
            warn(f"[toolnexus] heartbeat on_report for {self._h.id} raised: {exc!r}")

    async def stop(self) -> None:
        self._stopped = True
        if self._timer is not None:
            self._timer.cancel()
        collectors = list(self._collectors)
        for task in collectors:
            task.cancel()
        await asyncio.gather(*collectors, return_exceptions=True)


def start_agent(
    a: "Agent",
    *,
    every_ms: Optional[float] = None,
    on_report: Optional[Callable[[str], Any]] = None,
    **rt_opts: Any,
) -> StartedAgent:
    """Spawn `a` under a fresh runtime; with `every_ms`, wake it on a heartbeat (needs a running loop).

    Each beat posts a clock tick and, only if the agent is idle, wakes it with `HEARTBEAT_PROMPT`;
    a non-error reply without `HEARTBEAT_OK` goes to `on_report`. The beat never waits on a turn.
    """
    if every_ms is not None:
        if not isinstance(every_ms, (int, float)) or isinstance(every_ms, bool) or every_ms <= 0:
            raise ToolnexusValueError(f"toolnexus: start_agent every_ms must be a positive number, got {every_ms!r}")
        try:
            asyncio.get_running_loop()
        except RuntimeError:
            raise ToolnexusRuntimeError("toolnexus: start_agent(every_ms=...) needs a running event loop") from None
    rt = build_runtime(a, rt_opts)
    spawned = rt.spawn(rt.root, a.name)
    if isinstance(spawned, SpawnError):
        raise ToolnexusRuntimeError(spawned.error)
    started = StartedAgent(spawned, rt)
    if every_ms is not None:
        started._heartbeat = _Heartbeat(rt, spawned, every_ms / 1000, on_report)
        started._heartbeat.start()
    return started
