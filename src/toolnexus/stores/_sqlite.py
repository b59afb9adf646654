"""`SqliteStore` (`open_store("sqlite:///runs.db")`): the default durable store, stdlib `sqlite3`.

One connection per store object, used from worker threads only (the event loop never blocks on
SQLite): the store's own thread, and — for a commit prepared with `prepare_commit` (or a run's
creation, with `prepare_start`) — the thread about to run a tool, which writes the call's start
itself (one thread round trip per call, not two); a lock keeps the connection to one thread at a
time. WAL journal so readers never wait for the writer; every write transaction is `BEGIN
IMMEDIATE`, which serialises writers across processes sharing the file, with a busy timeout
(default 10 s, `?timeout=SECONDS`) before a locked database is reported as `StoreUnavailable`.

Durability (`?synchronous=`): every commit survives a process crash at once. Against power loss,
by default (`critical`) the commits exactly-once rests on are made with `synchronous=FULL` (the
log is fsynced before the commit returns): a side-effecting tool call's start (`Changes.sync`),
an answer's claim, a submitted run or answer, a cancel — and, the log being written in order,
everything committed before each of them. Other commits (a finished call's result, a state
change) run with `NORMAL` and reach the disk with the next fsync: a power loss can undo only
those, which makes a recovery more careful (an LLM call sent again, a finished call asked about),
never wrong. What the fsync adds to a side-effecting tool's turn is in docs/performance.md.
`synchronous=full` fsyncs every commit;
`synchronous=normal` none (the earlier behaviour: a power loss may undo the latest commits of
any kind, an answer's claim included).

Checkpoints (copying the WAL back into the database file, with two fsyncs) are this store's own
background job: every `CHECKPOINT_EVERY` commits to a database file in this process (counted per
file, so stores opened per request count together) a passive checkpoint runs on a connection and
thread of its own, so no commit — least of all one written on a tool's thread just before the
tool runs — waits milliseconds for one. SQLite's automatic checkpoint stays on at a larger size
(`WAL_BOUND_PAGES`), as the bound should the background job fall behind; and the last connection
to close a database checkpoints it, as always.

Retention (`?retention=30d`, `SqliteStore(retention=...)`): how long an ended run is kept —
`store.prune()` without `older_than`, and every worker serving the store, hourly, delete runs
that ended longer ago (`RunStore.retention`).

URLs: `sqlite:///runs.db` (relative to the working directory), `sqlite:////abs/runs.db`.
"""

from __future__ import annotations

import asyncio
import functools
import itertools
import os
import sqlite3
import threading
from concurrent.futures import ThreadPoolExecutor
from datetime import timedelta
from typing import Any, Optional, TypeVar, Union, cast

from .._diag import warn
from ..durable import Changes, Holder, StoreError, StoreUnavailable
from ..durable._paging import retention_of
from ._damage import unstorable
from ._fleet_sql import FleetSqlStore, fleet_statements
from ._sql import FlatCommit, Keys, Query, Steps, schema_is_current, schema_statements, schema_steps
from ._sql_check import SqlChecks

SYNCHRONOUS = ("critical", "full", "normal")  # `?synchronous=` (see the module docstring); the first is the default

T = TypeVar("T")

# Commits to one file between background checkpoints. A checkpoint's copy and fsyncs slow the runs
# around it: fewer, larger checkpoints measured faster (docs/performance.md, "Durable stores").
CHECKPOINT_EVERY = 512
WAL_BOUND_PAGES = 10000  # SQLite's own automatic checkpoint (40 MB of log), only if the background job falls behind

# How text columns are read: SQLite's own decoding fails the whole query on one value that is not
# UTF-8; this keeps such bytes as lone surrogates instead, so the JSON reader reports that one row
# (`RunDamaged`) and every other row is read. In C, like the default (its cost: docs/performance.md).
_TEXT = functools.partial(str, encoding="utf-8", errors="surrogateescape")

# Database file → its commits in this process. The lock only adds a file: counting is `next`, atomic
# under the GIL (without one, a lost count would only move a checkpoint).
_commits: dict[str, "itertools.count[int]"] = {}
_commits_lock = threading.Lock()


def _checkpoint_due(path: str) -> bool:
    """Count a commit to `path`; True once every `CHECKPOINT_EVERY` commits."""
    counter = _commits.get(path)
    if counter is None:
        with _commits_lock:
            if len(_commits) > 1024 and path not in _commits:
                _commits.clear()  # many files seen: forget the counts (a checkpoint comes a little later)
            counter = _commits.setdefault(path, itertools.count(1))
    return next(counter) % CHECKPOINT_EVERY == 0


class SqliteStore(SqlChecks, FleetSqlStore):
    """Runs in one SQLite database file, shared safely by the processes of one machine."""

    dialect = "sqlite"
    update_returning = False  # SQLite's RETURNING costs as much again as the update: a SELECT reads it back

    def __init__(self, path: str, *, timeout: float = 10.0, synchronous: str = "critical",
                 retention: Union[None, str, float, timedelta] = None) -> None:
        super().__init__()
        self.retention = retention_of(retention, "for SqliteStore")
        if synchronous not in SYNCHRONOUS:
            from ..errors import ToolnexusValueError

            raise ToolnexusValueError(f"toolnexus: synchronous={synchronous!r} — choose one of "
                                      f"{', '.join(SYNCHRONOUS)} (see toolnexus.stores._sqlite)")
        self.path = os.path.abspath(path)
        self.url = f"sqlite:///{self.path}"  # an absolute path: four slashes
        self.timeout = timeout
        self.synchronous = synchronous
        self._level = ""  # the connection's `PRAGMA synchronous` now
        self._pool: Optional[ThreadPoolExecutor] = None
        self._conn: Optional[sqlite3.Connection] = None
        self._conn_lock = threading.Lock()  # the connection serves one thread at a time
        self._opened = False
        self._open_lock: Optional[asyncio.Lock] = None
        self._checkpointer: Optional[_Checkpointer] = None

    # -- the worker thread -------------------------------------------------------------------------

    def _connect(self) -> sqlite3.Connection:
        folder = os.path.dirname(self.path)
        if folder and not os.path.isdir(folder):
            raise StoreUnavailable(f"toolnexus: cannot open {self.url}: folder {folder} does not exist")
        conn = sqlite3.connect(self.path, timeout=self.timeout, isolation_level=None, check_same_thread=False)
        conn.text_factory = _TEXT  # bytes that are not UTF-8 (a bad disk, a hand edit) damage one row, not the read
        conn.execute("PRAGMA journal_mode=WAL")
        self._level = "FULL" if self.synchronous == "full" else "NORMAL"
        conn.execute(f"PRAGMA synchronous={self._level}")
        conn.execute(f"PRAGMA wal_autocheckpoint={WAL_BOUND_PAGES}")
        return conn

    def _execute(self, cur: sqlite3.Cursor, query: Query) -> Any:
        if query.many:
            cur.executemany(query.sql, query.params)
        else:
            cur.execute(query.sql, query.params)
        if query.returning:
            return (cur.lastrowid,) if cur.rowcount == 1 else None
        if query.fetch == "one":
            return cur.fetchone()
        if query.fetch == "all":
            return cur.fetchall()
        if query.fetch == "rowcount":
            return cur.rowcount
        return None

    def _drive(self, steps: "Steps[T] | FlatCommit", write: bool, sync: bool = False) -> T:
        """Run one step generator, or one `FlatCommit`, as one transaction (a worker thread);
        `sync`: it must survive power loss (see the module docstring)."""
        with self._conn_lock:
            if self._conn is None:
                self._conn = self._connect()
            conn = self._conn
            cur = conn.cursor()  # one cursor for the whole transaction
            if write and self.synchronous == "critical":
                level = "FULL" if sync else "NORMAL"
                if level != self._level:  # set between transactions: it applies to this one's commit
                    cur.execute(f"PRAGMA synchronous={level}")
                    self._level = level
            cur.execute("BEGIN IMMEDIATE" if write else "BEGIN")
            try:
                result = self._flat(cur, steps) if isinstance(steps, FlatCommit) else self._steps_here(cur, steps)
                cur.execute("COMMIT")
            except BaseException:
                if conn.in_transaction:
                    conn.execute("ROLLBACK")
                raise
            if write:
                self._wrote()
            return result  # type: ignore[return-value]

    def _flat(self, cur: sqlite3.Cursor, flat: FlatCommit) -> int:
        """A `FlatCommit`'s statements, without a step generator: on a tool's just-woken thread
        every Python frame is paid cold (see docs/performance.md)."""
        cur.execute(flat.first.sql, flat.first.params)
        if cur.rowcount != 1:
            self._steps_here(cur, flat.refuse())
        if flat.made:  # a new conversation or handle: its key made (once per key)
            self._steps_here(cur, flat.make_keys())
        for query in flat.writes:
            if query.many:
                cur.executemany(query.sql, query.params)
            else:
                cur.execute(query.sql, query.params)
        return flat.version

    def _steps_here(self, cur: sqlite3.Cursor, steps: Steps[Any]) -> Any:
        """Run steps inside the transaction `cur` is in (no BEGIN, no COMMIT); their value."""
        try:
            query = steps.send(None)
            while True:
                query = steps.send(self._execute(cur, query))
        except StopIteration as stop:
            return stop.value
        finally:
            steps.close()

    def _wrote(self) -> None:
        """After a commit (holding the connection lock): now and then, a checkpoint in the
        background. Never raises — the commit has landed, and must not be reported as failed."""
        if _checkpoint_due(self.path):
            try:
                if self._checkpointer is None:
                    self._checkpointer = _Checkpointer(self.path)
                self._checkpointer.request()
            except Exception as exc:  # no thread to be had (e.g. the interpreter is stopping)
                warn(f"[toolnexus] stores: could not start a checkpoint of {self.path}: {exc}")

    def _unavailable(self, exc: sqlite3.Error) -> StoreUnavailable:
        hint = ("another process holds a write lock on it; retry, or raise ?timeout=" if "locked" in str(exc)
                else "check that the file is writable and the disk has space")
        return StoreUnavailable(f"toolnexus: the SQLite store {self.path} failed: {exc} — {hint}")

    def _drive_here(self, steps: "Steps[T] | FlatCommit", write: bool, sync: bool = False) -> T:
        """`_drive` on the calling thread, its failures said as the store's."""
        try:
            return self._drive(steps, write, sync)
        except StoreError:
            raise
        except sqlite3.Error as exc:
            raise self._unavailable(exc) from exc
        except UnicodeEncodeError as exc:
            raise unstorable(self.url, exc) from None

    async def _call(self, steps: "Steps[T] | FlatCommit", write: bool, sync: bool = False) -> T:
        if self._pool is None:
            self._pool = ThreadPoolExecutor(max_workers=1, thread_name_prefix="toolnexus-sqlite")
        return await asyncio.get_running_loop().run_in_executor(self._pool, self._drive_here, steps, write, sync)

    # -- the store ---------------------------------------------------------------------------------

    async def open(self) -> None:
        if self._opened:
            return
        if self._open_lock is None:
            self._open_lock = asyncio.Lock()
        async with self._open_lock:
            if not self._opened:
                statements = schema_statements("sqlite") + fleet_statements("sqlite")
                # a read first: a database already set up is opened without waiting for a writer
                if not await self._call(schema_is_current(statements, "sqlite"), False):
                    await self._call(schema_steps(statements, self.url, "sqlite"), True)
                self._opened = True

    async def _run(self, steps: Steps[T], *, write: bool = True) -> T:
        await self.open()
        return await self._call(steps, write)

    async def _run_commit(self, commit: "Steps[int] | FlatCommit", sync: bool = False) -> int:
        await self.open()
        return await self._call(commit, True, sync)

    async def _run_sync(self, steps: Steps[T]) -> T:
        await self.open()
        return await self._call(steps, True, True)

    async def start_run(self, run_id: str, *, kind: str, entry_agent: Optional[str], holder: Holder,
                        lease_ttl: float, state: Optional[dict[str, Any]], changes: Changes) -> int:
        steps, keys = self._start(run_id, kind, entry_agent, holder, lease_ttl, state, changes)
        version = await self._run_commit(steps, changes.sync)
        self._keys.learn(keys.fresh)
        return version

    async def commit(self, run_id: str, holder: Holder, changes: Changes, *, lease_ttl: float) -> int:
        steps, keys = self._commit(run_id, holder, changes, lease_ttl)
        version = await self._run_commit(steps, changes.sync)
        self._keys.learn(keys.fresh)
        return version

    def prepare_commit(self, run_id: str, holder: Holder, changes: Changes, *,
                       lease_ttl: float) -> "_PreparedCommit":
        return _PreparedCommit(self, *self._commit(run_id, holder, changes, lease_ttl), sync=changes.sync)

    def prepare_start(self, run_id: str, *, kind: str, entry_agent: Optional[str], holder: Holder,
                      lease_ttl: float, state: Optional[dict[str, Any]], changes: Changes) -> "_PreparedCommit":
        return _PreparedCommit(self, *self._start(run_id, kind, entry_agent, holder, lease_ttl, state, changes),
                               sync=changes.sync)

    async def aclose(self) -> None:
        pool, self._pool = self._pool, None
        if pool is not None:
            await asyncio.get_running_loop().run_in_executor(pool, self._disconnect)
            # Its thread is idle now and exits at once: nothing here waits for the loop's default
            # executor, which tools may be keeping busy.
            pool.shutdown(wait=False)
        self._opened = False

    def _disconnect(self) -> None:
        with self._conn_lock:  # after a transaction another thread may be in
            conn, self._conn = self._conn, None
            checkpointer, self._checkpointer = self._checkpointer, None
            if conn is not None:
                conn.close()
        if checkpointer is not None:
            checkpointer.close()

    def stored_bytes(self) -> int:
        """Size of the database file after a WAL checkpoint (for benchmarks; call off the loop)."""
        conn = sqlite3.connect(self.path, timeout=self.timeout)
        try:
            conn.execute("PRAGMA wal_checkpoint(TRUNCATE)")
        finally:
            conn.close()
        return os.path.getsize(self.path)


class _Checkpointer:
    """Passive WAL checkpoints, on a connection and thread of their own (see the module docstring)."""

    def __init__(self, path: str) -> None:
        self.path = path
        self._pool = ThreadPoolExecutor(max_workers=1, thread_name_prefix="toolnexus-sqlite-wal")
        self._conn: Optional[sqlite3.Connection] = None  # used on the pool's thread only

    def request(self) -> None:
        self._pool.submit(self.run)

    def run(self) -> Optional[tuple[int, int, int]]:
        """Copy what the WAL holds back into the database: SQLite's `(busy, WAL pages, pages
        copied)`. Never raises: a checkpoint that cannot run now runs next time, and SQLite's own
        bound still holds."""
        try:
            if self._conn is None:
                self._conn = sqlite3.connect(self.path, check_same_thread=False)
            return cast(Optional[tuple[int, int, int]], self._conn.execute("PRAGMA wal_checkpoint(PASSIVE)").fetchone())
        except sqlite3.Error as exc:
            warn(f"[toolnexus] stores: checkpointing {self.path} failed (tried again later): {exc}")
            return None

    def close(self) -> None:
        """Its last job closes its connection (a checkpoint still running finishes first); nobody
        waits for it."""
        self._pool.submit(self._disconnect)
        self._pool.shutdown(wait=False)

    def _disconnect(self) -> None:
        conn, self._conn = self._conn, None
        if conn is not None:
            conn.close()


class _PreparedCommit:
    """One commit's transaction, encoded on the event loop, run once on whichever thread asks."""

    def __init__(self, store: SqliteStore, steps: "Steps[int] | FlatCommit", keys: Keys, *, sync: bool) -> None:
        self._store = store
        self._steps = steps
        self._keys = keys
        self._sync = sync

    def run(self) -> int:
        return self._store._drive_here(self._steps, True, self._sync)

    async def run_async(self) -> int:
        return await self._store._run_commit(self._steps, self._sync)

    def landed(self) -> None:
        self._store._keys.learn(self._keys.fresh)
