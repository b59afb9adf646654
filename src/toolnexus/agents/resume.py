"""Durable resume (`AgentRuntime.resume`): route a host's `Answer` to the handle that holds its
request, replay it, cascade up.

When no `wait_for` is reachable, a suspension parks the whole chain: the leaf and every relaying
ancestor are `suspended`, each holding (a copy of) the same `Request` and its preserved input.
`route` picks the deepest durably suspended handle whose pending request id is the answer's id
(beyond #4/#5: the id is checked, and independent pending subtrees are answered by id). An id
that matches nothing is a `ResumeError` that lists what is pending.

`replay_and_cascade` then replays the leaf's turn from its checkpoint with the Answer bound to
the halted call (beyond #6, `escalation.ReplayBinding`), and replays each suspended ancestor in
turn; their `task` calls reattach to the same children by task key, so no child is duplicated.
Counters continue from the checkpoint and never reset.

Continue mode (ours, beyond #7; `resume_mode="continue"` on a def or the runtime): a handle that
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

`apply_answer` is the entry point and keeps resume idempotent: a second resume with an already
applied (or being applied) answer id returns the first one's result and changes nothing; a failed
resume may be retried. The applied answers live on the runtime (`rt._resumes`) so a snapshot can
carry them.
"""

from __future__ import annotations

import asyncio
from typing import TYPE_CHECKING, Optional

from ..client import ResumeError
from ..types import Answer, Request
from .defs import RESUME_CONTINUE
from .escalation import ReplayBinding, pending_result
from .handle import is_durably_suspended, live_turn, take_pending
from .turn import Continuation, run_admitted

if TYPE_CHECKING:  # pragma: no cover
    from .handle import Handle, TaskResult
    from .runtime import AgentRuntime

__all__ = ["apply_answer", "durably_suspended", "route", "replay_and_cascade"]


async def apply_answer(rt: "AgentRuntime", answer: Answer) -> "TaskResult":
    """`AgentRuntime.resume`: route `answer`, replay and cascade, at most once per answer id."""
    if isinstance(answer, dict):
        answer = Answer.from_dict(answer)
    if not isinstance(answer, Answer):
        raise TypeError(f"toolnexus.agents: resume() takes an Answer, got {type(answer).__name__}")
    earlier = rt._resumes.get(answer.id)
    if earlier is not None:  # already applied (or being applied): change nothing
        return await asyncio.shield(earlier)
    leaf = route(rt, answer)
    done: asyncio.Future[TaskResult] = asyncio.get_running_loop().create_future()
    rt._resumes[answer.id] = done
    try:
        result = await replay_and_cascade(rt, leaf, answer)
    except BaseException as exc:
        del rt._resumes[answer.id]
        if isinstance(exc, asyncio.CancelledError):
            done.cancel()
        else:
            done.set_exception(exc)
            done.exception()  # retrieved: a failed resume may be retried
        raise
    done.set_result(result)
    return result


def durably_suspended(rt: "AgentRuntime", h: Optional["Handle"] = None) -> list["Handle"]:
    """Suspended handles with no live turn (not an inline escalation), post-order, spawn order."""
    h = h if h is not None else rt.root
    found: list[Handle] = []
    for child in h.children:
        found.extend(durably_suspended(rt, child))
    if h is not rt.root and is_durably_suspended(h):
        found.append(h)
    return found


def route(rt: "AgentRuntime", answer: Answer) -> "Handle":
    """The deepest durably suspended handle holding `answer.id`; loud when there is none."""
    suspended = durably_suspended(rt)
    if not suspended:
        raise RuntimeError("no suspended handle")
    holders = [h for h in suspended if h.pending_req is not None and h.pending_req.id == answer.id]
    if holders:
        return max(holders, key=lambda h: h.depth)
    leaf = suspended[0]
    tops = [h for h in suspended if h.parent is rt.root or (h.parent is not None and h.parent.state != "suspended")]
    listing = ", ".join(f"{h.pending_req.id!r} at {h.id}" for h in tops if h.pending_req is not None)
    assert leaf.pending_req is not None
    raise ResumeError(
        f"toolnexus: cannot resume — answer id {answer.id!r} does not match the pending request "
        f"{leaf.pending_req.id!r} of handle {leaf.id!r} (pending: {listing})"
    )


async def replay_and_cascade(rt: "AgentRuntime", leaf: "Handle", answer: Answer) -> "TaskResult":
    """Replay (or continue) `leaf` with `answer`, then each suspended ancestor; the outermost result."""
    ok = "true" if answer.ok else "false"
    rt._trace(leaf, f"resume with Answer(ok={ok}) at checkpoint (turns so far: {leaf.turns_total})")
    held = take_pending(leaf)
    request, call = held["pending_req"], held["pending_call"]
    rt._transition(leaf, "idle", "(Answer accepted, checkpoint restored)")
    if held["pending_mode"] == RESUME_CONTINUE and request is not None:
        result = await run_admitted(rt, leaf, "", replay=True, continuation=Continuation(request, answer, held))
    else:
        if held["pending_origin"] == "tool" and call is not None:
            binding = ReplayBinding(answer, call=call)
        else:
            binding = ReplayBinding(answer, request=request)
        result = await run_admitted(rt, leaf, held["pending_input"] or "continue", binding=binding, replay=True)
    node = leaf.parent
    while node is not None and node is not rt.root and node.state == "suspended" and live_turn(node) is None:
        if node.pending_mode == RESUME_CONTINUE:
            if node.pending_req is None or node.pending_req.id != answer.id:
                return _parked(rt, node)
            if result.status == "pending" and result.pending is not None:
                result = _relay_up(rt, node, result)
                node = node.parent
                continue
        result = await _cascade_one(rt, node)
        node = node.parent
    return result


async def _cascade_one(rt: "AgentRuntime", node: "Handle") -> "TaskResult":
    """Resume one suspended ancestor whose child has settled: replay it, or continue it."""
    held = take_pending(node)
    rt._transition(node, "idle", "(Answer accepted, checkpoint restored)")
    rt._trace(node, "cascade resume (replay reattaches by task key)")
    request = held["pending_req"]
    if held["pending_mode"] == RESUME_CONTINUE and request is not None:
        placeholder = (held["pending_call"] or {}).get("placeholder", request.prompt)
        settled = Request(id=request.id, kind="task", prompt=placeholder)
        continuation = Continuation(settled, Answer(id=request.id, ok=True), held)
        return await run_admitted(rt, node, "", replay=True, continuation=continuation)
    return await run_admitted(rt, node, held["pending_input"] or "continue", replay=True)


def _relay_up(rt: "AgentRuntime", node: "Handle", child_result: "TaskResult") -> "TaskResult":
    """The resumed child suspended again: its continued parent now waits on the new request."""
    assert child_result.pending is not None
    node.pending_req = child_result.pending
    rt._trace(node, f'cascade resume deferred (child pending again "{child_result.pending.kind}")')
    node.last_result = pending_result(node)
    return node.last_result


def _parked(rt: "AgentRuntime", node: "Handle") -> "TaskResult":
    """`node` waits on a request of its own: the pending result of the top of its suspended chain."""
    top = node
    while (
        top.parent is not None
        and top.parent is not rt.root
        and top.parent.state == "suspended"
        and top.parent.pending_req is not None
        and top.pending_req is not None
        and top.parent.pending_req.id == top.pending_req.id
    ):
        top = top.parent
    return pending_result(top)
