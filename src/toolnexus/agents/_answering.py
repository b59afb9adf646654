"""Answering a parked run (`AgentRuntime.resume`): route a host's `Answer` to the handle that
holds its request, resume it, cascade up.

When no `wait_for` is reachable, a suspension parks the whole chain: the leaf and every relaying
ancestor are `suspended`, each holding (a copy of) the same `Request` and its preserved input.
`route` picks the deepest durably suspended handle whose pending request id is the answer's id
(the id is checked, and independent pending subtrees are answered by id). An id
that matches nothing is a `ResumeError` that lists what is pending.

`replay_and_cascade` then replays the leaf's turn from its checkpoint with the Answer bound to
the halted call (`escalation.ReplayBinding`), and replays each suspended ancestor in
turn; their `task` calls reattach to the same children by task key, so no child is duplicated.
Counters continue from the checkpoint and never reset.

Continue mode (ours; `resume_mode="continue"` on a def or the runtime): a handle that
suspended in this mode kept its halted transcript, so instead of replaying it runs a continuation
(`turn.Continuation`): the client's durable resume fills the halted slot from the Answer — the
halted tool runs once more with `ctx.answer`, earlier results stay byte for byte, the model is not
re-asked for the call. The cascade works the same way one level up: a continued ancestor's halted
call is its `task` call, which re-executes and reattaches to the (now settled) child by task key,
so the ancestor is continued with a synthetic `ok` Answer that only says "the child settled".
Two guards keep that honest: an ancestor is continued only if it holds the answered request id (an
ancestor parked on a request of its own stays parked, and that request is what `resume` returns),
and if the resumed child suspended again, the new request is relayed up to the continued
ancestors (they stay suspended) instead of answering their `task` call with "unresolved".
Replay-mode handles keep the baseline behaviour; the modes may be mixed within one tree. A model
script written for replay (tool call, the same call again, final text — the seed examples' shape)
does not fit continue mode, where the model is asked only for what comes after the halted call.

`apply_answer` is the entry point. Before anything runs it checks the answer against its request:
an answer that violates the request's `data["schema"]` is a `ResumeError` (nothing changes, the
host may answer again), and an `ok` answer to a request whose `expiresAt` has passed is applied as
declined with reason `expired` (the tool does not run). Then exactly once:

- with a durable store, the answer is claimed in the store's ledger (compare-and-set) and the run's
  lease taken; a second answer to the same request — here or in any other process — gets
  `AnswerAlreadyApplied` naming the run, and the request is marked applied in the same commit that
  un-parks the handle;
- without one, the runtime's own ledger (`core.resumes`) makes a second resume with an already
  applied (or being applied) id return the first one's result and change nothing.

A failed resume gives its claim back and may be retried.
"""

from __future__ import annotations

import asyncio
from dataclasses import asdict
from datetime import datetime
from typing import TYPE_CHECKING, Optional

from ..client import ResumeError
from ..client._resume import RESUME_PREFIX
from ..client._tool_calls import (
    TIMER_KIND as TIMER_KIND,
    answer_refusal,
    expiry_answer as expiry_answer,
    late_answer,
    utc_now,
)
from ..errors import ToolnexusRuntimeError, ToolnexusTypeError
from ..types import Answer, Request
from ._defs import RESUME_CONTINUE
from ._handle import is_parked, live_turn, pending_result, take_suspension
from ._suspension import ORIGIN_TOOL
from ._turn import run_admitted
from ._turnstate import Continuation, ReplayBinding
from ._vocab import HandleState, TaskStatus
from .clock import wall_now

if TYPE_CHECKING:  # pragma: no cover
    from ._core import RuntimeCore
    from ._handle import Handle, TaskResult


def checked_answer(request: Request, answer: Answer, now: Optional[datetime] = None) -> Answer:
    """The answer to apply: a schema violation is a `ResumeError`; an `ok` answer to an expired
    request (by `now`, default the machine's wall time) gets the expiry action instead
    (`client.tool_calls.expiry_answer`: a decline with reason `expired`; a timer is simply answered)."""
    if answer.id != request.id:
        raise ResumeError(RESUME_PREFIX + f"answer id {answer.id!r} does not match the pending request {request.id!r}")
    answer = late_answer(request, answer, now if now is not None else utc_now())
    refused = answer_refusal(request, answer)
    if refused is not None:
        raise ResumeError(RESUME_PREFIX + refused)
    return answer


async def apply_answer(core: "RuntimeCore", answer: Answer, *, claimed: bool = False) -> "TaskResult":
    """`AgentRuntime.resume`: route `answer`, resume and cascade, at most once per answer id.

    `claimed`: the caller already claimed the answer in the store for this runtime."""
    if isinstance(answer, dict):
        answer = Answer.from_dict(answer)
    if not isinstance(answer, Answer):
        raise ToolnexusTypeError(f"toolnexus.agents: resume() takes an Answer, got {type(answer).__name__}")
    durable = core.durable
    earlier = core.resumes.get(answer.id)
    if earlier is not None and durable is None:  # already applied (or being applied): change nothing
        return await asyncio.shield(earlier)
    if durable is not None and not _held(core, answer.id):
        await durable.refuse_unheld(answer.id)  # the store's ledger says why (answered, withdrawn)
    leaf = route(core, answer)
    assert leaf.suspension is not None
    answer = checked_answer(leaf.suspension.request, answer, wall_now(core.clock))
    core.approval_memory().remember(leaf.suspension.request, answer, wall_now(core.clock))  # `always`: sticky
    if durable is not None:
        await durable.claim(answer, ours_already=claimed)
    done: asyncio.Future[TaskResult] = asyncio.get_running_loop().create_future()
    core.resumes[answer.id] = done
    try:
        result = await replay_and_cascade(core, leaf, answer)
    except BaseException as exc:
        del core.resumes[answer.id]
        if durable is not None:
            await durable.unclaim(answer.id)  # only a claim not yet applied is given back
        if isinstance(exc, asyncio.CancelledError):
            done.cancel()
        else:
            done.set_exception(exc)
            done.exception()  # retrieved: a failed resume may be retried
        raise
    done.set_result(result)
    core.maybe_park()
    return result


def _held(core: "RuntimeCore", request_id: str) -> bool:
    return any(h.pending_req is not None and h.pending_req.id == request_id for h in parked_handles(core))


def parked_handles(core: "RuntimeCore", h: Optional["Handle"] = None) -> list["Handle"]:
    """Suspended handles with no live turn (not an inline escalation), post-order, spawn order."""
    h = h if h is not None else core.root
    found: list[Handle] = []
    for child in h.children:
        found.extend(parked_handles(core, child))
    if h is not core.root and is_parked(h):
        found.append(h)
    return found


def route(core: "RuntimeCore", answer: Answer) -> "Handle":
    """The deepest durably suspended handle holding `answer.id`; loud when there is none."""
    suspended = parked_handles(core)
    if not suspended:
        raise ToolnexusRuntimeError("no suspended handle")
    holders = [h for h in suspended if h.pending_req is not None and h.pending_req.id == answer.id]
    if holders:
        return max(holders, key=lambda h: h.depth)
    leaf = suspended[0]
    tops = [
        h
        for h in suspended
        if h.parent is core.root or (h.parent is not None and h.parent.state != HandleState.SUSPENDED)
    ]
    listing = ", ".join(f"{h.pending_req.id!r} at {h.id}" for h in tops if h.pending_req is not None)
    assert leaf.pending_req is not None
    raise ResumeError(
        RESUME_PREFIX + f"answer id {answer.id!r} does not match the pending request "
        f"{leaf.pending_req.id!r} of handle {leaf.id!r} (pending: {listing})"
    )


async def replay_and_cascade(core: "RuntimeCore", leaf: "Handle", answer: Answer) -> "TaskResult":
    """Replay (or continue) `leaf` with `answer`, then each suspended ancestor; the outermost result."""
    ok = "true" if answer.ok else "false"
    core.trace_line(leaf, f"resume with Answer(ok={ok}) at checkpoint (turns so far: {leaf.turns_total})")
    held = take_suspension(leaf)
    assert held is not None
    if core.durable is not None:
        core.durable.applied(held.request.id)
    core.transition(leaf, HandleState.IDLE, "(Answer accepted, checkpoint restored)")
    if held.mode == RESUME_CONTINUE:
        result = await run_admitted(core, leaf, "", continuation=Continuation(held.request, answer, held))
    else:
        if held.origin == ORIGIN_TOOL and held.call is not None:
            binding = ReplayBinding(answer, call={"name": held.call.name, "args": held.call.args}, held=held.request)
        else:
            binding = ReplayBinding(answer, request=held.request)
        result = await run_admitted(core, leaf, held.input or "continue", binding=binding, replay=True)
    node = leaf.parent
    while (
        node is not None and node is not core.root and node.state == HandleState.SUSPENDED and live_turn(node) is None
    ):
        if node.pending_mode == RESUME_CONTINUE:
            if node.pending_req is None or node.pending_req.id != answer.id:
                return _parked(core, node)
            if result.status == TaskStatus.PENDING and result.pending is not None:
                result = _relay_up(core, node, result)
                node = node.parent
                continue
        result = await cascade_one(core, node)
        node = node.parent
    return result


async def cascade_one(core: "RuntimeCore", node: "Handle") -> "TaskResult":
    """Resume one suspended ancestor whose child has settled: replay it, or continue it."""
    held = take_suspension(node)
    assert held is not None
    core.transition(node, HandleState.IDLE, "(Answer accepted, checkpoint restored)")
    core.trace_line(node, "cascade resume (replay reattaches by task key)")
    request = held.request
    if held.mode == RESUME_CONTINUE:
        placeholder = held.call.placeholder if held.call is not None and held.call.placeholder else request.prompt
        settled = Request(id=request.id, kind="task", prompt=placeholder)
        continuation = Continuation(settled, Answer(id=request.id, ok=True), held)
        return await run_admitted(core, node, "", continuation=continuation)
    return await run_admitted(core, node, held.input or "continue", replay=True)


def _relay_up(core: "RuntimeCore", node: "Handle", child_result: "TaskResult") -> "TaskResult":
    """The resumed child suspended again: its continued parent now waits on the new request."""
    assert child_result.pending is not None and node.suspension is not None
    node.suspension.request = child_result.pending
    core.trace_line(node, f'cascade resume deferred (child pending again "{child_result.pending.kind}")')
    core.changed(node)
    node.last_result = pending_result(node)
    if core.durable is not None:
        request = node.last_result.pending
        assert request is not None
        core.durable.open_request(node, asdict(request), list((request.data or {}).get("path") or []))
    return node.last_result


def _parked(core: "RuntimeCore", node: "Handle") -> "TaskResult":
    """`node` waits on a request of its own: the pending result of the top of its suspended chain."""
    top = node
    while (
        top.parent is not None
        and top.parent is not core.root
        and top.parent.state == HandleState.SUSPENDED
        and top.parent.pending_req is not None
        and top.pending_req is not None
        and top.parent.pending_req.id == top.pending_req.id
    ):
        top = top.parent
    return pending_result(top)
