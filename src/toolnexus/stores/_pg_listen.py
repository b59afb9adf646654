"""`PgListener`: a worker's wake-up channel on PostgreSQL (`LISTEN`), on a connection of its own.

Every transaction that queues work (`submit_run`, `submit_answer`, a scan that found some, an
item handed back) ends with `pg_notify(channel, '')`, which the server delivers at commit. A
worker waits on `wait(timeout)` instead of sleeping out its poll interval; the poll stays as
the fallback (a notification can be missed while the connection is being re-made, and due
expiries and dead holders need time to pass, not a notification).

The channel is per schema (`_fleet_sql.channel_name`), so stores sharing a database — tests run
each in a schema of its own — never wake each other. A connection that fails is re-made on the
next wait, after saying so once; until then the worker polls.
"""

from __future__ import annotations

import asyncio
from typing import Any, Optional

from .._diag import warn


class PgListener:
    """`LISTEN channel` on a dedicated autocommit connection."""

    def __init__(self, conninfo: str, channel: str, *, options: Optional[str], timeout: float, url: str) -> None:
        self._conninfo = conninfo
        self._channel = channel
        self._options = options
        self._timeout = timeout
        self._url = url
        self._conn: Any = None
        self._broken = False

    async def _connect(self) -> Any:
        import psycopg

        kwargs: dict[str, Any] = {"autocommit": True, "connect_timeout": max(2, round(self._timeout))}
        if self._options:
            kwargs["options"] = self._options
        conn = await psycopg.AsyncConnection.connect(self._conninfo, **kwargs)
        await conn.execute(f'LISTEN "{self._channel}"')
        return conn

    async def wait(self, timeout: float) -> bool:
        """True when a notification arrived within `timeout` seconds; False on timeout (or while
        the connection is down: the caller's poll covers that time)."""
        import psycopg

        try:
            if self._conn is None:
                self._conn = await self._connect()
                if self._broken:
                    warn(f"[toolnexus] stores: listening on {self._url} again")
                    self._broken = False
            got = False
            async for _ in self._conn.notifies(timeout=max(0.0, timeout), stop_after=1):
                got = True
            return got
        except (psycopg.Error, OSError) as exc:
            if not self._broken:
                warn(f"[toolnexus] stores: listening for work on {self._url} failed ({type(exc).__name__}: {exc}); "
                     "polling until it is back")
                self._broken = True
            await self._drop()
            await asyncio.sleep(max(0.0, timeout))
            return False

    async def _drop(self) -> None:
        conn, self._conn = self._conn, None
        if conn is not None:
            try:
                await conn.close()
            except Exception:
                pass

    async def aclose(self) -> None:
        await self._drop()
