"""Bringing a durable run back in any process: `AgentRuntime.restore` (and, built on it, the host
verb `toolnexus.agents.resume` in _resumption.py).

`restore_run` takes the run's lease, reads its last commit and rebuilds the handle tree in this
process, taking what cannot be stored (tools, `wait_for`, hooks, completion gates) from the agent
definitions passed in. Then it picks up what the previous process left in flight:

- a handle that was **running** continues at once, as a *recovery* turn (`turn.Recovery`): a run
  that had not started asks its input again; otherwise the stored transcript is continued with
  the run journal (`client.continue_run`): recorded results are kept, an LLM call the crash cut is
  sent again, a tool call that started but recorded nothing is not re-run silently — it parks as
  an `in_doubt` request (or simply runs again when its tool is `idempotent`);
- an answer that was **claimed** by a process that died before applying it (on this host; on
  another, once the claim is older than the lease TTL) is applied now;
- a resume **cascade** that was cut (a child settled, its parked parent not yet continued) goes on.

Parked handles otherwise stay parked until answered. A definition the run needs but `agents`
lacks is a `RestoreError` naming it; a definition that changed since the run was stored is used
as it is now, with a warning (code is never stored, only state).
"""

from __future__ import annotations

import asyncio
from collections.abc import Mapping
from typing import TYPE_CHECKING, Any, Callable, Iterable, Optional, Protocol, TypeVar, runtime_checkable

from .._diag import warn
from ..durable import DEFAULT_LEASE_TTL, RestoreError, RunStore, StoreVersionError
from ..durable._model import APPLIED, CLAIMED, KIND_AGENTS, RUN_FORMAT, Holder, LoadedRun, epoch
from ..durable._queue import QUEUED_RUN
from ..errors import ToolnexusTypeError
from ..types import Answer
from ._answering import apply_answer, cascade_one
from ._defs import AgentDef
from ._handle import Handle, is_parked
from ._scope import TurnScope
from ._snapshot import SnapshotError, rebuild_tree, registry_fingerprint
from ._turn import begin_turn, run_body
from ._turnstate import Recovery
from ._vocab import HandleState

if TYPE_CHECKING:  # pragma: no cover
    from ._core import RuntimeCore


class RestoredRuntime(Protocol):
    """What `restore_run` needs of the runtime it builds (`AgentRuntime` is one)."""

    @property
    def run_state(self) -> "RuntimeCore": ...

    async def aclose(self) -> None: ...


R = TypeVar("R", bound=RestoredRuntime)


@runtime_checkable
class DefinesAgents(Protocol):
    """An `Agent` (_surface.py) or alike: `registry()` gives its definitions by name (it may read files)."""

    def registry(self) -> dict[str, AgentDef]: ...

_PREFIX = "toolnexus.agents: cannot restore run — "


async def registry_of(agents: Any) -> dict[str, AgentDef]:
    """Agent definitions by name from an `Agent`, an `AgentDef`, a registry dict, or a list of those."""
    if isinstance(agents, Mapping):
        return dict(agents)
    items: Iterable[Any] = [agents] if not isinstance(agents, (list, tuple)) else agents
    registry: dict[str, AgentDef] = {}
    for item in items:
        if isinstance(item, AgentDef):
            registry.setdefault(item.name, item)
        elif isinstance(item, DefinesAgents):
            for name, defn in (await asyncio.to_thread(item.registry)).items():
                registry.setdefault(name, defn)
        else:
            raise ToolnexusTypeError(f"toolnexus.agents: agents= takes Agents, AgentDefs or a registry dict, got "
                            f"{type(item).__name__}")
    return registry


def _check_definitions(run_id: str, loaded: LoadedRun, registry: dict[str, AgentDef]) -> None:
    needed = sorted({str(rec.get("def_name")) for hid, rec in loaded.handles.items() if hid != "root"}
                    | ({loaded.entry_agent} if loaded.entry_agent else set()))
    missing = [name for name in needed if name not in registry]
    if missing:
        raise RestoreError(
            _PREFIX + f"run {run_id!r} needs the agent definition(s) {', '.join(map(repr, missing))}, which agents= "
            f"does not give (given: {', '.join(sorted(registry)) or 'none'}) — pass the same agents the run was "
            "started with")
    recorded = (loaded.state or {}).get("registry")
    if isinstance(recorded, dict) and isinstance(recorded.get("defs"), dict):
        ours = registry_fingerprint(registry)["defs"]
        changed = sorted(n for n in needed if n in recorded["defs"] and ours.get(n) != recorded["defs"][n])
        if changed:
            warn(f"[toolnexus] agents: restoring run {run_id!r} with changed definition(s) {', '.join(changed)} "
                 "(soul, model, budget, team or tools differ from when it was stored); continuing with the new ones")


def _records_in_order(run_id: str, handles: dict[str, dict[str, Any]]) -> list[dict[str, Any]]:
    """Handle records root first, each parent before its children, children in spawn order."""
    if "root" not in handles:
        raise RestoreError(_PREFIX + f"run {run_id!r} has no root handle record")
    ordered: list[dict[str, Any]] = []
    stack = ["root"]
    seen: set[str] = set()
    while stack:
        hid = stack.pop()
        if hid in seen:
            continue
        seen.add(hid)
        rec = handles.get(hid)
        if rec is None:
            raise RestoreError(_PREFIX + f"run {run_id!r} names handle {hid!r} but holds no record of it")
        ordered.append(rec)
        stack.extend(reversed(rec.get("children") or []))
    return ordered


def _rebuild(core: "RuntimeCore", loaded: LoadedRun) -> None:
    durable = core.durable
    assert durable is not None
    try:
        by_id = rebuild_tree(core, _records_in_order(loaded.run_id, loaded.handles), _PREFIX)
    except SnapshotError as exc:
        raise RestoreError(str(exc)) from None
    now, wall = core.clock.now(), epoch()
    for hid, h in by_id.items():
        born = loaded.handles[hid].get("spawned_epoch")
        if isinstance(born, (int, float)):
            h.spawned_at = now - max(0.0, wall - born)
        h.running_children = 0
    core.root = by_id["root"]
    durable.forget_staged_handles()
    core.trace.extend(loaded.trace)
    for conv, messages in loaded.conversations.items():
        durable.load_conversation(conv, messages)
    durable.load_calls(loaded.calls, loaded.handles)
    durable.entry_agent = loaded.entry_agent
    durable.state = dict(loaded.state or {})
    fingerprint = registry_fingerprint(core.registry)
    if durable.state.get("registry") != fingerprint:  # unchanged: nothing to write (no commit of its own)
        durable.state["registry"] = fingerprint
        durable.set_state()


def _was_running(h: Handle) -> bool:
    return h.state == HandleState.RUNNING or (h.state == HandleState.SUSPENDED and h.suspension is None)


def _post_order(h: Handle) -> list[Handle]:
    out: list[Handle] = []
    for child in h.children:
        out.extend(_post_order(child))
    out.append(h)
    return out


async def _cascade_from(core: "RuntimeCore", node: Optional[Handle], applied: set[str]) -> None:
    """Continue a cascade a crash cut: parked ancestors whose request was answered and applied."""
    while (node is not None and node is not core.root and is_parked(node)
           and node.pending_req is not None and node.pending_req.id in applied):
        await cascade_one(core, node)
        node = node.parent


async def _recover_turn(scope: TurnScope, applied: set[str]) -> None:
    await run_body(scope)
    await _cascade_from(scope.run, scope.handle.parent, applied)


def _recover(core: "RuntimeCore", loaded: LoadedRun) -> None:
    """Start what the previous process left in flight (see the module docstring)."""
    rows = {row.request_id: row for row in loaded.pending}
    applied = {rid for rid, row in rows.items() if row.status == APPLIED}
    handles = _post_order(core.root)[:-1]  # children before parents; root excluded
    for h in handles:
        if not _was_running(h):
            continue
        info = h.turn_info or {}
        calls = {call_id: row for (conv, call_id), row in loaded.calls.items() if conv == h.id}
        calls.update(core.durable.calls_of(h.id) if core.durable is not None else {})
        h.state = HandleState.IDLE  # as it is once the dead process's turn is gone; the recovery traces idle→running
        core.trace_line(h, "restored while its turn was in flight (recovering from the last commit)")
        scope = begin_turn(core, h, str(info.get("input") or ""), detail="(recover)",
                           recovery=Recovery(calls, bool(info.get("started"))))
        core.background(_recover_turn(scope, applied))
    for h in handles:
        if h.state == HandleState.IDLE and h.parent is not None and h.parent is not core.root:
            parent = h.parent
            if is_parked(parent) and parent.pending_req is not None and parent.pending_req.id in applied \
                    and not any(c.state in (HandleState.RUNNING, HandleState.SUSPENDED) for c in parent.children):
                core.background(_cascade_from(core, parent, applied))
    me = core.durable.holder if core.durable is not None else None
    for h in handles:
        if not is_parked(h) or h.pending_req is None:
            continue
        row = rows.get(h.pending_req.id)
        if row is None or row.status != CLAIMED or not isinstance(row.answer, dict):
            continue
        claimer = Holder.from_dict(row.claim)
        if claimer is not None and me is not None and claimer.id == me.id:
            continue  # claimed by the host restoring us: it applies the answer itself
        ttl = core.durable.lease_ttl if core.durable is not None else DEFAULT_LEASE_TTL
        stale = row.answered_at is not None and row.answered_at + ttl <= epoch()  # its claimer (elsewhere) is gone
        if claimer is None or claimer.is_dead_here() or stale:
            core.background(apply_answer(core, Answer.from_dict(row.answer)))
    core.dispatch_queued()


async def restore_run(cls: Callable[..., R], store: RunStore, run_id: str, *, agents: Any, transport: Any = None,
                      llm: Optional[dict[str, Any]] = None, takeover: bool = False, holder: Optional[Holder] = None,
                      **options: Any) -> R:
    """`AgentRuntime.restore` (see the module docstring)."""
    registry = await registry_of(agents)
    rt = cls(registry=registry, store=store, run_id=run_id, transport=transport, llm=llm, **options)
    core = rt.run_state
    durable = core.durable
    assert durable is not None
    if holder is not None:
        durable.holder = holder
    acquired = False
    try:
        version = await store.acquire(run_id, durable.holder, lease_ttl=durable.lease_ttl, takeover=takeover)
        acquired = True
        loaded = await store.load(run_id)
        if loaded.kind != KIND_AGENTS:
            raise RestoreError(_PREFIX + f"{run_id!r} is a client conversation, not an agent run; continue it with "
                               "client.ask(..., id=...)")
        if loaded.status == QUEUED_RUN and not loaded.handles:
            raise RestoreError(_PREFIX + f"run {run_id!r} is queued and has not started yet: a worker starts it "
                               "(toolnexus worker --store ...), or cancel it (toolnexus cancel)")
        if loaded.format > RUN_FORMAT:
            raise StoreVersionError(f"toolnexus: run {run_id!r} was written by a newer toolnexus (format "
                                    f"{loaded.format}; this version reads {RUN_FORMAT})")
        _check_definitions(run_id, loaded, registry)
        _rebuild(core, loaded)
        durable.adopt(version)
        durable.mark_status(loaded.status)
    except BaseException:
        if acquired:
            try:
                await store.release(run_id, durable.holder)
            except Exception:
                pass
        durable.abandon()
        await rt.aclose()
        raise
    _recover(core, loaded)
    return rt
