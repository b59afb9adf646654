"""The run lifecycle for the document stores (memory, file): paged listings and `cancel_run`.

A document store keeps few runs in one process or folder, so its listings filter and sort in
Python over what `DocumentStore` reads (no index to serve them); the order and the cursors are the
SQL stores' (see `durable.paging`). It has no work queue: workers need SQLite or PostgreSQL.
"""

from __future__ import annotations

from typing import Any, Optional

from ..durable import Holder, PendingRow, PendingRun, RunDamaged, RunNotFound, RunSummary
from ..durable._model import CANCELLED, CLAIMED, OPEN, QUEUED, epoch, to_datetime
from ..durable._paging import FINAL_STATUSES, Page, PendingQuery, RunsQuery
from ..durable._queue import CANCELLED_RUN
from ..durable._rules import check_lease
from ..durable.errors import RunInProgress
from ._damage import sift
from ._run_doc import RunDoc


def page_pending(rows: list[PendingRow], query: PendingQuery, entries: dict[str, Optional[str]],
                 now: float, url: str = "") -> tuple[Page[PendingRun], list[RunDamaged]]:
    """The waiting requests `query` asks for, from every waiting ledger row; and why each row of the
    page that cannot be read was left out (the page then holds fewer; the cursor still moves on)."""
    if query.kind is not None:
        rows = [r for r in rows if (r.request or {}).get("kind") == query.kind]
    if query.agent is not None:
        rows = [r for r in rows if entries.get(r.run_id or "") == query.agent]
    if query.older_than is not None:
        cutoff = now - query.older_than
        rows = [r for r in rows if r.created_at <= cutoff]
    rows.sort(key=lambda r: (r.created_at, r.request_id))
    if query.after is not None:
        rows = [r for r in rows if (r.created_at, r.request_id) > query.after]
    if query.limit is None or len(rows) <= query.limit:
        found, damaged = sift(rows, lambda r: r.to_pending_run(url))
        return Page(found), damaged
    last = rows[query.limit - 1]
    found, damaged = sift(rows[:query.limit], lambda r: r.to_pending_run(url))
    return Page(found, query.cursor(last.created_at, last.request_id)), damaged


def summary_of(run_id: str, status: str, entry_agent: Optional[str], updated_at: float, created_at: float,
               kind: str, lease: Any, lease_expires: Optional[float]) -> RunSummary:
    holder = Holder.from_dict(lease)
    updated, created = to_datetime(updated_at), to_datetime(created_at)
    assert updated is not None and created is not None
    return RunSummary(run_id, status, entry_agent, updated, created, kind,
                      holder.describe() if holder is not None else None, to_datetime(lease_expires))


def page_runs(docs: list[RunDoc], query: RunsQuery, now: float) -> Page[RunSummary]:
    """The runs `query` asks for (see `RunsQuery` for the orders)."""
    if query.status is not None:
        docs = [d for d in docs if d.status in query.status]
    if query.agent is not None:
        docs = [d for d in docs if d.entry_agent == query.agent]
    if query.kind is not None:
        docs = [d for d in docs if d.kind == query.kind]
    if query.older_than is not None:
        cutoff = now - query.older_than
        docs = [d for d in docs if d.created_at <= cutoff]

    def summary(d: RunDoc) -> RunSummary:
        return summary_of(d.run_id, d.status, d.entry_agent, d.updated_at, d.created_at, d.kind, d.lease,
                          d.lease_expires)

    if not query.paged:
        docs.sort(key=lambda d: (d.updated_at, d.run_id), reverse=True)
        return Page([summary(d) for d in docs])
    docs.sort(key=lambda d: (d.created_at, d.run_id), reverse=True)
    if query.after is not None:
        docs = [d for d in docs if (d.created_at, d.run_id) < query.after]
    if query.limit is None or len(docs) <= query.limit:
        return Page([summary(d) for d in docs])
    last = docs[query.limit - 1]
    return Page([summary(d) for d in docs[:query.limit]], query.cursor(last.created_at, last.run_id))


class DocLifecycle:
    """`cancel_run` for a `DocumentStore` (mixed in; it uses the store's own primitives)."""

    url: str

    async def cancel_run(self, run_id: str, *, force: bool = False) -> str:
        await self.open()  # type: ignore[attr-defined]
        async with self._locked():  # type: ignore[attr-defined]
            doc = await self._read(run_id, messages=False)  # type: ignore[attr-defined]
            if doc is None:
                raise RunNotFound(run_id, self.url)
            if doc.status in FINAL_STATUSES:
                return str(doc.status)
            now = epoch()
            if not force:
                try:
                    check_lease(run_id, doc.lease, doc.lease_expires, Holder("cancel", "", -1), now, False)
                except RunInProgress:
                    raise RunInProgress(run_id, Holder.from_dict(doc.lease).describe()  # type: ignore[union-attr]
                                        if doc.lease else "another process") from None
            # Rows of other runs that cannot be read do not stop this cancel (`toolnexus doctor` finds them).
            ledger = await self._ledger([])  # type: ignore[attr-defined]
            rows = [r for r in ledger.values() if r.run_id == run_id and r.status in (OPEN, CLAIMED, QUEUED)]
            for row in rows:
                row.status = CANCELLED
            doc.status = CANCELLED_RUN
            doc.lease = doc.lease_expires = None
            doc.version += 1
            doc.updated_at = now
            line = f"run cancelled ({len(rows)} waiting request(s) withdrawn)"
            doc.trace = doc.trace + [line] if doc.trace is not None else [line]
            await self._write(doc, {}, [line], rows)  # type: ignore[attr-defined]
            return CANCELLED_RUN
