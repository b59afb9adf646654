"""`PostgresStore` (`open_store("postgresql://user@host/db")`): for many workers on many machines.

psycopg 3, async, with a connection pool (`pip install toolnexus[postgres]`) and pipeline mode
(statements whose results are not read are sent without waiting, see `_execute`). Every write
transaction locks the run's row (`SELECT … FOR UPDATE`) and ledger claims lock their request's
row, so exactly one process applies an answer and only the lease holder writes a run. Reads run
at REPEATABLE READ, so a restore sees one commit, not half of two.

URL options (query string): `schema=NAME` puts the tables in that schema (created if missing),
`pool=N` sizes the pool (default 4), `timeout=SECONDS` bounds waiting for a connection (default
10), `retention=30d` keeps ended runs that long (`RunStore.retention`: `prune()` without
`older_than`, and every worker serving the store, hourly, delete older ones). The password, if
the URL has one, is never printed.
"""

from __future__ import annotations

import asyncio
import re
from typing import Any, Optional, TypeVar, cast
from urllib.parse import parse_qsl, urlencode, urlsplit, urlunsplit

from ..durable import StoreError, StoreUnavailable
from ..durable._paging import retention_of
from ..durable._queue import WorkListener
from ..errors import ToolnexusValueError
from ._damage import unstorable
from ._fleet_sql import FleetSqlStore, channel_name, fleet_statements
from ._sql import Query, Steps, schema_statements, schema_steps
from ._sql_check import SqlChecks

T = TypeVar("T")
_IDENT = re.compile(r"^[A-Za-z_][A-Za-z0-9_]{0,62}$")


def redact_url(url: str) -> str:
    """`url` with any password replaced by `***`."""
    parts = urlsplit(url)
    if parts.password is None:
        return url
    netloc = parts.netloc.replace(f":{parts.password}@", ":***@", 1)
    return urlunsplit(parts._replace(netloc=netloc))


class PostgresStore(SqlChecks, FleetSqlStore):
    """Runs in a PostgreSQL database, shared by any number of processes and hosts."""

    dialect = "postgres"

    def __init__(self, url: str) -> None:
        super().__init__()
        parts = urlsplit(url)
        options = dict(parse_qsl(parts.query))
        self.schema = options.pop("schema", None)
        if self.schema is not None and not _IDENT.match(self.schema):
            raise ToolnexusValueError(
                f"toolnexus: schema={self.schema!r} in the store URL is not a plain SQL identifier"
            )
        self.pool_size = int(options.pop("pool", 4))
        self.timeout = float(options.pop("timeout", 10))
        self.retention = retention_of(options.pop("retention", None), "in the PostgreSQL store URL")
        self._conninfo = urlunsplit(parts._replace(query=urlencode(options)))
        self.url = redact_url(url)
        self.channel: str = channel_name(self.schema)
        self.fleet_key = self.schema or "public"
        self._pool: Any = None
        self._opened = False
        self._open_lock: Optional[asyncio.Lock] = None

    async def open(self) -> None:
        if self._opened:
            return
        if self._open_lock is None:
            self._open_lock = asyncio.Lock()
        async with self._open_lock:
            if self._opened:
                return
            try:
                from psycopg_pool import AsyncConnectionPool
            except ImportError:  # pragma: no cover - depends on the installed extras
                raise StoreError("toolnexus: PostgreSQL stores need psycopg 3 and psycopg-pool: "
                                 "pip install 'toolnexus[postgres]'") from None
            kwargs: dict[str, Any] = {"autocommit": True}
            if self.schema:
                kwargs["options"] = f"-c search_path={self.schema}"
            await self._probe(kwargs)
            pool = AsyncConnectionPool(self._conninfo, min_size=1, max_size=self.pool_size, kwargs=kwargs,
                                       open=False, timeout=self.timeout, name="toolnexus")
            try:
                await pool.open(wait=True, timeout=self.timeout)
            except Exception as exc:
                await pool.close()
                raise StoreUnavailable(
                    f"toolnexus: cannot reach the PostgreSQL store {self.url}: {type(exc).__name__}: {exc} — check "
                    "that the server is running and the URL (host, port, database, user) is right") from exc
            self._pool = pool
            try:
                statements = schema_statements("postgres") + fleet_statements("postgres")
                if self.schema:
                    statements = [f'CREATE SCHEMA IF NOT EXISTS "{self.schema}"'] + statements
                await self._call(_with_schema_lock(schema_steps(statements, self.url, "postgres")), True)
            except BaseException:
                self._pool = None
                await pool.close()
                raise
            self._opened = True

    async def _probe(self, kwargs: dict[str, Any]) -> None:
        """One plain connection first: a server that is down, a wrong database or a refused login
        fails here at once, with the server's reason — the pool would retry in the background
        until `timeout`, logging each failure, and then report only that it timed out."""
        import psycopg

        try:
            conn = await psycopg.AsyncConnection.connect(self._conninfo, connect_timeout=max(2, round(self.timeout)),
                                                         **kwargs)
        except psycopg.Error as exc:
            reason = str(exc).strip().splitlines()[0] if str(exc).strip() else type(exc).__name__
            password = urlsplit(self._conninfo).password
            if password:
                reason = reason.replace(password, "***")
            raise StoreUnavailable(
                f"toolnexus: cannot reach the PostgreSQL store {self.url}: {reason} — check that the server is "
                "running and the URL (host, port, database, user) is right") from None
        await conn.close()

    async def _call(self, steps: Steps[T], write: bool) -> T:
        """Run `steps` as one transaction. A pooled connection the server dropped (a restart, a
        failover, a killed backend) is found out only when used: when that happens before the
        transaction sent any statement of its own — nothing of it can have been written — it runs
        once more on a fresh connection (the pool discards the dead one), instead of failing a
        commit whose work is intact and making the caller think it was lost."""
        import psycopg

        for attempt in (1, 2):
            began: list[bool] = []
            try:
                return await self._transaction(steps, write, began)
            except psycopg.OperationalError as exc:
                if attempt == 1 and not began and type(exc).__name__ != "PoolTimeout":
                    continue
                raise self._unavailable(exc) from exc
            except StoreError:
                raise
            except UnicodeEncodeError as exc:
                raise unstorable(self.url, exc) from None
            except psycopg.DataError as exc:
                if "NUL" not in str(exc):
                    raise self._unavailable(exc) from exc
                raise unstorable(self.url, exc) from None
            except (psycopg.Error, OSError) as exc:
                raise self._unavailable(exc) from exc
        raise AssertionError("unreachable")  # pragma: no cover

    def _unavailable(self, exc: BaseException) -> StoreError:
        if type(exc).__name__ == "PoolTimeout":
            return StoreUnavailable(f"toolnexus: no connection to the PostgreSQL store {self.url} within "
                                    f"{self.timeout:g}s — the server is down or the pool is exhausted")
        return StoreUnavailable(f"toolnexus: the PostgreSQL store {self.url} failed: {type(exc).__name__}: "
                                f"{exc} — check the server; committed work is intact")

    async def _transaction(self, steps: Steps[T], write: bool, began: list[bool]) -> T:
        """One try of `_call`; `began` gets an entry once a statement of `steps` is about to be sent."""
        async with self._pool.connection() as conn, conn.pipeline() as pipeline, conn.transaction():
            if not write:
                await conn.execute("SET TRANSACTION ISOLATION LEVEL REPEATABLE READ")
            began.append(True)
            try:
                result: Any = None
                query = steps.send(None)
                while True:
                    result = await self._execute(conn, query, pipeline)
                    query = steps.send(result)
            except StopIteration as stop:
                return cast(T, stop.value)
            finally:
                steps.close()

    @staticmethod
    async def _execute(conn: Any, query: Query, pipeline: Any) -> Any:
        """In pipeline mode a statement whose result nobody reads is only sent: a commit waits on
        the server where it reads a result (the run row's update) and at COMMIT, not after every
        statement (fewer round trips per commit). An error in a statement sent that
        way fails the transaction at the next wait, so nothing of it is kept. A cursor per
        statement: each reads its own result."""
        cur = conn.cursor()
        sql = query.sql.replace("?", "%s")
        if query.lock:
            sql += " FOR UPDATE"
        if query.returning:
            sql += f" RETURNING {query.returning}"
        if query.many:
            await cur.executemany(sql, query.params)
            return None
        await cur.execute(sql, query.params)
        if query.fetch == "one" or query.returning:
            return await cur.fetchone()
        if query.fetch == "all":
            return await cur.fetchall()
        if query.fetch == "rowcount":
            await pipeline.sync()
            return cur.rowcount
        return None

    async def _run(self, steps: Steps[T], *, write: bool = True) -> T:
        await self.open()
        return await self._call(steps, write)

    def work_listener(self) -> WorkListener:
        """`LISTEN` on this store's channel, on a connection of its own (see `_pg_listen`)."""
        from ._pg_listen import PgListener

        options = f"-c search_path={self.schema}" if self.schema else None
        return PgListener(self._conninfo, self.channel, options=options, timeout=self.timeout, url=self.url)

    async def aclose(self) -> None:
        pool, self._pool = self._pool, None
        self._opened = False
        if pool is not None:
            await pool.close()


def _with_schema_lock(steps: Steps[None]) -> Steps[None]:
    """Serialise first-time schema creation across processes (CREATE … IF NOT EXISTS can race)."""
    yield Query("SELECT pg_advisory_xact_lock(7404173291)", fetch="one")
    return (yield from steps)
