"""The gate: a tool whose body runs only after an approval — on any source, on every path.

`gate_tool(tool, rule)` returns a copy of `tool` whose `execute` asks before the body runs:

- first call (no `ctx.answer`): the rule's `when` decides; a call that needs an approval returns
  the approval request (`requests.approval_request`) as a suspension and the body does not run;
- a retry with the answer to that request (`ctx.answer`, `ctx.request`): `decisions.decide` says
  run (with the edited arguments, validated against the tool's schema and merged over the
  redacted ones, the model told), decline, or ask again (N-of-M, escalation);
- a retry answering a request the *body* made after it was approved (a login, a question: marked
  `data["approved_as"]` with the approval's id) goes straight to the body.

The gated copy's `needs_approval` holds the enforced rule (an `Enforced`), which is how a toolkit
knows not to gate it twice (also after `dataclasses.replace`). `enforce(tool, policy)` gates a
tool that declares `needs_approval` or that `policy` names; a tool already gated is returned as is.

The body gets `ctx=None` on its first real run (as every tool author expects), or a context with
only the run's signal and timeout: the approval's answer is the gate's, not the tool's.
"""

from __future__ import annotations

import dataclasses
from datetime import UTC, datetime
from typing import Any, Callable, Optional

from .._schema import schema_error
from .._write_ahead import takes_write_ahead, taking
from ..types import Answer, Request, Tool, ToolContext, ToolResult, pending_of
from ._decisions import DECLINE, INVALID, REASK, decide, edited_note
from ._requests import approval_request, is_approval_request, redact_arguments, restore_redacted
from ._rules import ApprovalPolicy, ApprovalRule, rule_of

APPROVED_AS = "approved_as"


@dataclasses.dataclass(frozen=True)
class Enforced(ApprovalRule):
    """The rule a gate enforces (a gated tool's `needs_approval`)."""


def is_gated(tool: Tool) -> bool:
    """Whether `tool.execute` already asks for approval (its `needs_approval` is an `Enforced`)."""
    return isinstance(tool.needs_approval, Enforced)


def suspended_on(request: Request) -> ToolResult:
    """The suspension result carrying `request` itself (the pinned `pending()` shape)."""
    return ToolResult(output=request.prompt + ("\n" + request.url if request.url else ""), is_error=True,
                      metadata={"pending": request})


def _utc_now() -> datetime:
    return datetime.now(UTC)


def _plain(ctx: Optional[ToolContext]) -> Optional[ToolContext]:
    """The body's context: the run's signal and timeout, never the gate's answer."""
    if ctx is None or (ctx.signal is None and ctx.timeout is None):
        return None
    return ToolContext(signal=ctx.signal, timeout=ctx.timeout)


def _mark(result: ToolResult, approval_id: str) -> ToolResult:
    """A body that suspends after its approval: mark its request, so its answer reaches the body."""
    request = pending_of(result)
    if request is not None:
        request.data = {**(request.data or {}), APPROVED_AS: approval_id}
    return result


Precheck = Callable[[dict[str, Any]], Optional[str]]


def gate_tool(tool: Tool, rule: ApprovalRule, *, precheck: Optional[Precheck] = None) -> Tool:
    """A copy of `tool` that asks for approval by `rule` before its body runs (see the module docstring).

    `precheck(args)` (optional) names what is wrong with a call's arguments: such a call is refused
    with `invalid arguments for <tool>: ...` before anyone is asked (a native tool passes its own
    schema check), and an edit is checked with it too (else with the tool's input schema).
    """
    if is_gated(tool):
        return tool
    inner = tool.execute
    enforced = Enforced(**{f.name: getattr(rule, f.name) for f in dataclasses.fields(ApprovalRule)})

    def problem_with(args: dict[str, Any]) -> Optional[str]:
        return precheck(args) if precheck is not None else schema_error(tool.input_schema, args)

    async def answered(args: dict[str, Any], ctx: ToolContext, request: Request, answer: Answer) -> ToolResult:
        decision = decide(request, answer, _utc_now())
        if decision.kind in (DECLINE, INVALID):
            return ToolResult(output=decision.text, is_error=True)
        if decision.kind == REASK:
            assert decision.request is not None
            return suspended_on(decision.request)
        run_args = args
        if decision.arguments is not None:
            run_args = restore_redacted(decision.arguments, args)
            problem = problem_with(run_args)
            if problem:
                return ToolResult(output=f"invalid answer for {request.prompt}: the edited arguments do not match "
                                         f"the tool's input schema: {problem}", is_error=True)
        result = _mark(await inner(run_args, _plain(ctx)), request.id)
        if decision.arguments is not None and pending_of(result) is None:
            meta = {**(result.metadata or {}), "approval": {"edited": True, "arguments": redact_arguments(run_args)}}
            result = dataclasses.replace(result, output=edited_note(run_args) + "\n" + result.output, metadata=meta)
        return result

    async def execute(args: Optional[dict[str, Any]] = None, ctx: Optional[ToolContext] = None) -> ToolResult:
        call_args = dict(args or {})
        answer = ctx.answer if ctx is not None else None
        if ctx is not None and answer is not None:
            request = ctx.request
            if request is not None and not is_approval_request(request):
                if isinstance(request.data, dict) and request.data.get(APPROVED_AS):
                    return await inner(args, ctx)  # the body's own question, asked after its approval
                request = None  # an answer to something else approves nothing: ask
            if request is not None:
                return await answered(call_args, ctx, request, answer)
            if ctx.request is None:  # a host re-running the call with an answer and no request: this gate's
                return await answered(call_args, ctx, approval_request(tool, call_args, enforced), answer)
        problem = precheck(call_args) if precheck is not None else None
        if problem:  # nobody is asked to approve a call that cannot run
            return ToolResult(output=f"invalid arguments for {tool.name}: {problem}", is_error=True)
        if not await enforced.applies(tool.name, call_args, ctx):
            return await inner(args, ctx)
        return suspended_on(approval_request(tool, call_args, enforced, _utc_now()))

    if takes_write_ahead(tool):  # the body still writes an offered start on its own thread
        taking(execute)
    return dataclasses.replace(tool, execute=execute, needs_approval=enforced)


def enforce(tool: Tool, policy: Optional[ApprovalPolicy] = None, *, precheck: Optional[Precheck] = None) -> Tool:
    """`tool` gated by its own `needs_approval`, else by `policy`'s rule for it; as is when neither
    asks (or it is gated already)."""
    if is_gated(tool):
        return tool
    rule = rule_of(tool.needs_approval, f"tool {tool.name!r} needs_approval")
    if rule is None and policy is not None:
        rule = policy.rule_for(tool)
    return gate_tool(tool, rule, precheck=precheck) if rule is not None else tool
