"""Store fixtures for the durable-run tests: one URL per backend, each test on fresh ground.

`store_url` runs a test once per backend (memory, file, SQLite, PostgreSQL); `shared_store_url`
only over the ones several processes can share (file, SQLite, PostgreSQL). PostgreSQL needs a
server: set `TOOLNEXUS_TEST_POSTGRES` to its URL (CI points it at the machine's server); without
it those cases skip, saying how to enable them. Each PostgreSQL test gets a schema of its own,
dropped afterwards.

Also `run_app(...)`: run `support.durable_app` as a real subprocess and return its JSON line.
"""

from __future__ import annotations

import asyncio
import json
import os
import subprocess
import sys
import uuid
from pathlib import Path
from typing import Any, Iterator, Optional

import pytest

POSTGRES_ENV = "TOOLNEXUS_TEST_POSTGRES"
TESTS = Path(__file__).resolve().parents[1]
SKIP_PG = (f"PostgreSQL store tests need a server: set {POSTGRES_ENV}=postgresql://user@host:5432/db to run them "
           "(each test uses a schema of its own and drops it)")


def postgres_base() -> Optional[str]:
    return os.environ.get(POSTGRES_ENV) or None


def _with_query(url: str, **params: str) -> str:
    sep = "&" if "?" in url else "?"
    return url + sep + "&".join(f"{k}={v}" for k, v in params.items())


def drop_schema(base: str, schema: str) -> None:
    import psycopg

    with psycopg.connect(base, autocommit=True) as conn:
        conn.execute(f'DROP SCHEMA IF EXISTS "{schema}" CASCADE')


def _url(kind: str, tmp_path: Path) -> Iterator[str]:
    if kind == "memory":
        yield "memory:"
    elif kind == "file":
        yield f"file:{tmp_path / 'store'}"
    elif kind == "sqlite":
        yield f"sqlite:///{tmp_path / 'runs.db'}"
    else:
        base = postgres_base()
        if base is None:
            pytest.skip(SKIP_PG)
        schema = f"tn_t_{uuid.uuid4().hex[:12]}"
        try:
            yield _with_query(base, schema=schema)
        finally:
            drop_schema(base, schema)


@pytest.fixture(params=["memory", "file", "sqlite", "postgres"])
def store_url(request: Any, tmp_path: Path) -> Iterator[str]:
    yield from _url(request.param, tmp_path)


@pytest.fixture(params=["file", "sqlite", "postgres"])
def shared_store_url(request: Any, tmp_path: Path) -> Iterator[str]:
    yield from _url(request.param, tmp_path)


@pytest.fixture
def postgres_url(tmp_path: Path) -> Iterator[str]:
    yield from _url("postgres", tmp_path)


def app_command(*args: str) -> list[str]:
    return [sys.executable, "-m", "support.durable_app", *args]


def run_app(*args: str, expect: int = 0, timeout: float = 60) -> dict[str, Any]:
    """Run one step of the host program in a fresh process; its JSON line."""
    done = subprocess.run(app_command(*args), cwd=TESTS, capture_output=True, text=True, timeout=timeout)
    if done.returncode != expect:
        raise AssertionError(f"durable_app {' '.join(args)} exited {done.returncode} (expected {expect})\n"
                             f"stdout: {done.stdout}\nstderr: {done.stderr}")
    return json.loads(done.stdout.strip().splitlines()[-1])


async def start_app(*args: str) -> asyncio.subprocess.Process:
    return await asyncio.create_subprocess_exec(*app_command(*args), cwd=TESTS, stdout=asyncio.subprocess.PIPE,
                                                stderr=asyncio.subprocess.PIPE)


async def read_until(proc: asyncio.subprocess.Process, marker: str, timeout: float = 30) -> None:
    """Read the child's stdout until a line equal to `marker` (bounded; the child's stderr on failure)."""
    assert proc.stdout is not None

    async def scan() -> None:
        while True:
            line = await proc.stdout.readline()  # type: ignore[union-attr]
            if not line:
                err = await proc.stderr.read() if proc.stderr is not None else b""
                raise AssertionError(f"the child exited before printing {marker!r}: {err.decode()[-2000:]}")
            if line.decode().strip() == marker:
                return

    await asyncio.wait_for(scan(), timeout)


async def kill(proc: asyncio.subprocess.Process) -> None:
    proc.kill()
    await proc.wait()


def sqlite_records(conn: Any, run_id: str) -> list[tuple[str, str, int]]:
    """`run_id`'s handle records in a SQLite store, read with another connection, as
    `(handle id, record JSON, row key)`: each is the one row of a key named `record:<handle id>`."""
    return conn.execute(
        "SELECT substr(c.conv_id, 8), m.message, m.k FROM tn_convs c JOIN tn_messages m ON m.k = c.cid * 4294967296 "
        "WHERE c.run_id = ? AND c.conv_id LIKE 'record:%' ORDER BY c.conv_id", (run_id,)).fetchall()


def sqlite_transcript(conn: Any, run_id: str, conv_id: str) -> list[dict[str, Any]]:
    """The stored messages of conversation `conv_id` of `run_id`, read with another connection."""
    rows = conn.execute("SELECT m.message FROM tn_convs c JOIN tn_messages m ON m.k >= c.cid * 4294967296 "
                        "AND m.k < (c.cid + 1) * 4294967296 WHERE c.run_id = ? AND c.conv_id = ? ORDER BY m.k",
                        (run_id, conv_id)).fetchall()
    return [json.loads(text) for (text,) in rows]
