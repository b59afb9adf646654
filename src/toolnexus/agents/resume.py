"""Durable resume: route a host's `Answer` to the handle that holds its request, replay, cascade up.

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

Idempotency of repeated answers is the runtime's (`AgentRuntime.resume`); this module only routes
and replays.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any, Optional

from ..client import ResumeError
from ..types import Answer, Request
from .defs import RESUME_CONTINUE
from .escalation import ReplayBinding
from .handle import PENDING_FIELDS
from .turn import Continuation

if TYPE_CHECKING:  # pragma: no cover
    from .handle import Handle, TaskResult
    from .runtime import AgentRuntime

__all__ = ["durably_suspended", "route", "replay_and_cascade"]


def durably_suspended(rt: "AgentRuntime", h: Optional["Handle"] = None) -> list["Handle"]:
    """Suspended handles with no live turn (not an inline escalation), post-order, spawn order."""
    h = h if h is not None else rt.root
    found: list[Handle] = []
    for child in h.children:
        found.extend(durably_suspended(rt, child))
    if h is not rt.root and h.state == "suspended" and h.pending_req is not None and rt._live_turn(h) is None:
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


def _hold(h: "Handle") -> dict[str, Any]:
    return {name: getattr(h, name) for name in PENDING_FIELDS}


async def replay_and_cascade(rt: "AgentRuntime", leaf: "Handle", answer: Answer) -> "TaskResult":
    """Replay (or continue) `leaf` with `answer`, then each suspended ancestor; the outermost result."""
    ok = "true" if answer.ok else "false"
    rt._trace(leaf, f"resume with Answer(ok={ok}) at checkpoint (turns so far: {leaf.turns_total})")
    held = _hold(leaf)
    request, call, origin = leaf.pending_req, leaf.pending_call, leaf.pending_origin
    preserved = rt._clear_pending(leaf)
    rt._transition(leaf, "idle", "(Answer accepted, checkpoint restored)")
    if held["pending_mode"] == RESUME_CONTINUE and request is not None:
        result = await rt._run_admitted(leaf, "", replay=True, continuation=Continuation(request, answer, held))
    else:
        if origin == "tool" and call is not None:
            binding = ReplayBinding(answer, call=call)
        else:
            binding = ReplayBinding(answer, request=request)
        result = await rt._run_admitted(leaf, preserved or "continue", binding=binding, replay=True)
    node = leaf.parent
    while node is not None and node is not rt.root and node.state == "suspended" and rt._live_turn(node) is None:
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
    held = _hold(node)
    preserved = rt._clear_pending(node)
    rt._transition(node, "idle", "(Answer accepted, checkpoint restored)")
    rt._trace(node, "cascade resume (replay reattaches by task key)")
    request = held["pending_req"]
    if held["pending_mode"] == RESUME_CONTINUE and request is not None:
        placeholder = (held["pending_call"] or {}).get("placeholder", request.prompt)
        settled = Request(id=request.id, kind="task", prompt=placeholder)
        continuation = Continuation(settled, Answer(id=request.id, ok=True), held)
        return await rt._run_admitted(node, "", replay=True, continuation=continuation)
    return await rt._run_admitted(node, preserved or "continue", replay=True)


def _relay_up(rt: "AgentRuntime", node: "Handle", child_result: "TaskResult") -> "TaskResult":
    """The resumed child suspended again: its continued parent now waits on the new request."""
    assert child_result.pending is not None
    node.pending_req = child_result.pending
    rt._trace(node, f'cascade resume deferred (child pending again "{child_result.pending.kind}")')
    node.last_result = rt._pending_result(node)
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
    return rt._pending_result(top)
