"""A worker's metrics: counters of what it did, gauges of the store it serves, as Prometheus text.

`Worker.metrics()` renders them (the CLI serves them on `--metrics HOST:PORT` at `/metrics`);
each counted event also goes to the worker's `on_metric(event)` as a dict
(`{"event": "fleet", "what": "job", "kind": ..., "outcome": ..., "ms": ...}`), as client metric
events do. The gauges are the whole fleet's (read from the store on each heartbeat, so they are
at most one beat old; ages by the worker's clock, `wall_now(clock)`); the counters are this
worker's since it started.

| metric | type | what |
|---|---|---|
| `toolnexus_fleet_jobs_total{kind,outcome}` | counter | items this worker finished, by kind and outcome |
| `toolnexus_fleet_recoveries_total` | counter | runs this worker continued after their holder stopped |
| `toolnexus_fleet_lease_takeovers_total` | counter | of those, runs whose holder had not given the lease up (it died) |
| `toolnexus_fleet_expiries_total` | counter | expiries (and timers) this worker fired |
| `toolnexus_fleet_handbacks_total` | counter | runs this worker handed back while stopping |
| `toolnexus_fleet_jobs_active` | gauge | items this worker is working on |
| `toolnexus_fleet_queue_depth{kind}` | gauge | items waiting in the queue, by kind |
| `toolnexus_fleet_oldest_queued_seconds` | gauge | age of the oldest waiting item |
| `toolnexus_fleet_waiting_requests` | gauge | requests waiting for an answer (the inbox) |
| `toolnexus_fleet_oldest_pending_seconds` | gauge | age of the oldest of them |
| `toolnexus_fleet_running_runs` | gauge | runs in status `running` |
| `toolnexus_fleet_failed_items` | gauge | items that failed (kept for a person to look at) |
| `toolnexus_fleet_workers_alive` | gauge | workers whose heartbeat is current |

Not a general registry: it renders these families only, in this order, series sorted by labels.
"""

from __future__ import annotations

import threading
from typing import Any, Callable, Optional

from ..durable._queue import WORK_KINDS, QueueStats
from ..errors import ToolnexusValueError

_COUNTERS = (
    ("toolnexus_fleet_jobs_total", "Work items this worker finished, by kind and outcome."),
    ("toolnexus_fleet_recoveries_total", "Runs this worker continued after their holder stopped."),
    ("toolnexus_fleet_lease_takeovers_total", "Runs this worker took over from a holder that died holding the lease."),
    ("toolnexus_fleet_expiries_total", "Request expiries and timers this worker fired."),
    ("toolnexus_fleet_handbacks_total", "Runs this worker handed back while stopping."),
)
_GAUGES = (
    ("toolnexus_fleet_jobs_active", "Work items this worker is working on."),
    ("toolnexus_fleet_queue_depth", "Work items waiting in the store's queue, by kind."),
    ("toolnexus_fleet_oldest_queued_seconds", "Age of the oldest waiting work item, in seconds."),
    ("toolnexus_fleet_waiting_requests", "Requests waiting for an answer."),
    ("toolnexus_fleet_oldest_pending_seconds", "Age of the oldest request waiting for an answer, in seconds."),
    ("toolnexus_fleet_running_runs", "Runs in status running."),
    ("toolnexus_fleet_failed_items", "Work items that failed."),
    ("toolnexus_fleet_workers_alive", "Workers whose heartbeat is current."),
)

Labels = tuple[tuple[str, str], ...]


def _number(value: float) -> str:
    return str(int(value)) if float(value).is_integer() else repr(float(value))


def _labels(labels: Labels) -> str:
    if not labels:
        return ""
    inner = ",".join(f'{k}="{v}"' for k, v in labels)
    return "{" + inner + "}"


class FleetMetrics:
    """Counters and gauges of one worker (thread-safe: a metrics endpoint may read from anywhere)."""

    def __init__(self, on_metric: Optional[Callable[[dict[str, Any]], Any]] = None) -> None:
        self._lock = threading.Lock()
        self._on_metric = on_metric
        self._counters: dict[str, dict[Labels, float]] = {name: {} for name, _ in _COUNTERS}
        self._gauges: dict[str, dict[Labels, float]] = {name: {} for name, _ in _GAUGES}
        self._gauges["toolnexus_fleet_jobs_active"][()] = 0

    def _add(self, name: str, labels: Labels = (), amount: float = 1) -> None:
        with self._lock:
            series = self._counters[name]
            series[labels] = series.get(labels, 0) + amount

    def _emit(self, event: dict[str, Any]) -> None:
        if self._on_metric is None:
            return
        try:
            self._on_metric(event)
        except Exception:
            self._on_metric = None
            from .._diag import warn

            warn("[toolnexus] fleet: on_metric raised; it is not called again")

    def job(self, kind: str, outcome: str, ms: float, *, takeover: bool = False) -> None:
        """One item finished (`outcome`: done, pending, error, released, failed, skipped)."""
        self._add("toolnexus_fleet_jobs_total", (("kind", kind), ("outcome", outcome)))
        if kind == "recover" and outcome not in ("released", "skipped", "failed"):
            self._add("toolnexus_fleet_recoveries_total")
            if takeover:
                self._add("toolnexus_fleet_lease_takeovers_total")
        if kind == "expire" and outcome not in ("released", "skipped", "failed"):
            self._add("toolnexus_fleet_expiries_total")
        if outcome == "released":
            self._add("toolnexus_fleet_handbacks_total")
        self._emit({"event": "fleet", "what": "job", "kind": kind, "outcome": outcome, "ms": ms,
                    "takeover": takeover})

    def active(self, n: int) -> None:
        with self._lock:
            self._gauges["toolnexus_fleet_jobs_active"][()] = n

    def store(self, stats: QueueStats) -> None:
        """The fleet-wide gauges, as the store reported them."""
        with self._lock:
            g = self._gauges
            g["toolnexus_fleet_queue_depth"] = {(("kind", k),): float(stats.queued.get(k, 0)) for k in WORK_KINDS}
            g["toolnexus_fleet_oldest_queued_seconds"] = {(): stats.oldest_queued_age or 0.0}
            g["toolnexus_fleet_waiting_requests"] = {(): float(stats.waiting_requests)}
            g["toolnexus_fleet_oldest_pending_seconds"] = {(): stats.oldest_request_age or 0.0}
            g["toolnexus_fleet_running_runs"] = {(): float(stats.running_runs)}
            g["toolnexus_fleet_failed_items"] = {(): float(stats.failed)}
            g["toolnexus_fleet_workers_alive"] = {(): float(stats.workers_alive)}
        self._emit({"event": "fleet", "what": "store", "queued": dict(stats.queued), "taken": stats.taken,
                    "oldest_queued_age": stats.oldest_queued_age, "waiting_requests": stats.waiting_requests,
                    "oldest_request_age": stats.oldest_request_age, "running_runs": stats.running_runs,
                    "workers_alive": stats.workers_alive})

    def value(self, name: str, **labels: str) -> float:
        """One series' value (0 when it has none yet): for tests and hosts."""
        key = tuple(sorted(labels.items()))
        with self._lock:
            for family in (self._counters, self._gauges):
                if name in family:
                    return next((v for k, v in family[name].items() if tuple(sorted(k)) == key), 0.0)
        raise ToolnexusValueError(f"toolnexus.fleet: no metric {name!r} (see toolnexus.fleet._metrics)")

    def render(self) -> str:
        """Prometheus text exposition (version 0.0.4), ending with a newline."""
        lines: list[str] = []
        with self._lock:
            for kind, families, source in (("counter", _COUNTERS, self._counters), ("gauge", _GAUGES, self._gauges)):
                for name, help_text in families:
                    lines += [f"# HELP {name} {help_text}", f"# TYPE {name} {kind}"]
                    series = source[name] or ({(): 0.0} if kind == "counter" and name != _COUNTERS[0][0] else {})
                    for labels in sorted(series, key=_labels):
                        lines.append(f"{name}{_labels(labels)} {_number(series[labels])}")
        return "\n".join(lines) + "\n"
