"""The `task` tool: delegate a subtask to a fresh child agent (spawn + wake + wait + close in one call).

Only defs with a non-empty team (`task_targets`) get it. Each call gets a child with its own
transcript, so the parent gains exactly one tool message per delegation; parallel `task` calls in
one model turn run concurrently through the client loop. A pending child makes the call itself a
suspension (`metadata["pending"]`), leaving the child open so a resume can find it.

Reattachment (ours): a call whose `agent:prompt` key matches a child of the
*same* wake reattaches to it only while that wake is being replayed by `resume`; a fresh wake
always spawns, so a later turn never receives a stale result from an earlier one. When the resume
continues the halted turn instead of replaying it (`resume_mode="continue"`), only the halted call
and the calls after it re-execute; the halted `task` call reattaches to its child and returns the
child's settled result (see `_continued_child`). A run recovered after a crash re-executes its
in-flight `task` calls the same way (the tool is idempotent: it reattaches, it never spawns twice).
"""

from __future__ import annotations

import asyncio
import copy
from collections.abc import Mapping
from typing import TYPE_CHECKING, Any, Optional

from ..types import Tool, ToolContext, ToolResult
from ._handle import SpawnError, find_child
from ._scope import TurnScope
from ._vocab import HandleState, TaskStatus

if TYPE_CHECKING:  # pragma: no cover
    from ._defs import AgentDef
    from ._handle import Handle
    from ._turnstate import TurnState

TASK_TOOL_NAME = "task"
TASK_INPUT_SCHEMA = {
    "type": "object",
    "properties": {"agent": {"type": "string"}, "prompt": {"type": "string"}},
    "required": ["agent", "prompt"],
}


def task_description(registry: Mapping[str, "AgentDef"], team: list[str]) -> str:
    """The pinned description, listing the team members present in the registry, by name."""
    members = sorted({name for name in team if name in registry})
    listing = "; ".join(f"{name}: {registry[name].description}" for name in members)
    return f"Delegate a subtask to an isolated subagent. Available agents — {listing}"


def _continued_child(h: "Handle", turn: "TurnState", ids: list[str]) -> Optional["Handle"]:
    """In a continuation, a re-executed call of the halted turn takes the wake's first child for
    its key not yet taken by this turn, preferring one still open (the halted call's child) to a
    closed one (a later call whose result the halt dropped). Calls the model makes after the
    continuation's first LLM response are new work and always spawn."""
    if turn.meter.calls:
        return None
    children = [c for c in (find_child(h, i) for i in ids) if c is not None and c.id not in turn.reattached]
    child = next((c for c in children if c.state != HandleState.CLOSED), children[0] if children else None)
    if child is not None:
        turn.reattached.add(child.id)
    return child


def _reattachable(h: "Handle", turn: "TurnState", key: str) -> Optional["Handle"]:
    """During a replay, the next child this wake spawned for `key` (in call order), if any."""
    if not turn.replay:
        return None
    ids = h.task_children.get(key, [])
    if turn.continued:
        return _continued_child(h, turn, ids)
    index = turn.reattach_cursor.get(key, 0)
    if index >= len(ids):
        return None
    turn.reattach_cursor[key] = index + 1
    return find_child(h, ids[index])


def make_task_tool(scope: TurnScope) -> Tool:
    """The `task` tool as seen by one turn of a handle."""
    core, h, turn = scope.run, scope.handle, scope.turn
    team = list(h.defn.task_targets or [])

    async def execute(args: Any = None, ctx: Optional[ToolContext] = None) -> ToolResult:
        args = args if isinstance(args, dict) else {}
        agent = str(args.get("agent"))
        prompt = str(args.get("prompt"))
        if agent not in team:
            members = ", ".join(sorted(set(team))) or "none"
            return ToolResult(f'agent "{agent}" not in this agent\'s team ({members})', True)
        key = f"{agent}:{prompt}"
        child = _reattachable(h, turn, key)
        if child is not None:
            core.trace_line(h, f"task replay → REATTACH to {child.id} (state {child.state})")
        else:
            spawned = core.spawn(h, agent)
            if isinstance(spawned, SpawnError):
                return ToolResult(spawned.error, True)
            child = spawned
            child.task_key = key
            h.task_children.setdefault(key, []).append(child.id)
            core.changed(h, child)
            core.wake(child, prompt)
        try:
            result = await core.wait(child)
        except asyncio.CancelledError:
            # The parent's turn was aborted: its delegated work is abandoned with it.
            core.background(core.close(child, force=True, reason=TaskStatus.INTERRUPTED))
            raise
        if result.status == TaskStatus.PENDING and result.pending is not None:
            return ToolResult(output=result.pending.prompt, is_error=True, metadata={"pending": result.pending})
        await core.close(child)
        output = result.text if result.status == TaskStatus.DONE else f"[{result.status}] {result.text}"
        return ToolResult(
            output=output,
            is_error=result.is_error,
            metadata={"agent": agent, "turns": result.turns, "totalTokens": result.total_tokens},
        )

    return Tool(
        name=TASK_TOOL_NAME,
        description=task_description(core.registry, team),
        input_schema=copy.deepcopy(TASK_INPUT_SCHEMA),
        source="native",
        execute=execute,
        idempotent=True,  # a repeated call reattaches to its child (after a crash too), never spawns twice
    )
