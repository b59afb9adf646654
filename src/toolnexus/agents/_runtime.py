"""`AgentRuntime`: the public face of one agent runtime — a tree of handles under `root`.

Each agent turn is exactly one `client.ask` against the runtime's conversation store, with the
conversation id equal to the handle id. The runtime adds what a single client cannot: a tree of
handles with deterministic parent-scoped ids, an inbox per handle, three loud backpressure
gates, hierarchical budgets with a live ancestor walk, the `task` tool, nearest-interpreter
escalation and resume.

This module validates options and builds the `RuntimeCore` (state and verbs, `_core.py`), handing
it the turn runner (`turn.start_wake`, `turn.settle_interrupted`); every verb here delegates to it.
Helpers receive the core, never this object. The runtime's own hosts (restore, the lifecycle
verbs, `Agent.run`, the Temporal workflow) reach the core through one supported accessor,
`run_state`, never through a private attribute.

With a durable store (`store=` a `RunStore` from `toolnexus.stores`) the runtime is a *run*:
every state change and completed step commits to the store (`_durable/`), a parked run
survives the process, `AgentRuntime.restore(store, run_id, agents=[...])` brings it back in any
process (a run killed mid-turn continues from its last commit, see `_restore.py`), and answers
are applied exactly once. Resuming then *continues* the halted call by default (the model is not
asked to repeat it); without a store the default stays `"replay"`.

Choices of ours (each tested):

- Spend is metered at the transport seam, so retried completion attempts, interrupted and failed
  Runs are all counted; a response that lands after its turn was aborted is rolled up when it
  arrives. `turns` counts LLM responses.
- `resume(answer)` routes by request id to the deepest parked handle holding it; an unknown id
  raises `ResumeError` naming what is pending; an answer violating the request's schema raises
  `ResumeError` before anything runs; an `ok` answer to an expired request is applied as
  declined (`expired`). Without a store a repeated answer returns the first result and changes
  nothing; with one it raises `AnswerAlreadyApplied`.
- Unknown `llm` keys raise `ValueError` instead of being dropped.
- With neither `transport` nor `in_process`, the wire is the client's pooled default transport
  (one keep-alive pool for every handle, closed by `close(root)` or `aclose()`).
- `on_budget(handle, limit)` (def over runtime) is notified whenever a limit stops work.
- `approvals=` (def over runtime): the tools that wait for a human's approval
  (`toolnexus.approvals`); sticky `always` decisions are stored with the run (the root's record).
- `resume_mode="continue"` (def over runtime) keeps a halted transcript and continues it; the
  default is `"replay"` without a store and `"continue"` with one.
- Every per-turn client gets the runtime's clock as its `timer`.
- `trace` is a bounded ring (`trace_limit`, default 10 000 lines), every transition is also a
  structured event in `events` and, if set, passed to `on_transition(event)`.
- `on_pending(pending)` (with a store): called with a `PendingRun` for each request the run
  waits on, once the commit that stores it has landed (so the request can be answered from any
  process by then); sync or async, its failures are warned about, never raised. A notifier
  hangs here (`toolnexus.inbox.Notifications.on_pending`); a `Worker` passes it through.
- `await rt.snapshot()` / `AgentRuntime.from_snapshot(...)`: the whole runtime as plain JSON.
- `async with AgentRuntime(...) as rt:` / `await rt.aclose()` free the runtime's resources
  (transport, background work, a store lease) without closing its handles: a parked run stays
  parked in the store.
- `repr(rt)` never shows the `llm` api key.
"""

from __future__ import annotations

import asyncio
import builtins
from typing import Any, Callable, Optional

from .._redact import REDACTED
from ..approvals import ApprovalPolicy
from ..client import InMemoryConversationStore, InProcessTransport
from ..client._client import api_key_from_env
from ..client._http11 import default_transport
from ..durable import DEFAULT_LEASE_TTL, RunStore, is_run_store
from ..durable._model import new_run_id
from ..errors import ToolnexusTypeError, ToolnexusValueError
from ..types import Answer, Request
from ._answering import apply_answer
from ._budget import (
    DEFAULT_MAX_CONCURRENT as DEFAULT_MAX_CONCURRENT,
    DEFAULT_MAX_DEPTH as DEFAULT_MAX_DEPTH,
    DEFAULT_MAX_TURNS as DEFAULT_MAX_TURNS,
    Budget,
)
from ._core import RuntimeCore
from ._defs import RESUME_CONTINUE, RESUME_REPLAY, AgentDef, check_resume_mode
from ._durable import DurableRun
from ._gate import TurnGate
from ._handle import Handle, HandleView, InboxItem, PostResult, SpawnError, TaskResult, subtree
from ._restore import restore_run
from ._snapshot import restore_runtime, snapshot_runtime
from ._trace import DEFAULT_TRACE_LIMIT, TraceRing, check_trace_limit
from ._turn import run_admitted, settle_interrupted, start_wake
from ._vocab import HandleState, TaskStatus
from .clock import AsyncioClock, Clock

LLM_KEYS = ("base_url", "style", "model", "api_key", "request_params")
_LLM_DEFAULTS = {"base_url": "http://mock.local", "style": "openai", "api_key": "unused"}

_TRANSPORT_AND_IN_PROCESS = (
    "toolnexus.agents: `transport` and `in_process` are mutually exclusive — set one, not both"
)
_LLM_AND_IN_PROCESS = (
    "toolnexus.agents: `llm` and `in_process` are mutually exclusive — "
    "an in-process model has no wire endpoint for `llm` to point at"
)


def _check_registry(registry: Any) -> None:
    if not isinstance(registry, dict):
        raise ToolnexusTypeError(
            f"toolnexus.agents: registry must be a dict of name → AgentDef, got {type(registry).__name__}"
        )
    for name, defn in registry.items():
        if not isinstance(defn, AgentDef):
            raise ToolnexusTypeError(
                f"toolnexus.agents: registry[{name!r}] must be an AgentDef, got {type(defn).__name__}"
            )
        check_resume_mode(defn.resume_mode, f"registry[{name!r}]")


def _check_llm(llm: Optional[dict[str, Any]]) -> dict[str, Any]:
    """The `llm` keys with their defaults (`request_params`, optional, is the turn client's: e.g.
    `{"max_tokens": 16000}` to raise Anthropic's pinned 4096). The API key is found like the client finds it:
    `llm["api_key"]`, else the environment (`OPENROUTER_API_KEY`, the style's own variable, the
    other one), else the placeholder `"unused"` (a scripted or local model needs none)."""
    llm = dict(llm or {})
    unknown = sorted(k for k in llm if k not in LLM_KEYS)
    if unknown:
        raise ToolnexusValueError(
            f"toolnexus.agents: unknown llm key(s) {', '.join(map(repr, unknown))} — "
            f"the runtime reads only {', '.join(LLM_KEYS)}; configure anything else on the transport"
        )
    if llm.get("request_params") is not None and not isinstance(llm["request_params"], dict):
        raise ToolnexusTypeError(f"toolnexus.agents: llm['request_params'] must be a dict of request body keys, got "
                                 f"{type(llm['request_params']).__name__}")
    merged = {**_LLM_DEFAULTS, **llm}
    if not llm.get("api_key"):
        style_key = "ANTHROPIC_API_KEY" if merged["style"] == "anthropic" else "OPENAI_API_KEY"
        merged["api_key"] = api_key_from_env(style_key) or _LLM_DEFAULTS["api_key"]
    return merged


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
        in_process: Optional[Callable[[dict[str, Any]], Any]] = None,
        store: Any = None,
        clock: Optional[Clock] = None,
        hooks: Any = None,
        on_metric: Optional[Callable[[dict[str, Any]], None]] = None,
        on_budget: Optional[Callable[[Handle, str], Any]] = None,
        on_transition: Optional[Callable[[dict[str, Any]], Any]] = None,
        trace_limit: Optional[int] = DEFAULT_TRACE_LIMIT,
        resume_mode: Optional[str] = None,
        run_id: Optional[str] = None,
        lease_ttl: float = DEFAULT_LEASE_TTL,
        approvals: Any = None,
        on_pending: Optional[Callable[[Any], Any]] = None,
    ) -> None:
        if transport is not None and in_process is not None:
            raise ToolnexusValueError(_TRANSPORT_AND_IN_PROCESS)
        if llm and in_process is not None:
            raise ToolnexusValueError(_LLM_AND_IN_PROCESS)
        _check_registry(registry)
        llm = _check_llm(llm)
        if not isinstance(inbox_cap, int) or inbox_cap < 0:
            raise ToolnexusValueError(f"toolnexus.agents: inbox_cap must be an integer >= 0, got {inbox_cap!r}")
        durable_store = store if is_run_store(store) else None
        if run_id is not None and durable_store is None:
            raise ToolnexusValueError(
                "toolnexus.agents: run_id needs a durable store (store=open_store(...)) to name the run in"
            )
        if run_id is not None and (not isinstance(run_id, str) or not run_id.strip()):
            raise ToolnexusValueError(f"toolnexus.agents: run_id must be a non-empty string, got {run_id!r}")
        default_mode = RESUME_CONTINUE if durable_store is not None else RESUME_REPLAY
        mode: str = check_resume_mode(resume_mode, "AgentRuntime") or default_mode
        owns_transport = transport is None and in_process is None
        if in_process is not None:
            wire: Any = InProcessTransport(in_process)
        elif transport is not None:
            wire = transport
        else:  # one pooled keep-alive client for every handle's turns; closed with the root
            wire = default_transport()
        the_clock: Clock = clock if clock is not None else AsyncioClock()
        durable = None
        if durable_store is not None:
            durable = DurableRun(durable_store, run_id or new_run_id(), lease_ttl=lease_ttl, clock=the_clock,
                                 named=run_id is not None)
        conversations = (
            durable.view if durable is not None else (store if store is not None else InMemoryConversationStore())
        )
        self._core = RuntimeCore(
            registry=registry, transport=wire, owns_transport=owns_transport, llm=llm, store=conversations,
            clock=the_clock, gate=TurnGate(max_concurrent_turns), inbox_cap=inbox_cap, shutdown_ms=shutdown_ms,
            hooks=hooks, on_metric=on_metric, on_budget=on_budget, on_transition=on_transition, resume_mode=mode,
            trace_limit=check_trace_limit(trace_limit), durable=durable, approvals=ApprovalPolicy.of(approvals),
            on_pending=on_pending, start_turn=start_wake, settle_interrupted=settle_interrupted)
        if durable is not None:
            durable.attach(self._core)

    # -- read-only surface ---------------------------------------------------------------------------

    @property
    def run_state(self) -> RuntimeCore:
        """The runtime's state and verbs, for toolnexus's own hosts (restore, the lifecycle verbs,
        `Agent.run`, the Temporal workflow): the one supported way past this facade. Applications
        use the runtime's verbs; what the core offers beyond them may change between versions."""
        return self._core

    @property
    def root(self) -> Handle:
        return self._core.root

    @property
    def registry(self) -> dict[str, AgentDef]:
        return self._core.registry

    @property
    def trace(self) -> TraceRing:
        return self._core.trace

    @property
    def events(self) -> TraceRing:
        return self._core.events

    @property
    def conversation_store(self) -> Any:
        """The one store every handle's conversation lives in (a read handle, not a setter). With a
        durable store, the run's view of it (transcripts staged for the next commit)."""
        return self._core.store

    @property
    def clock(self) -> Clock:
        return self._core.clock

    @property
    def transport(self) -> Any:
        """The transport every turn's LLM requests go through (behind the turn gate)."""
        return self._core.transport

    @property
    def resume_mode(self) -> str:
        return self._core.resume_mode

    @property
    def store(self) -> Optional[RunStore]:
        """The durable store this runtime's run lives in, or None."""
        return self._core.durable.store if self._core.durable is not None else None

    @property
    def run_id(self) -> Optional[str]:
        """The run's id in its durable store, or None without one."""
        return self._core.durable.run_id if self._core.durable is not None else None

    @property
    def entry(self) -> Optional[Handle]:
        """The first handle spawned under root (the agent `Agent.run` started), if any."""
        return self._core.root.children[0] if self._core.root.children else None

    @property
    def concurrent_turns(self) -> int:
        """LLM requests in flight right now (inside the turn gate)."""
        return self._core.gate.active

    @property
    def max_observed_concurrent_turns(self) -> int:
        return self._core.gate.max_observed

    def __repr__(self) -> str:
        core = self._core
        store = f", store={core.durable.store.url!r}, run_id={core.durable.run_id!r}" if core.durable else ""
        llm = {k: (REDACTED if k == "api_key" and v else v) for k, v in core.llm.items()}
        return f"AgentRuntime(agents={sorted(core.registry)!r}, llm={llm!r}{store})"

    async def quiesce(self, timeout: Optional[float] = None) -> bool:
        """Wait until no LLM request is in flight, including requests of aborted turns whose
        worker threads are still running, so every counter is final. False on timeout (seconds)."""
        unwinding = [turn.finished.wait() for turn in self._core.turns if turn.settled]
        if unwinding:  # aborted bodies still unwinding: let them close their meters first
            await asyncio.gather(*unwinding)
        return await self._core.gate.idle(timeout)

    def list(
        self, h: Optional[Handle] = None, acc: Optional[builtins.list[HandleView]] = None
    ) -> builtins.list[HandleView]:
        """Pre-order views of the subtree under `h` (default: the whole tree), root excluded."""
        acc = acc if acc is not None else []
        root = self._core.root
        acc.extend(self.inspect(node) for node in subtree(h if h is not None else root) if node is not root)
        return acc

    def inspect(self, h: Handle) -> HandleView:
        return HandleView(h.id, h.state, h.usage_total, len(h.inbox))

    def resume_mode_of(self, h: Handle) -> str:
        """How a durable suspension of `h` is resumed: `"replay"` or `"continue"` (def over runtime)."""
        return self._core.resume_mode_of(h)

    # -- the six verbs ---------------------------------------------------------------------------------

    # The synchronous verbs (spawn, post, wake, interrupt, dispatch_queued) cannot await a commit:
    # with a durable store each *schedules* one (written within milliseconds, or with the next awaited
    # commit); `await rt.flush()` waits for it. With a store and no running event loop nothing could
    # ever write the change, so they raise `ToolnexusRuntimeError` before changing anything. The
    # async verbs (`wait`, `run_turn`, `close`, `resume`, `flush`) return once their commit is written.

    def spawn(self, parent: Handle, def_name: str, budget: Optional[Budget] = None) -> Handle | SpawnError:
        """Create a child of `parent` (synchronous). Only the spawner receives the handle.

        Does not await its commit (with a store it is scheduled; `await rt.flush()` waits for it)."""
        return self._core.spawn(parent, def_name, budget)

    def post(self, h: Handle, item: InboxItem) -> PostResult:
        """Put unsolicited input into `h`'s inbox; it enters only at the next explicit wake.

        Does not await its commit (with a store it is scheduled; `await rt.flush()` waits for it)."""
        return self._core.post(h, item)

    def wake(self, h: Handle, prompt: Optional[str] = None) -> PostResult:
        """Start a turn now, or queue it behind the parent's concurrency gate.

        Does not await its commit (with a store it is scheduled; `await rt.flush()` waits for it)."""
        return self._core.wake(h, prompt)

    async def wait(self, h: Handle, timeout_ms: Optional[float] = None) -> TaskResult:
        """The next result of `h`, or its settled one; a truthy `timeout_ms` bounds the wait."""
        return await self._core.wait(h, timeout_ms)

    def interrupt(self, h: Handle) -> None:
        """Abort the running turn (idle when this returns) or cancel a durable pending request.

        Does not await its commit (with a store it is scheduled; `await rt.flush()` waits for it)."""
        self._core.interrupt(h)

    async def close(self, h: Handle, *, force: bool = False, reason: Optional[str] = None) -> None:
        """Close `h` and its subtree, leaf first. Never raises. `close(root)` ends the run. With a
        store it returns once the closing is committed (a failed commit is warned about and kept
        in `commit_error`; what is staged is written by the next commit)."""
        await self._core.close(h, force=force, reason=reason)
        if h is not self._core.root:  # closing the root ends the run: its shutdown committed already
            await self._core.commit_quietly(f"close({h.id})")

    def dispatch_queued(self) -> int:
        """Hand free concurrency slots to queued wakes (arrival order); how many were started.

        A restored runtime starts no queued turn by itself; this is how its queued wakes get going.
        Does not await its commit (with a store it is scheduled; `await rt.flush()` waits for it)."""
        return self._core.dispatch_queued()

    async def run_turn(self, h: Handle, prompt: Optional[str] = None,
                       one_shot_wait_for: Optional[Callable[[Request], Any]] = None) -> TaskResult:
        """Run one turn of an idle handle with exactly `prompt` as input (the inbox is not drained).

        With a store it returns once the turn's end is committed (raises the store's error if that
        commit fails; nothing staged is lost, `await rt.flush()` tries again)."""
        if h.state == HandleState.CLOSED:
            return TaskResult("closed", True, TaskStatus.CLOSED)
        result = await run_admitted(self._core, h, prompt or "", one_shot=one_shot_wait_for)
        if self._core.durable is not None:
            await self._core.durable.flush()
        return result

    async def resume(self, answer: Answer) -> TaskResult:
        """Apply a host's `Answer` to the parked handle holding its request, then cascade up.

        The handle resumes its parked turn with the Answer bound to the halted call (replay: the
        turn is asked again; continue: the halted call is filled and the loop goes on); each
        parked ancestor then resumes too, its `task` call reattaching to the same child by task
        key. Returns the outermost result. Counters only grow.

        With a store it returns once what the resume did is committed. What it raises means the
        answer was not applied; once the answer's application has committed (before the answered
        tool runs), a later store failure is not raised as if it had not been: it is warned about
        and kept in `commit_error` (`await rt.flush()` tries again)."""
        result = await apply_answer(self._core, answer)
        if self._core.durable is not None:
            await self._core.durable.flush_applied(answer.id if isinstance(answer, Answer) else str(answer["id"]))
        return result

    async def flush(self) -> None:
        """With a durable store: commit everything staged now (the synchronous verbs only schedule
        a commit). Raises the store's error if it fails; nothing staged is lost."""
        if self._core.durable is not None:
            await self._core.durable.flush()

    @property
    def commit_error(self) -> Optional[BaseException]:
        """With a durable store: the last commit failure not overcome yet (a background commit's, or
        one after an applied answer), else None. What it failed to write stays staged; the next
        commit that gets through (`await rt.flush()`) writes it and clears this."""
        return self._core.durable.failure if self._core.durable is not None else None

    async def aclose(self) -> None:
        """Free this runtime's resources without closing its handles: background work is stopped,
        an owned transport closed, and with a store what is staged is committed and the lease
        given up (a parked run stays parked in the store)."""
        await self._core.shutdown(final=False)

    async def __aenter__(self) -> "AgentRuntime":
        return self

    async def __aexit__(self, *exc: Any) -> None:
        await self.aclose()

    # -- snapshot / restore ------------------------------------------------------------------------------

    async def snapshot(self, *, conversations: bool = True) -> dict[str, Any]:
        """The whole runtime as plain JSON: the handle tree in id order, trace, events, applied
        answers and (unless `conversations=False`, when the host shares a durable store) every
        handle's stored transcript. See `_snapshot.py`."""
        return await snapshot_runtime(self._core, conversations=conversations)

    @classmethod
    async def from_snapshot(
        cls, snapshot: dict[str, Any], *, registry: dict[str, AgentDef], **options: Any
    ) -> "AgentRuntime":
        """A fresh runtime (built with `registry` and `options`) holding the tree of `snapshot`.

        Raises `snapshot.SnapshotError` (a `ValueError`) when the snapshot is malformed or the
        registry's fingerprint does not match. A handle that was running comes back idle with an
        `interrupted by restart` result. With a durable store the tree is staged like a new
        runtime's: written by its first commit (`await rt.flush()`), not by this call."""
        rt = cls(registry=registry, **options)
        try:
            await restore_runtime(rt.run_state, snapshot)
        except BaseException:
            await rt.close(rt.root)  # frees a transport the refused runtime created
            raise
        return rt

    @classmethod
    async def restore(cls, store: RunStore, run_id: str, *, agents: Any, transport: Any = None,
                      llm: Optional[dict[str, Any]] = None, takeover: bool = False, **options: Any) -> "AgentRuntime":
        """The run `run_id` of `store`, rebuilt in this process from its last commit.

        `agents` gives the definitions (an `Agent`, a list of `Agent`s / `AgentDef`s, or a registry
        dict): code is never stored, only state; a definition the run needs but `agents` lacks is a
        `RestoreError` naming it. The run's lease is taken: a run held by a live process is refused
        with `RunInProgress` unless its lease expired, its holder died on this host, or `takeover`.
        Handles that were running when the run's last process stopped continue at once from the
        last commit (see `_restore.py`); parked handles stay parked until answered."""
        return await restore_run(cls, store, run_id, agents=agents, transport=transport, llm=llm,
                                 takeover=takeover, **options)
