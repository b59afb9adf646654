"""Executing one turn's tool calls, and resolving one suspended call with an `Answer`.

`ToolRunner.run_all` runs every call of a turn concurrently in an `asyncio.TaskGroup`
(`before_tool` → `toolkit.execute` → `after_tool`, plus the `tool` metric) and returns the
outcomes in CALL order. A call whose arguments could not be read (invalid or truncated JSON, not
an object: `ToolCall.args_error`) — or that hold what no tool should run on: a non-finite number, a
lone surrogate, nesting past `_shapes.MAX_ARGUMENT_DEPTH` — is never executed and no hook sees it:
its result is an error naming the tool and the problem, so the model can send the call again. A
tool (or hook) that raises fails the whole turn: the TaskGroup cancels the siblings (none keeps
running unobserved) and the original exception is re-raised unchanged.

`resolve_with_answer` applies a host's answer to one suspended call, reusable by the in-process
`wait_for` path and by durable resume: declined ⇒ `declined/expired: <prompt>` (then the answer's
`message` on its own line, when it has one); ok ⇒ one re-run with `ToolContext(answer=…, request=…)`
(no `before_tool`; `after_tool` and a metric yes), still pending ⇒ `unresolved: <prompt>`. An
approval request (an approval gate's, `toolnexus.approvals`) is decided by `approvals.decide`:
declined as above; an answer `answer_problem` refuses ⇒ `invalid answer for <prompt>: <why>`;
one more approval still needed (N-of-M) or an expiry that escalates ⇒ the result is the *new*
approval request, a suspension the loop asks (or halts on) again; otherwise the re-run, in which
the gate runs the body (with edited arguments, if any). A re-run that suspends on the body's
own request after its approval is a new suspension too, not `unresolved`. An answer with
`always` is remembered in the runner's `ApprovalMemory` (sticky for the rest of the run).

Two answer checks come first: an `ok` answer that arrives when the request's `expiresAt` is not
after `client.clock()` gets the one expiry action, `expiry_answer` (`late_answer`): a decline with
reason `expired` (`declined/expired: <prompt>`; an approval whose rule escalates is asked again of
its escalation group instead; a timer fires), and an `ok` answer whose `data` does not match the
request's flat `data["schema"]` gives the error result `invalid answer for <prompt>: <detail>` — in
both cases the tool does not run (no retry, no hook, no metric). Durable resume applies the same
two checks before anything runs (`_resume.py`).

Tool calls carry the run's cancel signal as `ctx.signal` (`RunSignal`, _run_signal.py): it fires when
the run is cancelled, runs out of time, or the call is abandoned. Every `ToolContext` a call gets
carries it (one that already has a signal keeps its own); a first execution still gets `ctx=None`,
as tool authors rely on, unless the tool takes the signal there (a `SignalTool`, and the library's
MCP, HTTP and A2A tools, which race it).

Not here: the order in which outcomes are written to the transcript (_loop.py).
"""

from __future__ import annotations

import asyncio
import time
from dataclasses import dataclass, replace
from datetime import UTC, datetime
from typing import Any, Awaitable, Callable, Optional, TypeVar

from .._schema import schema_error
from .._shapes import argument_problem, non_finite_problem
from .._write_ahead import WriteAhead, offered, takes_write_ahead
from ..approvals import (
    DECLINE,
    INVALID,
    REASK,
    ApprovalMemory,
    answer_problem,
    decide,
    is_approval_request,
    suspended_on,
)
from ..durable._rules import expiry_of
from ..errors import ToolnexusTypeError
from ..types import Answer, Request, ToolContext, ToolResult, declined_text, pending_of
from ._journal import RunJournal
from ._provider import Provider
from ._retry import Abort
from ._run_signal import RunSignal, takes_signal
from ._settings import utc_now as utc_now
from ._wire.base import ToolCall, arguments_error_text

T = TypeVar("T")


@dataclass
class CallOutcome:
    """What one call produced: the effective args (after `before_tool`), its result, its suspension."""

    call: ToolCall
    args: dict[str, Any]
    result: ToolResult
    request: Optional[Request] = None


def first_leaf(group: BaseExceptionGroup) -> BaseException:
    """The first non-group exception inside a (possibly nested) exception group."""
    exc: BaseException = group
    while isinstance(exc, BaseExceptionGroup):
        exc = exc.exceptions[0]
    return exc


class ToolRunner:
    """Runs tool calls for one turn of one run (hooks, toolkit, metrics, and the run journal).

    With a `journal` (a durable store's), each execution is bracketed by `call_started` (durable
    before the tool acts: `execute_call`) and `call_finished` (committed before its outcome is
    used); `transcript` gives the loop's messages so the store can write the turn the call belongs
    to. `model` is the run's model this turn (the `tool` metric's `model`).
    """

    def __init__(self, provider: Provider, toolkit: Any, turn: int, model: Optional[str] = None,
                 journal: Optional[RunJournal] = None, transcript: Optional[Callable[[], list[dict[str, Any]]]] = None,
                 *, abort: Optional[Abort] = None, memory: Optional[ApprovalMemory] = None) -> None:
        self.provider = provider  # hooks, the `tool` metric, the settings
        self.memory = memory  # the run's sticky approval decisions
        self.abort = abort  # the run's cancel event and deadline, which each call's `ctx.signal` follows
        self.toolkit = toolkit
        self.turn = turn
        self.model = provider.settings.endpoint.model if model is None else model
        self.journal = journal
        self.transcript = transcript

    def now(self) -> datetime:
        """What `expiresAt` is judged by: the settings' `clock`, read when it is needed."""
        return self.provider.settings.loop.clock()

    async def begin(self, call: ToolCall, args: dict[str, Any]) -> Optional[WriteAhead]:
        if self.journal is None:
            return None
        return await self.journal.call_started(self.transcript() if self.transcript else [], call, args)

    async def execute_call(self, call: ToolCall, args: dict[str, Any], ctx: Optional[ToolContext]) -> ToolResult:
        """Tell the journal the call starts, then execute it. A start the journal returns prepared
        is durable before the tool can act: written on the loop first, or — for a tool that runs a
        plain function — by the function's own worker thread, just before calling it."""
        ahead = await self.begin(call, args)
        if ahead is None:
            return await self.execute(call.name, args, ctx)
        if not takes_write_ahead(self.toolkit.get(call.name) if self.toolkit is not None else None):
            await ahead.written()
            return await self.execute(call.name, args, ctx)
        with offered(ahead):
            result = await self.execute(call.name, args, ctx)
        await ahead.written()  # raises if it could not be written (the function was not called then)
        return result

    async def end(self, call: ToolCall, result: ToolResult) -> None:
        if self.journal is not None:
            await self.journal.call_finished(call, result)

    def source_of(self, name: str) -> str:
        tool = self.toolkit.get(name) if self.toolkit is not None else None
        return (tool.source if tool is not None else "") or "custom"

    async def execute(self, name: str, args: dict[str, Any], ctx: Optional[ToolContext]) -> ToolResult:
        if self.toolkit is None:
            return ToolResult(output=f"unknown tool: {name}", is_error=True)
        ctx, signal = self.context_for(name, ctx)
        try:
            result = await self.toolkit.execute(name, args, ctx)
        except asyncio.CancelledError:  # the call was abandoned: a tool still working (a thread) can see it
            if signal is not None:
                signal.interrupt()
            raise
        if not isinstance(result, ToolResult):
            raise ToolnexusTypeError(f"toolnexus: tool {name!r} returned {type(result).__name__}, expected ToolResult")
        return result

    def context_for(self, name: str, ctx: Optional[ToolContext]) -> tuple[Optional[ToolContext], Optional[RunSignal]]:
        """`ctx` carrying this call's `RunSignal` (a signal already there is kept), and that signal.

        A first execution (`ctx is None`) stays None unless the tool takes the signal there."""
        if ctx is not None:
            if ctx.signal is not None:
                return ctx, None
            signal = RunSignal(self.abort)
            return replace(ctx, signal=signal), signal
        if not takes_signal(self.toolkit.get(name)):
            return None, None
        signal = RunSignal(self.abort)
        return ToolContext(signal=signal), signal

    def emit_tool(self, name: str, result: ToolResult, started: float) -> None:
        suspended = pending_of(result) is not None
        event: dict[str, Any] = {"event": "tool", "tool": name, "source": self.source_of(name),
                                 "is_error": False if suspended else bool(result.is_error),
                                 "ms": (time.monotonic() - started) * 1000, "model": self.model}
        if suspended:
            event["pending"] = True
        self.provider.emit(event)

    async def after_tool(self, call: ToolCall, args: dict[str, Any], result: ToolResult) -> ToolResult:
        hv = await self.provider.call_hook("after_tool", {"name": call.name, "args": args, "result": result,
                                                          "id": call.id, "turn": self.turn})
        replaced: Optional[ToolResult] = hv.get("result") if hv else None
        return replaced if replaced is not None else result

    async def run_one(self, call: ToolCall) -> CallOutcome:
        args = call.args
        if call.args_error is None and args:  # what no tool should run on, whichever dialect read it
            hostile = argument_problem(args)
            if hostile is not None:
                call.args_error = f"the arguments cannot be used: {hostile}"
        if call.args_error is not None:  # never run a tool on arguments the model did not send
            started = time.monotonic()
            result = ToolResult(output=arguments_error_text(call), is_error=True)
            self.emit_tool(call.name, result, started)
            return CallOutcome(call, args, result, None)
        hv = await self.provider.call_hook("before_tool", {"name": call.name, "args": args, "id": call.id,
                                                           "turn": self.turn})
        started = time.monotonic()
        short: Optional[ToolResult] = hv.get("result") if hv else None
        if short is not None:
            result = short
        else:
            rewritten: Optional[dict[str, Any]] = hv.get("args") if hv else None
            if rewritten is not None:
                args = rewritten
            result = await self.execute_call(call, args, None)
            if pending_of(result) is None:
                result = await self.after_tool(call, args, result)
        await self.end(call, result)
        self.emit_tool(call.name, result, started)
        return CallOutcome(call, args, result, pending_of(result))

    async def run_all(self, calls: list[ToolCall]) -> list[CallOutcome]:
        return await gather_in_order([self.run_one(c) for c in calls])


async def gather_in_order(coros: list[Awaitable[T]]) -> list[T]:
    """Run concurrently in a TaskGroup; results in input order; first failure re-raised unchanged."""
    if len(coros) == 1:
        return [await coros[0]]
    try:
        async with asyncio.TaskGroup() as group:
            tasks: list[asyncio.Task[T]] = [group.create_task(c) for c in coros]  # type: ignore[arg-type]
    except BaseExceptionGroup as eg:
        raise first_leaf(eg) from None
    return [t.result() for t in tasks]


async def resolve_with_answer(runner: ToolRunner, outcome: CallOutcome, answer: Optional[Answer]) -> ToolResult:
    """Apply `answer` to one suspended call (see module docstring)."""
    request = outcome.request
    assert request is not None
    now = runner.now()
    if answer is not None:
        answer = late_answer(request, answer, now)
    approval = is_approval_request(request)
    if approval:
        decision = decide(request, answer, now)
        if decision.kind == INVALID:
            return ToolResult(output=decision.text, is_error=True)
        if runner.memory is not None:
            runner.memory.remember(request, answer, now)
        if decision.kind == DECLINE:
            return ToolResult(output=decision.text, is_error=True)
        if decision.kind == REASK:
            assert decision.request is not None
            return suspended_on(decision.request)
    elif answer is None or not answer.ok:
        return ToolResult(output=declined_text(request.prompt, answer), is_error=True)
    assert answer is not None
    problem = answer_schema_error(request, answer)
    if problem is not None:
        return ToolResult(output=f"invalid answer for {request.prompt}: {problem}", is_error=True)
    started = time.monotonic()
    result = await runner.execute_call(outcome.call, outcome.args, ToolContext(answer=answer, request=request))
    result = await runner.after_tool(outcome.call, outcome.args, result)
    await runner.end(outcome.call, result)
    runner.emit_tool(outcome.call.name, result, started)
    again = pending_of(result)
    if again is not None and not (approval or is_approval_request(again)):
        return ToolResult(output=f"unresolved: {request.prompt}", is_error=True)
    return result


# -- answer checks (shared with durable resume) ----------------------------------------------------


def expires_at(request: Request) -> Optional[datetime]:
    """`request.expiresAt` as an aware datetime (RFC 3339, `Z` accepted, naive = UTC), else None.

    An unparseable value is not enforced, so it reads as "no expiry".
    """
    return expiry_of(request.expiresAt)


def is_expired(request: Request, now: datetime) -> bool:
    """True when the request carries a parseable `expiresAt` that is not after `now`."""
    when = expires_at(request)
    if when is None:
        return False
    return when <= (now if now.tzinfo is not None else now.replace(tzinfo=UTC))


TIMER_KIND = "timer"  # a request a tool makes to be called again at its `expiresAt` (`toolnexus.agents.timer`)


def expiry_answer(request: Request, late: Optional[Answer] = None) -> Answer:
    """What a request gets once its `expiresAt` has passed — the one place the expiry action is
    decided, for an answer that arrives late (every resume path: `late`, whose `by`/`via` are kept)
    and for a worker of the fleet firing the expiry while nothing runs: a decline with reason
    `expired`; a timer (`kind="timer"`) fires instead: ok, `data={"timer": "fired", "at": <expiresAt>}`.
    For an approval request, `approvals.decide` then turns the decline into its rule's `on_expiry`
    (asking the escalation group), so a late answer and a fired expiry escalate alike."""
    if request.kind == TIMER_KIND:
        return Answer(id=request.id, ok=True, data={"timer": "fired", "at": request.expiresAt})
    return Answer(id=request.id, ok=False, reason="expired", by=late.by if late is not None else None,
                  via=late.via if late is not None else None)


def late_answer(request: Request, answer: Answer, now: datetime) -> Answer:
    """`answer` as applied at `now`: an ok answer to an expired request gets the expiry action (a
    timer's own answer stands: answering a timer early or late fires it)."""
    if answer.ok and request.kind != TIMER_KIND and is_expired(request, now):
        return expiry_answer(request, answer)
    return answer


def answer_schema_error(request: Request, answer: Answer) -> Optional[str]:
    """Why an `ok` answer's `data` fails the request's flat `data["schema"]`, or None (also: no
    schema). A non-finite number (NaN, ±Infinity) in the data fails with or without a schema: no
    tool should run on one."""
    if not answer.ok:
        return None
    schema = request.data.get("schema") if isinstance(request.data, dict) else None
    if not isinstance(schema, dict) or not schema:
        return non_finite_problem(answer.data) if answer.data is not None else None
    return schema_error(schema, {} if answer.data is None else answer.data)


def answer_refusal(request: Request, answer: Answer) -> Optional[str]:
    """Why a resume refuses `answer` to `request` before anything runs, or None — the one wording
    of the answer rules every resume path shares: an approval answer `approvals.answer_problem`
    refuses (an edit where none is allowed, a repeated or unnamed approver), then data that fails
    the request's `data["schema"]` (or, with no schema, data JSON cannot hold). Check the expiry
    first (`late_answer`): an expired request's answer is a decline, which has no data to fail."""
    refused = answer_problem(request, answer)
    if refused is not None:
        return f"the answer to {request.id!r} is refused: {refused}"
    problem = answer_schema_error(request, answer)
    if problem is None:
        return None
    schema = isinstance(request.data, dict) and bool(request.data.get("schema"))
    what = "does not match the request's schema" if schema else "holds data JSON does not have"
    return f"the answer to {request.id!r} {what}: {problem}"
