"""One agent turn, from admission to finish: run exactly one `client.ask` and settle the outcome.

`begin_turn` admits a turn (state `running`, a parent slot taken) and returns its `TurnScope`;
the core runs `run_body` as a task (a wake: `start_wake`, the runner the core is handed) or it is
awaited (`run_admitted`: `run_turn`, resume and recovery). The body
builds a per-turn toolkit (`def.tools`, plus `task` for a def with a team) and a client whose
transport is the gated, metered seam and whose store is the runtime's conversation store plus
this turn's journal, snapshots the stored transcript, and runs the ask through the completion
gate. Each outcome settles the turn exactly once:

| outcome | state | result |
|---|---|---|
| done | idle (drained items consumed) | `done` |
| pending | suspended: a `Suspension` is recorded (replay mode: the transcript rewound to the snapshot) | `pending`, path stamped |
| incomplete | idle (drained items consumed) | `incomplete`, canonical `limit` |
| aborted | idle (drained items restored) | `interrupted` or `closed` |
| exception | idle (drained items restored) | `error` |

Spend is always rolled up from the turn's meter, whatever the outcome — with a store, also at
each checkpoint, so a crash loses no counted spend. `settle_turn` ends a turn exactly once (an
interrupt may settle it before its body has unwound): trace, free the parent slot and hand it
on, publish `last_result`, flush the waiters. With a store, the settle also stages the turn's
transcript — the run's final one, or the snapshot for a rewind (a parked replay, an error, an
abort) — so the state flip and the transcript change commit in one transaction.

Three kinds of turn besides a plain wake:
- a *replay* (resume, replay mode): the turn's input again, the Answer bound to the halted call;
- a *continuation* (resume, continue mode — the default with a store): `client.ask_with_answer`
  fills the halted slot from the Answer and the loop goes on, the model not asked again. If the
  client refuses the answer before anything ran, the handle is parked again, request intact, and
  the error is raised to the `resume` caller;
- a *recovery* (restore after a crash): `client.continue_run` from the journal; a run that had
  not started yet is asked its input again.
"""  # noqa: E501 - Markdown tables, one row per line

from __future__ import annotations

import asyncio
from contextlib import nullcontext
from dataclasses import asdict
from datetime import datetime
from typing import TYPE_CHECKING, Any, Callable, Coroutine, Optional, Protocol, runtime_checkable

from .._diag import warn, warn_once
from ..approvals import ApprovalPolicy, ApprovalScope, enforce
from ..client import ResumeError, create_client
from ..client._result import RUN_STATUS_INCOMPLETE, RUN_STATUS_PENDING, RunResult
from ..client._structured import with_output
from ..client._tracing import resume_context
from ..toolkit import create_toolkit
from ..types import Request, Tool
from ._budget import canonical_limit
from ._defs import RESUME_CONTINUE, RESUME_REPLAY
from ._durable import TurnJournal, TurnStore
from ._escalation import make_escalator, watch_tools
from ._gate import TurnMeter, gated_transport
from ._handle import LiveTurn, flush_waiters, pending_result, restore_drained, result_of, stamp_path
from ._loop import resolve_hooks, run_gated
from ._scope import TurnScope
from ._suspension import ORIGIN_HOOK, ORIGIN_TOOL, HaltedCall, Suspension
from ._task_tool import make_task_tool
from ._turnstate import Continuation as Continuation, Recovery as Recovery, TurnState as TurnState
from ._vocab import HandleState, TaskStatus
from .clock import wall_now

if TYPE_CHECKING:  # pragma: no cover
    from ._core import RuntimeCore
    from ._handle import Handle, TaskResult

_REWIND = object()  # settle_turn: stage the turn's snapshot (the transcript as it was before)


def begin_turn(core: "RuntimeCore", h: "Handle", input: str, *, detail: str = "(wake)",
               **options: Any) -> TurnScope:
    """Admission after a passed budget walk: `running`, a parent slot taken, traced; the turn's scope."""
    meter = TurnMeter(on_late=lambda tokens: core.roll_up(h, 1, tokens, 0))
    turn = TurnState(input, meter=meter, **options)
    h.attach_turn(turn)
    core.turns.add(turn)
    if not turn.replay:
        h.task_children = {}
    started = turn.recovery.started if turn.recovery is not None else turn.continuation is not None
    h.turn_info = {"input": input, "started": started}
    if core.durable is not None:
        core.durable.hold()
    core.transition(h, HandleState.RUNNING, detail)
    assert h.parent is not None
    h.parent.running_children += 1
    core.changed(h.parent)
    return TurnScope(core, h, turn)


async def run_admitted(core: "RuntimeCore", h: "Handle", input: str, **options: Any) -> "TaskResult":
    """Run one turn of an idle `h` to its result, with exactly `input` (the inbox is not drained)."""
    if h.parent is None:
        return result_of(h, "root never runs a turn", TaskStatus.ERROR)
    if h.state != HandleState.IDLE:
        return result_of(h, f"run_turn needs an idle handle; {h.id} is {h.state}", TaskStatus.ERROR)
    dim = core.walk(h)
    if dim is not None:
        return core.refuse(h, dim)
    scope = begin_turn(core, h, input, **options)
    await run_body(scope)
    turn = scope.turn
    if turn.refusal is not None:  # the client refused a continuation: parked again, loudly
        raise turn.refusal
    assert turn.result is not None
    return turn.result


def settle_turn(scope: TurnScope, result: "TaskResult", to: str, detail: str,
                *, transcript: Any = _REWIND) -> None:
    """End a turn exactly once: stage its transcript (with a store), trace, free the parent slot,
    hand it on, publish the result. `transcript`: the messages to keep, `_REWIND` for the turn's
    snapshot, None to leave the stored transcript as it is."""
    core, h, turn = scope.run, scope.handle, scope.turn
    if turn.settled:
        return
    turn.result = result
    durable = core.durable
    if durable is not None:
        if transcript is _REWIND:
            transcript = list(turn.snapshot or [])
        if transcript is not None:
            durable.stage_conversation(h.id, transcript)
        durable.drop_calls(h)
    h.turn_info = None
    core.transition(h, to, detail)
    parent = h.parent
    assert parent is not None
    parent.running_children -= 1
    core.transfer_slot(parent)
    h.last_result = result
    flush_waiters(h, result)


def start_wake(core: "RuntimeCore", h: "Handle", input: str) -> Coroutine[Any, Any, None]:
    """A wake the core admitted: the turn begins now; the returned body is the core's to schedule."""
    return run_body(begin_turn(core, h, input))


def settle_interrupted(core: "RuntimeCore", h: "Handle", turn: LiveTurn, detail: str) -> None:
    """`interrupt()` of a live turn: settled at once as `interrupted`, the inbox intact."""
    assert isinstance(turn, TurnState)
    settle_turn(TurnScope(core, h, turn), result_of(h, "interrupted", TaskStatus.INTERRUPTED), HandleState.IDLE, detail)


def _finished(scope: TurnScope) -> None:
    """The body is done (settled earlier or just now): forget it and wake `close`/`quiesce`."""
    core, h, turn = scope.run, scope.handle, scope.turn
    h.detach_turn(turn)
    core.turns.discard(turn)
    turn.finished.set()
    core.maybe_park()


def resolved_seams(core: "RuntimeCore", h: "Handle") -> tuple[Any, Any]:
    """`hooks` and `on_metric`, each def over runtime (replace, never merge).

    The one composition: a def whose hooks are only its guardrails composes them over the
    runtime's hooks instead of dropping those (`loop.resolve_hooks`).
    """
    hooks = resolve_hooks(h.defn.hooks, core.hooks)
    on_metric = h.defn.on_metric if h.defn.on_metric is not None else core.on_metric
    return hooks, on_metric


def _checkpoint(scope: TurnScope) -> None:
    """Before a commit inside the turn: roll up the spend counted so far, so it is committed too."""
    core, h, turn = scope.run, scope.handle, scope.turn
    calls, tokens = turn.meter.take()
    if calls or tokens:
        core.roll_up(h, calls, tokens, 0)


async def run_body(scope: TurnScope) -> None:
    """The turn body; always settles `turn` (unless an interrupt already did) and reaps its toolkit."""
    core, h, turn = scope.run, scope.handle, scope.turn
    toolkit = None
    try:
        if core.turn_hold is not None:  # the run's entry is being stored: nothing happens before it is
            await core.turn_hold
        spawn_task = h.take_first_turn_hold()
        if spawn_task is not None:  # an async on_spawn finishes before the first LLM call
            await spawn_task
        defn = h.defn
        tools = list(defn.tools or [])
        if defn.task_targets:
            tools.append(make_task_tool(scope))
        tools = _gated(tools, core.approvals_of(h), defn.name)
        memory = core.approval_memory()
        wall = lambda: wall_now(core.clock)  # noqa: E731 - expiry and escalation follow the runtime's clock
        toolkit = await create_toolkit(builtins=False, extra_tools=watch_tools(tools, turn, now=wall, memory=memory))
        toolkit = with_output(toolkit, defn.output_type, defn.output_retries)  # structured output, if any
        llm = core.llm
        hooks, on_metric = resolved_seams(core, h)
        turn.journal = TurnJournal(core.durable, h, lambda: _checkpoint(scope),
                                   lambda name: _idempotent(toolkit.get(name)))
        store = TurnStore(core.store, turn.journal, hold=_holder(turn) if core.durable is not None else None)
        client = create_client(
            base_url=llm["base_url"],
            style=llm["style"],
            model=(llm.get("model") or "inherit") if defn.model == "inherit" else defn.model,
            api_key=llm["api_key"],
            request_params=llm.get("request_params"),  # e.g. {"max_tokens": 16000} for an anthropic model
            agent_name=defn.name,  # names the turn's trace spans
            system_prompt=defn.system_prompt or None,
            max_turns=h.eff["max_turns"],
            http_transport=gated_transport(core.transport, core.gate, turn.meter),
            store=store,
            wait_for=turn.one_shot or make_escalator(scope),
            hooks=hooks,
            on_metric=on_metric,
            timer=core.clock,  # retry backoff and the run deadline follow the runtime's clock
            approvals=ApprovalScope(memory, h.id.split("/")),  # the run's sticky decisions; who asks
        )
        if isinstance(core.clock, WallClock):
            client.clock = core.clock.utc_now  # `expiresAt` is judged by the runtime's wall clock too
        turn.snapshot = await core.store.get(h.id)
        if turn.abort is not None:  # aborted while the turn was being set up
            raise asyncio.CancelledError
        binding = turn.binding  # a replayed turn's trace span says which answer it applies
        with resume_context(binding.request or {"id": binding.answer.id}, binding.answer) if binding else nullcontext():
            turn.ask_task = asyncio.ensure_future(run_gated(_asker(client, toolkit, h, turn), turn.input,
                                                            defn.completion))
        run = await turn.ask_task
    except asyncio.CancelledError:
        external = turn.abort is None  # the body itself was cancelled, not just its ask
        if external and turn.ask_task is not None:
            turn.ask_task.cancel()
        _settle_aborted(scope)
        if external:
            raise
    except ResumeError as exc:
        if turn.continuation is not None and turn.meter.calls == 0:
            _settle_refused(scope, exc)
        else:
            _settle_error(scope, exc)
    except Exception as exc:
        _settle_error(scope, exc)
    else:
        try:
            await _settle_run(scope, run)
        except Exception as exc:  # e.g. the store failed to rewind: still settle, loudly
            _settle_error(scope, exc)
    finally:
        if toolkit is not None:
            try:
                await toolkit.close()
            except Exception as exc:
                warn(f"[toolnexus] agents: closing the toolkit of {h.id} failed: {exc}")
        _finished(scope)


@runtime_checkable
class WallClock(Protocol):
    """A clock that also tells wall time (`clock.py`): each turn's client judges `expiresAt` by it."""

    def utc_now(self) -> datetime: ...


def _idempotent(tool: Optional[Tool]) -> bool:
    """The journal's question: may a call of this tool, in doubt after a crash, simply run again?"""
    return tool is not None and tool.idempotent


def _gated(tools: list[Tool], policy: Optional[ApprovalPolicy], agent: str) -> list[Tool]:
    """The def's tools, gated by their own `needs_approval` or the agent's policy (before the replay
    binding wraps them, so a bound answer reaches the gate); a policy name that matches none of
    them is warned about once."""
    if policy:
        for pattern in policy.unmatched(tools):
            warn_once(f"agent-approvals:{agent}:{pattern}",
                      f'[toolnexus] agent "{agent}": approvals name "{pattern}" matched no tool')
    return [enforce(t, policy) for t in tools]


def _holder(turn: TurnState) -> Callable[[list[dict[str, Any]]], None]:
    def hold(messages: list[dict[str, Any]]) -> None:
        turn.final_messages = list(messages)

    return hold


def _asker(client: Any, toolkit: Any, h: "Handle", turn: TurnState) -> Callable[[str], Any]:
    """What the completion gate calls: the continuation or recovery first (if any), then plain asks."""
    first: Any = turn.continuation or turn.recovery

    async def ask(text: str) -> Any:
        nonlocal first
        if isinstance(first, Continuation):
            cont, first = first, None
            return await client.ask_with_answer(toolkit, h.id, cont.request, cont.answer)
        if isinstance(first, Recovery):
            recovery, first = first, None
            if recovery.started:
                return await client.continue_run(toolkit, h.id, recovery.calls)
        return await client.ask(text, toolkit, id=h.id)

    return ask


def _account(scope: TurnScope, tool_calls: int) -> tuple[int, int]:
    core, h, turn = scope.run, scope.handle, scope.turn
    calls, tokens, left_calls, left_tokens = turn.meter.close()
    core.roll_up(h, left_calls, left_tokens, tool_calls)
    return calls, tokens


def _settle_aborted(scope: TurnScope) -> None:
    h, turn = scope.handle, scope.turn
    _account(scope, 0)
    if turn.settled:  # interrupt() already settled it; only the spend was left to count
        return
    restore_drained(h)
    status = TaskStatus.CLOSED if turn.abort == TaskStatus.CLOSED else TaskStatus.INTERRUPTED
    settle_turn(scope, result_of(h, status, status), HandleState.IDLE, "(interrupted; inbox intact)")


def _settle_error(scope: TurnScope, exc: BaseException) -> None:
    h, turn = scope.handle, scope.turn
    _account(scope, 0)
    if turn.settled:
        return
    message = str(exc) or type(exc).__name__
    restore_drained(h)
    settle_turn(scope, result_of(h, message, TaskStatus.ERROR), HandleState.IDLE, f"(error: {message})")


def _settle_refused(scope: TurnScope, exc: ResumeError) -> None:
    """The client refused the continuation before anything ran: parked again, request intact."""
    h, turn = scope.handle, scope.turn
    _account(scope, 0)
    if turn.settled or turn.continuation is None:
        return
    h.suspension = turn.continuation.held
    turn.refusal = exc
    _suspend(scope, pending_result(h), transcript=None)


async def _settle_run(scope: TurnScope, run: RunResult) -> None:
    core, h, turn = scope.run, scope.handle, scope.turn
    tool_calls = list(run.tool_calls or [])
    calls, tokens = _account(scope, len(tool_calls) or int(run.tool_call_count or 0))
    if turn.settled:
        return
    status = run.status
    kept = turn.final_messages if core.durable is not None else None
    if status == RUN_STATUS_PENDING and run.pending is not None:
        # A continued (or recovered) turn stays continued; otherwise the handle's mode decides.
        mode = RESUME_CONTINUE if turn.continued else core.resume_mode_of(h)
        transcript: Any = kept
        if mode == RESUME_REPLAY:
            transcript = _REWIND
            if core.durable is None:
                await core.store.save(h.id, list(turn.snapshot or []))  # rewind to the checkpoint
                if turn.settled:  # interrupted while rewinding
                    return
        else:
            h.drained = []  # the turn's input is in the kept transcript
        request: Request = run.pending
        record = tool_calls[-1] if tool_calls and isinstance(tool_calls[-1], dict) else {}
        minted = turn.journal.halted.get(request.id) if turn.journal is not None else None
        h.suspension = Suspension(
            request=request,
            input=turn.input,
            mode=mode,
            origin=ORIGIN_TOOL if request.id in turn.tool_minted else ORIGIN_HOOK,
            call=HaltedCall(minted.id if minted is not None else None, record.get("name"), record.get("args"),
                            request.prompt if mode == RESUME_CONTINUE else None),
        )
        result = _with_finish(result_of(h, request.prompt, TaskStatus.PENDING, pending=stamp_path(request, h)), run)
        if core.durable is not None:
            assert result.pending is not None
            core.durable.open_request(h, asdict(result.pending), list((result.pending.data or {}).get("path") or []))
        _suspend(scope, result, transcript=transcript)
        return
    h.drained = []
    if status == RUN_STATUS_INCOMPLETE:
        limit = canonical_limit(run.limit or "maxTurns")
        text = f"hit {limit} without a final answer"
        bound: Any = h.eff["max_turns"]
        if limit != "maxTurns":
            bound = getattr(h.defn.completion, "max_attempts", "") if limit == "completion" else ""
            if run.text:
                text = f"{text} ({run.text})"
        result = _with_finish(result_of(h, text, TaskStatus.INCOMPLETE, limit=limit), run)
        settle_turn(scope, result, HandleState.IDLE, f"(INCOMPLETE at {limit} {bound})", transcript=kept)
        core.budget_stop(h, limit)
        return
    done = _with_finish(result_of(h, run.text, TaskStatus.DONE), run)
    done.output = run.output
    settle_turn(scope, done, HandleState.IDLE, f"(done, turns={calls}, tokens={tokens})", transcript=kept)


def _with_finish(result: "TaskResult", run: RunResult) -> "TaskResult":
    """`result` with how the run's last reply ended (the client's `finish_reason`)."""
    result.finish_reason = run.finish_reason
    result.provider_finish_reason = run.provider_finish_reason
    return result


def _suspend(scope: TurnScope, result: "TaskResult", *, transcript: Any) -> None:
    """Settle a turn as durably parked on `h.suspension` (set by the caller)."""
    h = scope.handle
    assert h.suspension is not None
    settle_turn(
        scope,
        result,
        HandleState.SUSPENDED,
        f'DURABLE (pending "{h.suspension.request.kind}", path preserved)',
        transcript=transcript,
    )
