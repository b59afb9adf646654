"""Suspension inside a team: nearest-interpreter escalation, path stamping and answer binding.

- *Inline escalation*: a suspended tool call is answered by the first `wait_for` found walking
  `[h, parent, …, root]`; the handle shows `running→suspended→running` while it waits.
- *Path stamping*: every pending result carries a copy of the `Request` whose `data["path"]` is
  the id path of the handle that reports it (the original object is never mutated).
- *Binding* (ours): on a durable resume the
  `Answer` applies only to the call that halted — the same tool with the same arguments, once —
  instead of to whatever suspends first in the replay. Other suspensions in the replay escalate
  or halt durably as usual, each with its own `Request`. The bound call is answered *without*
  running its first branch again: the tool runs once more, with `ctx.answer` (and `ctx.request`,
  the request the human saw) — so a tool that asks runs exactly twice over the whole
  suspend-and-resume (it ran three times before: the replay re-ran its asking branch first). An
  approval gate's request is decided by `toolnexus.approvals.decide`, as on every other path.

This module builds callables; the runtime decides when to use them and owns every transition.
"""

from __future__ import annotations

import dataclasses
import inspect
from datetime import datetime
from typing import TYPE_CHECKING, Any, Awaitable, Callable, Optional

from .._write_ahead import takes_write_ahead, taking
from ..approvals import DECLINE, INVALID, REASK, ApprovalMemory, decide, is_approval_request, suspended_on
from ..client._tool_calls import utc_now
from ..types import Answer, Request, Tool, ToolContext, ToolResult, declined_text, pending_of
from ._handle import lineage, pending_result as pending_result, stamp_path as stamp_path
from ._scope import TurnScope
from ._turnstate import ReplayBinding as ReplayBinding, TurnState, same_args as same_args
from ._vocab import HandleState

if TYPE_CHECKING:  # pragma: no cover
    from ._handle import Handle


def nearest_interpreter(h: "Handle") -> Optional[tuple["Handle", Callable[[Request], Any]]]:
    """The first handle in `[h, parent, …, root]` whose def has a `wait_for`, with that callable."""
    for node in lineage(h):
        if node.defn.wait_for is not None:
            return node, node.defn.wait_for
    return None


def make_escalator(scope: TurnScope) -> Optional[Callable[[Request], Awaitable[Optional[Answer]]]]:
    """The client's `wait_for` for one turn of a handle, or `None` when the suspension must be
    durable; the turn's replay binding (if any) answers its own question first."""
    core, h, binding = scope.run, scope.handle, scope.turn.binding
    found = nearest_interpreter(h)
    hook_bound = binding is not None and binding.request is not None
    if found is None and not hook_bound:
        return None

    async def escalate(req: Request) -> Optional[Answer]:
        if binding is not None and binding.claims_request(req):
            binding.used = True
            return binding.answer
        if found is None:
            return None  # an unrelated hook suspension in a replay with no interpreter: declined
        who, wait_for = found
        core.transition(h, HandleState.SUSPENDED, f'(pending "{req.kind}": {req.prompt})')
        answer = wait_for(req)
        if inspect.isawaitable(answer):
            answer = await answer
        core.trace_line(h, f'escalate → {"self" if who is h else who.id} answers ("nearest interpreter")')
        ok = bool(getattr(answer, "ok", False))
        core.transition(h, HandleState.RUNNING, f"(Answer ok={'true' if ok else 'false'})")
        given: Optional[Answer] = answer  # the host's interpreter's word, passed on as it is
        return given

    return escalate


def watch_tools(tools: list[Tool], turn: "TurnState", *, now: Callable[[], datetime] = utc_now,
                memory: Optional[ApprovalMemory] = None) -> list[Tool]:
    """Wrap a turn's tools so the runtime learns which requests tools minted, and so a bound
    durable-resume `Answer` resolves exactly the halted call (same tool, same args, once).

    `now` is the runtime's wall clock (what an approval's expiry and escalation are judged by);
    `memory` the run's sticky approval decisions (an `always` answer applied here is kept)."""

    async def bound(tool: Tool, inner: Any, args: Any, ctx: Optional[ToolContext], binding: ReplayBinding) -> Any:
        answer, held = binding.answer, binding.held
        if held is not None and is_approval_request(held):
            decision = decide(held, answer, now())
            if decision.kind != INVALID and memory is not None:
                memory.remember(held, answer, now())
            if decision.kind in (DECLINE, INVALID):
                return ToolResult(output=decision.text, is_error=True)
            if decision.kind == REASK:
                assert decision.request is not None
                turn.tool_minted.add(decision.request.id)
                return suspended_on(decision.request)
        elif not answer.ok:  # declined (or expired): the tool does not run again
            prompt = held.prompt if held is not None else tool.name
            return ToolResult(output=declined_text(prompt, answer), is_error=True)
        result = await inner(
            args, ToolContext(signal=ctx.signal if ctx is not None else None, answer=answer, request=held)
        )
        again = pending_of(result)
        if again is not None:
            turn.tool_minted.add(again.id)
        return result

    def wrap(tool: Tool) -> Tool:
        inner = tool.execute

        async def execute(args: Any = None, ctx: Optional[ToolContext] = None) -> Any:
            binding = turn.binding
            first_run = ctx is None or ctx.answer is None
            if binding is not None and first_run and binding.claims_call(tool.name, args):
                binding.used = True  # the halted call: answered now, its asking branch not run again
                return await bound(tool, inner, args, ctx, binding)
            result = await inner(args, ctx)
            req = pending_of(result)
            if req is not None:
                turn.tool_minted.add(req.id)
            return result

        if takes_write_ahead(tool):  # nothing runs before `inner`, which writes the call's start itself
            taking(execute)
        return dataclasses.replace(tool, execute=execute)

    return [wrap(t) for t in tools]
