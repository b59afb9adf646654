"""`RuntimeCore`: the state of one agent runtime and the verbs that change it.

The one owner of a runtime's data — the registry, the handle tree under `root`, the clock, the
turn gate, the conversation store, the seams (`hooks`, `on_metric`, ...), the trace, and (with a
durable store) the `DurableRun` that commits it. `AgentRuntime` is the public face over it. The
helpers receive the core, never the facade: `answering` and `restore` take it whole, a turn's
helpers take a `scope.TurnScope` holding it, and `snapshot` sees it as a `state.RunState`.

The core imports no module that builds on it: the turn runner (`turn.start_wake`,
`turn.settle_interrupted`) is handed to it at construction, so the flow goes one way — the turn
module calls the core's verbs, the core calls the callables it was given.

The verbs are the state machine: `spawn`, `post`, `wake`, `wait`, `interrupt`, `close`, plus
admission and the per-parent wake queue. Every state change goes through `transition`, which
writes the pinned trace line and the structured event; with a store, each verb also stages what
it changed and commits it: `wait` awaits that commit, so a result is reported only once it is
durable (`AgentRuntime.close` and `resume` await theirs too); the synchronous ones (`spawn`,
`post`, `wake`, `interrupt`, `dispatch_queued`) cannot, and schedule it on the running loop —
with no running loop nothing could ever write it, so they refuse (`ToolnexusRuntimeError`)
before changing anything.

Choices (ours, each tested): `interrupt()` settles a running handle synchronously (when it
returns, the state is `idle`, the inbox intact and the waiters told); queued wakes dequeue in
arrival order across siblings; the depth limit is the minimum over the ancestor chain; an async
`on_spawn` finishes before the child's first LLM call; timer ticks coalesce at post time;
interrupting a parked handle also withdraws the requests of its parked descendants.
"""

from __future__ import annotations

import asyncio
import builtins
import dataclasses
import inspect
from typing import TYPE_CHECKING, Any, Awaitable, Callable, Coroutine, Optional

from .._diag import warn
from ..approvals import ApprovalMemory, ApprovalPolicy
from ..durable import LeaseLost
from ..errors import ToolnexusRuntimeError, ToolnexusTypeError
from ._budget import canonical_limit, carve_pool, effective_limits, first_exhausted, merge_budgets
from ._defs import AgentDef
from ._gate import TurnGate
from ._handle import (
    Handle,
    InboxItem,
    LiveTurn,
    PostResult,
    SpawnError,
    TaskResult,
    find_child,
    flush_waiters,
    is_parked,
    lineage,
    live_turn,
    pending_result,
    restore_drained,
    result_of,
    subtree,
    take_suspension,
)
from ._inbox import coalesce_tick, drain_input
from ._trace import TraceRing, transition_event
from ._vocab import LIMIT_MAX_CHILDREN, LIMIT_MAX_DEPTH, LIMIT_TIMEOUT, HandleState, TaskStatus
from .clock import Clock

if TYPE_CHECKING:  # pragma: no cover
    from ._durable import DurableRun

# The turn runner the core is given (`turn.start_wake`, `turn.settle_interrupted`): admit a wake's
# turn and return its body to schedule; settle a live turn an `interrupt()` aborts.
StartTurn = Callable[["RuntimeCore", Handle, str], Coroutine[Any, Any, None]]
SettleInterrupted = Callable[["RuntimeCore", Handle, LiveTurn, str], None]

# How long `aclose()` waits for settled turns to finish tearing down before giving the lease up.
TEARDOWN_WAIT = 10.0

ROOT_DEF = AgentDef("root", "runtime root", "", "none")


class RuntimeCore:
    """One runtime's state and verbs (see the module docstring)."""

    def __init__(self, *, registry: dict[str, AgentDef], transport: Any, owns_transport: bool, llm: dict[str, Any],
                 store: Any, clock: Clock, gate: TurnGate, inbox_cap: int, shutdown_ms: float, hooks: Any,
                 on_metric: Any, on_budget: Any, on_transition: Any, resume_mode: str, trace_limit: Optional[int],
                 durable: Optional["DurableRun"] = None, approvals: Optional[ApprovalPolicy] = None,
                 on_pending: Optional[Callable[..., Any]] = None, start_turn: StartTurn,
                 settle_interrupted: SettleInterrupted) -> None:
        self.start_turn = start_turn
        self.settle_interrupted = settle_interrupted
        self.registry = registry
        self.transport = transport
        self.owns_transport = owns_transport
        self.llm = llm
        self.store = store  # the conversation store every handle's transcript lives in
        self.clock = clock
        self.gate = gate
        self.inbox_cap = inbox_cap
        self.shutdown_ms = shutdown_ms
        self.hooks = hooks
        self.on_metric = on_metric
        self.on_budget = on_budget
        self.on_transition = on_transition
        self.resume_mode = resume_mode
        self.approvals = approvals  # the runtime's approval policy (a def's own wins)
        self.on_pending = on_pending  # told of each request once the store holds it (`DurableRun._committed`)
        self.pending_told: set[asyncio.Future[Any]] = set()  # async `on_pending` calls: waited for at shutdown
        self.durable = durable
        self.trace: TraceRing = TraceRing(trace_limit)
        self.events: TraceRing = TraceRing(trace_limit)
        self.background_tasks: set[asyncio.Future[Any]] = set()
        self.turns: set[LiveTurn] = set()  # bodies not yet finished (running or unwinding)
        self.resumes: dict[str, asyncio.Future[TaskResult]] = {}  # the answer ledger of a store-less runtime
        # Turns wait on this before doing anything (set while `Agent.run` stores the entry agent
        # and its prompt under a run id of the caller's): a run is never past its first commit
        # without them.
        self.turn_hold: Optional[asyncio.Future[None]] = None
        self.root = Handle("root", ROOT_DEF, None, spawned_at=clock.now())

    # -- tracing and transitions -------------------------------------------------------------------

    def trace_line(self, h: Handle, event: str) -> None:
        line = f"{h.id}: {event}"
        self.trace.append(line)
        if self.durable is not None:
            self.durable.trace(line)

    def transition(self, h: Handle, to: str, detail: str) -> None:
        """Set `h.state`, write the pinned `<id>: <from>→<to> <detail>` line and the structured event."""
        prior = h.state
        h.state = HandleState(to)
        self.trace_line(h, f"{prior}→{to} {detail}")
        event = transition_event(h.id, prior, to, detail, self.clock.now())
        self.events.append(event)
        callback = h.defn.on_transition if h.defn.on_transition is not None else self.on_transition
        self.notify(callback, dict(event), what="on_transition")
        self.changed(h)

    def changed(self, *handles: Handle) -> None:
        """With a store: stage these handles' records and schedule a commit."""
        if self.durable is not None:
            self.durable.touch(*handles)
            self.durable.schedule()

    def resume_mode_of(self, h: Handle) -> str:
        """How a durable suspension of `h` is resumed: `"replay"` or `"continue"` (def over runtime)."""
        return h.defn.resume_mode or self.resume_mode

    def approvals_of(self, h: Handle) -> Optional[ApprovalPolicy]:
        """The approval policy of `h`'s tools (def over runtime)."""
        own = ApprovalPolicy.of(h.defn.approvals)
        return own if own is not None else self.approvals

    def approval_memory(self) -> ApprovalMemory:
        """The run's sticky approval decisions, kept in the root's record (a change is committed)."""
        memory = self.root.approvals
        if memory is None:
            memory = self.root.approvals = ApprovalMemory()
        memory.on_change = lambda: self.changed(self.root)
        return memory

    def run_status(self) -> str:
        """The run's status as a store lists it: the entry handle's state or settled status."""
        entry = self.root.children[0] if self.root.children else None
        if entry is None:
            return HandleState.RUNNING
        if entry.state == HandleState.RUNNING or (entry.state == HandleState.SUSPENDED and not is_parked(entry)):
            return HandleState.RUNNING
        if entry.state == HandleState.SUSPENDED:
            return TaskStatus.PENDING
        if any(node.state == HandleState.RUNNING for node in subtree(entry)):
            return HandleState.RUNNING
        if entry.last_result is not None:
            return entry.last_result.status
        return HandleState.CLOSED if entry.state == HandleState.CLOSED else HandleState.IDLE

    def busy(self) -> bool:
        """Some turn or resume is live."""
        return bool(self.turns) or any(not f.done() for f in self.resumes.values())

    def can_commit(self, verb: str) -> None:
        """A synchronous verb is about to change a durable run: its commit must be schedulable."""
        if self.durable is None:
            return
        try:
            asyncio.get_running_loop()
        except RuntimeError:
            raise ToolnexusRuntimeError(
                f"toolnexus.agents: {verb}() changes durable run {self.durable.run_id!r}, and with no running event "
                "loop its commit could never be written — call it from async code on the loop's thread (then "
                "`await rt.flush()` waits for the commit)") from None

    async def commit_quietly(self, what: str) -> None:
        """With a store: commit what is staged now, for a verb that never raises (`close`). A failure
        is warned about and kept in `durable.failure`; what is staged stays for the next commit."""
        if self.durable is None:
            return
        try:
            await self.durable.flush()
        except Exception as exc:
            self.durable.failure = exc
            warn(f"[toolnexus] agents: committing {what} failed: {type(exc).__name__}: {exc}")

    def maybe_park(self) -> None:
        """Nothing runs any more: with a store, give the lease up so another process may resume."""
        if self.durable is not None and not self.busy():
            self.durable.park()

    # -- small helpers -----------------------------------------------------------------------------

    def background(self, awaitable: Awaitable[Any]) -> asyncio.Future[Any]:
        """Run `awaitable` as a tracked task that `close(root)` reaps."""
        task = asyncio.ensure_future(awaitable)
        self.background_tasks.add(task)
        task.add_done_callback(self.background_tasks.discard)
        return task

    def notify(self, callback: Optional[Callable[..., Any]], *args: Any, what: str) -> None:
        """Call a host notification (sync or async); its failures are reported, never raised."""
        if callback is None:
            return
        try:
            outcome = callback(*args)
        except Exception as exc:  # a host callback must not break the runtime
            warn(f"[toolnexus] agents: {what} raised {type(exc).__name__}: {exc}")
            return
        if inspect.isawaitable(outcome):
            self.background(self._guard(outcome, what))

    def tell_pending(self, pending: Any) -> None:
        """`on_pending(pending)`: a failure is warned about; an async hook runs on, and `shutdown`
        waits for it (up to `TEARDOWN_WAIT`) instead of cancelling it with the background work."""
        try:
            outcome = self.on_pending(pending) if self.on_pending is not None else None
        except Exception as exc:
            warn(f"[toolnexus] agents: on_pending raised {type(exc).__name__}: {exc}")
            return
        if inspect.isawaitable(outcome):
            task = asyncio.ensure_future(self._guard(outcome, "on_pending"))
            self.pending_told.add(task)
            task.add_done_callback(self.pending_told.discard)

    async def _guard(self, awaitable: Awaitable[Any], what: str) -> None:
        try:
            await awaitable
        except Exception as exc:
            warn(f"[toolnexus] agents: {what} raised {type(exc).__name__}: {exc}")

    def budget_stop(self, h: Handle, limit: str) -> None:
        callback = h.defn.on_budget if h.defn.on_budget is not None else self.on_budget
        self.notify(callback, h, limit, what="on_budget")

    def walk(self, h: Handle) -> Optional[str]:
        """The live budget walk from `h` up to root; the first exhausted dimension, or None."""
        return first_exhausted(lineage(h), self.clock.now())

    def roll_up(self, h: Handle, turns: int, tokens: int, tool_calls: int) -> None:
        h.turns_total += turns
        h.own_total += tokens
        for node in lineage(h):
            node.usage_total += tokens
            node.pool.tokens -= tokens
            node.pool.tool_calls -= tool_calls
            if self.durable is not None:
                self.durable.touch(node)

    # -- spawn / post / wake -----------------------------------------------------------------------

    def spawn(self, parent: Handle, def_name: str, budget: Any = None) -> Handle | SpawnError:
        self.can_commit("spawn")
        defn = self.registry.get(def_name)
        if defn is None:
            known = ", ".join(sorted(self.registry))
            return SpawnError(f'unknown agent "{def_name}" (known: {known})')
        if parent.state == HandleState.CLOSED:
            return SpawnError("parent closed")
        max_depth = min(node.eff["max_depth"] for node in lineage(parent))
        if parent.depth + 1 > max_depth:
            self.budget_stop(parent, LIMIT_MAX_DEPTH)
            return SpawnError(f"maxDepth {max_depth} exceeded")
        if len(parent.children) + 1 > parent.pool.children:
            self.budget_stop(parent, LIMIT_MAX_CHILDREN)
            return SpawnError(f"maxChildren {int(parent.pool.children)} exceeded")
        dim = self.walk(parent)
        if dim is not None:
            self.budget_stop(parent, canonical_limit(dim))
            return SpawnError(f"budget exhausted ({dim}); incomplete")
        parent.seq += 1
        own = merge_budgets(defn.budget, budget)
        child = Handle(f"{parent.id}/{def_name}.{parent.seq}", defn, parent, spawned_at=self.clock.now())
        child.budget = own
        child.pool = carve_pool(own, parent.pool)
        child.eff = effective_limits(own)
        parent.children.append(child)
        self.trace_line(child, f"spawned (depth {child.depth}, tokens {child.pool.tokens})")
        self.changed(parent, child)
        if defn.on_spawn is not None:
            try:
                outcome = defn.on_spawn(child)
            except Exception as exc:
                warn(f"[toolnexus] agents: on_spawn raised {type(exc).__name__}: {exc}")
            else:
                if inspect.isawaitable(outcome):
                    # Scheduled now, awaited by the child's first turn before any LLM call.
                    child.hold_first_turn(self.background(self._guard(outcome, "on_spawn")))
        return child

    def post(self, h: Handle, item: InboxItem) -> PostResult:
        self.can_commit("post")
        if not isinstance(item, InboxItem):
            raise ToolnexusTypeError(f"toolnexus.agents: post() takes an InboxItem, got {type(item).__name__}")
        if h.state == HandleState.CLOSED:
            return PostResult(False, f"inbox closed: {h.id}")
        if coalesce_tick(h.inbox, item):
            self.changed(h)
            return PostResult(True)
        if len(h.inbox) >= self.inbox_cap:
            self.trace_line(h, f"post REJECTED (inbox full, cap {self.inbox_cap}) from {item.from_}")
            return PostResult(False, f"inbox full: {h.id}")
        h.inbox.append(dataclasses.replace(item))
        self.changed(h)
        return PostResult(True)

    def wake(self, h: Handle, prompt: Optional[str] = None) -> PostResult:
        self.can_commit("wake")
        if h.state == HandleState.CLOSED:
            return PostResult(False, "closed")
        if h.parent is None:
            return PostResult(False, "root never runs a turn")
        if h.state in (HandleState.SUSPENDED, HandleState.RUNNING):
            return PostResult(True)
        parent = h.parent
        if parent.running_children >= parent.eff["max_concurrent"]:
            h.wake_queue.append(prompt or "")
            parent.wake_fifo.append(h.id)
            self.trace_line(h, f"wake QUEUED (parent concurrency {parent.eff['max_concurrent']})")
            self.changed(h, parent)
            return PostResult(True)
        self.admit_wake(h, prompt)
        return PostResult(True)

    def refuse(self, h: Handle, dim: str) -> TaskResult:
        """A failed live walk settles the handle as `incomplete` at once (no turn runs)."""
        limit = canonical_limit(dim)
        result = result_of(h, f"budget exhausted ({dim}); partial work preserved", TaskStatus.INCOMPLETE, limit=limit)
        h.last_result = result
        flush_waiters(h, result)
        self.budget_stop(h, limit)
        self.changed(h)
        return result

    def admit_wake(self, h: Handle, prompt: Optional[str]) -> bool:
        dim = self.walk(h)
        if dim is not None:
            self.refuse(h, dim)
            return False
        items, h.inbox = h.inbox, []
        h.drained = items
        self.background(self.start_turn(self, h, drain_input(prompt, items)))
        return True

    def transfer_slot(self, parent: Handle) -> None:
        """A child's turn ended: hand the freed slot to the oldest queued wake (arrival order).

        One slot per completion; a dequeued wake refused by the budget walk does not use it up.
        """
        index = 0
        while index < len(parent.wake_fifo) and parent.running_children < parent.eff["max_concurrent"]:
            child = find_child(parent, parent.wake_fifo[index])
            if child is None or child.state == HandleState.CLOSED or not child.wake_queue:
                parent.wake_fifo.pop(index)
                continue
            if child.state != HandleState.IDLE:  # busy (e.g. being resumed): keeps its place in line
                index += 1
                continue
            parent.wake_fifo.pop(index)
            prompt = child.wake_queue.pop(0)
            self.trace_line(child, "DEQUEUED wake (slot freed)")
            self.changed(parent, child)
            if self.admit_wake(child, prompt):
                return

    def dispatch_queued(self) -> int:
        self.can_commit("dispatch_queued")
        started = 0
        for parent in builtins.list(subtree(self.root)):
            while parent.wake_fifo and parent.running_children < parent.eff["max_concurrent"]:
                before, queued = parent.running_children, len(parent.wake_fifo)
                self.transfer_slot(parent)
                if parent.running_children > before:
                    started += 1
                elif len(parent.wake_fifo) >= queued:
                    break  # nothing dispatchable right now (e.g. the queued handles are busy)
        return started

    # -- wait / interrupt / close ------------------------------------------------------------------

    async def wait(self, h: Handle, timeout_ms: Optional[float] = None, *, commit: bool = True) -> TaskResult:
        """`h`'s next result. With a store it is reported once it is durable; `commit=False` leaves
        that to the caller (which commits it together with what it does next)."""
        result = await self._next_result(h, timeout_ms)
        if commit and self.durable is not None and result.status != TaskStatus.TIMEOUT:
            await self.durable.flush()
        return result

    async def _next_result(self, h: Handle, timeout_ms: Optional[float]) -> TaskResult:
        if h.state == HandleState.CLOSED:
            return h.last_result if h.last_result is not None else result_of(h, "closed", TaskStatus.CLOSED)
        if is_parked(h):
            return pending_result(h)
        if h.state == HandleState.IDLE and h.last_result is not None and not h.wake_queue:
            return h.last_result
        if h.parent is None:
            return await self._run_result(h, timeout_ms)
        fut: asyncio.Future[TaskResult] = asyncio.get_running_loop().create_future()
        h.add_waiter(fut)
        if not timeout_ms:
            return await fut

        def expire() -> None:
            if not fut.done():
                text = f"wait timeout after {timeout_ms}ms (child still {h.state})"
                fut.set_result(result_of(h, text, TaskStatus.TIMEOUT, limit=LIMIT_TIMEOUT))

        timer = self.clock.call_later(timeout_ms / 1000, expire)
        try:
            return await fut
        finally:
            timer.cancel()
            h.drop_waiter(fut)

    async def _run_result(self, root: Handle, timeout_ms: Optional[float]) -> TaskResult:
        """`wait(root)`: the run's result — the entry agent's, once nothing in the runtime runs (a
        restored run may be recovering a child, or cascading an answer up, under a parked entry)."""
        entry = root.children[0] if root.children else None
        if entry is None:
            return result_of(
                root, "root never runs a turn: spawn an agent under it and wait for that", TaskStatus.ERROR
            )
        quiet = asyncio.ensure_future(self.quiet())
        timer = self.clock.call_later(timeout_ms / 1000, quiet.cancel) if timeout_ms else None
        try:
            await quiet
        except asyncio.CancelledError:
            if not quiet.cancelled() or asyncio.current_task().cancelling():  # type: ignore[union-attr]
                raise
            text = f"wait timeout after {timeout_ms}ms (run still {self.run_status()})"
            return result_of(entry, text, TaskStatus.TIMEOUT, limit=LIMIT_TIMEOUT)
        finally:
            if timer is not None:
                timer.cancel()
            quiet.cancel()
        if entry.state == HandleState.IDLE and live_turn(entry) is None and entry.last_result is not None:
            return entry.last_result  # queued wakes a restored runtime has not dispatched do not count
        return await self._next_result(entry, None)

    async def quiet(self) -> None:
        """Until no turn, resume or background task of this runtime is live."""
        me = asyncio.current_task()
        while True:
            watchers = [asyncio.ensure_future(turn.finished.wait()) for turn in builtins.list(self.turns)]
            live: list[Any] = [t for t in self.background_tasks if t is not me and not t.done()]
            live += [f for f in self.resumes.values() if not f.done()]
            if not watchers and not live:
                return
            try:
                await asyncio.wait(watchers + live, return_when=asyncio.FIRST_COMPLETED)
            finally:
                for watcher in watchers:
                    watcher.cancel()

    def interrupt(self, h: Handle) -> None:
        self.can_commit("interrupt")
        turn = live_turn(h)
        if turn is not None:
            turn.cancel(TaskStatus.INTERRUPTED)
            before = len(h.inbox)
            restore_drained(h)
            self.settle_interrupted(self, h, turn, f"(interrupt; inbox intact: {before} items)")
            return
        if h.state == HandleState.SUSPENDED:
            for child in h.children:
                if child.state == HandleState.SUSPENDED:
                    self.interrupt(child)
            held = take_suspension(h)
            kind = held.request.kind if held is not None else ""
            if held is not None and self.durable is not None:
                self.durable.cancelled(held.request.id)
            restore_drained(h)
            self.transition(h, HandleState.IDLE, f'(interrupt cancelled pending "{kind}")')
            result = result_of(h, "interrupted", TaskStatus.INTERRUPTED)
            h.last_result = result
            flush_waiters(h, result)

    async def close(self, h: Handle, *, force: bool = False, reason: Optional[str] = None) -> None:
        if h.state == HandleState.CLOSED:
            return
        why = reason or (TaskStatus.INTERRUPTED if force else TaskStatus.CLOSED)
        try:
            for child in builtins.list(h.children):
                await self.close(child, force=force, reason=reason)
            if live_turn(h) is not None and not force:
                await self._next_result(h, self.shutdown_ms)
            turn = live_turn(h)
            if turn is not None:
                turn.cancel(TaskStatus.CLOSED)
                await turn.finished.wait()
            if h.defn.on_close is not None:
                try:
                    outcome = h.defn.on_close(h, why)
                    if inspect.isawaitable(outcome):
                        await outcome
                except Exception as exc:
                    warn(f"[toolnexus] agents: on_close raised {type(exc).__name__}: {exc}")
            self.transition(h, HandleState.CLOSED, f"({why})")
            closed = result_of(h, "closed", TaskStatus.CLOSED)
            if h.last_result is None:
                h.last_result = closed
            flush_waiters(h, closed)
            if h is self.root:
                await self.shutdown(final=True)
        except Exception as exc:  # close never raises
            warn(f"[toolnexus] agents: close({h.id}) failed: {type(exc).__name__}: {exc}")

    async def shutdown(self, *, final: bool) -> None:
        """Reap background work and free owned resources; with a store, commit what is staged
        (`final`: and give the lease up).

        A turn that has settled but is still tearing down (closing its toolkit) is waited for
        first, for at most `TEARDOWN_WAIT` seconds: only once it is finished is nothing running,
        so the lease can be given up now rather than when it expires."""
        finishing = [asyncio.ensure_future(turn.finished.wait()) for turn in builtins.list(self.turns) if turn.settled]
        if finishing:
            _, late = await asyncio.wait(finishing, timeout=TEARDOWN_WAIT)
            for waiter in late:
                waiter.cancel()
            if late:
                warn(f"[toolnexus] agents: {len(late)} turn(s) still tearing down after {TEARDOWN_WAIT:g}s; "
                     "the run's lease is given up when they finish or when it expires")
        await self.reap_background()
        if self.durable is not None:
            try:
                if final or not self.busy():
                    self.durable.park()
                await self.durable.flush()
            except LeaseLost as exc:  # another process owns the run now: nothing here may be written
                warn(f"[toolnexus] agents: {exc}")
            finally:
                await self.durable.close()
        if self.pending_told:  # the host's notifications of requests the last commits stored
            told: builtins.list[asyncio.Future[Any]] = builtins.list(self.pending_told)
            _, unfinished = await asyncio.wait(told, timeout=TEARDOWN_WAIT)
            for call in unfinished:
                call.cancel()
        if self.owns_transport:
            await self.transport.aclose()

    async def reap_background(self) -> None:
        current = asyncio.current_task()
        tasks = [t for t in builtins.list(self.background_tasks) if t is not current and not t.done()]
        for task in tasks:
            task.cancel()
        if tasks:
            await asyncio.gather(*tasks, return_exceptions=True)
