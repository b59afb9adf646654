"""The store's work queue and worker registry: what a fleet of workers (`toolnexus.fleet`) reads
and writes, as plain records and one backend interface.

- `Queued`: what `store.submit_run(...)` / `store.submit_answer(...)` return — the queued item.
- `WorkItem`: one item a worker took: start a run (`run`), apply a submitted answer (`answer`),
  continue a run whose holder died (`recover`), fire a request's expiry (`expire`), or cancel a
  run a live worker holds (`cancel`).
- `WorkerInfo`: one worker's heartbeat row (`toolnexus workers`).
- `QueueStats`: what the fleet's metrics report (queue depth, oldest pending age, ...).
- `FleetBackend`: what a store gives a worker (`store.fleet()`): take items (a `FOR UPDATE SKIP
  LOCKED` claim on PostgreSQL, a write transaction on SQLite, with per-agent limits held across
  the fleet), finish or hand them back, scan for work nobody queued (dead holders, due expiries,
  answers a dead worker claimed), beat, and wait for a wake-up (PostgreSQL `LISTEN/NOTIFY`).

Only the SQL stores have a work queue; the memory and file stores say so when asked.
Nothing here does I/O.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Collection, Mapping, Optional, Protocol

from ._model import Holder

WORK_RUN = "run"  # start a submitted run
WORK_ANSWER = "answer"  # apply a submitted answer
WORK_RECOVER = "recover"  # continue a run whose holder died (or apply an answer a dead process claimed)
WORK_EXPIRE = "expire"  # a request's `expiresAt` passed while nothing ran
WORK_CANCEL = "cancel"  # `cancel` of a run a live process holds: that process is asked to stop it
WORK_KINDS = (WORK_RUN, WORK_ANSWER, WORK_RECOVER, WORK_EXPIRE, WORK_CANCEL)

QUEUED_RUN = "queued"  # the status of a submitted run no worker has started yet
CANCELLED_RUN = "cancelled"  # the status `cancel` leaves


@dataclass(frozen=True)
class Queued:
    """A submitted item: its queue id, what it is, and the run it concerns."""

    id: int
    kind: str
    run_id: str
    request_id: Optional[str] = None


@dataclass
class WorkItem:
    """One item a worker took. `holder`: for an `answer`, the identity the take claimed the
    answer for (the worker restores the run under it, so the claim is its own)."""

    id: int
    kind: str
    run_id: Optional[str]
    request_id: Optional[str]
    agent: Optional[str]
    payload: dict[str, Any]
    created_at: float
    attempts: int = 0
    holder: Optional[Holder] = None


@dataclass(frozen=True)
class WorkerInfo:
    """One worker process as its heartbeat row has it. `alive`: its last beat is within the
    fleet's time-to-live and, on this host, its process still runs."""

    id: str
    name: str
    host: str
    pid: int
    agents: list[str]
    started_at: float
    seen_at: float
    status: str  # "running" | "draining" | "stopped"
    info: dict[str, Any] = field(default_factory=dict)
    started: Optional[int] = None  # the process's start time (clock ticks), to tell a reused pid apart
    alive: bool = True

    def holder(self) -> Holder:
        return Holder(self.id, self.host, self.pid, self.started)


@dataclass(frozen=True)
class QueueStats:
    """The fleet's gauges, read in one transaction."""

    queued: dict[str, int]  # by kind
    taken: int
    failed: int
    oldest_queued_age: Optional[float]  # seconds
    waiting_requests: int  # open requests (the inbox)
    oldest_request_age: Optional[float]  # seconds
    running_runs: int
    workers_alive: int


class WorkListener(Protocol):
    """A wake-up channel (PostgreSQL `LISTEN`)."""

    async def wait(self, timeout: float) -> bool:
        """True when a notification arrived within `timeout` seconds (all pending ones consumed)."""

    async def aclose(self) -> None: ...


class FleetBackend(Protocol):
    """What a store gives a worker; see the module docstring."""

    async def take(self, worker: WorkerInfo, *, capacity: int, limits: Mapping[str, int],
                   agents: Optional[Collection[str]], claim_ttl: float) -> list[WorkItem]:
        """Up to `capacity` items, oldest first, round-robin across agents, never two of one run,
        never more taken items of an agent (fleet-wide) than `limits` allows, only of `agents`."""

    async def done(self, item: WorkItem) -> None:
        """The item is finished: forget it."""

    async def fail(self, item: WorkItem, error: str) -> None:
        """The item cannot be done (kept as `failed` for a person; a submitted answer's request is
        opened again so it can be answered anew)."""

    async def release(self, item: WorkItem, *, delay: float = 0.0, error: Optional[str] = None) -> None:
        """Hand the item back to the queue (a draining worker, a run held elsewhere for now)."""

    async def scan(self, *, worker_ttl: float, claim_ttl: float) -> dict[str, int]:
        """Queue what nobody queued: items of dead workers back, runs whose holder died, answers
        a dead process claimed, requests whose expiry is due. Counts by what was queued."""

    async def beat(self, worker: WorkerInfo) -> None:
        """Write the worker's heartbeat row."""

    async def workers(self, *, worker_ttl: float) -> list[WorkerInfo]:
        """Every worker row, newest beat first, with `alive` judged now."""

    async def stats(self, *, worker_ttl: float, now: Optional[float] = None) -> QueueStats:
        """The gauges the metrics report; the ages as of `now` (wall-clock seconds; default the
        machine's: a worker passes its clock's, so a test can pin them)."""

    async def cancels(self, run_ids: Collection[str]) -> list[str]:
        """Of `run_ids` (runs this worker holds), those someone asked to cancel."""

    def listener(self) -> Optional[WorkListener]:
        """A wake-up channel, or None (poll)."""
