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

Idempotency of repeated answers is the runtime's (`AgentRuntime.resume`); this module only routes
and replays.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Optional

from ..client import ResumeError
from ..types import Answer
from .escalation import ReplayBinding

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


async def replay_and_cascade(rt: "AgentRuntime", leaf: "Handle", answer: Answer) -> "TaskResult":
    """Replay `leaf` from its checkpoint with `answer`, then each suspended ancestor; the outermost result."""
    ok = "true" if answer.ok else "false"
    rt._trace(leaf, f"resume with Answer(ok={ok}) at checkpoint (turns so far: {leaf.turns_total})")
    request, call, origin = leaf.pending_req, leaf.pending_call, leaf.pending_origin
    preserved = rt._clear_pending(leaf)
    rt._transition(leaf, "idle", "(Answer accepted, checkpoint restored)")
    if origin == "tool" and call is not None:
        binding = ReplayBinding(answer, call=call)
    else:
        binding = ReplayBinding(answer, request=request)
    result = await rt._run_admitted(leaf, preserved or "continue", binding=binding, replay=True)
    node = leaf.parent
    while node is not None and node is not rt.root and node.state == "suspended" and rt._live_turn(node) is None:
        preserved = rt._clear_pending(node)
        rt._transition(node, "idle", "(Answer accepted, checkpoint restored)")
        rt._trace(node, "cascade resume (replay reattaches by task key)")
        result = await rt._run_admitted(node, preserved or "continue", replay=True)
        node = node.parent
    return result
