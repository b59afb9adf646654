"""Damaged rows, shared by every store: decoding one row at a time, reporting what cannot be read,
and what quarantine records.

A stored row can be unreadable — cut mid-JSON by a torn write or a bad disk, edited by hand, not
the shape it should be. Readers that walk many rows (the inbox, a records listing) decode each row
on its own (`sift`): the healthy ones are returned, each damaged one is reported once per call as a
warning naming run, row and request (`report`), and the listing goes on. A reader of one run
(restore, an answer) raises `RunDamaged` instead.

**Quarantine** (`store.quarantine(run_id)`) takes a damaged run out of service without losing a
byte: the run's status and that of its waiting requests become `quarantined`, so the inbox stops
listing (and warning about) them and a restore or an answer is refused with `RunDamaged`; every
stored row stays as it was, the damaged raw text included (a file store moves an unreadable file,
unchanged, into its `quarantine/` folder instead). What it changed is kept in a record
(`QUARANTINE_NS`, keyed by run id: the statuses before, the damaged rows, the files moved), so
`store.unquarantine(run_id)` puts the run back exactly as it was — after the row was repaired, say.
"""

from __future__ import annotations

from typing import Any, Callable, Iterable, Optional, TypeVar

from .._diag import warn
from ..durable import DamagedRow, DamagedRun, RunDamaged, StoreError
from ..durable._model import dumps, epoch

T = TypeVar("T")
R = TypeVar("R")

QUARANTINE_NS = "toolnexus:quarantine"


def sift(rows: Iterable[R], decode: Callable[[R], T]) -> tuple[list[T], list[RunDamaged]]:
    """Each row decoded on its own: the healthy values, and why each other one could not be read."""
    ok: list[T] = []
    damaged: list[RunDamaged] = []
    for row in rows:
        try:
            ok.append(decode(row))
        except RunDamaged as exc:
            damaged.append(exc)
    return ok, damaged


def report(damaged: list[RunDamaged], listing: str) -> None:
    """One warning per damaged row a listing left out."""
    for exc in damaged:
        warn(f"[toolnexus] stores: {str(exc).removeprefix('toolnexus: ')} (left out of {listing})")


def group(rows: Iterable[DamagedRow]) -> dict[str, list[DamagedRow]]:
    """Damaged rows by run id (a row whose run is unknown under `""`), in first-seen order."""
    out: dict[str, list[DamagedRow]] = {}
    for row in rows:
        out.setdefault(row.run_id or "", []).append(row)
    return out


def quarantine_record(run_id: str, status: Optional[str], requests: dict[str, str], rows: list[DamagedRow],
                      moved: Optional[list[str]] = None) -> str:
    """The JSON of a quarantine record: what `unquarantine` needs to undo it, and what was damaged."""
    return dumps({"run_id": run_id, "at": epoch(), "status": status, "requests": requests,
                  "damaged": [r.to_dict() for r in rows], "moved": list(moved or [])})


def record_rows(record: dict[str, Any]) -> tuple[DamagedRow, ...]:
    return tuple(DamagedRow.from_dict(r) for r in record.get("damaged") or [])


def quarantined(record: dict[str, Any]) -> DamagedRun:
    return DamagedRun(str(record.get("run_id") or ""), record_rows(record), True)


def unstorable(url: str, exc: BaseException) -> StoreError:
    """A text the database cannot hold: an id or name with a lone surrogate (PostgreSQL: or NUL).
    Message and record texts never get here (they are JSON, escaped); ids are refused, not altered,
    since an altered id would name another run."""
    return StoreError(f"toolnexus: the store {url} cannot hold a text given to it as an id or name: {exc} — "
                      "use ids and names that are valid Unicode without NUL characters; nothing was written")
