"""Live agent state as plain data: `Handle`, its views, inbox items and the results verbs return.

A `Handle` is one spawned agent: ids, the state machine's current state, counters, pools, the
inbox, the preserved input of a suspended turn, and the settled `last_result`. It holds no
behaviour beyond bookkeeping; the runtime performs every transition. `to_record()` /
`from_record()` give a JSON-able snapshot of exactly the durable part (no futures, tasks or
callables), so a checkpoint store can persist a tree and rebuild it later.

A durably parked handle holds one `Suspension` record (`_suspension.py`); `pending_req`,
`pending_input` and `pending_mode` read it. A handle whose turn is live carries `turn_info` (the
turn's exact input, the transcript length it started from, whether its run has started, and the
answer a resumed turn applies), so a store can bring an interrupted turn back after a crash.

The module-level helpers (`lineage`, `subtree`, `find_child`, `live_turn`,
`is_parked`, `result_of`, `pending_result`, `stamp_path`, `flush_waiters`, `restore_drained`) walk
the tree or read and tidy one handle's own data; they are shared by the runtime and its sibling
modules and never change `state` (transitions are traced, so only the runtime makes them).

This module is a leaf of `agents/`: it imports nothing of the runtime. What it needs to know of
a live turn (`LiveTurn`) and of the runtime a result carries (`ResultRuntime`) are protocols
defined here, which the turn state and `AgentRuntime` satisfy. A handle's runtime-private live
objects (the running turn, its waiters, an async `on_spawn` still running) change only through
its methods (`attach_turn`, `detach_turn`, `add_waiter`, ...), never from another module.

`TaskResult.status` takes its values from `vocab.TASK_STATUSES`.
"""

from __future__ import annotations

import asyncio
import dataclasses
import math
from dataclasses import asdict, dataclass, field, fields
from typing import TYPE_CHECKING, Any, Iterator, Optional, Protocol

from ..approvals import ApprovalMemory
from ..types import Request
from ._budget import Budget, Pool, effective_limits
from ._suspension import HaltedCall, Suspension
from ._vocab import TASK_STATUS_DONE, TASK_STATUS_PENDING, HandleState

if TYPE_CHECKING:  # pragma: no cover
    from ._defs import AgentDef

HANDLE_STATES = tuple(HandleState)
_BUDGET_FIELDS = fields(Budget)  # every one a scalar (or None)


class LiveTurn(Protocol):
    """What the tree and the verbs need of a handle's running turn (the turn state satisfies it)."""

    @property
    def settled(self) -> bool: ...

    @property
    def finished(self) -> asyncio.Event: ...

    def cancel(self, reason: str) -> None: ...


class ResultRuntime(Protocol):
    """The runtime a parked result carries (`TaskResult.runtime`, an `AgentRuntime`), as far as a
    host continues a parked run through it: answer, wait, inspect, snapshot, free or close."""

    @property
    def root(self) -> "Handle": ...

    @property
    def entry(self) -> Optional["Handle"]: ...

    @property
    def run_id(self) -> Optional[str]: ...

    async def resume(self, answer: Any) -> "TaskResult": ...

    async def wait(self, h: "Handle", timeout_ms: Optional[float] = None) -> "TaskResult": ...

    async def flush(self) -> None: ...

    async def snapshot(self, *, conversations: bool = True) -> dict[str, Any]: ...

    async def aclose(self) -> None: ...

    async def close(self, h: "Handle", *, force: bool = False, reason: Optional[str] = None) -> None: ...


@dataclass
class InboxItem:
    """One unsolicited input. `from_` is a handle path, `"external"` or `"clock"`.

    `ticks` is ours: timer ticks coalesce at post time into one item whose `ticks` grows, so a
    long turn cannot fill the inbox with ticks.
    """

    from_: str
    channel: str
    text: str
    ticks: int = 1


@dataclass
class TaskResult:
    """What `wait` / `run_turn` / `resume` / `Agent.run` return. `status` is in `TASK_STATUSES`."""

    text: str
    is_error: bool
    status: str
    pending: Optional[Request] = None
    turns: int = 0
    total_tokens: int = 0
    own_tokens: int = 0
    limit: Optional[str] = None
    runtime: Optional[ResultRuntime] = field(default=None, repr=False, compare=False)
    run_id: Optional[str] = field(default=None, compare=False)
    output: Any = field(default=None, compare=False)  # an output_type turn's value (live only; `text` is its JSON)
    # how the turn's last model reply ended (neutral vocabulary) and the provider's own word for it
    finish_reason: Optional[str] = field(default=None, compare=False)
    provider_finish_reason: Optional[str] = field(default=None, compare=False)

    def to_record(self) -> dict[str, Any]:
        """JSON-able form, without the live runtime (the finish keys only when known)."""
        record: dict[str, Any] = {
            "text": self.text,
            "is_error": self.is_error,
            "status": self.status,
            "pending": asdict(self.pending) if self.pending is not None else None,
            "turns": self.turns,
            "total_tokens": self.total_tokens,
            "own_tokens": self.own_tokens,
            "limit": self.limit,
        }
        if self.finish_reason is not None:
            record["finish_reason"] = self.finish_reason
            record["provider_finish_reason"] = self.provider_finish_reason
        return record

    @classmethod
    def from_record(cls, rec: dict[str, Any]) -> "TaskResult":
        pend = rec.get("pending")
        return cls(
            text=rec["text"],
            is_error=rec["is_error"],
            status=rec["status"],
            pending=Request.from_dict(pend) if pend else None,
            turns=rec.get("turns", 0),
            total_tokens=rec.get("total_tokens", 0),
            own_tokens=rec.get("own_tokens", 0),
            limit=rec.get("limit"),
            finish_reason=rec.get("finish_reason"),
            provider_finish_reason=rec.get("provider_finish_reason"),
        )


@dataclass
class SpawnError:
    """`spawn` refused; `error` says why (pinned texts)."""

    error: str


@dataclass
class PostResult:
    """Outcome of `post` / `wake`; built positionally: `PostResult(False, "inbox full: <id>")`."""

    ok: bool
    error: Optional[str] = None


@dataclass
class HandleView:
    """A read-only snapshot for `list` / `inspect`: `tokens` is the cumulative subtree usage."""

    id: str
    state: str
    tokens: int
    inbox: int


def _num_out(x: float) -> Optional[float]:
    """JSON has no infinity: an unlimited pool is written as `None`."""
    return None if isinstance(x, float) and math.isinf(x) else x


def _num_in(x: Optional[float]) -> float:
    return math.inf if x is None else x


class Handle:
    """One spawned agent. The runtime owns every transition; this class only holds state.

    Attributes without a leading `_` are public; the ones starting with `_` are runtime-private
    live objects (waiters, the running turn) that are never part of a record.
    """

    def __init__(self, id: str, defn: "AgentDef", parent: Optional["Handle"], *, spawned_at: float = 0.0) -> None:
        self.id = id
        self.defn = defn
        self.parent = parent
        self.depth: int = 0 if parent is None else parent.depth + 1
        self.state = HandleState.IDLE
        self.inbox: list[InboxItem] = []
        self.children: list[Handle] = []
        self.usage_total = 0
        self.own_total = 0
        self.turns_total = 0
        self.suspension: Optional[Suspension] = None
        self.turn_info: Optional[dict[str, Any]] = None
        self.task_key: Optional[str] = None
        self.last_result: Optional[TaskResult] = None
        self.running_children = 0
        self.seq = 0
        self.spawned_at = spawned_at
        self.wake_queue: list[str] = []
        self.drained: list[InboxItem] = []
        self.budget = Budget()
        self.pool = Pool()
        self.eff: dict[str, Any] = effective_limits(self.budget)
        # Ours, durable: the task keys of the current wake's children (reattached only when the
        # turn is resumed or recovered), and the arrival order of this handle's children's queued wakes.
        self.task_children: dict[str, list[str]] = {}
        self.wake_fifo: list[str] = []
        # The run's sticky approval decisions (`always`): held by the root only, stored with the run.
        self.approvals: Optional[ApprovalMemory] = None
        # Runtime-private live objects.
        self._waiters: list[asyncio.Future[TaskResult]] = []
        self._turn: Optional[LiveTurn] = None
        self._on_spawn_task: Optional[asyncio.Future[Any]] = None

    @property
    def conv_id(self) -> str:
        """The conversation id in the store: the handle id (a pinned name of the handle's surface)."""
        return self.id

    # -- the runtime-private live objects, changed only through these ------------------------------

    @property
    def turn(self) -> Optional[LiveTurn]:
        """The turn attached to this handle (live, or settled and still unwinding), if any."""
        return self._turn

    def attach_turn(self, turn: LiveTurn) -> None:
        """A turn was admitted for this handle."""
        self._turn = turn

    def detach_turn(self, turn: LiveTurn) -> None:
        """`turn`'s body finished: forget it, unless a newer turn was attached meanwhile."""
        if self._turn is turn:
            self._turn = None

    def hold_first_turn(self, task: asyncio.Future[Any]) -> None:
        """An async `on_spawn` is running: the first turn awaits `task` before any LLM call."""
        self._on_spawn_task = task

    def take_first_turn_hold(self) -> Optional[asyncio.Future[Any]]:
        """The pending `on_spawn` task (once: it is cleared), or None."""
        task, self._on_spawn_task = self._on_spawn_task, None
        return task

    def add_waiter(self, fut: "asyncio.Future[TaskResult]") -> None:
        """`fut` receives this handle's next result (`flush_waiters`)."""
        self._waiters.append(fut)

    def drop_waiter(self, fut: "asyncio.Future[TaskResult]") -> None:
        """`fut` no longer waits (its wait timed out or was cancelled)."""
        if fut in self._waiters:
            self._waiters.remove(fut)

    @property
    def pending_req(self) -> Optional[Request]:
        """The request this handle is durably parked on (None when not parked)."""
        return self.suspension.request if self.suspension is not None else None

    @property
    def pending_input(self) -> Optional[str]:
        """The exact input of the parked turn."""
        return self.suspension.input if self.suspension is not None else None

    @property
    def pending_mode(self) -> Optional[str]:
        """How the parked turn resumes: `"replay"` or `"continue"`."""
        return self.suspension.mode if self.suspension is not None else None

    def __repr__(self) -> str:
        return f"Handle({self.id!r}, state={self.state!r})"

    def to_record(self) -> dict[str, Any]:
        """A JSON-able snapshot of everything durable about this handle (children by id)."""
        return {
            "id": self.id,
            "def_name": self.defn.name,
            "parent_id": self.parent.id if self.parent is not None else None,
            "depth": self.depth,
            "state": self.state,
            "seq": self.seq,
            "spawned_at": self.spawned_at,
            "task_key": self.task_key,
            "budget": {f.name: getattr(self.budget, f.name) for f in _BUDGET_FIELDS},  # scalars: no deep copy
            "pool": {f.name: _num_out(getattr(self.pool, f.name)) for f in fields(Pool)},
            "eff": dict(self.eff),
            "usage_total": self.usage_total,
            "own_total": self.own_total,
            "turns_total": self.turns_total,
            "running_children": self.running_children,
            "suspension": self.suspension.to_record() if self.suspension is not None else None,
            "turn": dict(self.turn_info) if self.turn_info is not None else None,
            "inbox": [asdict(i) for i in self.inbox],
            "drained": [asdict(i) for i in self.drained],
            "wake_queue": list(self.wake_queue),
            "wake_fifo": list(self.wake_fifo),
            "task_children": {k: list(v) for k, v in self.task_children.items()},
            "children": [c.id for c in self.children],
            "last_result": self.last_result.to_record() if self.last_result is not None else None,
            "approvals": self.approvals.to_record() if self.approvals is not None else None,
        }

    @classmethod
    def from_record(cls, rec: dict[str, Any], defn: "AgentDef", parent: Optional["Handle"]) -> "Handle":
        """Rebuild a handle from `to_record()`; the caller re-links `children` in id order."""
        h = cls(rec["id"], defn, parent, spawned_at=rec.get("spawned_at", 0.0))
        h.state = rec["state"]
        h.seq = rec.get("seq", 0)
        h.task_key = rec.get("task_key")
        h.budget = Budget(**rec.get("budget", {}))
        h.pool = Pool(**{k: _num_in(v) for k, v in rec.get("pool", {}).items()})
        h.eff = dict(rec.get("eff") or effective_limits(h.budget))
        h.usage_total = rec.get("usage_total", 0)
        h.own_total = rec.get("own_total", 0)
        h.turns_total = rec.get("turns_total", 0)
        h.running_children = rec.get("running_children", 0)
        h.suspension = Suspension.from_record(rec.get("suspension"))
        if h.suspension is None and rec.get("pending_req"):  # the first snapshot format
            call = rec.get("pending_call") or {}
            h.suspension = Suspension(Request.from_dict(rec["pending_req"]), rec.get("pending_input") or "",
                                      rec.get("pending_mode") or "replay", rec.get("pending_origin") or "tool",
                                      HaltedCall(None, call.get("name"), call.get("args"), call.get("placeholder")))
        turn = rec.get("turn")
        h.turn_info = dict(turn) if isinstance(turn, dict) else None
        h.inbox = [InboxItem(**i) for i in rec.get("inbox", [])]
        h.drained = [InboxItem(**i) for i in rec.get("drained", [])]
        h.wake_queue = list(rec.get("wake_queue", []))
        h.wake_fifo = list(rec.get("wake_fifo", []))
        h.task_children = {k: list(v) for k, v in rec.get("task_children", {}).items()}
        last = rec.get("last_result")
        h.last_result = TaskResult.from_record(last) if last else None
        if isinstance(rec.get("approvals"), dict):
            h.approvals = ApprovalMemory.from_record(rec["approvals"])
        return h


# --------------------------------------------------------------------------- one handle's bookkeeping


def lineage(h: Handle) -> Iterator[Handle]:
    """`h`, its parent, …, root: the chain the budget walk, roll-up and escalation follow."""
    node: Optional[Handle] = h
    while node is not None:
        yield node
        node = node.parent


def subtree(h: Handle) -> Iterator[Handle]:
    """`h` and its descendants, pre-order, children in spawn order (parents before children)."""
    yield h
    for child in h.children:
        yield from subtree(child)


def find_child(h: Handle, child_id: str) -> Optional[Handle]:
    """The child of `h` with id `child_id`, closed or not."""
    return next((c for c in h.children if c.id == child_id), None)


def live_turn(h: Handle) -> Optional[LiveTurn]:
    """The turn `h` is running (or escalating inside), if any; a settled turn that is still
    unwinding does not count."""
    turn = h.turn
    return turn if turn is not None and not turn.settled else None


def is_parked(h: Handle) -> bool:
    """Parked durably: `suspended`, holding a `Suspension`, no live turn. (A handle `suspended` with a
    live turn is *waiting inline* for a `wait_for` up its chain, and parks nothing.)"""
    return h.state == HandleState.SUSPENDED and h.pending_req is not None and live_turn(h) is None


def result_of(
    h: Handle, text: str, status: str, *, pending: Optional[Request] = None, limit: Optional[str] = None
) -> TaskResult:
    """A `TaskResult` carrying `h`'s lifetime counters; `is_error` follows from `status`."""
    return TaskResult(
        text=text,
        is_error=status not in (TASK_STATUS_DONE, TASK_STATUS_PENDING),
        status=status,
        pending=pending,
        turns=h.turns_total,
        total_tokens=h.usage_total,
        own_tokens=h.own_total,
        limit=limit,
    )


def stamp_path(req: Request, h: Handle) -> Request:
    """A copy of `req` whose `data["path"]` names `h` (e.g. `["root", "approverParent.1"]`)."""
    return dataclasses.replace(req, data={**(req.data or {}), "path": h.id.split("/")})


def pending_result(h: Handle) -> TaskResult:
    """The `pending` result of a suspended `h`: its request's prompt, with the path stamped."""
    assert h.pending_req is not None
    return result_of(h, h.pending_req.prompt, TASK_STATUS_PENDING, pending=stamp_path(h.pending_req, h))


def flush_waiters(h: Handle, result: TaskResult) -> None:
    """Hand `result` to everyone awaiting `h`'s next result."""
    waiters, h._waiters = h._waiters, []
    for fut in waiters:
        if not fut.done():
            fut.set_result(result)


def restore_drained(h: Handle) -> None:
    """Put a drained (not consumed) inbox block back at the front of the inbox."""
    if h.drained:
        h.inbox = h.drained + h.inbox
        h.drained = []


def take_suspension(h: Handle) -> Optional[Suspension]:
    """Clear `h`'s parked record and return it (resume or interrupt)."""
    held, h.suspension = h.suspension, None
    return held
