"""The SQL stores' work queue and worker rows (`durable.queue`), as step generators over
`sql.Query`: `submit_run` / `submit_answer`, taking items (with per-agent limits held across the
fleet), finishing or handing them back, the scan that queues what nobody queued, heartbeats,
stats. The store class that runs them, and why the queue is ours, are in `_fleet_sql.py`.

Concurrency: a worker takes items with `SELECT … FOR UPDATE SKIP LOCKED` on PostgreSQL (other
workers skip what one is taking); per-agent limits are counted again under a transaction-scoped
advisory lock per limited agent (taken in name order), so two workers cannot both take the last
slot. SQLite's write transactions (`BEGIN IMMEDIATE`) serialise all of it on one machine.
"""

from __future__ import annotations

import hashlib
from collections import OrderedDict
from datetime import UTC
from typing import Any, Collection, Mapping, Optional, Sequence

from ..durable import Holder, PendingRow, RunDamaged, RunExists
from ..durable._model import (
    APPLIED,
    CANCELLED,
    CLAIMED,
    CONVERSATION_PREFIX,
    KIND_AGENTS,
    OPEN,
    QUARANTINED,
    QUEUED,
    RUN_FORMAT,
    dumps,
    epoch,
    loads,
)
from ..durable._queue import (
    QUEUED_RUN,
    WORK_ANSWER,
    WORK_CANCEL,
    WORK_EXPIRE,
    WORK_RECOVER,
    WORK_RUN,
    Queued,
    QueueStats,
    WorkerInfo,
    WorkItem,
)
from ..durable._rules import check_claim, check_lease
from ..durable.errors import RunInProgress
from ._sql import Query, Steps, pending_row as pending_row


def iso_time(seconds: float) -> str:
    """RFC 3339 in UTC, to the second (`Z`)."""
    from datetime import datetime

    return datetime.fromtimestamp(seconds, UTC).strftime("%Y-%m-%dT%H:%M:%SZ")

WAITING = "('open', 'claimed', 'queued')"  # the statuses of a request still waiting (spelled as the index is)
TAKEN = "taken"
FAILED = "failed"
SCAN_BATCH = 500  # due expiries / orphans queued per scan
PRUNE_BATCH = 200  # runs deleted per transaction
PENDING_COLS = ("p.request_id, p.run_id, p.handle_id, p.request, p.path, p.created_at, p.expires_at, p.status, "
                 "p.claim, p.answer, p.answered_at")
_ITEM_COLS = "id, kind, run_id, request_id, agent, payload, created_at, attempts"


def _lenient(text: Optional[str]) -> Any:
    """A JSON column a scan over many rows reads: `DAMAGED` when it cannot be read (that row is
    skipped; `toolnexus doctor` names it), so one bad row never stops the scan of the others."""
    try:
        return loads(text)
    except (ValueError, RecursionError):
        return DAMAGED


DAMAGED = object()


# --------------------------------------------------------------------------- submitting


def notify(channel: Optional[str], *, wait: bool = True) -> list[Query]:
    """Wake the listening workers when this transaction commits (PostgreSQL; SQLite workers poll).
    `wait=False`: sent in the pipeline without waiting for it (it cannot fail on its own)."""
    return [Query("SELECT pg_notify(?, '')", (channel,), "one" if wait else "none")] if channel else []


def enqueue(kind: str, run_id: Optional[str], request_id: Optional[str], agent: Optional[str],
             payload: dict[str, Any], dedup: str, now: float, *, fetch: bool) -> Query:
    """One item's insert; a duplicate of queued or taken work inserts nothing."""
    sql = ("INSERT INTO tn_queue (kind, run_id, request_id, agent, payload, dedup, status, created_at, available_at, "
           "attempts) VALUES (?, ?, ?, ?, ?, ?, 'queued', ?, ?, 0) ON CONFLICT DO NOTHING")
    params = (kind, run_id, request_id, agent, dumps(payload), dedup, now, now)
    return Query(sql, params, returning="id") if fetch else Query(sql, params, "rowcount")


_QUEUED_ROW = ("INSERT INTO tn_runs (run_id, kind, entry_agent, status, created_at, updated_at, version, format, "
               "state, trace_seq) VALUES (?, ?, ?, ?, ?, ?, 0, ?, ?, 0) ON CONFLICT (run_id) DO NOTHING")


def submit_run_steps(run_id: str, agent: str, prompt: str, channel: Optional[str], dialect: str) -> Steps[Queued]:
    """The run is listed (status `queued`, no lease) and its item queued, in one transaction. A
    worker starting it takes the row over (`sql._INSERT_RUN` adopts a `queued` row). On
    PostgreSQL both rows are one statement and the notification is not waited for: the enqueue
    is one round trip and the commit."""
    now = epoch()
    row = (run_id, KIND_AGENTS, agent, QUEUED_RUN, now, now, RUN_FORMAT, dumps({"queued": {"agent": agent,
                                                                                        "prompt": prompt}}))
    item = enqueue(WORK_RUN, run_id, None, agent, {"prompt": prompt}, f"run:{run_id}", now, fetch=True)
    if dialect == "postgres":
        found = yield Query(f"WITH made AS ({_QUEUED_ROW} RETURNING run_id) "
                            + item.sql.replace("VALUES (?, ?, ?, ?, ?, ?, 'queued', ?, ?, 0)",
                                               "SELECT ?, ?, ?, ?, ?, ?, 'queued', ?, ?, 0 FROM made"),
                            (*row, *item.params), returning="id")
    else:
        found = (yield item) if (yield Query(_QUEUED_ROW, row, "rowcount")) else None
    if found is None:
        raise RunExists(run_id)
    for query in notify(channel, wait=False):
        yield query
    return Queued(int(found[0]), WORK_RUN, run_id)


def _get_row(request_id: str, dialect: str) -> Steps[Optional[PendingRow]]:
    lock = " FOR UPDATE" if dialect == "postgres" else ""
    found = yield Query(f"SELECT {PENDING_COLS} FROM tn_pending p WHERE p.request_id = ?{lock}", (request_id,), "one")
    return pending_row(found) if found is not None else None


def _put_row(row: PendingRow) -> Query:
    return Query("UPDATE tn_pending SET status = ?, claim = ?, answer = ?, answered_at = ? WHERE request_id = ?",
                 (row.status, dumps(row.claim) if row.claim is not None else None,
                  dumps(row.answer) if row.answer is not None else None, row.answered_at, row.request_id))


def _queue_claim(item_id: int) -> dict[str, Any]:
    """The ledger's claim of an answer the queue holds (`durable.rules.check_claim` refuses
    everyone else until a worker takes it)."""
    return {"id": f"queue:{item_id}", "host": "", "pid": -1, "queue": item_id}


def submit_answer_steps(answer: dict[str, Any], dialect: str, ttl: float, channel: Optional[str],
                        url: str) -> Steps[Queued]:
    """Claim the request for the queue and queue the answer, in one transaction: from now on any
    other answer to it gets `AnswerAlreadyApplied` (the ledger row is `queued`)."""
    from ..client import ResumeError

    now = epoch()
    request_id = answer["id"]
    answer = {**answer, "at": iso_time(now)}  # when it was given: a worker may take it much later
    lock = " FOR UPDATE OF p" if dialect == "postgres" else ""
    found = yield Query(f"SELECT {PENDING_COLS}, r.entry_agent FROM tn_pending p LEFT JOIN tn_runs r ON "
                        f"r.run_id = p.run_id WHERE p.request_id = ?{lock}", (request_id,), "one")
    row = pending_row(found, url) if found is not None else None
    if row is None or row.request is None:
        raise ResumeError(f"toolnexus: cannot submit the answer — no request {request_id!r} is pending in {url}")
    if row.run_id and row.run_id.startswith(CONVERSATION_PREFIX):
        raise ResumeError(f"toolnexus: cannot submit the answer — request {request_id!r} belongs to a client "
                          "conversation; answer it with client.ask_with_answer")
    check_claim(row, Holder("queue", "", -1), now, ttl)
    agent = found[11]
    found = yield enqueue(WORK_ANSWER, row.run_id, request_id, agent, answer, f"answer:{request_id}", now, fetch=True)
    if found is None:  # an answer of this request is in the queue already (the ledger said open: a race lost)
        from ..durable import AnswerAlreadyApplied

        raise AnswerAlreadyApplied(request_id, row.run_id, queued=True)
    item_id = int(found[0])
    row.status, row.claim, row.answer, row.answered_at = QUEUED, _queue_claim(item_id), answer, now
    yield _put_row(row)
    for query in notify(channel, wait=False):
        yield query
    return Queued(item_id, WORK_ANSWER, str(row.run_id), request_id)


# --------------------------------------------------------------------------- taking work


def _alive(worker_row: Sequence[Any], now: float, ttl: float) -> bool:
    """A worker row `(worker_id, host, pid, started, seen_at, status)` is alive."""
    wid, host, pid, started, seen_at, status = worker_row[:6]
    if status == "stopped" or seen_at + ttl <= now:
        return False
    return not Holder(wid, host, int(pid), started).is_dead_here()


def take_steps(worker: WorkerInfo, capacity: int, limits: Mapping[str, int], agents: Optional[Collection[str]],
               claim_ttl: float, dialect: str, schema: str) -> Steps[list[WorkItem]]:
    """Up to `capacity` items (see `FleetBackend.take`)."""
    now = epoch()
    taken = yield Query(f"SELECT agent, run_id FROM tn_queue WHERE status = '{TAKEN}'", (), "all")
    counts: dict[str, int] = {}
    busy_runs = set()
    for agent, run_id in taken:
        counts[agent] = counts.get(agent, 0) + 1
        if run_id:
            busy_runs.add(run_id)
    full = sorted(a for a, n in limits.items() if counts.get(a, 0) >= n)
    where = ["status = 'queued'", "available_at <= ?"]
    params: list[Any] = [now]
    if agents is not None:
        names = sorted(set(agents))
        if not names:
            return []
        where.append(f"agent IN ({', '.join('?' * len(names))})")
        params += names
    if full:
        where.append(f"agent NOT IN ({', '.join('?' * len(full))})")
        params += full
    skip = " FOR UPDATE SKIP LOCKED" if dialect == "postgres" else ""
    window = max(capacity * 4, 16)
    rows = yield Query(f"SELECT {_ITEM_COLS} FROM tn_queue WHERE {' AND '.join(where)} ORDER BY id "
                       f"LIMIT {window}{skip}", tuple(params), "all")
    if not rows:
        return []
    left = {a: max(0, n - counts.get(a, 0)) for a, n in limits.items()}
    if dialect == "postgres":  # recount each limited agent under its lock: another worker may have taken some
        for agent in sorted({r[4] for r in rows if r[4] in left}):
            yield Query("SELECT pg_advisory_xact_lock(?)", (_lock_key(schema, agent),), "one")
            found = yield Query(f"SELECT count(*) FROM tn_queue WHERE status = '{TAKEN}' AND agent = ?", (agent,),
                                "one")
            left[agent] = max(0, limits[agent] - int(found[0]))
    chosen = _fair(rows, capacity, left, busy_runs)
    items: list[WorkItem] = []
    for r in chosen:
        payload = _lenient(r[5])
        if not isinstance(payload, dict) and payload is not None:  # unreadable: failed, never run on a guess
            yield Query(f"UPDATE tn_queue SET status = '{FAILED}', error = ? WHERE id = ?",
                        ("toolnexus: the work item's payload cannot be read (a damaged row)", r[0]))
            continue
        item = WorkItem(int(r[0]), r[1], r[2], r[3], r[4], payload or {}, r[6], int(r[7]) + 1)
        if item.kind == WORK_ANSWER:
            try:
                outcome = yield from _take_answer(item, worker, now, claim_ttl, dialect)
            except RunDamaged as exc:  # its ledger row cannot be read: this item fails, the others are taken
                yield Query(f"UPDATE tn_queue SET status = '{FAILED}', error = ? WHERE id = ?", (str(exc)[:2000], r[0]))
                continue
            if outcome is not None:  # done already, or not yet takeable
                yield outcome
                continue
        yield Query(f"UPDATE tn_queue SET status = '{TAKEN}', taken_by = ?, taken_at = ?, attempts = attempts + 1 "
                    "WHERE id = ?", (worker.id, now, item.id))
        items.append(item)
    return items


def _lock_key(schema: str, agent: str) -> int:
    """A transaction-scoped advisory lock id for one agent's limit (a signed 64-bit integer)."""
    digest = hashlib.sha256(f"toolnexus-limit:{schema}:{agent}".encode()).digest()
    return int.from_bytes(digest[:8], "big", signed=True)


def _fair(rows: list[Any], capacity: int, left: dict[str, int], busy_runs: set[str]) -> list[Any]:
    """Round-robin across agents (each in its items' age order), within each limited agent's free
    slots, one item per run (a run is never worked on twice at once)."""
    by_agent: "OrderedDict[Any, list[Any]]" = OrderedDict()
    for r in rows:
        by_agent.setdefault(r[4], []).append(r)
    chosen: list[Any] = []
    runs = set(busy_runs)
    while len(chosen) < capacity and by_agent:
        for agent in list(by_agent):
            queue = by_agent[agent]
            while queue and queue[0][2] is not None and queue[0][2] in runs:
                queue.pop(0)
            if not queue or (agent in left and left[agent] <= 0):
                del by_agent[agent]
                continue
            r = queue.pop(0)
            chosen.append(r)
            if r[2] is not None:
                runs.add(r[2])
            if agent in left:
                left[agent] -= 1
            if len(chosen) >= capacity:
                break
    return chosen


def _take_answer(item: WorkItem, worker: WorkerInfo, now: float, claim_ttl: float,
                 dialect: str) -> Steps[Optional[Query]]:
    """Move a submitted answer's claim from the queue to the job that applies it. None when the
    item is taken; otherwise the statement that settles the item instead (the request was
    answered or withdrawn meanwhile: nothing to do; or an earlier taker's claim is still live)."""
    row = yield from _get_row(str(item.request_id), dialect)
    if row is None or row.status in (APPLIED, CANCELLED):
        return Query("DELETE FROM tn_queue WHERE id = ?", (item.id,))
    if row.status == QUARANTINED:  # its run was taken out of service: the answer waits for `unquarantine`
        return Query("UPDATE tn_queue SET available_at = ? WHERE id = ?", (now + max(claim_ttl, 60.0), item.id))
    holder = Holder.here()
    holder = Holder(holder.id, worker.host, worker.pid, worker.started)
    queued = isinstance(row.claim, dict) and row.claim.get("queue") == item.id
    if row.status == QUEUED and not queued:
        return Query("DELETE FROM tn_queue WHERE id = ?", (item.id,))  # another item holds it
    if row.status == CLAIMED:  # an earlier taker of this item: dead (or its claim too old) by now?
        try:
            check_claim(row, holder, now, claim_ttl)
        except Exception:
            again = (row.answered_at or now) + claim_ttl
            return Query("UPDATE tn_queue SET available_at = ? WHERE id = ?", (max(again, now + 1.0), item.id))
    row.status, row.claim, row.answered_at = CLAIMED, holder.to_dict(), now
    if row.answer is None:
        row.answer = item.payload
    yield _put_row(row)
    item.holder = holder
    item.payload = row.answer
    return None


def done_steps(item_id: int) -> Steps[None]:
    yield Query("DELETE FROM tn_queue WHERE id = ?", (item_id,))


def fail_steps(item: WorkItem, error: str) -> Steps[None]:
    yield Query("UPDATE tn_queue SET status = ?, error = ?, taken_by = NULL WHERE id = ?",
                (FAILED, error[:2000], item.id))
    if item.kind == WORK_ANSWER and item.holder is not None and item.request_id:
        yield Query("UPDATE tn_pending SET status = ?, claim = NULL, answer = NULL, answered_at = NULL "
                    "WHERE request_id = ? AND status = ? AND claim = ?",
                    (OPEN, item.request_id, CLAIMED, dumps(item.holder.to_dict())))


def release_steps(item: WorkItem, delay: float, error: Optional[str], channel: Optional[str]) -> Steps[None]:
    """The item back in the queue (a submitted answer's claim back to the queue too)."""
    now = epoch()
    yield Query("UPDATE tn_queue SET status = 'queued', taken_by = NULL, taken_at = NULL, available_at = ?, "
                "error = ? WHERE id = ?", (now + delay, error[:2000] if error else None, item.id))
    if item.kind == WORK_ANSWER and item.holder is not None and item.request_id:
        yield Query("UPDATE tn_pending SET status = ?, claim = ? WHERE request_id = ? AND status = ? AND claim = ?",
                    (QUEUED, dumps(_queue_claim(item.id)), item.request_id, CLAIMED, dumps(item.holder.to_dict())))
    if delay <= 0:
        for query in notify(channel):
            yield query


# --------------------------------------------------------------------------- scanning


def scan_steps(worker_ttl: float, claim_ttl: float, channel: Optional[str]) -> Steps[dict[str, int]]:
    """Queue the work nobody queued (see `FleetBackend.scan`)."""
    now = epoch()
    counts = {"requeued": 0, WORK_RECOVER: 0, WORK_EXPIRE: 0}
    workers = yield Query("SELECT worker_id, host, pid, started, seen_at, status FROM tn_workers", (), "all")
    live = {w[0] for w in workers if _alive(w, now, worker_ttl)}
    taken = yield Query(f"SELECT id, taken_by, run_id FROM tn_queue WHERE status = '{TAKEN}'", (), "all")
    orphaned = [r[0] for r in taken if r[1] not in live]
    if orphaned:
        yield Query(f"UPDATE tn_queue SET status = 'queued', taken_by = NULL, taken_at = NULL WHERE id IN "
                    f"({', '.join('?' * len(orphaned))})", tuple(orphaned))
        counts["requeued"] = len(orphaned)
    busy = {r[2] for r in taken if r[1] in live and r[2]}
    running = yield Query("SELECT run_id, entry_agent, lease, lease_expires FROM tn_runs WHERE status = 'running' "
                          f"AND kind = '{KIND_AGENTS}'", (), "all")
    for run_id, agent, text, expires in running:
        lease = _lenient(text)
        if run_id in busy or lease is DAMAGED:
            continue
        try:
            check_lease(run_id, lease, expires, Holder("scan", "", -1), now, False)
        except RunInProgress:
            continue
        payload = {"takeover": lease is not None}  # its holder died holding the lease (not handed back)
        if (yield enqueue(WORK_RECOVER, run_id, None, agent, payload, f"recover:{run_id}", now, fetch=False)):
            counts[WORK_RECOVER] += 1
    claimed = yield Query("SELECT p.request_id, p.run_id, p.claim, p.answered_at, r.entry_agent FROM tn_pending p "
                          "JOIN tn_runs r ON r.run_id = p.run_id WHERE p.status = ? AND r.kind = ?",
                          (CLAIMED, KIND_AGENTS), "all")
    for _request_id, run_id, claim, answered_at, agent in claimed:
        found = _lenient(claim)
        if found is DAMAGED:
            continue
        claimer = Holder.from_dict(found)
        stale = claimer is None or claimer.is_dead_here() or (answered_at or 0) + claim_ttl <= now
        if stale and run_id not in busy:
            if (yield enqueue(WORK_RECOVER, run_id, None, agent, {}, f"recover:{run_id}", now, fetch=False)):
                counts[WORK_RECOVER] += 1
    due = yield Query("SELECT p.request_id, p.run_id, r.entry_agent FROM tn_pending p JOIN tn_runs r ON "
                      "r.run_id = p.run_id WHERE p.status = 'open' AND p.expires_at IS NOT NULL AND p.expires_at <= ? "
                      f"AND r.kind = ? ORDER BY p.expires_at LIMIT {SCAN_BATCH}", (now, KIND_AGENTS), "all")
    for request_id, run_id, agent in due:
        if (yield enqueue(WORK_EXPIRE, run_id, request_id, agent, {}, f"expire:{request_id}", now, fetch=False)):
            counts[WORK_EXPIRE] += 1
    if any(counts.values()):
        for query in notify(channel):
            yield query
    return counts


# --------------------------------------------------------------------------- workers and stats


def beat_steps(worker: WorkerInfo) -> Steps[None]:
    yield Query("INSERT INTO tn_workers (worker_id, name, host, pid, started, agents, started_at, seen_at, status, "
                "info) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?) ON CONFLICT (worker_id) DO UPDATE SET "
                "seen_at = excluded.seen_at, "
                "status = excluded.status, info = excluded.info",
                (worker.id, worker.name, worker.host, worker.pid, worker.started, dumps(list(worker.agents)),
                 worker.started_at, worker.seen_at, worker.status, dumps(worker.info)))


def workers_steps(worker_ttl: float) -> Steps[list[WorkerInfo]]:
    now = epoch()
    rows = yield Query("SELECT worker_id, host, pid, started, seen_at, status, name, agents, started_at, info "
                       "FROM tn_workers ORDER BY seen_at DESC", (), "all")
    return [WorkerInfo(r[0], r[6], r[1], int(r[2]), _readable(r[7], list), r[8], r[4], r[5], _readable(r[9], dict),
                       r[3], _alive(r, now, worker_ttl)) for r in rows]


def _readable(text: Optional[str], shape: type) -> Any:
    """A worker row's JSON column, or an empty one when it cannot be read (the row is still listed)."""
    value = _lenient(text)
    return value if isinstance(value, shape) else shape()


def stats_steps(worker_ttl: float, at: Optional[float] = None) -> Steps[QueueStats]:
    """The gauges; the queue's and the inbox's ages as of `at` (default now). Heartbeats are
    judged by the machine's clock, as they were written."""
    now = epoch()
    ages_at = now if at is None else at
    rows = yield Query("SELECT kind, status, count(*), min(created_at) FROM tn_queue GROUP BY kind, status", (), "all")
    queued: dict[str, int] = {}
    taken = failed = 0
    oldest: Optional[float] = None
    for kind, status, n, first in rows:
        if status == "queued":
            queued[kind] = queued.get(kind, 0) + int(n)
            oldest = first if oldest is None else min(oldest, first)
        elif status == TAKEN:
            taken += int(n)
        elif status == FAILED:
            failed += int(n)
    waiting = yield Query(f"SELECT count(*), min(created_at) FROM tn_pending WHERE status IN {WAITING} "
                          "AND request IS NOT NULL", (), "one")
    running = yield Query("SELECT count(*) FROM tn_runs WHERE status = 'running'", (), "one")
    workers = yield Query("SELECT worker_id, host, pid, started, seen_at, status FROM tn_workers", (), "all")
    return QueueStats(queued, taken, failed, None if oldest is None else max(0.0, ages_at - oldest), int(waiting[0]),
                      None if waiting[1] is None else max(0.0, ages_at - waiting[1]), int(running[0]),
                      sum(1 for w in workers if _alive(w, now, worker_ttl)))


def cancels_steps(run_ids: Collection[str]) -> Steps[list[str]]:
    ids = sorted(set(run_ids))
    if not ids:
        return []
    rows = yield Query(f"SELECT run_id FROM tn_queue WHERE kind = '{WORK_CANCEL}' AND status IN ('queued', 'taken') "
                       f"AND run_id IN ({', '.join('?' * len(ids))})", tuple(ids), "all")
    return [r[0] for r in rows]
