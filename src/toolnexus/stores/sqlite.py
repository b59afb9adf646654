"""`SqliteStore` (`open_store("sqlite:///runs.db")`): the default durable store, stdlib `sqlite3`.

One connection per store object, used only from one worker thread (the event loop never blocks
on SQLite); WAL journal so readers never wait for the writer; `synchronous=NORMAL` (a commit is
durable against a process crash at once, against power loss at the next checkpoint); every
write transaction is `BEGIN IMMEDIATE`, which serialises writers across processes sharing the
file, with a busy timeout (default 10 s, `?timeout=SECONDS`) before a locked database is
reported as `StoreUnavailable`.

URLs: `sqlite:///runs.db` (relative to the working directory), `sqlite:////abs/runs.db`.
"""

from __future__ import annotations

import asyncio
import os
import sqlite3
from concurrent.futures import ThreadPoolExecutor
from typing import Any, Optional, TypeVar

from ..durable import StoreError, StoreUnavailable
from .sql import Query, SqlStore, Steps, schema_statements, schema_steps

__all__ = ["SqliteStore"]

T = TypeVar("T")


class SqliteStore(SqlStore):
    """Runs in one SQLite database file, shared safely by the processes of one machine."""

    dialect = "sqlite"

    def __init__(self, path: str, *, timeout: float = 10.0) -> None:
        super().__init__()
        self.path = os.path.abspath(path)
        self.url = f"sqlite:///{self.path}"  # an absolute path: four slashes
        self.timeout = timeout
        self._pool: Optional[ThreadPoolExecutor] = None
        self._conn: Optional[sqlite3.Connection] = None
        self._opened = False
        self._open_lock: Optional[asyncio.Lock] = None

    # -- the worker thread -------------------------------------------------------------------------

    def _connect(self) -> sqlite3.Connection:
        folder = os.path.dirname(self.path)
        if folder and not os.path.isdir(folder):
            raise StoreUnavailable(f"toolnexus: cannot open {self.url}: folder {folder} does not exist")
        conn = sqlite3.connect(self.path, timeout=self.timeout, isolation_level=None, check_same_thread=False)
        conn.execute("PRAGMA journal_mode=WAL")
        conn.execute("PRAGMA synchronous=NORMAL")
        return conn

    def _execute(self, conn: sqlite3.Connection, query: Query) -> Any:
        if query.many:
            cur = conn.executemany(query.sql, query.params)
        else:
            cur = conn.execute(query.sql, query.params)
        if query.fetch == "one":
            return cur.fetchone()
        if query.fetch == "all":
            return cur.fetchall()
        if query.fetch == "rowcount":
            return cur.rowcount
        return None

    def _drive(self, steps: Steps[T], write: bool) -> T:
        if self._conn is None:
            self._conn = self._connect()
        conn = self._conn
        conn.execute("BEGIN IMMEDIATE" if write else "BEGIN")
        try:
            result: Any = None
            query = steps.send(None)
            while True:
                result = self._execute(conn, query)
                query = steps.send(result)
        except StopIteration as stop:
            conn.execute("COMMIT")
            return stop.value
        except BaseException:
            if conn.in_transaction:
                conn.execute("ROLLBACK")
            raise
        finally:
            steps.close()

    async def _call(self, steps: Steps[T], write: bool) -> T:
        if self._pool is None:
            self._pool = ThreadPoolExecutor(max_workers=1, thread_name_prefix="toolnexus-sqlite")
        try:
            return await asyncio.get_running_loop().run_in_executor(self._pool, self._drive, steps, write)
        except StoreError:
            raise
        except sqlite3.Error as exc:
            hint = ("another process holds a write lock on it; retry, or raise ?timeout=" if "locked" in str(exc)
                    else "check that the file is writable and the disk has space")
            raise StoreUnavailable(f"toolnexus: the SQLite store {self.path} failed: {exc} — {hint}") from exc

    # -- the store ---------------------------------------------------------------------------------

    async def open(self) -> None:
        if self._opened:
            return
        if self._open_lock is None:
            self._open_lock = asyncio.Lock()
        async with self._open_lock:
            if not self._opened:
                await self._call(schema_steps(schema_statements("sqlite"), self.url), True)
                self._opened = True

    async def _run(self, steps: Steps[T], *, write: bool = True) -> T:
        await self.open()
        return await self._call(steps, write)

    async def aclose(self) -> None:
        pool, self._pool = self._pool, None
        if pool is not None:
            conn, self._conn = self._conn, None
            if conn is not None:
                await asyncio.get_running_loop().run_in_executor(pool, conn.close)
            await asyncio.get_running_loop().run_in_executor(None, pool.shutdown)
        self._opened = False

    def stored_bytes(self) -> int:
        """Size of the database file after a WAL checkpoint (for benchmarks; call off the loop)."""
        conn = sqlite3.connect(self.path, timeout=self.timeout)
        try:
            conn.execute("PRAGMA wal_checkpoint(TRUNCATE)")
        finally:
            conn.close()
        return os.path.getsize(self.path)
