"""`MemoryStore` (`open_store("memory:")`): the durable-store interface, held in this process.

Everything a real store does — leases, the answer ledger, append-only transcripts, one atomic
commit — with the data kept as JSON text in dicts, so nothing outside can alias what is stored.
It is lost with the process: use it for tests and for single-process hosts that want the same
exactly-once answer handling as a real store. Not shared across processes.
"""

from __future__ import annotations

import asyncio
from typing import Any, Optional

from ..durable import RunDamaged
from ..durable._model import PendingRow
from ._doc_check import CheckedDocumentStore
from ._document import Edits, RunDoc


class MemoryStore(CheckedDocumentStore):
    """Runs and the answer ledger in this process's memory."""

    def __init__(self) -> None:
        super().__init__()
        self.url = "memory:"
        self._runs: dict[str, RunDoc] = {}
        self._rows: dict[str, PendingRow] = {}
        self._plain: dict[str, dict[str, str]] = {}  # namespace → key → JSON (insertion = write order)
        self._lock: Optional[asyncio.Lock] = None

    def _locked(self) -> Any:
        if self._lock is None:
            self._lock = asyncio.Lock()
        return self._lock

    async def aclose(self) -> None:
        """Nothing to release; the data stays until the store object is dropped."""

    async def _read(self, run_id: str, *, messages: bool) -> Optional[RunDoc]:
        return self._runs.get(run_id)

    async def _write(self, doc: RunDoc, edits: Edits, trace: list[str],
                     rows: list[PendingRow]) -> None:
        self._runs[doc.run_id] = doc  # edits and trace were applied to the document itself
        await self._write_rows(rows)

    async def _write_rows(self, rows: list[PendingRow]) -> None:
        for row in rows:
            self._rows[row.request_id] = PendingRow.from_dict(row.to_dict())

    async def _ledger(self, damaged: Optional[list[RunDamaged]] = None) -> dict[str, PendingRow]:
        return {k: PendingRow.from_dict(v.to_dict()) for k, v in self._rows.items()}

    async def _rows_get(self, request_ids: list[str]) -> dict[str, PendingRow]:
        return {k: PendingRow.from_dict(self._rows[k].to_dict()) for k in request_ids if k in self._rows}

    async def _run_ids(self) -> list[str]:
        return list(self._runs)

    async def _forget(self, run_id: str, request_ids: list[str]) -> None:
        self._runs.pop(run_id, None)
        for request_id in request_ids:
            self._rows.pop(request_id, None)

    async def _record(self, namespace: str, key: str) -> Optional[str]:
        return self._plain.get(namespace, {}).get(key)

    async def _put_record(self, namespace: str, key: str, text: str) -> None:
        space = self._plain.setdefault(namespace, {})
        space.pop(key, None)
        space[key] = text

    async def _records(self, namespace: str) -> list[str]:
        return list(self._plain.get(namespace, {}).values())

    async def _drop_record(self, namespace: str, key: str) -> None:
        self._plain.get(namespace, {}).pop(key, None)

    def stored_bytes(self, run_id: str) -> int:
        """Bytes of JSON text this run occupies (for benchmarks)."""
        doc = self._runs.get(run_id)
        if doc is None:
            return 0
        total = sum(len(t.encode()) for msgs in doc.conversations.values() for t in msgs)
        total += sum(len(t.encode()) for t in doc.handles.values()) + sum(len(t.encode()) for t in doc.trace)
        return total
