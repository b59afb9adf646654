"""One agent turn, from admission to finish: run exactly one `client.ask` and settle the outcome.

`begin_turn` admits a turn (state `running`, a parent slot taken); the runtime then runs
`run_body` as a task (a wake) or awaits it (`run_admitted`: `run_turn` and `resume`). The body
builds a per-turn toolkit (`def.tools`, plus `task` for a def with a team) and a §8 client whose
transport is the gated, metered seam, snapshots the stored transcript, and runs the ask through
the completion gate. Each outcome settles the turn exactly once:

| outcome | state | result |
|---|---|---|
| done | idle (drained items consumed) | `done` |
| pending | suspended (transcript rewound to the snapshot, input preserved) | `pending`, path stamped |
| incomplete | idle (drained items consumed) | `incomplete`, canonical `limit` |
| aborted | idle (drained items restored) | `interrupted` or `closed` |
| exception | idle (drained items restored) | `error` |

Spend is always rolled up from the turn's meter, whatever the outcome (beyond #9, #10).
`settle_turn` ends a turn exactly once (an interrupt may settle it before its body has unwound):
trace, free the parent slot and hand it on, publish `last_result`, flush the waiters.

Resume modes (ours, beyond #7): a handle whose `resume_mode` is `"continue"` does not rewind at a
durable suspension — the halted transcript (earlier results byte for byte, the placeholder in the
halted slot) stays in the store and the drained inbox items are consumed, since they are in it. A
resume then runs a *continuation* turn: `client.ask_with_answer` fills the halted slot from the
Answer (the halted tool re-runs once with `ctx.answer`) and the loop carries on, so the model is
not asked for the same call again. A continuation that the client refuses before anything runs
(`ResumeError`, e.g. an answer that fails the request's schema) puts the handle back to
`suspended` with its request intact, and the error is raised to the `resume` caller.
This module holds no state of its own; transitions go through the runtime (`rt._transition`).
"""

from __future__ import annotations

import asyncio
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Callable, Optional

from .._diag import warn
from ..client import ResumeError, create_client
from ..toolkit import create_toolkit
from ..types import Answer, Request
from .budget import canonical_limit
from .defs import RESUME_CONTINUE, RESUME_REPLAY
from .escalation import ReplayBinding, make_escalator, pending_result, stamp_path, watch_tools
from .gate import TurnMeter, gated_transport
from .handle import flush_waiters, put_pending, restore_drained, result_of
from .loop import resolve_hooks, run_gated
from .task_tool import make_task_tool

if TYPE_CHECKING:  # pragma: no cover
    from .handle import Handle, TaskResult
    from .runtime import AgentRuntime

__all__ = ["TurnState", "Continuation", "begin_turn", "run_admitted", "run_body", "settle_turn", "resolved_seams"]


@dataclass
class Continuation:
    """A durable resume that continues the halted turn instead of replaying it.

    `request` / `answer` are what `client.ask_with_answer` checks and applies; `held` is the
    handle's pending fields as they were, put back if the client refuses the answer.
    """

    request: Request
    answer: Answer
    held: dict[str, Any]


class TurnState:
    """One admitted turn of a handle: live, runtime-private, never persisted.

    `replay` marks a turn run by `resume` (task calls may reattach); `binding` is the durable
    Answer bound to the halted call; `abort` is the reason an interrupt/close cancelled it;
    `result` is set once, when the turn is settled.
    """

    def __init__(
        self,
        input: str,  # noqa: A002 - the turn's exact input
        *,
        meter: TurnMeter,
        one_shot: Optional[Callable[[Request], Any]] = None,
        binding: Optional[ReplayBinding] = None,
        replay: bool = False,
        continuation: Optional[Continuation] = None,
    ) -> None:
        self.input = input
        self.meter = meter
        self.one_shot = one_shot
        self.binding = binding
        self.replay = replay
        self.continuation = continuation
        self.refusal: Optional[ResumeError] = None  # a continuation the client refused
        self.abort: Optional[str] = None
        self.ask_task: Optional[asyncio.Task[Any]] = None
        self.result: Optional[TaskResult] = None
        self.finished = asyncio.Event()
        self.tool_minted: set[str] = set()
        self.reattach_cursor: dict[str, int] = {}
        self.reattached: set[str] = set()

    @property
    def settled(self) -> bool:
        return self.result is not None

    def cancel(self, reason: str) -> None:
        """Abort the turn (`reason` is "interrupted" or "closed"): cancel its ask, if it started."""
        self.abort = reason
        if self.ask_task is not None:
            self.ask_task.cancel()


def begin_turn(rt: "AgentRuntime", h: "Handle", input: str, **options: Any) -> TurnState:  # noqa: A002
    """Admission after a passed budget walk: `running`, a parent slot taken, traced."""
    meter = TurnMeter(on_late=lambda tokens: rt._roll_up(h, 1, tokens, 0))
    turn = TurnState(input, meter=meter, **options)
    h._turn = turn
    rt._turns.add(turn)
    rt._transition(h, "running", "(wake)")
    assert h.parent is not None
    h.parent.running_children += 1
    if not turn.replay:
        h.task_children = {}
    return turn


async def run_admitted(rt: "AgentRuntime", h: "Handle", input: str, **options: Any) -> "TaskResult":  # noqa: A002
    """Run one turn of an idle `h` to its result, with exactly `input` (the inbox is not drained)."""
    if h.parent is None:
        return result_of(h, "root never runs a turn", "error")
    if h.state != "idle":
        return result_of(h, f"run_turn needs an idle handle; {h.id} is {h.state}", "error")
    dim = rt._walk(h)
    if dim is not None:
        return rt._refuse(h, dim)
    turn = begin_turn(rt, h, input, **options)
    await run_body(rt, h, turn)
    if turn.refusal is not None:  # the client refused a continuation: suspended again, loudly
        raise turn.refusal
    assert turn.result is not None
    return turn.result


def settle_turn(rt: "AgentRuntime", h: "Handle", turn: TurnState, result: "TaskResult", to: str, detail: str) -> None:
    """End a turn exactly once: trace, free the parent slot, hand it on, publish the result."""
    if turn.settled:
        return
    turn.result = result
    rt._transition(h, to, detail)
    parent = h.parent
    assert parent is not None
    parent.running_children -= 1
    rt._transfer_slot(parent)
    h.last_result = result
    flush_waiters(h, result)


def _finished(rt: "AgentRuntime", h: "Handle", turn: TurnState) -> None:
    """The body is done (settled earlier or just now): forget it and wake `close`/`quiesce`."""
    if h._turn is turn:
        h._turn = None
    rt._turns.discard(turn)
    turn.finished.set()


def resolved_seams(rt: "AgentRuntime", h: "Handle") -> tuple[Any, Any]:
    """`hooks` and `on_metric`, each def over runtime (replace, never merge).

    The one composition: a def whose hooks are only its guardrails composes them over the
    runtime's hooks instead of dropping those (beyond #12, `loop.resolve_hooks`).
    """
    hooks = resolve_hooks(h.defn.hooks, rt.hooks)
    on_metric = h.defn.on_metric if h.defn.on_metric is not None else rt.on_metric
    return hooks, on_metric


async def run_body(rt: "AgentRuntime", h: "Handle", turn: TurnState) -> None:
    """The turn body; always settles `turn` (unless an interrupt already did) and reaps its toolkit."""
    toolkit = None
    snapshot: Optional[list[dict[str, Any]]] = None
    try:
        if h._on_spawn_task is not None:  # an async on_spawn finishes before the first LLM call
            spawn_task, h._on_spawn_task = h._on_spawn_task, None
            await spawn_task
        defn = h.defn
        tools = list(defn.tools or [])
        if defn.task_targets:
            tools.append(make_task_tool(rt, h, turn))
        toolkit = await create_toolkit(builtins=False, extra_tools=watch_tools(tools, turn))
        llm = rt._llm
        hooks, on_metric = resolved_seams(rt, h)
        client = create_client(
            base_url=llm["base_url"],
            style=llm["style"],
            model=(llm.get("model") or "inherit") if defn.model == "inherit" else defn.model,
            api_key=llm["api_key"],
            system_prompt=defn.system_prompt or None,
            max_turns=h.eff["max_turns"],
            http_transport=gated_transport(rt._transport, rt._gate, turn.meter),
            store=rt.conversation_store,
            wait_for=turn.one_shot or make_escalator(rt, h, turn.binding),
            hooks=hooks,
            on_metric=on_metric,
            timer=rt.clock,  # §8 backoff and deadline run on the runtime's clock (beyond #17)
        )
        snapshot = await rt.conversation_store.get(h.id)
        if turn.abort is not None:  # aborted while the turn was being set up
            raise asyncio.CancelledError
        turn.ask_task = asyncio.ensure_future(run_gated(_asker(client, toolkit, h, turn), turn.input, defn.completion))
        run = await turn.ask_task
    except asyncio.CancelledError:
        external = turn.abort is None  # the body itself was cancelled, not just its ask
        if external and turn.ask_task is not None:
            turn.ask_task.cancel()
        _settle_aborted(rt, h, turn)
        if external:
            raise
    except ResumeError as exc:
        if turn.continuation is not None and turn.meter.calls == 0:
            _settle_refused(rt, h, turn, exc)
        else:
            _settle_error(rt, h, turn, exc)
    except Exception as exc:
        _settle_error(rt, h, turn, exc)
    else:
        try:
            await _settle_run(rt, h, turn, run, snapshot)
        except Exception as exc:  # e.g. the store failed to rewind: still settle, loudly
            _settle_error(rt, h, turn, exc)
    finally:
        if toolkit is not None:
            try:
                await toolkit.close()
            except Exception as exc:
                warn(f"[toolnexus] agents: closing the toolkit of {h.id} failed: {exc}")
        _finished(rt, h, turn)


def _asker(client: Any, toolkit: Any, h: "Handle", turn: TurnState) -> Callable[[str], Any]:
    """What the completion gate calls: the continuation first (if any), then plain asks."""
    first = turn.continuation

    async def ask(text: str) -> Any:
        nonlocal first
        if first is not None:
            cont, first = first, None
            return await client.ask_with_answer(toolkit, h.id, cont.request, cont.answer)
        return await client.ask(text, toolkit, id=h.id)

    return ask


def _account(rt: "AgentRuntime", h: "Handle", turn: TurnState, tool_calls: int) -> tuple[int, int]:
    calls, tokens = turn.meter.close()
    rt._roll_up(h, calls, tokens, tool_calls)
    return calls, tokens


def _settle_aborted(rt: "AgentRuntime", h: "Handle", turn: TurnState) -> None:
    _account(rt, h, turn, 0)
    if turn.settled:  # interrupt() already settled it; only the spend was left to count
        return
    restore_drained(h)
    status = "closed" if turn.abort == "closed" else "interrupted"
    settle_turn(rt, h, turn, result_of(h, status, status), "idle", "(interrupted; inbox intact)")


def _settle_error(rt: "AgentRuntime", h: "Handle", turn: TurnState, exc: BaseException) -> None:
    _account(rt, h, turn, 0)
    if turn.settled:
        return
    message = str(exc) or type(exc).__name__
    restore_drained(h)
    settle_turn(rt, h, turn, result_of(h, message, "error"), "idle", f"(error: {message})")


def _settle_refused(rt: "AgentRuntime", h: "Handle", turn: TurnState, exc: ResumeError) -> None:
    """The client refused the continuation before anything ran: suspended again, request intact."""
    _account(rt, h, turn, 0)
    if turn.settled or turn.continuation is None:
        return
    put_pending(h, turn.continuation.held)
    turn.refusal = exc
    _suspend(rt, h, turn, pending_result(h))


async def _settle_run(
    rt: "AgentRuntime", h: "Handle", turn: TurnState, run: Any, snapshot: Optional[list[dict[str, Any]]]
) -> None:
    tool_calls = list(getattr(run, "tool_calls", None) or [])
    calls, tokens = _account(rt, h, turn, len(tool_calls) or int(getattr(run, "tool_call_count", 0) or 0))
    if turn.settled:
        return
    status = getattr(run, "status", "done")
    if status == "pending" and run.pending is not None:
        # A continued turn stays continued; otherwise the handle's mode decides.
        mode = RESUME_CONTINUE if turn.continuation is not None else rt.resume_mode_of(h)
        if mode == RESUME_REPLAY:
            await rt.conversation_store.save(h.id, list(snapshot or []))  # rewind to the checkpoint
            if turn.settled:  # interrupted while rewinding
                return
        else:
            h.drained = []  # the turn's input is in the kept transcript
        request: Request = run.pending
        halted = tool_calls[-1] if tool_calls else None
        h.pending_req = request
        h.pending_input = turn.input
        h.pending_call = {"name": halted.get("name"), "args": halted.get("args")} if isinstance(halted, dict) else None
        if mode == RESUME_CONTINUE:  # the halted slot's text, which the continuation must match
            h.pending_call = {**(h.pending_call or {}), "placeholder": request.prompt}
        h.pending_origin = "tool" if request.id in turn.tool_minted else "hook"
        h.pending_mode = mode
        _suspend(rt, h, turn, result_of(h, request.prompt, "pending", pending=stamp_path(request, h)))
        return
    h.drained = []
    if status == "incomplete":
        limit = canonical_limit(getattr(run, "limit", None) or "maxTurns")
        text = f"hit {limit} without a final answer"
        bound: Any = h.eff["max_turns"]
        if limit != "maxTurns":
            bound = getattr(h.defn.completion, "max_attempts", "")
            if run.text:
                text = f"{text} ({run.text})"
        result = result_of(h, text, "incomplete", limit=limit)
        settle_turn(rt, h, turn, result, "idle", f"(INCOMPLETE at {limit} {bound})")
        rt._budget_stop(h, limit)
        return
    settle_turn(rt, h, turn, result_of(h, run.text, "done"), "idle", f"(done, turns={calls}, tokens={tokens})")


def _suspend(rt: "AgentRuntime", h: "Handle", turn: TurnState, result: "TaskResult") -> None:
    """Settle a turn as durably suspended on `h.pending_req` (set by the caller)."""
    assert h.pending_req is not None
    settle_turn(rt, h, turn, result, "suspended", f'DURABLE (pending "{h.pending_req.kind}", path preserved)')
