"""The stdio transport for local MCP servers: spawn the child, pump JSON-RPC lines both ways.

Ours rather than the SDK's `stdio_client` because we must hold the child process: an aborted
connect (the `cancel` event, a timeout, task cancellation) kills the child's whole process group
at once instead of closing stdin and waiting seconds for a server that is still starting up.
A normal close follows the MCP shutdown sequence: close stdin, wait `GRACE` seconds, SIGTERM
the group, wait `TERM_GRACE`, SIGKILL. The child runs in its own session (process group); its
stderr is ours. Messages are the SDK's `SessionMessage`s, so `ClientSession` runs on top unchanged.
"""

from __future__ import annotations

import asyncio
import os
import signal
import sys
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager, suppress
from typing import Any

import anyio
from mcp.shared.message import SessionMessage
from mcp.types import jsonrpc_message_adapter

from .config import ServerSpec

__all__ = ["GRACE", "TERM_GRACE", "stdio_transport"]

GRACE = 2.0
TERM_GRACE = 2.0
_REAP = 2.0
_CHUNK = 1 << 16


def _parse(line: bytes) -> Any:
    try:
        return SessionMessage(jsonrpc_message_adapter.validate_json(line, by_name=False))
    except ValueError as exc:  # the session surfaces it to its message handler
        return exc


async def _read_pump(stdout: asyncio.StreamReader, to_session: Any) -> None:
    """Child stdout → session, one JSON-RPC message per line; EOF closes the session's stream."""
    buf = bytearray()
    try:
        while chunk := await stdout.read(_CHUNK):
            buf += chunk
            while (nl := buf.find(b"\n")) >= 0:
                line = bytes(buf[:nl])
                del buf[: nl + 1]
                if line.strip():
                    await to_session.send(_parse(line))
    except (anyio.ClosedResourceError, anyio.BrokenResourceError, ConnectionError):
        pass
    finally:
        to_session.close()


async def _write_pump(stdin: asyncio.StreamWriter, from_session: Any, to_session: Any) -> None:
    """Session → child stdin; a dead pipe closes the session's read side so callers stop waiting."""
    try:
        async for message in from_session:
            data = message.message.model_dump_json(by_alias=True, exclude_unset=True)
            stdin.write(data.encode("utf-8") + b"\n")
            await stdin.drain()
    except (OSError, anyio.ClosedResourceError, anyio.BrokenResourceError):
        to_session.close()


def _signal_group(proc: asyncio.subprocess.Process, sig: int) -> None:
    with suppress(ProcessLookupError, PermissionError):
        if sys.platform == "win32":  # pragma: no cover - no process groups
            proc.kill()
        else:
            os.killpg(proc.pid, sig)


async def _exited(proc: asyncio.subprocess.Process, timeout: float) -> bool:
    try:
        await asyncio.wait_for(proc.wait(), timeout)
    except TimeoutError:
        return False
    return True


async def _stop(proc: asyncio.subprocess.Process, graceful: bool) -> None:
    try:
        if graceful and proc.returncode is None:
            if proc.stdin is not None:
                proc.stdin.close()
            if not await _exited(proc, GRACE):
                _signal_group(proc, signal.SIGTERM)
                await _exited(proc, TERM_GRACE)
    finally:
        # Abort path (or a server that ignored SIGTERM): the whole group goes, right now.
        if proc.returncode is None:
            _signal_group(proc, signal.SIGKILL)
            await _exited(proc, _REAP)


@asynccontextmanager
async def stdio_transport(spec: ServerSpec) -> AsyncIterator[tuple[Any, Any, asyncio.subprocess.Process]]:
    """Spawn `spec`'s command; yields (read stream, write stream, process) for a `ClientSession`.

    Leaving normally shuts the child down gracefully; leaving by an exception (cancellation
    included) kills its process group immediately. The child is always reaped before we return.
    """
    proc = await asyncio.create_subprocess_exec(
        spec.command,
        *spec.args,
        stdin=asyncio.subprocess.PIPE,
        stdout=asyncio.subprocess.PIPE,
        env=spec.env,
        cwd=spec.cwd,
        start_new_session=sys.platform != "win32",
    )
    to_session, from_server = anyio.create_memory_object_stream[Any](0)
    to_server, from_session = anyio.create_memory_object_stream[Any](0)
    assert proc.stdout is not None and proc.stdin is not None
    pumps = [
        asyncio.ensure_future(_read_pump(proc.stdout, to_session)),
        asyncio.ensure_future(_write_pump(proc.stdin, from_session, to_session)),
    ]
    graceful = False
    try:
        yield from_server, to_server, proc
        graceful = True
    finally:
        try:
            await _stop(proc, graceful)
        finally:
            for pump in pumps:
                pump.cancel()
            await asyncio.gather(*pumps, return_exceptions=True)
            for stream in (to_session, from_server, to_server, from_session):
                stream.close()
