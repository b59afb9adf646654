"""A runtime as plain JSON, and back: `AgentRuntime.snapshot()` / `AgentRuntime.from_snapshot()`.

A snapshot is one JSON-able dict:

- `format`: `SNAPSHOT_FORMAT`;
- `registry`: the registry fingerprint (`registry_fingerprint`): sorted def names and, per def, a
  hash of its serializable fields (description, soul, model, budget, team, tool names, resume
  mode). Callables (tools' code, `wait_for`, hooks, `on_metric`, completion) cannot be serialized;
  the restoring host passes the same definitions, and a mismatch fails loudly (`SnapshotError`);
- `handles`: every handle's `Handle.to_record()`, root first, in id order (pre-order, children in
  spawn order, so a parent always precedes its children) — ids, `seq`, states, task keys, pending
  request and preserved input, inbox, drained items, wake queues, pools, counters, `last_result`;
- `trace` / `events` (and how many lines each ring had dropped), the ids of answers already
  applied with their results (so a repeated `resume` stays idempotent after a restore), the turn
  gate's `max_observed_concurrent_turns`, and the clock anchors below;
- `conversations`: each handle's stored transcript (omit with `snapshot(conversations=False)` when
  the host passes the same durable store to the restoring runtime).

Restoring (`from_snapshot(snap, registry=..., **runtime_options)`) builds a fresh runtime, checks
the fingerprint, rebuilds the tree, writes the transcripts into the new runtime's store and then:

- a handle that was `running` (or mid inline escalation) comes back `idle`, its drained items back
  at the front of its inbox, with `last_result` = `interrupted` whose text is
  `interrupted by restart` (traced `running→idle (interrupted by restart)`); its in-flight spend
  is lost with the process;
- `running_children` is recomputed (no turn is live), and no turn is started: restoring never
  spends. Queued wakes stay queued until a slot is freed, or `rt.dispatch_queued()`;
- `spawned_at` is re-anchored on the new clock so each handle keeps its age, plus the wall time
  that passed since the snapshot (epoch anchors: a wall-clock limit counts downtime).

Strict JSON: non-finite floats (an explicit `math.inf` budget) are written as `{"$float": "inf"}`
and read back. Take a snapshot at a quiet point for an exact copy: the tree is recorded
synchronously, but the transcripts are read after it, from the (async) store.

This module only converts; the durable-runs issue commits these records to a checkpoint store.
"""

from __future__ import annotations

import asyncio
import dataclasses
import hashlib
import json
import math
import time
from typing import Any

from ..errors import ToolnexusError
from ._defs import AgentDef
from ._handle import HANDLE_STATES, Handle, TaskResult, restore_drained, result_of, subtree, take_suspension
from ._state import RunState
from ._vocab import HandleState, TaskStatus

SNAPSHOT_FORMAT = "toolnexus-agent-runtime/v2"
_READABLE = ("toolnexus-agent-runtime/v1", SNAPSHOT_FORMAT)  # v1 kept a handle's suspension in loose fields
RESTART_TEXT = "interrupted by restart"
_PREFIX = "toolnexus.agents: cannot restore snapshot — "


class SnapshotError(ToolnexusError, ValueError):
    """A snapshot that cannot be restored into this runtime (wrong format, registry or shape)."""


# --------------------------------------------------------------------------- fingerprint


def _def_digest(defn: AgentDef) -> str:
    fields = {
        "description": defn.description,
        "system_prompt": defn.system_prompt,
        "model": defn.model,
        "budget": dataclasses.asdict(defn.budget) if defn.budget is not None else None,
        "task_targets": list(defn.task_targets or []),
        "tools": [t.name for t in defn.tools or []],
        "resume_mode": defn.resume_mode,
    }
    text = json.dumps(fields, sort_keys=True, default=repr)
    return hashlib.sha256(text.encode("utf-8")).hexdigest()


def registry_fingerprint(registry: dict[str, AgentDef]) -> dict[str, Any]:
    """Sorted def names plus a hash per def of its serializable fields."""
    return {"names": sorted(registry), "defs": {name: _def_digest(registry[name]) for name in sorted(registry)}}


def check_fingerprint(registry: dict[str, AgentDef], recorded: Any) -> None:
    if not isinstance(recorded, dict) or not isinstance(recorded.get("defs"), dict):
        raise SnapshotError(_PREFIX + "it has no registry fingerprint")
    ours = registry_fingerprint(registry)["defs"]
    theirs = recorded["defs"]
    missing = sorted(set(theirs) - set(ours))
    added = sorted(set(ours) - set(theirs))
    changed = sorted(n for n in set(ours) & set(theirs) if ours[n] != theirs[n])
    if missing or added or changed:
        parts = [f"{label}: {', '.join(names)}" for label, names in
                 (("missing", missing), ("changed", changed), ("not in snapshot", added)) if names]
        raise SnapshotError(
            _PREFIX + "the registry does not match the one it was taken with (" + "; ".join(parts) + ")"
        )


# --------------------------------------------------------------------------- strict JSON


def _encode(value: Any) -> Any:
    if isinstance(value, float) and not math.isfinite(value):
        return {"$float": repr(value)}
    if isinstance(value, dict):
        return {str(k): _encode(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [_encode(v) for v in value]
    return value


def _decode(value: Any) -> Any:
    if isinstance(value, dict):
        if len(value) == 1 and isinstance(value.get("$float"), str):
            return float(value["$float"])
        return {k: _decode(v) for k, v in value.items()}
    if isinstance(value, list):
        return [_decode(v) for v in value]
    return value


# --------------------------------------------------------------------------- snapshot


def _applied_answers(core: RunState) -> dict[str, Any]:
    out: dict[str, Any] = {}
    for answer_id, fut in core.resumes.items():
        if fut.done() and not fut.cancelled() and fut.exception() is None:
            out[answer_id] = fut.result().to_record()
    return out


async def snapshot_runtime(core: RunState, *, conversations: bool = True) -> dict[str, Any]:
    """The runtime as one JSON-able dict (see the module docstring)."""
    handles = list(subtree(core.root))
    snap: dict[str, Any] = {  # recorded synchronously: one consistent tree
        "format": SNAPSHOT_FORMAT,
        "registry": registry_fingerprint(core.registry),
        "clock": {"now": core.clock.now(), "epoch": time.time()},
        "handles": [h.to_record() for h in handles],
        "trace": list(core.trace),
        "trace_dropped": core.trace.dropped,
        "events": [dict(e) for e in core.events],
        "events_dropped": core.events.dropped,
        "answers": _applied_answers(core),
        "max_observed_concurrent_turns": core.gate.max_observed,
    }
    if conversations:
        stored: dict[str, Any] = {}
        for h in handles[1:]:
            messages = await core.store.get(h.id)
            if messages is not None:
                stored[h.id] = messages
        snap["conversations"] = stored
    encoded: dict[str, Any] = _encode(snap)
    return encoded


# --------------------------------------------------------------------------- restore


def rebuild_tree(core: RunState, records: list[Any], prefix: str = _PREFIX) -> dict[str, Handle]:
    """Every handle from its record, parents first; children re-linked in spawn order."""
    if not records or not isinstance(records[0], dict) or records[0].get("id") != "root":
        raise SnapshotError(prefix + "its first handle record must be the root")
    by_id: dict[str, Handle] = {}
    for index, rec in enumerate(records):
        where = f"handle #{index} ({rec.get('id') if isinstance(rec, dict) else rec!r})"
        if not isinstance(rec, dict):
            raise SnapshotError(prefix + f"{where} is not an object")
        if index == 0:
            defn, parent = core.root.defn, None
        else:
            found = core.registry.get(rec.get("def_name"))  # type: ignore[arg-type]
            parent = by_id.get(rec.get("parent_id"))  # type: ignore[arg-type]
            if found is None:
                raise SnapshotError(prefix + f"{where} uses def {rec.get('def_name')!r}, which the registry lacks")
            defn = found
            if parent is None:
                raise SnapshotError(prefix + f"{where} names parent {rec.get('parent_id')!r}, not recorded before it")
        if rec.get("state") not in HANDLE_STATES:
            raise SnapshotError(prefix + f"{where} has state {rec.get('state')!r} (expected one of {HANDLE_STATES})")
        try:
            by_id[rec["id"]] = Handle.from_record(rec, defn, parent)
        except (KeyError, TypeError, ValueError) as exc:
            raise SnapshotError(prefix + f"{where} is malformed: {type(exc).__name__}: {exc}") from None
    for rec in records:
        h = by_id[rec["id"]]
        try:
            h.children = [by_id[child_id] for child_id in rec.get("children", [])]
        except KeyError as exc:
            raise SnapshotError(prefix + f"handle {h.id!r} lists child {exc.args[0]!r}, which has no record") from None
    return by_id


def _interrupted_by_restart(core: RunState, h: Handle) -> None:
    """A turn that was live when the snapshot was taken: idle, inbox intact, `interrupted`."""
    restore_drained(h)
    take_suspension(h)
    h.turn_info = None
    core.transition(h, HandleState.IDLE, f"({RESTART_TEXT})")
    h.last_result = result_of(h, RESTART_TEXT, TaskStatus.INTERRUPTED)


def reanchor(core: RunState, handles: Any, then: Any, epoch: Any) -> None:
    """Re-anchor each handle's `spawned_at` on this runtime's clock, counting the downtime since
    `epoch` (wall clock) so wall-clock limits keep measuring real age; no turn is live."""
    downtime = max(0.0, time.time() - epoch) if isinstance(epoch, (int, float)) else 0.0
    now = core.clock.now()
    for h in handles:
        if isinstance(then, (int, float)):
            h.spawned_at = now - (then - h.spawned_at) - downtime
        h.running_children = 0


async def restore_runtime(core: RunState, snapshot: Any) -> None:
    """Load `snapshot` into the fresh runtime state `core` (see the module docstring)."""
    if not isinstance(snapshot, dict) or snapshot.get("format") not in _READABLE:
        got = snapshot.get("format") if isinstance(snapshot, dict) else type(snapshot).__name__
        raise SnapshotError(_PREFIX + f"expected format {SNAPSHOT_FORMAT!r}, got {got!r}")
    check_fingerprint(core.registry, snapshot.get("registry"))
    snap = _decode(snapshot)
    by_id = rebuild_tree(core, snap.get("handles"))
    core.trace.extend(snap.get("trace", []))
    core.trace.dropped += int(snap.get("trace_dropped", 0))
    core.events.extend(snap.get("events", []))
    core.events.dropped += int(snap.get("events_dropped", 0))
    core.gate.max_observed = max(core.gate.max_observed, int(snap.get("max_observed_concurrent_turns", 0)))
    clock = snap.get("clock") or {}
    reanchor(core, by_id.values(), clock.get("now"), clock.get("epoch"))
    core.root = by_id["root"]
    for h in subtree(core.root):
        if h.state == HandleState.RUNNING or (h.state == HandleState.SUSPENDED and h.pending_req is None):
            _interrupted_by_restart(core, h)
    loop = asyncio.get_running_loop()
    for answer_id, rec in (snap.get("answers") or {}).items():
        fut: asyncio.Future[TaskResult] = loop.create_future()
        fut.set_result(TaskResult.from_record(rec))
        core.resumes[answer_id] = fut
    for conv_id, messages in (snap.get("conversations") or {}).items():
        await core.store.save(conv_id, messages)

