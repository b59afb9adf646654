"""`AgentRuntime`: the handle tree, its state machine, the six verbs, the wake queue and `resume`.

Each agent turn is exactly one `client.ask` (through the completion gate `run_gated`) against
the runtime's single conversation store, with the conversation id equal to the handle id. The
runtime adds what a single client cannot: a tree of handles with deterministic parent-scoped
ids, an inbox per handle, three loud backpressure gates, hierarchical budgets with a live
ancestor walk, the `task` tool, nearest-interpreter escalation and durable resume.

Every state change goes through `_transition`, which writes the pinned trace line; runtime and
handle state are plain data (`Handle.to_record`) and I/O stays at the edges (store, transport).
This module owns the tree and the verbs; one turn's life (admission, body, settle) is in
`turn.py`, one handle's bookkeeping in `handle.py`, the live budget walk in `budget.py`, durable
resume in `resume.py`, the `task` tool in `task_tool.py`, escalation and answer binding in
`escalation.py`, snapshot/restore in `snapshot.py`.

Choices where the spec is silent or where we go beyond its baseline (each is tested):

- `interrupt()` settles a running handle synchronously: when it returns, the state is `idle`,
  the drained inbox items are back at the front of the inbox and waiters have `interrupted`
  (beyond #21). The aborted body later only accounts for spend; it never touches the new state.
- Spend is metered at the transport seam, so retried completion attempts, interrupted and
  failed Runs are all counted, and a response that lands after its turn was aborted is rolled up
  when it arrives (beyond #9, #10). `turns` counts LLM responses.
- `resume(answer)` routes by request id to the deepest suspended handle holding it (beyond #4,
  #5); an id that matches nothing raises `ResumeError` naming what is pending; a second resume
  with an already applied id returns the first resume's result and changes nothing. The answer
  binds to the halted call only (beyond #6, see `escalation.py`).
- Queued wakes are dequeued in arrival order across siblings (beyond #16); the depth limit is the
  minimum over the ancestor chain (beyond #15); an async `on_spawn` finishes before the child's
  first LLM call (beyond #14); timer ticks coalesce at post time (beyond #13).
- Unknown `llm` keys raise `ValueError` instead of being dropped (beyond #18).
- Interrupting a durably suspended handle also cancels the pending requests of its suspended
  descendants, so no orphaned request stays resumable.
- With neither `transport` nor `in_process`, the wire is the client's pooled `HttpxTransport`
  (one keep-alive pool shared by every handle, closed by `close(root)`), not a urllib call per
  request.
- An `on_budget(handle, limit)` callback (def over runtime) is notified whenever a limit stops
  work; it cannot change the outcome.
- `resume_mode="continue"` (opt-in, def over runtime; default `"replay"`): a durable suspension
  keeps its halted transcript and `resume` continues it, so a leaf's own side-effecting tools
  are not run again and the model is not re-asked for the halted call (beyond #7, `resume.py`).
- Every per-turn client gets the runtime's clock as its `timer`, so §8 retry backoff and
  deadlines run on the injected `Clock` (beyond #17).
- `trace` is a bounded ring (`trace_limit`, default 10 000 lines, `None` unbounded) and every
  transition is also a structured event in `events` (same bound) and, if set, passed to
  `on_transition(event)` (def over runtime, failures reported, never raised) (beyond #20,
  `trace.py`).
- `await rt.snapshot()` is the whole runtime as plain JSON and `await
  AgentRuntime.from_snapshot(snap, registry=..., ...)` rebuilds it in a fresh runtime (beyond #2,
  `snapshot.py`); a restored runtime starts no turn until a slot frees or `dispatch_queued()`.

Not done here (left for the durable-runs issue): restoring from a checkpoint store that every
verb commits to (beyond #1), and an atomic rollback-plus-state-flip (#3).
"""

from __future__ import annotations

import asyncio
import builtins
import dataclasses
import inspect
from typing import Any, Awaitable, Callable, Optional

from .._diag import warn
from ..client import HttpxTransport, InMemoryConversationStore, InProcessTransport
from ..types import Answer, Request
from .budget import (
    DEFAULT_MAX_CONCURRENT,
    DEFAULT_MAX_DEPTH,
    DEFAULT_MAX_TURNS,
    Budget,
    canonical_limit,
    carve_pool,
    effective_limits,
    first_exhausted,
    merge_budgets,
)
from .clock import AsyncioClock, Clock
from .defs import RESUME_REPLAY, AgentDef, check_resume_mode
from .escalation import pending_result
from .gate import TurnGate
from .handle import (
    Handle,
    HandleView,
    InboxItem,
    PostResult,
    SpawnError,
    TaskResult,
    find_child,
    flush_waiters,
    is_durably_suspended,
    lineage,
    live_turn,
    restore_drained,
    result_of,
    subtree,
    take_pending,
)
from .inbox import coalesce_tick, drain_input
from .resume import apply_answer
from .snapshot import restore_runtime, snapshot_runtime
from .trace import DEFAULT_TRACE_LIMIT, TraceRing, check_trace_limit, transition_event
from .turn import TurnState, begin_turn, run_admitted, run_body, settle_turn
from .vocab import LIMIT_MAX_CHILDREN, LIMIT_MAX_DEPTH, LIMIT_TIMEOUT

__all__ = ["AgentRuntime", "DEFAULT_MAX_TURNS", "DEFAULT_MAX_CONCURRENT", "DEFAULT_MAX_DEPTH"]

LLM_KEYS = ("base_url", "style", "model", "api_key")
_LLM_DEFAULTS = {"base_url": "http://mock.local", "style": "openai", "api_key": "unused"}

_TRANSPORT_AND_IN_PROCESS = (
    "toolnexus.agents: `transport` and `in_process` are mutually exclusive — set one, not both"
)
_LLM_AND_IN_PROCESS = (
    "toolnexus.agents: `llm` and `in_process` are mutually exclusive — "
    "an in-process model has no wire endpoint for `llm` to point at"
)


class AgentRuntime:
    """A tree of agent handles under `root`, driven by the six verbs and `resume`."""

    def __init__(
        self,
        *,
        registry: dict[str, AgentDef],
        transport: Any = None,
        inbox_cap: int = 8,
        max_concurrent_turns: int = 8,
        shutdown_ms: float = 200,
        llm: Optional[dict[str, Any]] = None,
        in_process: Optional[Callable[[dict], Any]] = None,
        store: Any = None,
        clock: Optional[Clock] = None,
        hooks: Any = None,
        on_metric: Optional[Callable[[dict], None]] = None,
        on_budget: Optional[Callable[[Handle, str], Any]] = None,
        on_transition: Optional[Callable[[dict[str, Any]], Any]] = None,
        trace_limit: Optional[int] = DEFAULT_TRACE_LIMIT,
        resume_mode: Optional[str] = RESUME_REPLAY,
    ) -> None:
        if transport is not None and in_process is not None:
            raise ValueError(_TRANSPORT_AND_IN_PROCESS)
        if llm and in_process is not None:
            raise ValueError(_LLM_AND_IN_PROCESS)
        if not isinstance(registry, dict):
            raise TypeError(f"toolnexus.agents: registry must be a dict of name → AgentDef, got {type(registry).__name__}")
        for name, defn in registry.items():
            if not isinstance(defn, AgentDef):
                raise TypeError(f"toolnexus.agents: registry[{name!r}] must be an AgentDef, got {type(defn).__name__}")
            check_resume_mode(defn.resume_mode, f"registry[{name!r}]")
        llm = dict(llm or {})
        unknown = sorted(k for k in llm if k not in LLM_KEYS)
        if unknown:
            raise ValueError(
                f"toolnexus.agents: unknown llm key(s) {', '.join(map(repr, unknown))} — "
                f"the runtime reads only {', '.join(LLM_KEYS)}; configure anything else on the transport"
            )
        if not isinstance(inbox_cap, int) or inbox_cap < 0:
            raise ValueError(f"toolnexus.agents: inbox_cap must be an integer >= 0, got {inbox_cap!r}")
        self.registry = registry
        self.inbox_cap = inbox_cap
        self.shutdown_ms = shutdown_ms
        self.hooks = hooks
        self.on_metric = on_metric
        self.on_budget = on_budget
        self.on_transition = on_transition
        self.resume_mode: str = check_resume_mode(resume_mode, "AgentRuntime") or RESUME_REPLAY
        trace_limit = check_trace_limit(trace_limit)
        self._llm = {**_LLM_DEFAULTS, **llm}
        self._owns_transport = transport is None and in_process is None
        if in_process is not None:
            self._transport: Any = InProcessTransport(in_process)
        elif transport is not None:
            self._transport = transport
        else:  # one pooled keep-alive client for every handle's turns; closed with the root
            self._transport = HttpxTransport()
        self._store = store if store is not None else InMemoryConversationStore()
        self._clock: Clock = clock if clock is not None else AsyncioClock()
        self._gate = TurnGate(max_concurrent_turns)
        self.trace: TraceRing = TraceRing(trace_limit)
        self.events: TraceRing = TraceRing(trace_limit)
        self._background_tasks: set[asyncio.Future[Any]] = set()
        self._turns: set[TurnState] = set()  # bodies not yet finished (running or unwinding)
        self._resumes: dict[str, asyncio.Future[TaskResult]] = {}
        self.root = Handle("root", AgentDef("root", "runtime root", "", "none"), None, spawned_at=self._clock.now())

    # ------------------------------------------------------------------ read-only surface

    def __repr__(self) -> str:  # never the api key (nor any other llm secret)
        llm = {k: ("«redacted»" if k == "api_key" else v) for k, v in self._llm.items()}
        return f"AgentRuntime(agents={sorted(self.registry)!r}, llm={llm!r})"

    @property
    def conversation_store(self) -> Any:
        """The one store every handle's conversation lives in (a read handle, not a setter)."""
        return self._store

    @property
    def clock(self) -> Clock:
        return self._clock

    @property
    def concurrent_turns(self) -> int:
        """LLM requests in flight right now (inside the turn gate)."""
        return self._gate.active

    @property
    def max_observed_concurrent_turns(self) -> int:
        return self._gate.max_observed

    async def quiesce(self, timeout: Optional[float] = None) -> bool:
        """Wait until no LLM request is in flight, including requests of aborted turns whose
        worker threads are still running, so every counter is final. False on timeout (seconds).

        Cancellation cannot stop a worker thread (agents.md §9); this is how a host (or a test)
        learns that the spend of an interrupted request has been rolled up.
        """
        unwinding = [turn.finished.wait() for turn in self._turns if turn.settled]
        if unwinding:  # aborted bodies still unwinding: let them close their meters first
            await asyncio.gather(*unwinding)
        # A late roll-up is queued on the loop (call_soon_threadsafe) before its slot is freed,
        # so it has run by the time this thread's completion is delivered to the loop.
        return await asyncio.to_thread(self._gate.wait_idle, timeout)

    def list(self, h: Optional[Handle] = None, acc: Optional[builtins.list[HandleView]] = None) -> builtins.list[HandleView]:
        """Pre-order views of the subtree under `h` (default: the whole tree), root excluded."""
        acc = acc if acc is not None else []
        acc.extend(self.inspect(node) for node in subtree(h if h is not None else self.root) if node is not self.root)
        return acc

    def inspect(self, h: Handle) -> HandleView:
        return HandleView(h.id, h.state, h.usage_total, len(h.inbox))

    # ------------------------------------------------------------------ the one place for transitions

    def _trace(self, h: Handle, event: str) -> None:
        self.trace.append(f"{h.id}: {event}")

    def _transition(self, h: Handle, to: str, detail: str) -> None:
        """Set `h.state`, write the pinned `<id>: <from>→<to> <detail>` line and the structured event."""
        prior = h.state
        h.state = to
        self._trace(h, f"{prior}→{to} {detail}")
        event = transition_event(h.id, prior, to, detail, self._clock.now())
        self.events.append(event)
        callback = h.defn.on_transition if h.defn.on_transition is not None else self.on_transition
        self._notify(callback, dict(event), what="on_transition")

    def resume_mode_of(self, h: Handle) -> str:
        """How a durable suspension of `h` is resumed: `"replay"` or `"continue"` (def over runtime)."""
        return h.defn.resume_mode or self.resume_mode

    # ------------------------------------------------------------------ small helpers

    def _background(self, awaitable: Awaitable[Any]) -> asyncio.Future[Any]:
        """Run `awaitable` as a tracked task that `close(root)` reaps."""
        task = asyncio.ensure_future(awaitable)
        self._background_tasks.add(task)
        task.add_done_callback(self._background_tasks.discard)
        return task

    def _notify(self, callback: Optional[Callable[..., Any]], *args: Any, what: str) -> None:
        """Call a host notification (sync or async); its failures are reported, never raised."""
        if callback is None:
            return
        try:
            outcome = callback(*args)
        except Exception as exc:  # a host callback must not break the runtime
            warn(f"[toolnexus] agents: {what} raised {type(exc).__name__}: {exc}")
            return
        if inspect.isawaitable(outcome):
            self._background(self._guard(outcome, what))

    async def _guard(self, awaitable: Awaitable[Any], what: str) -> None:
        try:
            await awaitable
        except Exception as exc:
            warn(f"[toolnexus] agents: {what} raised {type(exc).__name__}: {exc}")

    def _budget_stop(self, h: Handle, limit: str) -> None:
        callback = h.defn.on_budget if h.defn.on_budget is not None else self.on_budget
        self._notify(callback, h, limit, what="on_budget")

    def _walk(self, h: Handle) -> Optional[str]:
        """The live budget walk from `h` up to root; the first exhausted dimension, or None."""
        return first_exhausted(lineage(h), self._clock.now())

    def _roll_up(self, h: Handle, turns: int, tokens: int, tool_calls: int) -> None:
        h.turns_total += turns
        h.own_total += tokens
        for node in lineage(h):
            node.usage_total += tokens
            node.pool.tokens -= tokens
            node.pool.tool_calls -= tool_calls

    # ------------------------------------------------------------------ spawn / post / wake

    def spawn(self, parent: Handle, def_name: str, budget: Optional[Budget] = None) -> Handle | SpawnError:
        """Create a child of `parent` (synchronous). Only the spawner receives the handle."""
        defn = self.registry.get(def_name)
        if defn is None:
            known = ", ".join(sorted(self.registry))
            return SpawnError(f'unknown agent "{def_name}" (known: {known})')
        if parent.state == "closed":
            return SpawnError("parent closed")
        max_depth = min(node.eff["max_depth"] for node in lineage(parent))
        if parent.depth + 1 > max_depth:
            self._budget_stop(parent, LIMIT_MAX_DEPTH)
            return SpawnError(f"maxDepth {max_depth} exceeded")
        if len(parent.children) + 1 > parent.pool.children:
            self._budget_stop(parent, LIMIT_MAX_CHILDREN)
            return SpawnError(f"maxChildren {int(parent.pool.children)} exceeded")
        dim = self._walk(parent)
        if dim is not None:
            self._budget_stop(parent, canonical_limit(dim))
            return SpawnError(f"budget exhausted ({dim}); incomplete")
        parent.seq += 1
        own = merge_budgets(defn.budget, budget)
        child = Handle(f"{parent.id}/{def_name}.{parent.seq}", defn, parent, spawned_at=self._clock.now())
        child.budget = own
        child.pool = carve_pool(own, parent.pool)
        child.eff = effective_limits(own)
        parent.children.append(child)
        self._trace(child, f"spawned (depth {child.depth}, tokens {child.pool.tokens})")
        if defn.on_spawn is not None:
            try:
                outcome = defn.on_spawn(child)
            except Exception as exc:
                warn(f"[toolnexus] agents: on_spawn raised {type(exc).__name__}: {exc}")
            else:
                if inspect.isawaitable(outcome):
                    # Scheduled now, awaited by the child's first turn before any LLM call.
                    child._on_spawn_task = self._background(self._guard(outcome, "on_spawn"))
        return child

    def post(self, h: Handle, item: InboxItem) -> PostResult:
        """Put unsolicited input into `h`'s inbox; it enters only at the next explicit wake."""
        if not isinstance(item, InboxItem):
            raise TypeError(f"toolnexus.agents: post() takes an InboxItem, got {type(item).__name__}")
        if h.state == "closed":
            return PostResult(False, f"inbox closed: {h.id}")
        if coalesce_tick(h.inbox, item):
            return PostResult(True)
        if len(h.inbox) >= self.inbox_cap:
            self._trace(h, f"post REJECTED (inbox full, cap {self.inbox_cap}) from {item.from_}")
            return PostResult(False, f"inbox full: {h.id}")
        h.inbox.append(dataclasses.replace(item))
        return PostResult(True)

    def wake(self, h: Handle, prompt: Optional[str] = None) -> PostResult:
        """Start a turn now, or queue it behind the parent's concurrency gate."""
        if h.state == "closed":
            return PostResult(False, "closed")
        if h.parent is None:
            return PostResult(False, "root never runs a turn")
        if h.state in ("suspended", "running"):
            return PostResult(True)
        parent = h.parent
        if parent.running_children >= parent.eff["max_concurrent"]:
            h.wake_queue.append(prompt or "")
            parent.wake_fifo.append(h.id)
            self._trace(h, f"wake QUEUED (parent concurrency {parent.eff['max_concurrent']})")
            return PostResult(True)
        self._admit_wake(h, prompt)
        return PostResult(True)

    def _refuse(self, h: Handle, dim: str) -> TaskResult:
        """A failed live walk settles the handle as `incomplete` at once (no turn runs)."""
        limit = canonical_limit(dim)
        result = result_of(h, f"budget exhausted ({dim}); partial work preserved", "incomplete", limit=limit)
        h.last_result = result
        flush_waiters(h, result)
        self._budget_stop(h, limit)
        return result

    def _admit_wake(self, h: Handle, prompt: Optional[str]) -> bool:
        dim = self._walk(h)
        if dim is not None:
            self._refuse(h, dim)
            return False
        items, h.inbox = h.inbox, []
        h.drained = items
        turn = begin_turn(self, h, drain_input(prompt, items))
        self._background(run_body(self, h, turn))
        return True

    def _transfer_slot(self, parent: Handle) -> None:
        """A child's turn ended: hand the freed slot to the oldest queued wake (arrival order).

        One slot per completion; a dequeued wake refused by the budget walk does not use it up.
        """
        index = 0
        while index < len(parent.wake_fifo) and parent.running_children < parent.eff["max_concurrent"]:
            child = find_child(parent, parent.wake_fifo[index])
            if child is None or child.state == "closed" or not child.wake_queue:
                parent.wake_fifo.pop(index)
                continue
            if child.state != "idle":  # busy (e.g. being resumed): keeps its place in line
                index += 1
                continue
            parent.wake_fifo.pop(index)
            prompt = child.wake_queue.pop(0)
            self._trace(child, "DEQUEUED wake (slot freed)")
            if self._admit_wake(child, prompt):
                return

    def dispatch_queued(self) -> int:
        """Hand free concurrency slots to queued wakes (arrival order); how many were started.

        A restored runtime starts no turn by itself; this is how its queued wakes get going."""
        started = 0
        for parent in builtins.list(subtree(self.root)):
            while parent.wake_fifo and parent.running_children < parent.eff["max_concurrent"]:
                before, queued = parent.running_children, len(parent.wake_fifo)
                self._transfer_slot(parent)
                if parent.running_children > before:
                    started += 1
                elif len(parent.wake_fifo) >= queued:
                    break  # nothing dispatchable right now (e.g. the queued handles are busy)
        return started

    # ------------------------------------------------------------------ wait / interrupt / close

    async def wait(self, h: Handle, timeout_ms: Optional[float] = None) -> TaskResult:
        """The next result of `h`, or its settled one; a truthy `timeout_ms` bounds the wait."""
        if h.state == "closed":
            return h.last_result if h.last_result is not None else result_of(h, "closed", "closed")
        if is_durably_suspended(h):
            return pending_result(h)
        if h.state == "idle" and h.last_result is not None and not h.wake_queue:
            return h.last_result
        if h.parent is None:
            return result_of(h, "root never runs a turn", "error")
        fut: asyncio.Future[TaskResult] = asyncio.get_running_loop().create_future()
        h._waiters.append(fut)
        if not timeout_ms:
            return await fut

        def expire() -> None:
            if not fut.done():
                text = f"wait timeout after {timeout_ms}ms (child still {h.state})"
                fut.set_result(result_of(h, text, "timeout", limit=LIMIT_TIMEOUT))

        timer = self._clock.call_later(timeout_ms / 1000, expire)
        try:
            return await fut
        finally:
            timer.cancel()
            if fut in h._waiters:
                h._waiters.remove(fut)

    def interrupt(self, h: Handle) -> None:
        """Abort the running turn (idle when this returns) or cancel a durable pending request."""
        turn = live_turn(h)
        if turn is not None:
            turn.cancel("interrupted")
            before = len(h.inbox)
            restore_drained(h)
            settle_turn(self, h, turn, result_of(h, "interrupted", "interrupted"), "idle",
                        f"(interrupt; inbox intact: {before} items)")
            return
        if h.state == "suspended":
            for child in h.children:
                if child.state == "suspended":
                    self.interrupt(child)
            kind = h.pending_req.kind if h.pending_req is not None else ""
            take_pending(h)
            restore_drained(h)
            self._transition(h, "idle", f'(interrupt cancelled pending "{kind}")')
            result = result_of(h, "interrupted", "interrupted")
            h.last_result = result
            flush_waiters(h, result)

    async def close(self, h: Handle, *, force: bool = False, reason: Optional[str] = None) -> None:
        """Close `h` and its subtree, leaf first. Never raises."""
        if h.state == "closed":
            return
        why = reason or ("interrupted" if force else "closed")
        try:
            for child in builtins.list(h.children):
                await self.close(child, force=force, reason=reason)
            if live_turn(h) is not None and not force:
                await self.wait(h, self.shutdown_ms)
            turn = live_turn(h)
            if turn is not None:
                turn.cancel("closed")
                await turn.finished.wait()
            if h.defn.on_close is not None:
                try:
                    outcome = h.defn.on_close(h, why)
                    if inspect.isawaitable(outcome):
                        await outcome
                except Exception as exc:
                    warn(f"[toolnexus] agents: on_close raised {type(exc).__name__}: {exc}")
            self._transition(h, "closed", f"({why})")
            closed = result_of(h, "closed", "closed")
            if h.last_result is None:
                h.last_result = closed
            flush_waiters(h, closed)
            if h is self.root:
                await self._reap_background()
                if self._owns_transport:
                    await self._transport.aclose()
        except Exception as exc:  # close never raises
            warn(f"[toolnexus] agents: close({h.id}) failed: {type(exc).__name__}: {exc}")

    async def _reap_background(self) -> None:
        current = asyncio.current_task()
        tasks = [t for t in builtins.list(self._background_tasks) if t is not current and not t.done()]
        for task in tasks:
            task.cancel()
        if tasks:
            await asyncio.gather(*tasks, return_exceptions=True)

    # ------------------------------------------------------------------ the turn body

    async def run_turn(
        self, h: Handle, prompt: Optional[str] = None, one_shot_wait_for: Optional[Callable[[Request], Any]] = None
    ) -> TaskResult:
        """Run one turn of an idle handle with exactly `prompt` as input (the inbox is not drained)."""
        if h.state == "closed":
            return TaskResult("closed", True, "closed")
        return await run_admitted(self, h, prompt or "", one_shot=one_shot_wait_for)

    # ------------------------------------------------------------------ durable resume

    async def resume(self, answer: Answer) -> TaskResult:
        """Apply a host's `Answer` to the suspended handle holding its request, then cascade up.

        The handle replays its suspended turn from the checkpoint with the Answer bound to the
        halted call; each suspended ancestor then replays too, its `task` call reattaching to
        the same child by task key. Returns the outermost result. Counters only grow.
        """
        return await apply_answer(self, answer)

    # ------------------------------------------------------------------ snapshot / restore

    async def snapshot(self, *, conversations: bool = True) -> dict[str, Any]:
        """The whole runtime as plain JSON: the handle tree in id order, trace, events, applied
        answers and (unless `conversations=False`, when the host shares a durable store) every
        handle's stored transcript. See `snapshot.py`."""
        return await snapshot_runtime(self, conversations=conversations)

    @classmethod
    async def from_snapshot(cls, snapshot: dict[str, Any], *, registry: dict[str, AgentDef], **options: Any) -> "AgentRuntime":
        """A fresh runtime (built with `registry` and `options`) holding the tree of `snapshot`.

        Raises `snapshot.SnapshotError` (a `ValueError`) when the snapshot is malformed or the
        registry's fingerprint does not match. A handle that was running comes back idle with an
        `interrupted by restart` result."""
        rt = cls(registry=registry, **options)
        try:
            return await restore_runtime(rt, snapshot)
        except BaseException:
            await rt.close(rt.root)  # frees a transport the refused runtime created
            raise
