"""The plain data a durable store reads and writes, and who holds a run.

- `PendingRun`, `RunSummary`: what `store.pending()` and `store.runs()` return to a host.
- `Holder`: the identity of one live runtime (a random id, plus host, pid and the process start
  time, so a lease held by a process that died on this host can be recognised as dead even when
  its pid was reused).
- `Changes`: one commit — everything a runtime changed since its last commit, applied by the
  store in one transaction (handle records, the new messages of each transcript, pending
  requests, the tool-call journal, trace lines, run status).
- `LoadedRun`: a run as read back (the same parts, folded).
- `DamagedRow`, `DamagedRun`: what `store.check()` reports — a stored row that cannot be read.

Records are JSON: `dumps` writes compact UTF-8 JSON and spells the non-finite floats JSON lacks
(an unlimited budget) as `{"$float": "inf"}`, and any surrogate as its `\\uXXXX` escape, so
every text it returns can be encoded (and decodes back to the same value); `loads` reads them
back and refuses a bare `NaN`/`Infinity` (which `dumps` never writes: such a row is damaged).
`decoded` is `loads` for one stored row: a row that cannot be read is a `RunDamaged` naming the
run, the row and the request — one bad row never stops a reader of the others.
"""

from __future__ import annotations

import json
import math
import os
import socket
import time
import uuid
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import Any, Optional

from .._text import json_text
from ..errors import ToolnexusValueError
from ..types import Request
from .errors import RunDamaged

SCHEMA_VERSION = 1  # the layout of the store itself (tables, files)
RUN_FORMAT = 1  # the layout of one run's records
CONVERSATION_PREFIX = "conversation:"  # run ids of client-level conversations (`ask(id=...)`)
KIND_AGENTS = "agents"
KIND_CONVERSATION = "conversation"


def new_run_id() -> str:
    """A generated run id: `run-`, the creation time in milliseconds (12 hex digits), then 80
    random bits (20 hex digits). Ids made later sort later, so a new run's rows land at the end of
    every index keyed by run id (appended, not wedged between old runs, where a B-tree page split
    writes three pages; see docs/performance.md). Still
    unguessable: the random part alone is larger than most session tokens."""
    return f"run-{time.time_ns() // 1_000_000:012x}{os.urandom(10).hex()}"


# pending row states
OPEN = "open"
CLAIMED = "claimed"
QUEUED = "queued"  # answered through the store's work queue (`submit_answer`); a worker applies it
APPLIED = "applied"
CANCELLED = "cancelled"
# A damaged run taken out of service (`store.quarantine`): the run's status, and its waiting requests'.
QUARANTINED = "quarantined"


def epoch() -> float:
    """Wall-clock seconds: leases and timestamps are compared across processes and hosts."""
    return time.time()


def to_datetime(seconds: Optional[float]) -> Optional[datetime]:
    return None if seconds is None else datetime.fromtimestamp(seconds, UTC)


def _encode(value: Any) -> Any:
    if isinstance(value, float) and not math.isfinite(value):
        return {"$float": repr(value)}
    if isinstance(value, dict):
        return {k: _encode(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [_encode(v) for v in value]
    return value


def _decode_hook(obj: dict[str, Any]) -> Any:
    if len(obj) == 1 and isinstance(obj.get("$float"), str):
        return float(obj["$float"])
    return obj


def dumps(value: Any) -> str:
    """Compact JSON that can always be encoded; non-finite floats spelled `{"$float": "inf"}`,
    surrogates escaped."""
    try:
        text = json.dumps(value, separators=(",", ":"), ensure_ascii=False, allow_nan=False)
    except ValueError:
        text = json.dumps(_encode(value), separators=(",", ":"), ensure_ascii=False, allow_nan=False)
    return text if text.isascii() else json_text(text)


def _no_constant(name: str) -> Any:
    raise ToolnexusValueError(f"{name} is not a JSON number (a bare {name} is never written by toolnexus)")


_DECODER = json.JSONDecoder(object_hook=_decode_hook, parse_constant=_no_constant)


def loads(text: Optional[str]) -> Any:
    if text is None:
        return None
    return _DECODER.decode(text)


def _why(exc: BaseException) -> str:
    if isinstance(exc, RecursionError):
        return "nested too deeply to read"
    if isinstance(exc, json.JSONDecodeError):
        return f"not valid JSON ({exc})"
    return str(exc) or type(exc).__name__


def decoded(text: Optional[str], run_id: Optional[str], part: str, *, request_id: Optional[str] = None,
            store: str = "", shape: Optional[type] = None) -> Any:
    """`loads(text)` of one stored row; `RunDamaged` (naming run, row and request) when it cannot be
    read, or when it is not None and not of `shape` (e.g. `dict` for a message)."""
    try:
        value = loads(text)
    except (ValueError, RecursionError) as exc:
        raise RunDamaged(run_id, part, _why(exc), request_id=request_id, store=store) from None
    if shape is not None and value is not None and not isinstance(value, shape):
        raise RunDamaged(run_id, part, f"a JSON {type(value).__name__}, not an {shape.__name__}",
                         request_id=request_id, store=store)
    return value


@dataclass(frozen=True)
class DamagedRow:
    """One stored row that cannot be read: whose it is, which it is, and why."""

    run_id: Optional[str]
    part: str  # "request", "run state", "message 3 of conversation 'root/payer.1'", ...
    reason: str
    request_id: Optional[str] = None

    @classmethod
    def of(cls, exc: RunDamaged) -> "DamagedRow":
        return cls(exc.run_id, exc.part, exc.reason, exc.request_id)

    def error(self, store: str = "", *, quarantined: bool = False) -> RunDamaged:
        return RunDamaged(self.run_id, self.part, self.reason, request_id=self.request_id, store=store,
                          quarantined=quarantined)

    def to_dict(self) -> dict[str, Any]:
        return {"run_id": self.run_id, "part": self.part, "reason": self.reason, "request_id": self.request_id}

    @classmethod
    def from_dict(cls, data: Any) -> "DamagedRow":
        data = data if isinstance(data, dict) else {}
        return cls(data.get("run_id"), str(data.get("part") or "?"), str(data.get("reason") or "?"),
                   data.get("request_id"))


@dataclass(frozen=True)
class DamagedRun:
    """A run with rows that cannot be read (`store.check()`); `quarantined` once it was taken out
    of service with `store.quarantine(run_id)` (its rows then are those recorded at that time)."""

    run_id: str
    rows: tuple[DamagedRow, ...]
    quarantined: bool = False


@dataclass(frozen=True)
class PendingRun:
    """One request waiting for an answer: `store.pending()` lists these (the host's inbox).

    `request` carries `data["path"]` (the handle path of the top of the suspended subtree) for
    agent runs; `path` is the same list. A client conversation's halt has `path=None` and
    `run_id` `"conversation:<id>"`. `status`: `open` (waiting), `claimed` (an answer is being
    applied right now) or `queued` (an answer was submitted to the work queue; a worker applies it).
    """

    run_id: str
    request: Request
    path: Optional[list[str]]
    created_at: datetime
    expires_at: Optional[datetime]
    status: str = OPEN


@dataclass(frozen=True)
class RunSummary:
    """One run as `store.runs()` lists it. `holder`: who holds its lease right now (a process and
    host), None when nothing runs it; `lease_expires`: when that lease ends unless renewed."""

    run_id: str
    status: str
    entry_agent: Optional[str]
    updated_at: datetime
    created_at: datetime
    kind: str = KIND_AGENTS
    holder: Optional[str] = None
    lease_expires: Optional[datetime] = None


def _start_ticks(pid: int) -> Optional[int]:
    """The start time of process `pid` (clock ticks since boot), or None when it is not running."""
    try:
        with open(f"/proc/{pid}/stat", "rb") as fh:
            raw = fh.read().decode("ascii", "replace")
    except OSError:
        return None
    fields = raw.rsplit(")", 1)[-1].split()
    if not fields or fields[0] == "Z":  # a zombie has exited
        return None
    try:
        return int(fields[19])
    except (IndexError, ValueError):
        return None


def this_host() -> str:
    """The name leases record for this machine: `TOOLNEXUS_HOST` when set (containers that share a
    hostname but not a process table; or a test standing in for another machine), else the
    hostname. A holder is judged dead by its pid only on the machine of the same name."""
    return os.environ.get("TOOLNEXUS_HOST") or socket.gethostname()


@dataclass(frozen=True)
class Holder:
    """Who holds a lease: a fresh id per runtime, and the process it lives in."""

    id: str
    host: str
    pid: int
    started: Optional[int] = None

    @classmethod
    def here(cls) -> "Holder":
        pid = os.getpid()
        return cls(uuid.uuid4().hex, this_host(), pid, _start_ticks(pid))

    def to_dict(self) -> dict[str, Any]:
        return {"id": self.id, "host": self.host, "pid": self.pid, "started": self.started}

    @classmethod
    def from_dict(cls, data: Any) -> Optional["Holder"]:
        if not isinstance(data, dict) or not isinstance(data.get("id"), str):
            return None
        pid = data.get("pid")
        return cls(data["id"], str(data.get("host") or ""), pid if isinstance(pid, int) else -1, data.get("started"))

    def is_dead_here(self) -> bool:
        """True only when this holder's process is on this host and provably gone (or its pid
        now belongs to another process). A holder on another host is never judged dead here."""
        if self.host != this_host() or self.pid <= 0:
            return False
        ticks = _start_ticks(self.pid)
        if ticks is None:
            return True
        return self.started is not None and ticks != self.started

    def describe(self) -> str:
        return f"process {self.pid} on {self.host}"


@dataclass
class ConversationOps:
    """How one transcript changed: drop every message from index `start` on, then append
    `append` (each message already as its JSON text, see `dumps`) there. A plain append has
    `start` equal to the stored length (nothing dropped); a rewind or a compaction starts
    earlier. Transcripts are never rewritten whole."""

    start: int
    append: list[str] = field(default_factory=list)
    stored: Optional[int] = None  # how many messages the writer knows are stored (None: unknown)


@dataclass
class PendingRow:
    """A request in the store's ledger (open, claimed by a holder, applied or cancelled)."""

    request_id: str
    run_id: Optional[str]
    handle_id: Optional[str]
    request: Optional[dict[str, Any]]
    path: Optional[list[str]]
    created_at: float
    expires_at: Optional[float]
    status: str = OPEN
    claim: Optional[dict[str, Any]] = None  # Holder.to_dict() of the claimer
    answer: Optional[dict[str, Any]] = None
    answered_at: Optional[float] = None

    def to_pending_run(self, store: str = "") -> PendingRun:
        """The inbox entry; `RunDamaged` when the stored request is not a request."""
        try:
            req = Request.from_dict(self.request or {"id": self.request_id, "kind": "", "prompt": ""})
        except (TypeError, ValueError) as exc:
            raise RunDamaged(self.run_id, "request", str(exc), request_id=self.request_id, store=store) from None
        created = to_datetime(self.created_at)
        if created is None:
            raise RunDamaged(self.run_id, "request", "no creation time", request_id=self.request_id, store=store)
        return PendingRun(self.run_id or "", req, list(self.path) if self.path else None, created,
                          to_datetime(self.expires_at), self.status)

    def to_dict(self) -> dict[str, Any]:
        return {k: getattr(self, k) for k in self.__dataclass_fields__}

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> "PendingRow":
        return cls(**{k: data.get(k) for k in cls.__dataclass_fields__ if k in data})  # type: ignore[arg-type]


@dataclass
class Changes:
    """Everything one commit writes, in one transaction. Empty parts write nothing."""

    status: Optional[str] = None
    entry_agent: Optional[str] = None
    state: Optional[dict[str, Any]] = None  # runtime-level record (fingerprint, counters, ...)
    result: Optional[dict[str, Any]] = None
    handles: dict[str, dict[str, Any]] = field(default_factory=dict)
    conversations: dict[str, ConversationOps] = field(default_factory=dict)
    pending: list[PendingRow] = field(default_factory=list)
    applied: list[str] = field(default_factory=list)  # request ids now applied
    cancelled: list[str] = field(default_factory=list)  # request ids withdrawn (interrupt)
    calls: dict[tuple[str, str], Optional[dict[str, Any]]] = field(default_factory=dict)  # None deletes
    trace: list[str] = field(default_factory=list)
    release: bool = False  # give the lease up in the same transaction
    take_lease: bool = False  # take the lease in the same transaction (it must be free, expired or dead)
    expect_version: Optional[int] = None  # refuse (RunChanged) unless the run is at this version (a fence)
    sync: bool = False  # must survive power loss before the caller goes on (it precedes a side effect)

    def empty(self) -> bool:
        return not (self.status or self.entry_agent or self.state is not None or self.result is not None
                    or self.handles or self.conversations or self.pending or self.applied or self.cancelled
                    or self.calls or self.trace or self.release or self.take_lease)


@dataclass
class LoadedRun:
    """One run as read back from a store."""

    run_id: str
    kind: str
    entry_agent: Optional[str]
    status: str
    version: int
    format: int
    created_at: float
    updated_at: float
    state: Optional[dict[str, Any]]
    result: Optional[dict[str, Any]]
    lease: Optional[dict[str, Any]]
    lease_expires: Optional[float]
    handles: dict[str, dict[str, Any]] = field(default_factory=dict)
    conversations: dict[str, list[dict[str, Any]]] = field(default_factory=dict)
    calls: dict[tuple[str, str], dict[str, Any]] = field(default_factory=dict)
    pending: list[PendingRow] = field(default_factory=list)
    trace: list[str] = field(default_factory=list)
