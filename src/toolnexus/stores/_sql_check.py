"""`store.check()`, `quarantine()` and `unquarantine()` for the SQL stores (SQLite, PostgreSQL).

`check` reads every run (one read transaction each, so a large store is never held in memory at
once) and the whole answer ledger, decoding every stored JSON row on its own, and lists the runs
with rows that cannot be read; runs already quarantined are listed from their quarantine records.
`quarantine` and `unquarantine` are one write transaction each. What they mean is said in
`_damage.py`; nothing here deletes or rewrites a damaged row.
"""

from __future__ import annotations

from typing import Any, Optional

from ..durable import DamagedRow, DamagedRun, Holder, RunDamaged, RunInProgress, RunNotFound, StoreError
from ..durable._model import CLAIMED, OPEN, QUARANTINED, QUEUED, decoded, epoch
from ._damage import QUARANTINE_NS, group, quarantine_record, quarantined
from ._sql import (
    _PENDING_COLS,
    _RUN_ROWS,
    RECORD,
    Query,
    SqlStore,
    Steps,
    _run_row,
    get_record_steps,
    pending_row,
    put_record_steps,
)


def _try(rows: list[DamagedRow], text: Optional[str], run_id: str, part: str, shape: type) -> None:
    try:
        decoded(text, run_id, part, shape=shape)
    except RunDamaged as exc:
        rows.append(DamagedRow.of(exc))


def _run_damage(run_id: str) -> Steps[list[DamagedRow]]:
    """Every row of one run (but its ledger rows) that cannot be read."""
    row = yield from _run_row(run_id, lock=False)
    found: list[DamagedRow] = []
    if row is None:
        return found
    for text, part in ((row[8], "run state"), (row[9], "run result"), (row[10], "lease")):
        _try(found, text, run_id, part, dict)
    counts: dict[str, int] = {}
    for conv_id, text in (yield Query(_RUN_ROWS, (run_id,), "all")):
        if text is None:
            continue
        if conv_id.startswith(RECORD) and row[1] != "conversation":
            _try(found, text, run_id, f"record of handle {conv_id[len(RECORD):]!r}", dict)
            continue
        index = counts[conv_id] = counts.get(conv_id, -1) + 1
        _try(found, text, run_id, f"message {index} of conversation {conv_id!r}", dict)
    for conv, call, entry in (yield Query("SELECT conv_id, call_id, entry FROM tn_calls WHERE run_id = ?",
                                          (run_id,), "all")):
        _try(found, entry, run_id, f"journal entry {call!r} of {conv!r}", dict)
    return found


def _ledger_damage(where: str, params: tuple[Any, ...]) -> Steps[list[DamagedRow]]:
    found: list[DamagedRow] = []
    for r in (yield Query(f"SELECT {_PENDING_COLS} FROM tn_pending WHERE {where}", params, "all")):
        try:
            row = pending_row(r)
            if row.request is not None:
                row.to_pending_run()
        except RunDamaged as exc:
            found.append(DamagedRow.of(exc))
    return found


def _ids() -> Steps[list[tuple[str, str]]]:
    rows: list[tuple[str, str]] = yield Query("SELECT run_id, status FROM tn_runs ORDER BY run_id", (), "all")
    return rows


def _quarantined() -> Steps[list[DamagedRun]]:
    texts = yield Query("SELECT value FROM tn_records WHERE ns = ? ORDER BY written", (QUARANTINE_NS,), "all")
    out = []
    for (text,) in texts:
        try:
            out.append(quarantined(decoded(text, None, "quarantine record", shape=dict)))
        except RunDamaged:
            continue  # a quarantine record we wrote cannot be read: its run still shows as damaged
    return out


def quarantine_steps(run_id: str, url: str) -> Steps[None]:
    """Take `run_id` out of service (see `_damage.py`); a no-op for a run already quarantined."""
    row = yield from _run_row(run_id, lock=True)
    ledger = yield Query("SELECT request_id, status FROM tn_pending WHERE run_id = ?", (run_id,), "all", lock=True)
    if row is None and not ledger:
        raise RunNotFound(run_id, url)
    if row is not None and row[3] == QUARANTINED:
        return
    if row is not None:
        _refuse_live(run_id, row[10], row[11])
    damaged = (yield from _run_damage(run_id)) + (yield from _ledger_damage("run_id = ?", (run_id,)))
    waiting = {rid: status for rid, status in ledger if status in (OPEN, CLAIMED, QUEUED)}
    yield from put_record_steps(QUARANTINE_NS, run_id,
                                quarantine_record(run_id, row[3] if row is not None else None, waiting, damaged))
    if row is not None:
        yield Query("UPDATE tn_runs SET status = ? WHERE run_id = ?", (QUARANTINED, run_id))
    if waiting:
        # a queued answer (the work queue's) waits with its run: its item is taken after `unquarantine`
        yield Query("UPDATE tn_pending SET status = ? WHERE run_id = ? AND status IN (?, ?, ?)",
                    (QUARANTINED, run_id, OPEN, CLAIMED, QUEUED))


def _refuse_live(run_id: str, lease_text: Optional[str], expires: Optional[float]) -> None:
    """A run a live process is running is not quarantined under it (a damaged lease counts as none)."""
    try:
        lease = decoded(lease_text, run_id, "lease", shape=dict)
    except RunDamaged:
        return
    holder = Holder.from_dict(lease)
    if holder is not None and expires is not None and expires > epoch() and not holder.is_dead_here():
        raise RunInProgress(run_id, holder.describe(), expires - epoch())


def unquarantine_steps(run_id: str, url: str) -> Steps[None]:
    """Put a quarantined run back as it was (its statuses before); its damaged rows are as they are."""
    text = yield from get_record_steps(QUARANTINE_NS, run_id)
    if text is None:
        raise StoreError(f"toolnexus: run {run_id!r} in {url} is not quarantined")
    record = decoded(text, run_id, "quarantine record", store=url, shape=dict)
    if record.get("status"):
        yield Query("UPDATE tn_runs SET status = ? WHERE run_id = ? AND status = ?",
                    (record["status"], run_id, QUARANTINED))
    for request_id, status in (record.get("requests") or {}).items():
        yield Query("UPDATE tn_pending SET status = ? WHERE request_id = ? AND status = ?",
                    (status, request_id, QUARANTINED))
    yield Query("DELETE FROM tn_records WHERE ns = ? AND key = ?", (QUARANTINE_NS, run_id))


class SqlChecks(SqlStore):
    """A SQL store with `check` / `quarantine` / `unquarantine` (the drivers derive from it)."""

    async def check(self) -> list[DamagedRun]:
        """Every run with rows that cannot be read (and every quarantined run, flagged so)."""
        rows: list[DamagedRow] = []
        for run_id, status in await self._run(_ids(), write=False):
            if status != QUARANTINED:
                rows += await self._run(_run_damage(run_id), write=False)
        rows += await self._run(_ledger_damage("status <> ?", (QUARANTINED,)), write=False)
        found = [DamagedRun(run_id, tuple(damaged)) for run_id, damaged in group(rows).items()]
        return found + await self._run(_quarantined(), write=False)

    async def quarantine(self, run_id: str) -> None:
        """Take a (damaged) run out of service, keeping every row; see `toolnexus.stores._damage`."""
        await self._run(quarantine_steps(run_id, self.url))

    async def unquarantine(self, run_id: str) -> None:
        """Put a quarantined run back in service exactly as it was."""
        await self._run(unquarantine_steps(run_id, self.url))
