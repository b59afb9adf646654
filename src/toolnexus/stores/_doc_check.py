"""`store.check()`, `quarantine()` and `unquarantine()` for the document stores (memory, file).

`CheckedDocumentStore` adds them to `DocumentStore` over its primitives, plus three a backend
may override: `_unreadable_docs` (runs whose own record cannot be read at all: a file store's
`run.json`), `_set_aside` (move such unreadable files, unchanged, out of the way) and `_put_back`.
In memory nothing can be unreadable, so the defaults do nothing. What quarantine means is said in
`_damage.py`.
"""

from __future__ import annotations

from typing import Optional

from ..durable import DamagedRow, DamagedRun, Holder, PendingRow, RunDamaged, RunInProgress, RunNotFound, StoreError
from ..durable._model import CLAIMED, OPEN, QUARANTINED, decoded, epoch
from ._damage import QUARANTINE_NS, group, quarantine_record, quarantined
from ._document import DocumentStore, RunDoc, doc_parts


def _doc_damage(doc: RunDoc) -> list[DamagedRow]:
    found = []
    for text, part, shape in doc_parts(doc):
        try:
            decoded(text, doc.run_id, part, shape=shape)
        except RunDamaged as exc:
            found.append(DamagedRow.of(exc))
    return found


def _row_damage(rows: list[PendingRow]) -> list[DamagedRow]:
    found = []
    for row in rows:
        if row.request is not None and row.status != QUARANTINED:
            try:
                row.to_pending_run()
            except RunDamaged as exc:
                found.append(DamagedRow.of(exc))
    return found


class CheckedDocumentStore(DocumentStore):
    """A document store with `check` / `quarantine` / `unquarantine`."""

    async def _unreadable_docs(self) -> list[DamagedRow]:
        """Runs whose record cannot be read at all (none in memory)."""
        return []

    async def _set_aside(self, run_id: str, whole_run: bool, request_ids: list[str]) -> list[str]:
        """Move unreadable rows, unchanged, out of every reader's way; what was moved (none in memory)."""
        return []

    async def _put_back(self, moved: list[str]) -> None:
        """Undo `_set_aside`."""

    async def _read_or_damage(self, run_id: str, messages: bool) -> tuple[Optional[RunDoc], Optional[RunDamaged]]:
        try:
            return await self._read(run_id, messages=messages), None
        except RunDamaged as exc:
            return None, exc

    async def check(self) -> list[DamagedRun]:
        """Every run with rows that cannot be read (and every quarantined run, flagged so)."""
        await self.open()
        rows: list[DamagedRow] = []
        async with self._locked():
            for run_id in await self._run_ids():
                doc, broken = await self._read_or_damage(run_id, True)
                if broken is not None:
                    rows.append(DamagedRow.of(broken))
                elif doc is not None and doc.status != QUARANTINED:
                    rows += _doc_damage(doc)
            rows += await self._unreadable_docs()
            damaged: list[RunDamaged] = []
            ledger = await self._ledger(damaged)
            texts = await self._records(QUARANTINE_NS)
        rows += [DamagedRow.of(exc) for exc in damaged] + _row_damage(list(ledger.values()))
        held = []
        for text in texts:
            try:
                held.append(quarantined(decoded(text, None, "quarantine record", shape=dict)))
            except RunDamaged:
                continue
        skip = {run.run_id for run in held}
        found = [DamagedRun(run_id, tuple(d)) for run_id, d in group(rows).items() if run_id not in skip]
        return found + held

    async def quarantine(self, run_id: str) -> None:
        """Take a (damaged) run out of service, keeping every row; see `toolnexus.stores._damage`."""
        await self.open()
        async with self._locked():
            doc, broken = await self._read_or_damage(run_id, True)
            damaged: list[RunDamaged] = []
            ledger = [r for r in (await self._ledger(damaged)).values() if r.run_id == run_id]
            bad_rows = [exc for exc in damaged if exc.run_id == run_id]
            if doc is None and broken is None and not ledger and not bad_rows:
                raise RunNotFound(run_id, self.url)
            if doc is not None and doc.status == QUARANTINED:
                return
            if doc is not None:
                _refuse_live(run_id, doc)
            rows = ([DamagedRow.of(broken)] if broken is not None else _doc_damage(doc) if doc is not None else [])
            rows += [DamagedRow.of(exc) for exc in bad_rows] + _row_damage(ledger)
            moved = await self._set_aside(run_id, broken is not None,
                                          [exc.request_id for exc in bad_rows if exc.request_id])
            waiting = {r.request_id: r.status for r in ledger if r.status in (OPEN, CLAIMED)}
            record = quarantine_record(run_id, doc.status if doc is not None else None, waiting, rows, moved)
            await self._put_record(QUARANTINE_NS, run_id, record)
            changed = [r for r in ledger if r.status in (OPEN, CLAIMED)]
            for row in changed:
                row.status = QUARANTINED
            if doc is not None:
                doc.status = QUARANTINED
                await self._write(doc, {}, [], changed)
            elif changed:
                await self._write_rows(changed)

    async def unquarantine(self, run_id: str) -> None:
        """Put a quarantined run back in service exactly as it was."""
        await self.open()
        async with self._locked():
            text = await self._record(QUARANTINE_NS, run_id)
            if text is None:
                raise StoreError(f"toolnexus: run {run_id!r} in {self.url} is not quarantined")
            record = decoded(text, run_id, "quarantine record", store=self.url, shape=dict)
            await self._put_back(list(record.get("moved") or []))
            doc, _ = await self._read_or_damage(run_id, False)
            requests = dict(record.get("requests") or {})
            rows = [r for r in (await self._rows_get(list(requests))).values() if r.status == QUARANTINED]
            for row in rows:
                row.status = requests[row.request_id]
            if doc is not None and doc.status == QUARANTINED and record.get("status"):
                doc.status = str(record["status"])
                await self._write(doc, {}, [], rows)
            elif rows:
                await self._write_rows(rows)
            await self._drop_record(QUARANTINE_NS, run_id)

    async def _drop_record(self, namespace: str, key: str) -> None:
        """Forget a plain record (the backend's own way)."""
        raise NotImplementedError

    async def delete_run(self, run_id: str) -> None:
        """`DocumentStore.delete_run`, and a quarantined run's record and set-aside files with it."""
        await self.open()
        async with self._locked():
            text = await self._record(QUARANTINE_NS, run_id)
            if text is not None:
                try:
                    moved = decoded(text, run_id, "quarantine record", shape=dict).get("moved") or []
                except RunDamaged:
                    moved = []
                await self._put_back(list(moved))  # back where the delete below finds them
                await self._drop_record(QUARANTINE_NS, run_id)
        await super().delete_run(run_id)


def _refuse_live(run_id: str, doc: RunDoc) -> None:
    """A run a live process is running is not quarantined under it."""
    holder = Holder.from_dict(doc.lease)
    expires = doc.lease_expires
    if holder is not None and expires is not None and expires > epoch() and not holder.is_dead_here():
        raise RunInProgress(run_id, holder.describe(), expires - epoch())
