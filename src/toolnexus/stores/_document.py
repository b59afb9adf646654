"""The logic shared by the document stores (memory and file): one run is one document.

A `RunDoc` holds a run's row, its handle records, its transcripts (as JSON text, one string per
message, so nothing outside the store can alias what is stored), its tool-call journal and its
trace; the answer ledger is a map of request id → `PendingRow`. `DocumentStore` implements the
whole `RunStore` interface on top of four primitives a backend provides — read a run, write the
changed parts of a run, read the ledger, write ledger rows — each called inside `_locked()`, which
the backend makes exclusive (an asyncio lock in memory; a file lock across processes on disk).

Not here: how documents reach a disk (`_file.py`).
"""

from __future__ import annotations

import abc
from typing import Any, Optional, Sequence, Union

from .._text import plain_text
from ..client._memory import IdLocks
from ..durable import (
    Changes,
    ConversationOps,
    Holder,
    LeaseLost,
    LoadedRun,
    PendingRow,
    PendingRun,
    RunChanged,
    RunDamaged,
    RunExists,
    RunNotFound,
    RunStore,
    RunSummary,
    StoreConflict,
    StoreVersionError,
)
from ..durable._model import (
    APPLIED,
    CANCELLED,
    CLAIMED,
    CONVERSATION_PREFIX,
    KIND_CONVERSATION,
    OPEN,
    QUARANTINED,
    QUEUED,
    RUN_FORMAT,
    decoded,
    dumps,
    epoch,
)
from ..durable._paging import Age, Page, PendingQuery, RunsQuery
from ..durable._rules import check_claim, check_lease, expires_at_epoch, lease_is_ours
from ._damage import report, sift
from ._doc_lifecycle import DocLifecycle, page_pending, page_runs
from ._run_doc import RunDoc as RunDoc
from ._seen import SeenConversations

TRACE_KEEP = 10_000  # trace lines a store keeps per run (the newest)


def trim_trace(lines: list[str]) -> list[str]:
    return lines[-TRACE_KEEP:] if len(lines) > TRACE_KEEP else lines


def _call_key(conv: str, call_id: str) -> str:
    return f"{conv}\x00{call_id}"


Edits = dict[str, tuple[int, list[str], int]]  # conv → (start, new lines, stored count before)


def _apply(doc: RunDoc, changes: Changes, now: float) -> Edits:
    """Fold `changes` into `doc`; returns the conversation edits made."""
    if changes.status:
        doc.status = str(changes.status)  # a plain string, as the other stores read it back
    if changes.entry_agent:
        doc.entry_agent = changes.entry_agent
    if changes.state is not None:
        doc.state = dumps(changes.state)
    if changes.result is not None:
        doc.result = dumps(changes.result)
    for hid, record in changes.handles.items():
        doc.handles[hid] = dumps(record)
    edits: Edits = {}
    for conv, ops in changes.conversations.items():
        lines = list(ops.append)
        before = doc.counts.get(conv, 0)
        start = min(ops.start, before)
        doc.counts[conv] = start + len(lines)
        current = doc.conversations.get(conv)
        if current is not None or start == 0:  # transcripts loaded (memory), or written whole
            current = doc.conversations.setdefault(conv, [])
            del current[start:]
            current.extend(lines)
        edits[conv] = (start, lines, before)
    for (conv, call_id), entry in changes.calls.items():
        key = _call_key(conv, call_id)
        if entry is None:
            doc.calls.pop(key, None)
        else:
            doc.calls[key] = dumps(entry)
    if changes.trace:
        changes.trace[:] = [plain_text(line) for line in changes.trace]  # what every backend writes
        doc.trace = trim_trace(doc.trace + changes.trace)
    doc.version += 1
    doc.updated_at = now
    return edits


def doc_parts(doc: RunDoc) -> list[tuple[Optional[str], str, type]]:
    """Every stored JSON text of a run document, with the name of its row and its shape."""
    parts: list[tuple[Optional[str], str, type]] = [(doc.state, "run state", dict), (doc.result, "run result", dict)]
    parts += [(text, f"record of handle {hid!r}", dict) for hid, text in doc.handles.items()]
    for key, text in doc.calls.items():
        conv, _, call_id = key.partition("\x00")
        parts.append((text, f"journal entry {call_id!r} of {conv!r}", dict))
    for conv, msgs in doc.conversations.items():
        parts += [(text, f"message {i} of conversation {conv!r}", dict) for i, text in enumerate(msgs)]
    return parts


def _loaded(doc: RunDoc, ledger: list[PendingRow], url: str) -> LoadedRun:
    """The run as committed; every row decoded on its own (a damaged one is a `RunDamaged` naming it)."""
    run_id = doc.run_id

    def read(text: Optional[str], part: str) -> Any:
        return decoded(text, run_id, part, store=url, shape=dict)

    calls: dict[tuple[str, str], dict[str, Any]] = {}
    for key, text in doc.calls.items():
        conv, _, call_id = key.partition("\x00")
        calls[(conv, call_id)] = read(text, f"journal entry {call_id!r} of {conv!r}")
    return LoadedRun(
        run_id=doc.run_id, kind=doc.kind, entry_agent=doc.entry_agent, status=doc.status, version=doc.version,
        format=doc.format, created_at=doc.created_at, updated_at=doc.updated_at, state=read(doc.state, "run state"),
        result=read(doc.result, "run result"), lease=doc.lease, lease_expires=doc.lease_expires,
        handles={hid: read(text, f"record of handle {hid!r}") for hid, text in doc.handles.items()},
        conversations={conv: [read(m, f"message {i} of conversation {conv!r}") for i, m in enumerate(msgs)]
                       for conv, msgs in doc.conversations.items()},
        calls=calls, pending=[r for r in ledger if r.run_id == doc.run_id], trace=list(doc.trace))


class DocumentStore(DocLifecycle, RunStore):
    """`RunStore` over run documents and a ledger; backends provide the four primitives."""

    def __init__(self) -> None:
        self._conv_locks = IdLocks()
        self._loaded_ids = SeenConversations(self._conv_locks)

    # -- primitives (backend) ----------------------------------------------------------------------

    @abc.abstractmethod
    def _locked(self) -> Any:
        """An async context manager making the enclosed reads and writes one exclusive transaction."""

    @abc.abstractmethod
    async def _read(self, run_id: str, *, messages: bool) -> Optional[RunDoc]:
        """The run document (its transcripts and trace only when `messages`), or None."""

    @abc.abstractmethod
    async def _write(self, doc: RunDoc, edits: Edits, trace: list[str],
                     rows: list[PendingRow]) -> None:
        """Persist `doc`'s row, the conversation `edits`, the appended `trace` and ledger `rows`."""

    @abc.abstractmethod
    async def _ledger(self, damaged: Optional[list[RunDamaged]] = None) -> dict[str, PendingRow]:
        """Every ledger row by request id (copies). A row that cannot be read raises `RunDamaged`,
        or, when `damaged` is a list, is left out and its error appended there."""

    @abc.abstractmethod
    async def _rows_get(self, request_ids: list[str]) -> dict[str, PendingRow]:
        """The ledger rows of these request ids that exist (copies)."""

    @abc.abstractmethod
    async def _run_ids(self) -> list[str]:
        """Every run id."""

    @abc.abstractmethod
    async def _forget(self, run_id: str, request_ids: list[str]) -> None:
        """Delete a run and its ledger rows."""

    @abc.abstractmethod
    async def _record(self, namespace: str, key: str) -> Optional[str]:
        """A plain record's JSON text, or None."""

    @abc.abstractmethod
    async def _put_record(self, namespace: str, key: str, text: str) -> None:
        """Write a plain record (atomically)."""

    @abc.abstractmethod
    async def _records(self, namespace: str) -> list[str]:
        """Every record of a namespace, oldest write first."""

    # -- plain records -----------------------------------------------------------------------------

    async def get_record(self, namespace: str, key: str) -> Optional[dict[str, Any]]:
        await self.open()
        async with self._locked():
            text = await self._record(namespace, key)
        record: Optional[dict[str, Any]] = decoded(text, None, f"record {key!r} of {namespace!r}", store=self.url)
        return record

    async def put_record(self, namespace: str, key: str, value: dict[str, Any]) -> None:
        await self.open()
        text = dumps(value)
        async with self._locked():
            await self._put_record(namespace, key, text)

    async def list_records(self, namespace: str) -> list[dict[str, Any]]:
        await self.open()
        async with self._locked():
            texts = await self._records(namespace)
        found, damaged = sift(texts, lambda t: decoded(t, None, f"a record of {namespace!r}", store=self.url))
        report(damaged, f"the records of {namespace!r}")
        return found

    async def swap_record(self, namespace: str, key: str, expected: Optional[dict[str, Any]],
                          value: dict[str, Any]) -> bool:
        await self.open()
        text = dumps(value)
        async with self._locked():  # the store's one exclusive transaction (a file lock for the file store)
            current = decoded(
                await self._record(namespace, key), None, f"record {key!r} of {namespace!r}", store=self.url
            )
            if current != expected:
                return False
            await self._put_record(namespace, key, text)
            return True

    # -- helpers -----------------------------------------------------------------------------------

    def _check_format(self, doc: RunDoc) -> None:
        if doc.format > RUN_FORMAT:
            raise StoreVersionError(
                f"toolnexus: run {doc.run_id!r} in {self.url} was written by a newer toolnexus (run format "
                f"{doc.format}; this version reads {RUN_FORMAT}) — upgrade toolnexus to restore it")
        if doc.status == QUARANTINED:
            raise RunDamaged(doc.run_id, "run", "", store=self.url, quarantined=True)

    async def _must(self, run_id: str, *, messages: bool = False) -> RunDoc:
        doc = await self._read(run_id, messages=messages)
        if doc is None:
            raise RunNotFound(run_id, self.url)
        self._check_format(doc)
        return doc

    # -- host-facing -------------------------------------------------------------------------------

    async def pending(self, *, limit: Optional[int] = None, after: Optional[str] = None, agent: Optional[str] = None,
                      kind: Optional[str] = None, older_than: Optional[Age] = None) -> Page[PendingRun]:
        query = PendingQuery.of(limit, after, agent, kind, older_than)
        await self.open()
        damaged: list[RunDamaged] = []
        async with self._locked():
            rows = [r for r in (await self._ledger(damaged)).values()
                    if r.status in (OPEN, CLAIMED, QUEUED) and r.request]
            entries: dict[str, Optional[str]] = {}
            if query.agent is not None:
                for run_id in {r.run_id for r in rows if r.run_id}:
                    try:
                        doc = await self._read(run_id, messages=False)
                    except RunDamaged as exc:  # its requests are left out (no entry agent to match)
                        damaged.append(exc)
                        doc = None
                    entries[run_id] = doc.entry_agent if doc is not None else None
        page, unreadable = page_pending(rows, query, entries, epoch(), self.url)
        report(damaged + unreadable, "the inbox")
        return page

    async def runs(self, status: Union[None, str, Sequence[str]] = None, *, limit: Optional[int] = None,
                   after: Optional[str] = None, agent: Optional[str] = None, kind: Optional[str] = None,
                   older_than: Optional[Age] = None) -> Page[RunSummary]:
        query = RunsQuery.of(status, limit, after, agent, kind, older_than)
        await self.open()
        docs = []
        damaged: list[RunDamaged] = []
        async with self._locked():
            for run_id in await self._run_ids():
                try:
                    doc = await self._read(run_id, messages=False)
                except RunDamaged as exc:
                    damaged.append(exc)
                    continue
                if doc is not None:
                    docs.append(doc)
        report(damaged, "the runs listed")
        return page_runs(docs, query, epoch())

    async def delete_run(self, run_id: str) -> None:
        await self.open()
        damaged: list[RunDamaged] = []
        async with self._locked():
            ids = [r.request_id for r in (await self._ledger(damaged)).values() if r.run_id == run_id]
            ids += [exc.request_id for exc in damaged if exc.run_id == run_id and exc.request_id]
            await self._forget(run_id, ids)

    # -- runtime-facing ----------------------------------------------------------------------------

    async def create_run(self, run_id: str, *, kind: str, entry_agent: Optional[str], holder: Holder,
                         lease_ttl: float, state: Optional[dict[str, Any]] = None) -> None:
        await self.open()
        async with self._locked():
            doc = await self._new_doc(run_id, kind, entry_agent, holder, lease_ttl, state)
            await self._write(doc, {}, [], [])

    async def start_run(self, run_id: str, *, kind: str, entry_agent: Optional[str], holder: Holder,
                        lease_ttl: float, state: Optional[dict[str, Any]], changes: Changes) -> int:
        await self.open()
        async with self._locked():
            doc = await self._new_doc(run_id, kind, entry_agent, holder, lease_ttl, state)
            return await self._commit_doc(doc, holder, changes, lease_ttl)

    async def _new_doc(self, run_id: str, kind: str, entry_agent: Optional[str], holder: Holder, lease_ttl: float,
                       state: Optional[dict[str, Any]]) -> RunDoc:
        if await self._read(run_id, messages=False) is not None:
            raise RunExists(run_id)
        now = epoch()
        return RunDoc(run_id, kind, entry_agent, "running", now, now, version=1,
                      state=dumps(state) if state is not None else None, lease=holder.to_dict(),
                      lease_expires=now + lease_ttl)

    async def acquire(self, run_id: str, holder: Holder, *, lease_ttl: float, takeover: bool = False) -> int:
        await self.open()
        async with self._locked():
            doc = await self._must(run_id)
            now = epoch()
            check_lease(run_id, doc.lease, doc.lease_expires, holder, now, takeover)
            doc.lease, doc.lease_expires = holder.to_dict(), now + lease_ttl
            await self._write(doc, {}, [], [])
            return doc.version

    async def renew(self, run_id: str, holder: Holder, lease_ttl: float) -> None:
        await self.open()
        async with self._locked():
            doc = await self._must(run_id)
            if not lease_is_ours(doc.lease, holder):
                raise LeaseLost(run_id, _describe(doc.lease))
            doc.lease_expires = epoch() + lease_ttl
            await self._write(doc, {}, [], [])

    async def release(self, run_id: str, holder: Holder) -> None:
        await self.open()
        async with self._locked():
            doc = await self._read(run_id, messages=False)
            if doc is not None and lease_is_ours(doc.lease, holder):
                doc.lease = doc.lease_expires = None
                await self._write(doc, {}, [], [])

    async def load(self, run_id: str) -> LoadedRun:
        await self.open()
        async with self._locked():
            doc = await self._must(run_id, messages=True)
            damaged: list[RunDamaged] = []
            ledger = list((await self._ledger(damaged)).values())
        for exc in damaged:  # only this run's damaged rows concern its load
            if exc.run_id == run_id:
                raise exc
        return _loaded(doc, ledger, self.url)

    async def commit(self, run_id: str, holder: Holder, changes: Changes, *, lease_ttl: float) -> int:
        await self.open()
        async with self._locked():
            doc = await self._must(run_id, messages=False)
            if changes.take_lease:
                check_lease(run_id, doc.lease, doc.lease_expires, holder, epoch(), False)
            elif not lease_is_ours(doc.lease, holder):
                raise LeaseLost(run_id, _describe(doc.lease))
            if changes.expect_version is not None and doc.version != changes.expect_version:
                raise RunChanged(run_id, changes.expect_version, doc.version)
            if changes.take_lease:
                doc.lease = holder.to_dict()
            return await self._commit_doc(doc, holder, changes, lease_ttl)

    async def _commit_doc(self, doc: RunDoc, holder: Holder, changes: Changes, lease_ttl: float) -> int:
        """Fold `changes` into `doc` (whose lease is ours) with its ledger rows, and write it once."""
        now = epoch()
        edits = _apply(doc, changes, now)
        doc.lease_expires = now + lease_ttl
        if changes.release:
            doc.lease = doc.lease_expires = None
        wanted = [r.request_id for r in changes.pending] + list(changes.applied) + list(changes.cancelled)
        ledger = await self._rows_get(wanted) if wanted else {}
        rows = _ledger_changes(ledger, doc.run_id, changes, now)
        await self._write(doc, edits, list(changes.trace), rows)
        return doc.version

    # -- the answer ledger -------------------------------------------------------------------------

    async def find_request(self, request_id: str) -> Optional[PendingRow]:
        await self.open()
        async with self._locked():
            return (await self._rows_get([request_id])).get(request_id)

    async def claim(self, request_id: str, holder: Holder, answer: dict[str, Any], *, ttl: float,
                    run_id: Optional[str] = None) -> PendingRow:
        await self.open()
        async with self._locked():
            row = (await self._rows_get([request_id])).get(request_id)
            now = epoch()
            if row is None:
                row = PendingRow(request_id, run_id, None, None, None, now, None)
            check_claim(row, holder, now, ttl)
            row.status, row.claim, row.answer, row.answered_at = CLAIMED, holder.to_dict(), answer, now
            await self._write_rows([row])
            return PendingRow.from_dict(row.to_dict())

    async def mark_applied(self, request_id: str, holder: Holder) -> None:
        await self.open()
        async with self._locked():
            row = (await self._rows_get([request_id])).get(request_id)
            if row is not None and row.status == CLAIMED and lease_is_ours(row.claim, holder):
                row.status = APPLIED
                await self._write_rows([row])

    async def unclaim(self, request_id: str, holder: Holder) -> None:
        await self.open()
        async with self._locked():
            row = (await self._rows_get([request_id])).get(request_id)
            if row is not None and row.status == CLAIMED and lease_is_ours(row.claim, holder):
                row.status, row.claim, row.answer, row.answered_at = OPEN, None, None, None
                await self._write_rows([row])

    @abc.abstractmethod
    async def _write_rows(self, rows: list[PendingRow]) -> None:
        """Write ledger rows only (no run document touched)."""

    # -- client conversations ----------------------------------------------------------------------

    def lock(self, id: str) -> Any:
        return self._conv_locks.hold(id)

    async def get(self, id: str) -> Optional[list[dict[str, Any]]]:
        await self.open()
        async with self._locked():
            doc = await self._read(CONVERSATION_PREFIX + id, messages=True)
        if doc is None:
            self._loaded_ids.pop(id)
            return None
        messages = [decoded(m, doc.run_id, f"message {i} of conversation {id!r}", store=self.url, shape=dict)
                    for i, m in enumerate(doc.conversations.get(id, []))]
        self._loaded_ids.put(id, doc.version, list(messages))
        return messages

    async def save(self, id: str, messages: list[dict[str, Any]]) -> None:
        await self._save_conversation(id, messages, [], None)

    async def save_halt(self, id: str, messages: list[dict[str, Any]], request: dict[str, Any]) -> None:
        await self._save_conversation(id, messages, [_open_row(CONVERSATION_PREFIX + id, request)], None)

    async def save_applied(self, id: str, messages: list[dict[str, Any]], request_id: str, holder: Holder,
                           new_request: Optional[dict[str, Any]] = None) -> None:
        rows = [_open_row(CONVERSATION_PREFIX + id, new_request)] if new_request is not None else []
        await self._save_conversation(id, messages, rows, (request_id, holder))

    async def _save_conversation(self, id: str, messages: list[dict[str, Any]], opened: list[PendingRow],
                                 applied: Optional[tuple[str, Holder]]) -> None:
        await self.open()
        run_id = CONVERSATION_PREFIX + id
        messages = list(messages)
        async with self._locked():
            doc = await self._read(run_id, messages=False)
            now = epoch()
            if doc is None:
                doc = RunDoc(run_id, KIND_CONVERSATION, None, "active", now, now)
            seen = self._loaded_ids.get(id)
            if seen is not None and seen[0] != doc.version:
                raise StoreConflict(
                    f"toolnexus: conversation {id!r} in {self.url} was changed by another writer since it was "
                    f"loaded (version {seen[0]} → {doc.version}); load it again and retry")
            if seen is not None and len(seen[1]) == doc.counts.get(id, 0):
                start = _common_prefix(seen[1], messages)
            else:
                full = await self._read(run_id, messages=True)
                stored = full.conversations.get(id, []) if full is not None else []
                start = _common_text_prefix(stored, messages)
            changes = Changes(status="pending" if opened else "active")
            changes.conversations[id] = ConversationOps(start, [dumps(m) for m in messages[start:]])
            edits = _apply(doc, changes, now)
            rows = list(opened)
            if applied is not None:
                row = (await self._rows_get([applied[0]])).get(applied[0])
                if row is not None:
                    row.status, row.answered_at = APPLIED, now
                    rows.append(row)
            await self._write(doc, edits, [], rows)
        self._loaded_ids.put(id, doc.version, messages)


def _common_prefix(handed_out: list[Any], messages: list[Any]) -> int:
    """How many leading messages are unchanged since `get`/`save` handed them out (identity first,
    so the usual append costs a pointer comparison per message)."""
    n = 0
    for a, b in zip(handed_out, messages, strict=False):
        if a is not b and a != b:
            break
        n += 1
    return n


def _common_text_prefix(stored: list[str], messages: list[Any]) -> int:
    """How many leading messages equal the stored JSON text (no cache: a fresh process)."""
    n = 0
    for text, message in zip(stored, messages, strict=False):
        if dumps(message) != text:
            break
        n += 1
    return n


def _open_row(run_id: str, request: dict[str, Any], handle_id: Optional[str] = None,
              path: Optional[list[str]] = None) -> PendingRow:
    return PendingRow(request["id"], run_id, handle_id, request, path, epoch(), expires_at_epoch(request))


def _ledger_changes(ledger: dict[str, PendingRow], run_id: str, changes: Changes, now: float) -> list[PendingRow]:
    """The ledger rows a commit writes: new requests opened, answered ones applied, withdrawn ones cancelled."""
    rows: list[PendingRow] = []
    for row in changes.pending:
        existing = ledger.get(row.request_id)
        if existing is not None and existing.status in (CLAIMED, APPLIED):
            continue  # already answered (a re-suspension reusing the id): keep the ledger's word
        row.run_id = row.run_id or run_id
        rows.append(row)
    for request_id in changes.applied:
        row = ledger.get(request_id) or PendingRow(request_id, run_id, None, None, None, now, None)
        row.status, row.answered_at = APPLIED, row.answered_at or now
        rows.append(row)
    for request_id in changes.cancelled:
        cancelled = ledger.get(request_id)
        if cancelled is not None and cancelled.status in (OPEN, CLAIMED):
            cancelled.status = CANCELLED
            rows.append(cancelled)
    return rows


def _describe(lease: Optional[dict[str, Any]]) -> Optional[str]:
    holder = Holder.from_dict(lease)
    return holder.describe() if holder is not None else None

