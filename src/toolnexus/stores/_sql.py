"""The SQL stores' shared half: the schema and every transaction, written once for SQLite and
PostgreSQL.

Each operation is a *step generator* — plain Python that yields `Query` objects and receives
their results — so the same transactional logic runs synchronously on SQLite's worker thread and
asynchronously on psycopg, and neither driver holds any logic of its own (`SqlStore._run`).

Tables (prefix `tn_`): `meta` (schema version), `runs` (one row per run: status, lease, version,
runtime record), `convs` + `messages` (transcripts, append-only: a commit inserts the new messages
and deletes only what a rewind dropped; a conversation is keyed by a small integer `cid`, and a
message row by the one integer `k = cid * 2**32 + idx`, so a message row costs its JSON and little
more, and a conversation's messages are one key range; a handle's record, replaced in place, is
the one row of a key of its own, made beside its run's conversations — so the usual commit writes
its new messages and records in one statement, to one page), `calls` (`Changes.calls`: journal
rows of their own — the agent runtime keeps its journal in its handles' records now, so these are
rows an earlier version wrote, read and dropped as before), `pending` (the answer ledger) and
`trace` (the newest lines).

Concurrency: every write transaction first locks the run's row (PostgreSQL `SELECT … FOR
UPDATE`; SQLite `BEGIN IMMEDIATE`), then checks the lease, so two processes can never both
write one run, and a claim is a compare-and-set on its ledger row inside such a transaction.
Messages are stored as JSON text, not JSONB, so a transcript comes back byte for byte (JSONB
would reorder keys).
"""

from __future__ import annotations

import abc
import functools
import hashlib
from dataclasses import dataclass, field
from typing import Any, Callable, Generator, NoReturn, Optional, TypeVar

from .._text import plain_text
from ..client._memory import IdLocks
from ..durable import (
    Changes,
    Holder,
    LeaseLost,
    LoadedRun,
    PendingRow,
    RunChanged,
    RunDamaged,
    RunExists,
    RunNotFound,
    RunStore,
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
    RUN_FORMAT,
    decoded,
    dumps,
    epoch,
)
from ..durable._rules import check_claim, check_lease, expires_at_epoch, lease_is_ours
from ._damage import QUARANTINE_NS, report, sift
from ._document import TRACE_KEEP
from ._seen import SeenConversations

T = TypeVar("T")

# The SQL stores' own layout (the file store's is `SCHEMA_VERSION`). 2: messages keyed by one
# integer, handle records beside them.
SQL_SCHEMA = 2
# A message's key is `cid * SPAN + idx`: up to 2**31 conversations, 2**32 messages in each.
SPAN = 1 << 32


# A handle's record is the one row of a key of its own, named `RECORD + handle id` in `tn_convs`
# (an agent run's conversations are named by handle ids, which begin with "root", so none is named
# so; a client conversation's run has no records); made with the run's first commit, right after
# its conversations' keys, so it sits beside the run's newest messages.
RECORD = "record:"


def _key_column(dialect: str) -> str:
    """`tn_messages`' key column (on SQLite, the row id itself)."""
    return "k BIGINT" if dialect == "postgres" else "k INTEGER"


def _span(cid: int) -> tuple[int, int]:
    """The key range `[lo, hi)` holding conversation `cid`'s messages."""
    return cid * SPAN, (cid + 1) * SPAN


@dataclass
class Query:
    """One statement. `fetch`: "none" | "one" | "all" | "rowcount"; `many`: params is a list of rows;
    `lock`: append the dialect's row lock (`FOR UPDATE` on PostgreSQL); `returning`: an INSERT whose
    new row's key column this names is wanted back, as a one-tuple (None if nothing was inserted) —
    `RETURNING` on PostgreSQL, the cursor's last row id on SQLite (whose RETURNING costs about as
    much again as the insert)."""

    sql: str
    params: Any = ()
    fetch: str = "none"
    many: bool = False
    lock: bool = False
    returning: Optional[str] = None


Steps = Generator[Query, Any, T]


def schema_statements(dialect: str) -> list[str]:
    """The tables, created if missing. On SQLite, tables of small rows are `WITHOUT ROWID` (keyed
    by their primary key alone — `tn_runs` included, so every commit's fenced update walks one
    tree, not a key index and then the table). `tn_messages` is an ordinary row-id table whose row
    id *is* its key `k`: its rows are large (handle records), and a `WITHOUT ROWID` tree keeps
    whole rows in its inner pages and splits by spreading them over three siblings, while here
    appending a conversation's next messages fills its last page and then starts a new one (about
    half the pages written per commit; the figures are in docs/performance.md). `tn_convs`' row id is
    the conversation's small key. A database in an earlier schema is brought up to date on open (`migrate_steps`)."""
    real = "DOUBLE PRECISION" if dialect == "postgres" else "REAL"
    no_rowid = "" if dialect == "postgres" else " WITHOUT ROWID"
    identity = "BIGINT GENERATED BY DEFAULT AS IDENTITY PRIMARY KEY" if dialect == "postgres" else "INTEGER PRIMARY KEY"
    big = "BIGINT" if dialect == "postgres" else "INTEGER"
    return [
        "CREATE TABLE IF NOT EXISTS tn_meta (key TEXT PRIMARY KEY, value TEXT NOT NULL)",
        f"""CREATE TABLE IF NOT EXISTS tn_runs (
            run_id TEXT PRIMARY KEY, kind TEXT NOT NULL, entry_agent TEXT, status TEXT NOT NULL,
            created_at {real} NOT NULL, updated_at {real} NOT NULL, version {big} NOT NULL,
            format INTEGER NOT NULL, state TEXT, result TEXT, lease TEXT, lease_expires {real},
            trace_seq {big} NOT NULL DEFAULT 0, lease_id TEXT){no_rowid}""",
        f"""CREATE TABLE IF NOT EXISTS tn_convs (
            cid {identity}, run_id TEXT NOT NULL, conv_id TEXT NOT NULL, UNIQUE (run_id, conv_id))""",
        f"""CREATE TABLE IF NOT EXISTS tn_messages ({_key_column(dialect)} PRIMARY KEY, message TEXT NOT NULL)""",
        f"""CREATE TABLE IF NOT EXISTS tn_calls (
            run_id TEXT NOT NULL, conv_id TEXT NOT NULL, call_id TEXT NOT NULL, entry TEXT NOT NULL,
            PRIMARY KEY (run_id, conv_id, call_id)){no_rowid}""",
        f"""CREATE TABLE IF NOT EXISTS tn_pending (
            request_id TEXT PRIMARY KEY, run_id TEXT, handle_id TEXT, request TEXT, path TEXT,
            created_at {real} NOT NULL, expires_at {real}, status TEXT NOT NULL, claim TEXT, answer TEXT,
            answered_at {real})""",
        "CREATE INDEX IF NOT EXISTS tn_pending_by_status ON tn_pending (status, created_at)",
        "CREATE INDEX IF NOT EXISTS tn_pending_by_run ON tn_pending (run_id)",
        f"""CREATE TABLE IF NOT EXISTS tn_records (
            ns TEXT NOT NULL, key TEXT NOT NULL, value TEXT NOT NULL, written {big} NOT NULL,
            PRIMARY KEY (ns, key)){no_rowid}""",
        f"""CREATE TABLE IF NOT EXISTS tn_trace (
            run_id TEXT NOT NULL, seq {big} NOT NULL, line TEXT NOT NULL, PRIMARY KEY (run_id, seq)){no_rowid}""",
    ]


# --------------------------------------------------------------------------- step generators

_RUN_COLS = ("run_id, kind, entry_agent, status, created_at, updated_at, version, format, state, result, lease, "
             "lease_expires, trace_seq")
_PENDING_COLS = (
    "request_id, run_id, handle_id, request, path, created_at, expires_at, status, claim, answer, answered_at"
)


def pending_row(r: Any, url: str = "") -> PendingRow:
    """A ledger row, each JSON column decoded on its own (`RunDamaged` naming run and request)."""
    request_id, run_id = r[0], r[1]
    try:
        return PendingRow(request_id, run_id, r[2],
                          decoded(r[3], run_id, "request", request_id=request_id, store=url, shape=dict),
                          decoded(r[4], run_id, "path", request_id=request_id, store=url, shape=list), r[5], r[6],
                          r[7], decoded(r[8], run_id, "claim", request_id=request_id, store=url, shape=dict),
                          decoded(r[9], run_id, "answer", request_id=request_id, store=url, shape=dict), r[10])
    except RunDamaged as exc:
        if r[7] != QUARANTINED:
            raise
        raise RunDamaged(run_id, exc.part, exc.reason, request_id=request_id, store=url, quarantined=True) from None


def _lease_of(row: tuple[Any, ...], url: str = "") -> Any:
    """A run row's lease (`RunDamaged` if it cannot be read)."""
    return decoded(row[10], row[0], "lease", store=url, shape=dict)


def _refuse_quarantined(row: tuple[Any, ...], url: str) -> None:
    if row[3] == QUARANTINED:
        raise RunDamaged(row[0], "run", "", store=url, quarantined=True)


def _pending_params(row: PendingRow) -> tuple[Any, ...]:
    return (row.request_id, row.run_id, row.handle_id, dumps(row.request) if row.request is not None else None,
            dumps(row.path) if row.path is not None else None, row.created_at, row.expires_at, row.status,
            dumps(row.claim) if row.claim is not None else None, dumps(row.answer) if row.answer is not None else None,
            row.answered_at)


def _put_pending(row: PendingRow) -> Query:
    sets = ", ".join(f"{c} = excluded.{c}" for c in _PENDING_COLS.split(", ")[1:])
    return Query(f"INSERT INTO tn_pending ({_PENDING_COLS}) VALUES ({', '.join('?' * 11)}) "
                 f"ON CONFLICT (request_id) DO UPDATE SET {sets}", _pending_params(row))


def schema_is_current(statements: list[str], dialect: str) -> Steps[bool]:
    """Whether this very layout already made the database (its statements' fingerprint is in
    `tn_meta`, at schema `SQL_SCHEMA`): then opening it needs no schema statement at all."""
    probe = ("SELECT to_regclass('tn_meta') IS NOT NULL" if dialect == "postgres" else
             "SELECT EXISTS (SELECT 1 FROM sqlite_master WHERE type = 'table' AND name = 'tn_meta')")
    exists = yield Query(probe, fetch="one")
    if exists is None or not exists[0]:
        return False
    rows = yield Query("SELECT key, value FROM tn_meta WHERE key IN ('schema', 'layout')", fetch="all")
    meta = {str(k): str(v) for k, v in rows or []}
    return meta.get("schema") == str(SQL_SCHEMA) and meta.get("layout") == _layout(statements)


def _layout(statements: list[str]) -> str:
    return hashlib.sha256("\n".join(statements).encode()).hexdigest()[:16]


def schema_steps(statements: list[str], url: str, dialect: str) -> Steps[None]:
    """Create what is missing; bring a database an earlier version made up to `SQL_SCHEMA`; refuse
    one a newer version made.

    A database this very layout already made is left alone (`schema_is_current`): `CREATE INDEX IF
    NOT EXISTS` still locks its table before it finds the index there, and on PostgreSQL a process
    opening the store while another writes could deadlock with it."""
    if (yield from schema_is_current(statements, dialect)):
        return
    for sql in statements:
        yield Query(sql)
    found = yield Query("SELECT value FROM tn_meta WHERE key = 'schema'", fetch="one")
    if found is None:
        yield Query("INSERT INTO tn_meta (key, value) VALUES ('schema', ?)", (str(SQL_SCHEMA),))
    else:
        try:
            version = int(found[0])
        except ValueError:
            version = -1
        if version > SQL_SCHEMA or version < 1:
            raise StoreVersionError(
                f"toolnexus: the store {url} has schema {found[0]!r}, written by a newer toolnexus (this version "
                f"reads schema {SQL_SCHEMA}) — upgrade toolnexus or point at another database")
        if version < SQL_SCHEMA:
            yield from migrate_steps(version, dialect)
    yield Query("INSERT INTO tn_meta (key, value) VALUES ('layout', ?) ON CONFLICT (key) DO UPDATE "
                "SET value = excluded.value", (_layout(statements),))


def migrate_steps(version: int, dialect: str) -> Steps[None]:
    """Schema 1 → 2 (inside the opening transaction, so a second process opening the same
    database at once finds it done): messages move from `(cid, idx)` rows to one integer key,
    handle records from `tn_handles` to keys of their own beside them."""
    if version < 2:
        yield Query(f"CREATE TABLE tn_messages_v2 ({_key_column(dialect)} PRIMARY KEY, message TEXT NOT NULL)")
        yield Query(f"INSERT INTO tn_messages_v2 (k, message) SELECT cid * {SPAN} + idx, message FROM tn_messages")
        yield Query("DROP TABLE tn_messages")
        yield Query("ALTER TABLE tn_messages_v2 RENAME TO tn_messages")
        yield Query(f"INSERT INTO tn_convs (run_id, conv_id) SELECT run_id, '{RECORD}' || handle_id FROM tn_handles "
                    "WHERE true ON CONFLICT (run_id, conv_id) DO NOTHING")  # WHERE: SQLite's parser needs it here
        yield Query(f"INSERT INTO tn_messages (k, message) SELECT c.cid * {SPAN}, h.record FROM tn_handles h "
                    f"JOIN tn_convs c ON c.run_id = h.run_id AND c.conv_id = '{RECORD}' || h.handle_id")
        yield Query("DROP TABLE tn_handles")
    yield Query("UPDATE tn_meta SET value = ? WHERE key = 'schema'", (str(SQL_SCHEMA),))


def _run_row(run_id: str, *, lock: bool) -> Steps[Optional[tuple[Any, ...]]]:
    row: Optional[tuple[Any, ...]] = yield Query(f"SELECT {_RUN_COLS} FROM tn_runs WHERE run_id = ?", (run_id,), "one",
                                                 lock=lock)
    return row


def _check_format(row: tuple[Any, ...], url: str) -> None:
    if row[7] > RUN_FORMAT:
        raise StoreVersionError(
            f"toolnexus: run {row[0]!r} in {url} was written by a newer toolnexus (run format {row[7]}; this "
            f"version reads {RUN_FORMAT}) — upgrade toolnexus to restore it")


def _must_run(run_id: str, url: str, *, lock: bool = True) -> Steps[tuple[Any, ...]]:
    row = yield from _run_row(run_id, lock=lock)
    if row is None:
        raise RunNotFound(run_id, url)
    _check_format(row, url)
    _refuse_quarantined(row, url)
    return row


# A run submitted to the work queue is listed before a worker starts it (status `queued`, no
# lease): starting it takes that row over; any other taken id inserts nothing (`RunExists`).
_INSERT_RUN = (f"INSERT INTO tn_runs ({_RUN_COLS}, lease_id) VALUES ({', '.join('?' * 14)}) "
               "ON CONFLICT (run_id) DO UPDATE SET kind = excluded.kind, entry_agent = excluded.entry_agent, "
               "status = excluded.status, updated_at = excluded.updated_at, version = excluded.version, "
               "format = excluded.format, state = excluded.state, result = excluded.result, lease = excluded.lease, "
               "lease_expires = excluded.lease_expires, trace_seq = excluded.trace_seq, lease_id = excluded.lease_id "
               "WHERE tn_runs.status = 'queued'")


def _insert_run_query(run_id: str, kind: str, entry: Optional[str], status: str, version: int,
                      state: Optional[str], result: Optional[str], holder: Optional[Holder], ttl: float,
                      trace_seq: int, now: float) -> Query:
    """A new run's row, leased to `holder` (None: created with no lease); it inserts no row if the
    id is taken."""
    lease = (dumps(holder.to_dict()), now + ttl, holder.id) if holder is not None else (None, None, None)
    return Query(_INSERT_RUN, (run_id, kind, entry, status, now, now, version, RUN_FORMAT, state, result, lease[0],
                               lease[1], trace_seq, lease[2]), "rowcount")


def _insert_run(run_id: str, kind: str, entry: Optional[str], status: str, version: int, state: Optional[str],
                result: Optional[str], holder: Optional[Holder], ttl: float, trace_seq: int, now: float) -> Steps[None]:
    """`_insert_run_query`, run; `RunExists` if the id is taken."""
    if not (yield _insert_run_query(run_id, kind, entry, status, version, state, result, holder, ttl, trace_seq, now)):
        raise RunExists(run_id)


def _run_exists(run_id: str) -> Steps[NoReturn]:
    raise RunExists(run_id)
    yield  # a generator (never reached)


def create_steps(run_id: str, kind: str, entry: Optional[str], holder: Holder, ttl: float,
                 state: Optional[dict[str, Any]]) -> Steps[None]:
    yield from _insert_run(run_id, kind, entry, "running", 1, dumps(state) if state is not None else None, None,
                           holder, ttl, 0, epoch())


def acquire_steps(run_id: str, holder: Holder, ttl: float, takeover: bool, url: str) -> Steps[int]:
    row = yield from _must_run(run_id, url)
    now = epoch()
    check_lease(run_id, _lease_of(row, url), row[11], holder, now, takeover)
    yield Query("UPDATE tn_runs SET lease = ?, lease_id = ?, lease_expires = ? WHERE run_id = ?",
                (dumps(holder.to_dict()), holder.id, now + ttl, run_id))
    return int(row[6])


def renew_steps(run_id: str, holder: Holder, ttl: float, url: str) -> Steps[None]:
    row = yield from _must_run(run_id, url)
    lease = _lease_of(row, url)
    if not lease_is_ours(lease, holder):
        raise LeaseLost(run_id, _describe(lease))
    yield Query("UPDATE tn_runs SET lease_expires = ? WHERE run_id = ?", (epoch() + ttl, run_id))


def release_steps(run_id: str, holder: Holder) -> Steps[None]:
    row = yield from _run_row(run_id, lock=True)
    if row is not None and lease_is_ours(_lease_of(row), holder):
        yield Query(
            "UPDATE tn_runs SET lease = NULL, lease_id = NULL, lease_expires = NULL WHERE run_id = ?", (run_id,)
        )


def _describe(lease: Any) -> Optional[str]:
    holder = Holder.from_dict(lease)
    return holder.describe() if holder is not None else None


class ConvKeys:
    """The conversation keys a store has seen committed, so a commit need not look its key up.

    A key learned inside a transaction is `fresh` until that transaction commits (a rolled-back
    insert must not be remembered: its key would point at no conversation). Bounded: past `keep`
    entries the oldest half is forgotten (a miss costs one SELECT). Mutated on the event loop
    only; the SQL thread reads with `dict.get`."""

    def __init__(self, keep: int = 4096) -> None:
        self.keep = keep
        self._known: dict[tuple[str, str], int] = {}

    def get(self, key: tuple[str, str]) -> Optional[int]:
        return self._known.get(key)

    def learn(self, fresh: dict[tuple[str, str], int]) -> None:
        if not fresh:
            return
        self._known.update(fresh)
        if len(self._known) > self.keep:
            for old in list(self._known)[: len(self._known) - self.keep // 2]:
                del self._known[old]

    def forget_run(self, run_id: str) -> None:
        self._known = {k: v for k, v in self._known.items() if k[0] != run_id}

    def __len__(self) -> int:
        return len(self._known)


class Keys:
    """One transaction's view of conversation keys: the committed ones, plus those it made."""

    def __init__(self, known: ConvKeys) -> None:
        self.known = known
        self.fresh: dict[tuple[str, str], int] = {}

    def get(self, key: tuple[str, str]) -> Optional[int]:
        found = self.fresh.get(key)
        return found if found is not None else self.known.get(key)


def _conv_key(run_id: str, conv_id: str, keys: Keys) -> Steps[int]:
    """The small integer key of a conversation, created on first use (a key never changes once
    made, so a committed one is remembered)."""
    cid = keys.get((run_id, conv_id))
    if cid is not None:
        return cid
    found = yield Query("INSERT INTO tn_convs (run_id, conv_id) VALUES (?, ?) ON CONFLICT (run_id, conv_id) DO NOTHING",
                        (run_id, conv_id), returning="cid")
    if found is None:  # made before (by another process, or before this store object existed)
        found = yield Query("SELECT cid FROM tn_convs WHERE run_id = ? AND conv_id = ?", (run_id, conv_id), "one")
    keys.fresh[(run_id, conv_id)] = int(found[0])
    return int(found[0])


_CID_OF = "(SELECT cid FROM tn_convs WHERE run_id = ? AND conv_id = ?)"


def _rewind(cid: "int | tuple[str, str]", start: int) -> Query:
    """Delete a conversation's messages from `start` on. `cid`: its key, or its `(run_id,
    conv_id)` when the same transaction makes the key first (the statement looks it up itself,
    so it can be written before the key is known)."""
    if isinstance(cid, tuple):
        return Query(f"DELETE FROM tn_messages WHERE k >= {_CID_OF} * {SPAN} + ? AND k < ({_CID_OF} + 1) * {SPAN}",
                     (*cid, start, *cid))
    lo, hi = _span(cid)
    return Query("DELETE FROM tn_messages WHERE k >= ? AND k < ?", (lo + start, hi))


def _write_conversation(run_id: str, conv_id: str, start: int, texts: list[str],
                        keys: Keys) -> Steps[None]:
    """A whole transcript saved from `start` on (client-level conversations)."""
    cid = yield from _conv_key(run_id, conv_id, keys)
    yield _rewind(cid, start)
    if texts:
        yield Query(_ROWS_UPSERT, [(cid * SPAN + start + i, text) for i, text in enumerate(texts)], many=True)


def _ledger_rows(run_id: str, changes: Changes, now: float) -> Steps[list[PendingRow]]:
    rows: list[PendingRow] = []
    for row in changes.pending:
        existing = yield from _get_pending(row.request_id, lock=True)
        if existing is not None and existing.status in (CLAIMED, APPLIED):
            continue
        row.run_id = row.run_id or run_id
        rows.append(row)
    for request_id in changes.applied:
        row = (yield from _get_pending(request_id, lock=True)) or PendingRow(
            request_id, run_id, None, None, None, now, None
        )
        row.status, row.answered_at = APPLIED, row.answered_at or now
        rows.append(row)
    for request_id in changes.cancelled:
        cancelled = yield from _get_pending(request_id, lock=True)
        if cancelled is not None and cancelled.status in (OPEN, CLAIMED):
            cancelled.status = CANCELLED
            rows.append(cancelled)
    return rows


def _lease_steps(run_id: str, holder: Holder, changes: Changes, url: str) -> Steps[None]:
    """The slow path of a commit: lock the run's row and check that the lease may be taken (or is
    ours) and that the run is at the version the holder expects, or say why not."""
    row = yield from _must_run(run_id, url)
    lease = _lease_of(row, url)
    if changes.take_lease:
        check_lease(run_id, lease, row[11], holder, epoch(), False)
    elif not lease_is_ours(lease, holder):
        raise LeaseLost(run_id, _describe(lease))
    if changes.expect_version is not None and int(row[6]) != changes.expect_version:
        raise RunChanged(run_id, changes.expect_version, int(row[6]))


@dataclass
class Encoded:
    """A commit's JSON texts and its row writes as statements, made by the caller before the
    transaction, on the event loop, where the objects are warm in cache: the transaction's thread
    then only runs SQL (on a just-woken worker thread every Python frame is paid cold; see
    docs/performance.md). A conversation whose key the store does not know yet is made (or found) first in
    the transaction (`made`), and its statements look the key up themselves."""

    handles: list[tuple[str, str]]  # (handle id, record JSON)
    calls: list[tuple[str, str, str, str]]
    drops: list[tuple[str, str, str]]
    state: Optional[str]
    result: Optional[str]
    writes: list[Query] = field(default_factory=list)  # the handles, transcripts and call journal
    made: list[tuple[str, str]] = field(default_factory=list)  # conversation keys to make (or find) first

    @classmethod
    def of(cls, run_id: str, changes: Changes, keys: Keys) -> "Encoded":
        calls = changes.calls.items()
        enc = cls([(hid, dumps(rec)) for hid, rec in changes.handles.items()],
                  [(run_id, c, k, dumps(entry)) for (c, k), entry in calls if entry is not None],
                  [(run_id, c, k) for (c, k), entry in calls if entry is None],
                  dumps(changes.state) if changes.state is not None else None,
                  dumps(changes.result) if changes.result is not None else None)

        def key(name: str) -> "int | tuple[str, str]":
            cid = keys.get((run_id, name))
            if cid is None:
                enc.made.append((run_id, name))
                return (run_id, name)
            return cid

        cids = {conv: key(conv) for conv in changes.conversations}  # conversations' keys first
        records = [(key(RECORD + hid), text) for hid, text in enc.handles]
        enc.writes = _row_writes(changes, enc, cids, records)
        return enc


# New messages and changed records in one statement: a record replaces the one before it; a
# message is new (a rewind deleted what it replaces first), so its conflict clause never fires.
_ROWS_UPSERT = ("INSERT INTO tn_messages (k, message) VALUES (?, ?) "
                "ON CONFLICT (k) DO UPDATE SET message = excluded.message")
_ROWS_UPSERT_BY_IDS = (f"INSERT INTO tn_messages (k, message) VALUES ({_CID_OF} * {SPAN} + ?, ?) "
                       "ON CONFLICT (k) DO UPDATE SET message = excluded.message")
_CALLS_DELETE = "DELETE FROM tn_calls WHERE run_id = ? AND conv_id = ? AND call_id = ?"
_CALLS_UPSERT = ("INSERT INTO tn_calls (run_id, conv_id, call_id, entry) VALUES (?, ?, ?, ?) "
                 "ON CONFLICT (run_id, conv_id, call_id) DO UPDATE SET entry = excluded.entry")


def _row_writes(changes: Changes, enc: Encoded, cids: "dict[str, int | tuple[str, str]]",
                records: "list[tuple[int | tuple[str, str], str]]") -> list[Query]:
    """The statements writing a commit's transcripts, handle records (each with its key) and call
    journal, given every key (or its ids, for one the transaction makes: see `_rewind`): what a
    rewind drops first, then every new message and record in one statement (the usual commit: one
    statement, one page — a handle's record is stored beside its run's newest messages)."""
    writes: list[Query] = []
    rows: list[tuple[int, str]] = []
    rows_by_ids: list[tuple[str, str, int, str]] = []
    for conv_id, ops in changes.conversations.items():
        cid = cids[conv_id]
        if ops.stored is None or ops.start < ops.stored:  # a rewind (or not known): delete from `start` on
            writes.append(_rewind(cid, ops.start))
        if isinstance(cid, tuple):
            rows_by_ids += [(*cid, ops.start + i, text) for i, text in enumerate(ops.append)]
        else:
            rows += [(cid * SPAN + ops.start + i, text) for i, text in enumerate(ops.append)]
    for cid, text in records:
        if isinstance(cid, tuple):
            rows_by_ids.append((*cid, 0, text))
        else:
            rows.append((cid * SPAN, text))
    if rows:
        writes.append(Query(_ROWS_UPSERT, rows, many=True))
    if rows_by_ids:
        writes.append(Query(_ROWS_UPSERT_BY_IDS, rows_by_ids, many=True))
    if enc.drops:
        writes.append(Query(_CALLS_DELETE, enc.drops, many=True))
    if enc.calls:
        writes.append(Query(_CALLS_UPSERT, enc.calls, many=True))
    return writes


def start_steps(run_id: str, kind: str, entry: Optional[str], holder: Holder, ttl: float,
                state: Optional[dict[str, Any]], changes: Changes, encoded: Encoded, url: str,
                keys: Keys) -> "Steps[int] | FlatCommit":
    """Create a run and write its first changes, in one transaction: the run's row is inserted as
    that first commit leaves it (version 2: the creation, then the commit), not inserted and then
    updated. Without ledger rows to read, it is a `FlatCommit` built here, by the caller."""
    now = epoch()
    row_state = encoded.state if encoded.state is not None else (dumps(state) if state is not None else None)
    insert = _insert_run_query(run_id, kind, changes.entry_agent or entry, changes.status or "running", 2, row_state,
                               encoded.result, None if changes.release else holder, ttl, len(changes.trace), now)
    if not (changes.pending or changes.applied or changes.cancelled):
        return FlatCommit(insert, encoded.writes + _trace_writes(run_id, changes.trace, len(changes.trace)), 2,
                          functools.partial(_run_exists, run_id), encoded.made, keys)
    return _start_steps(run_id, changes, encoded, keys, insert, now)


def _start_steps(run_id: str, changes: Changes, encoded: Encoded, keys: Keys, insert: Query,
                 now: float) -> Steps[int]:
    if not (yield insert):
        raise RunExists(run_id)
    yield from _write_parts(run_id, changes, encoded, keys, now, len(changes.trace))
    return 2


@dataclass
class FlatCommit:
    """A usual commit (or a run's creation) as a flat list of statements, nothing read back: the
    fenced run-row update (the run row's insert) must change one row, else `refuse()` says why;
    then the conversation keys the transaction makes (`made`, learned into `keys`); then `writes`;
    the run's version after it is `version`. A driver may run it without a step generator
    (SQLite, on a tool's just-woken thread, where each Python frame is paid cold)."""

    first: Query
    writes: list[Query]
    version: int
    refuse: Callable[[], Steps[NoReturn]]
    made: list[tuple[str, str]]
    keys: Keys

    def make_keys(self) -> Steps[None]:
        for run_id, conv_id in self.made:
            yield from _conv_key(run_id, conv_id, self.keys)

    def steps(self) -> Steps[int]:
        if not (yield self.first):
            yield from self.refuse()
        yield from self.make_keys()
        for query in self.writes:
            yield query
        return self.version


def commit_steps(run_id: str, holder: Holder, changes: Changes, ttl: float, url: str,
                 keys: Keys, enc: Encoded, *, returning: bool = True) -> "Steps[int] | FlatCommit":
    """One commit. The run's row is updated first — `WHERE lease_id` (and, when the holder says
    which version it last wrote, `AND version`) is both the fence and (on PostgreSQL) the row lock
    — so the usual commit costs one statement per kind of change.

    The run row's statement is built here, by the caller (the event loop, for a prepared commit),
    not on the thread that runs the transaction. A fenced commit with no trace lines needs nothing
    from the row back: its new version is the one it fenced on, plus one. Otherwise `returning=False`
    reads the row back with a SELECT instead of `UPDATE … RETURNING`: SQLite buffers RETURNING rows
    in a scratch table, which costs about as much again as the update itself; the SELECT, inside
    the same write transaction, sees exactly what it wrote."""
    now = epoch()
    sets = ["version = version + 1", "updated_at = ?", "trace_seq = trace_seq + ?"]
    params: list[Any] = [now, len(changes.trace)]
    if changes.release:
        sets += ["lease = NULL", "lease_id = NULL", "lease_expires = NULL"]
    else:
        sets.append("lease_expires = ?")
        params.append(now + ttl)
        if changes.take_lease:
            sets += ["lease = ?", "lease_id = ?"]
            params += [dumps(holder.to_dict()), holder.id]
    for column, value in (("status", changes.status), ("entry_agent", changes.entry_agent)):
        if value:
            sets.append(f"{column} = ?")
            params.append(value)
    for column, text in (("state", enc.state), ("result", enc.result)):
        if text is not None:
            sets.append(f"{column} = ?")
            params.append(text)
    update = f"UPDATE tn_runs SET {', '.join(sets)} WHERE run_id = ?"
    if changes.take_lease:
        return _commit_taking(run_id, holder, changes, url, keys, enc, now, Query(update, (*params, run_id)), returning)
    known = changes.expect_version
    if known is None:
        fenced = Query(f"{update} AND lease_id = ?", (*params, run_id, holder.id), "rowcount")
    else:
        fenced = Query(f"{update} AND lease_id = ? AND version = ?", (*params, run_id, holder.id, known), "rowcount")
    if known is not None and not changes.trace and not returning:
        if not (changes.pending or changes.applied or changes.cancelled):
            return FlatCommit(fenced, enc.writes, known + 1, functools.partial(_refused, run_id, holder, changes, url),
                              enc.made, keys)
        return _commit_known(run_id, holder, changes, url, keys, enc, now, fenced, known)
    return _commit_held(run_id, holder, changes, url, keys, enc, now, fenced, returning)


def _refused(run_id: str, holder: Holder, changes: Changes, url: str) -> Steps[NoReturn]:
    """A fenced update matched no row: raise why (not found, not our lease, or written since)."""
    yield from _lease_steps(run_id, holder, changes, url)
    raise LeaseLost(run_id, None)


def _commit_known(run_id: str, holder: Holder, changes: Changes, url: str, keys: Keys, enc: Encoded, now: float,
                  fenced: Query, known: int) -> Steps[int]:
    """A commit under our lease, at the version we last wrote, nothing read back, that reads
    ledger rows first (so it cannot be a `FlatCommit`)."""
    if not (yield fenced):
        yield from _refused(run_id, holder, changes, url)
    yield from _write_parts(run_id, changes, enc, keys, now, 0)
    return known + 1


def _commit_taking(run_id: str, holder: Holder, changes: Changes, url: str, keys: Keys, enc: Encoded, now: float,
                   update: Query, returning: bool) -> Steps[int]:
    """A commit that takes the lease: checked first, under the row lock."""
    yield from _lease_steps(run_id, holder, changes, url)
    return (yield from _commit_held(run_id, holder, changes, url, keys, enc, now, update, returning))


def _commit_held(run_id: str, holder: Holder, changes: Changes, url: str, keys: Keys, enc: Encoded, now: float,
                 update: Query, returning: bool) -> Steps[int]:
    """A commit that reads the run row back (its version and trace sequence; its format checked)."""
    if returning:
        row = yield Query(f"{update.sql} RETURNING version, trace_seq, format", update.params, "one")
    elif (yield Query(update.sql, update.params, "rowcount")):
        row = yield Query("SELECT version, trace_seq, format FROM tn_runs WHERE run_id = ?", (run_id,), "one")
    else:
        row = None
    if row is None:
        yield from _refused(run_id, holder, changes, url)
    if row[2] > RUN_FORMAT:
        raise StoreVersionError(
            f"toolnexus: run {run_id!r} in {url} was written by a newer toolnexus (run format {row[2]}; this "
            f"version reads {RUN_FORMAT}) — upgrade toolnexus to restore it")
    yield from _write_parts(run_id, changes, enc, keys, now, int(row[1]))
    return int(row[0])


def _write_parts(run_id: str, changes: Changes, enc: Encoded, keys: Keys, now: float, last_trace: int) -> Steps[None]:
    """Everything a commit writes besides the run's row; `last_trace` is the run's trace sequence
    number after this commit's lines."""
    for made in enc.made:
        yield from _conv_key(*made, keys)
    for query in enc.writes:
        yield query
    if changes.pending or changes.applied or changes.cancelled:
        for ledger_row in (yield from _ledger_rows(run_id, changes, now)):
            yield _put_pending(ledger_row)
    for query in _trace_writes(run_id, changes.trace, last_trace):
        yield query


def _trace_writes(run_id: str, lines: list[str], last_trace: int) -> list[Query]:
    """Trace lines numbered up to `last_trace`, and now and then a trim of the oldest."""
    if not lines:
        return []
    first = last_trace - len(lines) + 1
    writes = [Query("INSERT INTO tn_trace (run_id, seq, line) VALUES (?, ?, ?)",
                    [(run_id, first + i, plain_text(line)) for i, line in enumerate(lines)], many=True)]
    if last_trace // 1000 != (first - 1) // 1000 and last_trace > TRACE_KEEP:  # trim now and then, not every commit
        writes.append(Query("DELETE FROM tn_trace WHERE run_id = ? AND seq <= ?", (run_id, last_trace - TRACE_KEEP)))
    return writes


def _get_pending(request_id: str, *, lock: bool = False) -> Steps[Optional[PendingRow]]:
    found = yield Query(f"SELECT {_PENDING_COLS} FROM tn_pending WHERE request_id = ?", (request_id,), "one", lock=lock)
    return pending_row(found) if found is not None else None


def find_steps(request_id: str) -> Steps[Optional[PendingRow]]:
    return (yield from _get_pending(request_id))


def claim_steps(request_id: str, holder: Holder, answer: dict[str, Any], ttl: float,
                run_id: Optional[str]) -> Steps[PendingRow]:
    now = epoch()
    yield Query(f"INSERT INTO tn_pending ({_PENDING_COLS}) VALUES ({', '.join('?' * 11)}) "
                "ON CONFLICT (request_id) DO NOTHING",
                _pending_params(PendingRow(request_id, run_id, None, None, None, now, None)))
    row = yield from _get_pending(request_id, lock=True)
    assert row is not None
    check_claim(row, holder, now, ttl)
    row.status, row.claim, row.answer, row.answered_at = CLAIMED, holder.to_dict(), answer, now
    yield _put_pending(row)
    return row


def mark_applied_steps(request_id: str, holder: Holder) -> Steps[None]:
    row = yield from _get_pending(request_id, lock=True)
    if row is not None and row.status == CLAIMED and lease_is_ours(row.claim, holder):
        yield Query("UPDATE tn_pending SET status = ? WHERE request_id = ?", (APPLIED, request_id))


def unclaim_steps(request_id: str, holder: Holder) -> Steps[None]:
    row = yield from _get_pending(request_id, lock=True)
    if row is not None and row.status == CLAIMED and lease_is_ours(row.claim, holder):
        yield Query("UPDATE tn_pending SET status = ?, claim = NULL, answer = NULL, answered_at = NULL "
                    "WHERE request_id = ?", (OPEN, request_id))


# Every row of a run (its messages and handle records), one query, in key order.
_RUN_ROWS = (f"SELECT c.conv_id, m.message FROM tn_convs c LEFT JOIN tn_messages m "
             f"ON m.k >= c.cid * {SPAN} AND m.k < (c.cid + 1) * {SPAN} WHERE c.run_id = ? ORDER BY c.cid, m.k")


def _messages_of(cid: int) -> Query:
    return Query("SELECT message FROM tn_messages WHERE k >= ? AND k < ? ORDER BY k", _span(cid), "all")


def load_steps(run_id: str, url: str) -> Steps[LoadedRun]:
    """A run as committed; every row decoded on its own (a damaged one is a `RunDamaged` naming it)."""
    row = yield from _must_run(run_id, url, lock=False)
    rows = yield Query(_RUN_ROWS, (run_id,), "all")
    handles, conversations = _run_rows(run_id, row[1], rows, url)
    calls = yield Query("SELECT conv_id, call_id, entry FROM tn_calls WHERE run_id = ?", (run_id,), "all")
    pend = yield Query(f"SELECT {_PENDING_COLS} FROM tn_pending WHERE run_id = ? ORDER BY created_at", (run_id,), "all")
    trace = yield Query("SELECT line FROM tn_trace WHERE run_id = ? ORDER BY seq", (run_id,), "all")
    return LoadedRun(
        run_id=row[0], kind=row[1], entry_agent=row[2], status=row[3], created_at=row[4], updated_at=row[5],
        version=int(row[6]), format=int(row[7]), state=decoded(row[8], run_id, "run state", store=url, shape=dict),
        result=decoded(row[9], run_id, "run result", store=url, shape=dict), lease=_lease_of(row, url),
        lease_expires=row[11], handles=handles, conversations=conversations,
        calls={(c, k): decoded(e, run_id, f"journal entry {k!r} of {c!r}", store=url, shape=dict) for c, k, e in calls},
        pending=[pending_row(p, url) for p in pend], trace=[t[0] for t in trace][-TRACE_KEEP:])


def _run_rows(run_id: str, kind: str, rows: list[tuple[str, Optional[str]]],
              url: str) -> tuple[dict[str, Any], dict[str, list[Any]]]:
    """A run's handle records and transcripts from its `_RUN_ROWS`, each row decoded on its own."""
    conversations: dict[str, list[Any]] = {}
    handles: dict[str, Any] = {}
    records = kind != KIND_CONVERSATION  # a client conversation's id is the caller's: any name at all
    for conv_id, text in rows:
        if records and conv_id.startswith(RECORD):
            if text is not None:
                hid = conv_id[len(RECORD):]
                handles[hid] = decoded(text, run_id, f"record of handle {hid!r}", store=url, shape=dict)
        else:
            msgs = conversations.setdefault(conv_id, [])
            if text is not None:  # a conversation with no messages (yet, or rewound to none) is kept, empty
                msgs.append(decoded(text, run_id, f"message {len(msgs)} of conversation {conv_id!r}", store=url,
                                    shape=dict))
    return handles, conversations


def delete_steps(run_id: str) -> Steps[None]:
    convs = yield Query("SELECT cid FROM tn_convs WHERE run_id = ?", (run_id,), "all")
    for (cid,) in convs:
        yield Query("DELETE FROM tn_messages WHERE k >= ? AND k < ?", _span(int(cid)))
    for table in ("tn_convs", "tn_calls", "tn_pending", "tn_trace", "tn_runs"):
        yield Query(f"DELETE FROM {table} WHERE run_id = ?", (run_id,))
    yield Query("DELETE FROM tn_records WHERE ns = ? AND key = ?", (QUARANTINE_NS, run_id))  # if it was quarantined


def get_record_steps(namespace: str, key: str) -> Steps[Optional[str]]:
    row = yield Query("SELECT value FROM tn_records WHERE ns = ? AND key = ?", (namespace, key), "one")
    return row[0] if row is not None else None


def put_record_steps(namespace: str, key: str, text: str) -> Steps[None]:
    # `written` orders a listing by write; a counter in the table keeps it monotonic across processes
    top = yield Query("SELECT COALESCE(MAX(written), 0) FROM tn_records WHERE ns = ?", (namespace,), "one")
    yield Query("INSERT INTO tn_records (ns, key, value, written) VALUES (?, ?, ?, ?) ON CONFLICT (ns, key) DO UPDATE "
                "SET value = excluded.value, written = excluded.written", (namespace, key, text, int(top[0]) + 1))


def swap_record_steps(namespace: str, key: str, expected: Optional[dict[str, Any]], text: str) -> Steps[bool]:
    # The row is locked (PostgreSQL; SQLite's write transaction holds the database) before it is
    # compared, so two swaps from one `expected` cannot both see it; an absent row is inserted only
    # if no one inserted it first.
    row = yield Query("SELECT value FROM tn_records WHERE ns = ? AND key = ?", (namespace, key), "one", lock=True)
    current = decoded(row[0], None, f"record {key!r} of {namespace!r}") if row is not None else None
    if current != expected:
        return False
    top = yield Query("SELECT COALESCE(MAX(written), 0) FROM tn_records WHERE ns = ?", (namespace,), "one")
    if row is None:
        made = yield Query("INSERT INTO tn_records (ns, key, value, written) VALUES (?, ?, ?, ?) "
                           "ON CONFLICT (ns, key) DO NOTHING", (namespace, key, text, int(top[0]) + 1), "rowcount")
        return bool(made)
    yield Query("UPDATE tn_records SET value = ?, written = ? WHERE ns = ? AND key = ?",
                (text, int(top[0]) + 1, namespace, key))
    return True


def list_records_steps(namespace: str) -> Steps[list[str]]:
    rows = yield Query("SELECT value FROM tn_records WHERE ns = ? ORDER BY written", (namespace,), "all")
    return [r[0] for r in rows]


def conversation_get_steps(conv: str) -> Steps[Optional[tuple[int, list[Any]]]]:
    run_id = CONVERSATION_PREFIX + conv
    row = yield from _run_row(run_id, lock=False)
    if row is None:
        return None
    found = yield Query("SELECT cid FROM tn_convs WHERE run_id = ? AND conv_id = ?", (run_id, conv), "one")
    if found is None:
        return int(row[6]), []
    msgs = yield _messages_of(int(found[0]))
    return int(row[6]), [decoded(m[0], run_id, f"message {i} of conversation {conv!r}", shape=dict)
                         for i, m in enumerate(msgs)]


def conversation_save_steps(conv: str, messages: list[Any], seen: Optional[tuple[int, list[Any]]], url: str,
                            opened: Optional[PendingRow], applied: Optional[str],
                            keys: Keys) -> Steps[int]:
    run_id = CONVERSATION_PREFIX + conv
    now = epoch()
    yield Query(f"INSERT INTO tn_runs ({_RUN_COLS}) VALUES ({', '.join('?' * 13)}) ON CONFLICT (run_id) DO NOTHING",
                (run_id, KIND_CONVERSATION, None, "active", now, now, 0, RUN_FORMAT, None, None, None, None, 0))
    row = yield from _must_run(run_id, url)
    version = int(row[6])
    if seen is not None and seen[0] != version:
        raise StoreConflict(
            f"toolnexus: conversation {conv!r} in {url} was changed by another writer since it was loaded "
            f"(version {seen[0]} → {version}); load it again and retry")
    cid = yield from _conv_key(run_id, conv, keys)
    counted = yield Query("SELECT count(*) FROM tn_messages WHERE k >= ? AND k < ?", _span(cid), "one")
    count = int(counted[0])
    if seen is not None and len(seen[1]) == count:
        start = 0
        for a, b in zip(seen[1], messages, strict=False):
            if a is not b and a != b:
                break
            start += 1
    else:
        stored = yield _messages_of(cid)
        start = 0
        for (text,), message in zip(stored, messages, strict=False):
            if dumps(message) != text:
                break
            start += 1
    yield from _write_conversation(run_id, conv, start, [dumps(m) for m in messages[start:]], keys)
    if opened is not None:
        yield _put_pending(opened)
    if applied is not None:
        yield Query("UPDATE tn_pending SET status = ?, answered_at = COALESCE(answered_at, ?) WHERE request_id = ?",
                    (APPLIED, now, applied))
    status = "pending" if opened is not None else "active"
    yield Query("UPDATE tn_runs SET version = version + 1, updated_at = ?, status = ? WHERE run_id = ?",
                (now, status, run_id))
    return version + 1


# --------------------------------------------------------------------------- the store


class SqlStore(RunStore):
    """`RunStore` over the step generators above; a driver supplies `_run` (and `open`/`aclose`).
    The listings (`pending`, `runs`) and the work queue are `_fleet_sql.FleetSqlStore`'s, which
    both drivers build on."""

    dialect = "sqlite"
    update_returning = True  # a commit reads its run row back with `UPDATE … RETURNING` (see `commit_steps`)

    def __init__(self) -> None:
        self._conv_locks = IdLocks()
        self._loaded_ids = SeenConversations(self._conv_locks)
        self._keys = ConvKeys()

    @abc.abstractmethod
    async def _run(self, steps: Steps[T], *, write: bool = True) -> T:
        """Run one step generator as one transaction."""

    async def delete_run(self, run_id: str) -> None:
        await self._run(delete_steps(run_id))
        self._keys.forget_run(run_id)

    async def create_run(self, run_id: str, *, kind: str, entry_agent: Optional[str], holder: Holder,
                         lease_ttl: float, state: Optional[dict[str, Any]] = None) -> None:
        await self._run(create_steps(run_id, kind, entry_agent, holder, lease_ttl, state))

    async def acquire(self, run_id: str, holder: Holder, *, lease_ttl: float, takeover: bool = False) -> int:
        return await self._run(acquire_steps(run_id, holder, lease_ttl, takeover, self.url))

    async def renew(self, run_id: str, holder: Holder, lease_ttl: float) -> None:
        await self._run(renew_steps(run_id, holder, lease_ttl, self.url))

    async def release(self, run_id: str, holder: Holder) -> None:
        await self._run(release_steps(run_id, holder))

    async def load(self, run_id: str) -> LoadedRun:
        return await self._run(load_steps(run_id, self.url), write=False)

    def _start(self, run_id: str, kind: str, entry_agent: Optional[str], holder: Holder, lease_ttl: float,
               state: Optional[dict[str, Any]], changes: Changes) -> "tuple[Steps[int] | FlatCommit, Keys]":
        """A run's first transaction, its JSON and statements made here (the caller's thread: the
        event loop), and the conversation keys it will have made (learned once it has committed)."""
        keys = Keys(self._keys)
        return start_steps(run_id, kind, entry_agent, holder, lease_ttl, state, changes,
                           Encoded.of(run_id, changes, keys), self.url, keys), keys

    def _commit(self, run_id: str, holder: Holder, changes: Changes,
                lease_ttl: float) -> "tuple[Steps[int] | FlatCommit, Keys]":
        """One commit's transaction, its JSON and statements made here (see `_start`)."""
        keys = Keys(self._keys)
        return commit_steps(run_id, holder, changes, lease_ttl, self.url, keys, Encoded.of(run_id, changes, keys),
                            returning=self.update_returning), keys

    async def start_run(self, run_id: str, *, kind: str, entry_agent: Optional[str], holder: Holder,
                        lease_ttl: float, state: Optional[dict[str, Any]], changes: Changes) -> int:
        steps, keys = self._start(run_id, kind, entry_agent, holder, lease_ttl, state, changes)
        version = await self._run_commit(steps)
        self._keys.learn(keys.fresh)
        return version

    async def _run_commit(self, commit: "Steps[int] | FlatCommit") -> int:
        """Run one commit's transaction (a driver that runs a `FlatCommit` as it is overrides this)."""
        return await self._run(commit.steps() if isinstance(commit, FlatCommit) else commit)

    async def commit(self, run_id: str, holder: Holder, changes: Changes, *, lease_ttl: float) -> int:
        steps, keys = self._commit(run_id, holder, changes, lease_ttl)
        version = await self._run_commit(steps)
        self._keys.learn(keys.fresh)
        return version

    async def find_request(self, request_id: str) -> Optional[PendingRow]:
        try:
            return await self._run(find_steps(request_id), write=False)
        except RunDamaged as exc:
            raise exc.at(self.url) from None

    async def claim(self, request_id: str, holder: Holder, answer: dict[str, Any], *, ttl: float,
                    run_id: Optional[str] = None) -> PendingRow:
        try:
            return await self._run(claim_steps(request_id, holder, answer, ttl, run_id))
        except RunDamaged as exc:
            raise exc.at(self.url) from None

    async def unclaim(self, request_id: str, holder: Holder) -> None:
        await self._run(unclaim_steps(request_id, holder))

    async def mark_applied(self, request_id: str, holder: Holder) -> None:
        await self._run(mark_applied_steps(request_id, holder))

    async def get_record(self, namespace: str, key: str) -> Optional[dict[str, Any]]:
        record: Optional[dict[str, Any]] = decoded(await self._run(get_record_steps(namespace, key), write=False),
                                                   None, f"record {key!r} of {namespace!r}", store=self.url)
        return record

    async def put_record(self, namespace: str, key: str, value: dict[str, Any]) -> None:
        await self._run(put_record_steps(namespace, key, dumps(value)))

    async def list_records(self, namespace: str) -> list[dict[str, Any]]:
        texts = await self._run(list_records_steps(namespace), write=False)
        found, damaged = sift(texts, lambda t: decoded(t, None, f"a record of {namespace!r}", store=self.url))
        report(damaged, f"the records of {namespace!r}")
        return found

    async def swap_record(self, namespace: str, key: str, expected: Optional[dict[str, Any]],
                          value: dict[str, Any]) -> bool:
        return bool(await self._run(swap_record_steps(namespace, key, expected, dumps(value))))

    def lock(self, id: str) -> Any:
        return self._conv_locks.hold(id)

    async def get(self, id: str) -> Optional[list[dict[str, Any]]]:
        found = await self._run(conversation_get_steps(id), write=False)
        if found is None:
            self._loaded_ids.pop(id)
            return None
        self._loaded_ids.put(id, found[0], list(found[1]))
        return found[1]

    async def _save(self, id: str, messages: list[dict[str, Any]], opened: Optional[PendingRow],
                    applied: Optional[str]) -> None:
        messages = list(messages)
        keys = Keys(self._keys)
        version = await self._run(conversation_save_steps(id, messages, self._loaded_ids.get(id), self.url,
                                                          opened, applied, keys))
        self._keys.learn(keys.fresh)
        self._loaded_ids.put(id, version, messages)

    async def save(self, id: str, messages: list[dict[str, Any]]) -> None:
        await self._save(id, messages, None, None)

    async def save_halt(self, id: str, messages: list[dict[str, Any]], request: dict[str, Any]) -> None:
        row = PendingRow(
            request["id"], CONVERSATION_PREFIX + id, None, request, None, epoch(), expires_at_epoch(request)
        )
        await self._save(id, messages, row, None)

    async def save_applied(self, id: str, messages: list[dict[str, Any]], request_id: str, holder: Holder,
                           new_request: Optional[dict[str, Any]] = None) -> None:
        row = None
        if new_request is not None:
            row = PendingRow(new_request["id"], CONVERSATION_PREFIX + id, None, new_request, None, epoch(),
                             expires_at_epoch(new_request))
        await self._save(id, messages, row, request_id)
