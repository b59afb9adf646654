"""The process side of a local MCP server: spawn the child, hold its pipes, stop its whole tree.

Ours rather than the SDK's `stdio_client` because we must hold the child process: an aborted
connect (the `cancel` event, a timeout, task cancellation) kills the child's whole process group
at once instead of closing stdin and waiting seconds for a server that is still starting up.
A normal close follows the MCP shutdown sequence: close stdin, wait `GRACE` seconds, SIGTERM
the group, wait `TERM_GRACE`, SIGKILL. The child runs in its own session (process group); its
stderr is ours. What goes over the pipes is `_session.py`'s business.

The whole tree, not just the leader: a server that starts helpers and then exits (or crashes)
leaves them in its process group, and signalling only a live leader would orphan them. So the
group is swept — SIGTERM, `TERM_GRACE`, SIGKILL, until it is empty — whenever the leader is gone:
as soon as it exits on its own (a watcher task), and on every close. A helper that leaves the
group (`setsid`) is held by the server's containment (_contain.py: a cgroup of its own, or a
subreaper launcher), which is swept at the same moments.

Bounded: one JSON-RPC line from the server may hold at most `MAX_LINE_BYTES` (32 MiB; the session
reads the figure here when it starts); a server that sends more without a newline gets the
connection closed with a clear error rather than our memory growing without end.
"""

from __future__ import annotations

import asyncio
import os
import signal
import sys
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager, suppress
from typing import Optional

from ._config import ServerSpec
from ._contain import Containment, contain

GRACE = 2.0
TERM_GRACE = 2.0
MAX_LINE_BYTES = 32 * 1024 * 1024
_REAP = 2.0
_POLL = 0.02


def _signal_group(proc: asyncio.subprocess.Process, sig: int) -> None:
    with suppress(ProcessLookupError, PermissionError):
        if sys.platform == "win32":  # pragma: no cover - no process groups
            proc.kill()
        else:
            os.killpg(proc.pid, sig)


async def _leader_exit(proc: asyncio.subprocess.Process, pidfd: Optional[int]) -> None:
    """Until the leader process has exited. Not `proc.wait()`: asyncio only completes that once
    every pipe is closed too, and a helper the server started may hold its stdout for ever."""
    if pidfd is not None:
        loop = asyncio.get_running_loop()
        ready = loop.create_future()
        def exited() -> None:
            if not ready.done():
                ready.set_result(None)

        loop.add_reader(pidfd, exited)
        try:
            await ready
        finally:
            loop.remove_reader(pidfd)
        return
    while proc.returncode is None:  # pragma: no cover - no pidfd (old kernel, not Linux)
        await asyncio.sleep(_POLL)


def _open_pidfd(proc: asyncio.subprocess.Process) -> Optional[int]:
    try:
        return os.pidfd_open(proc.pid) if hasattr(os, "pidfd_open") else None
    except OSError:  # pragma: no cover - kernel without pidfd
        return None


async def _exited(proc: asyncio.subprocess.Process, timeout: float, pidfd: Optional[int] = None) -> bool:
    try:
        await asyncio.wait_for(_leader_exit(proc, pidfd), timeout)
    except TimeoutError:
        return False
    return True


def _group_alive(pgid: int) -> bool:
    if sys.platform == "win32":  # pragma: no cover - no process groups
        return False
    try:
        os.killpg(pgid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:  # pragma: no cover - someone else's group now
        return False
    return True


async def _group_empty(pgid: int, timeout: float) -> bool:
    deadline = asyncio.get_running_loop().time() + timeout
    while _group_alive(pgid):
        if asyncio.get_running_loop().time() >= deadline:
            return False
        await asyncio.sleep(_POLL)
    return True


async def _sweep_group(proc: asyncio.subprocess.Process, grace: float) -> None:
    """The leader has exited: stop whatever it left in its process group (SIGTERM, grace, SIGKILL)."""
    if not _group_alive(proc.pid):
        return
    _signal_group(proc, signal.SIGTERM)
    if not await _group_empty(proc.pid, grace):
        _signal_group(proc, signal.SIGKILL)
        await _group_empty(proc.pid, _REAP)


async def _watch_exit(proc: asyncio.subprocess.Process, pidfd: Optional[int], box: Containment) -> None:
    """When the server exits or crashes on its own, sweep its group (and containment) at once."""
    await _leader_exit(proc, pidfd)
    await _sweep_group(proc, TERM_GRACE)
    await box.sweep(TERM_GRACE)


async def _stop(proc: asyncio.subprocess.Process, graceful: bool, pidfd: Optional[int], box: Containment) -> None:
    try:
        if graceful and proc.returncode is None:
            if proc.stdin is not None:
                proc.stdin.close()
            if not await _exited(proc, GRACE, pidfd):
                _signal_group(proc, signal.SIGTERM)
                await _exited(proc, TERM_GRACE + _REAP, pidfd)
    finally:
        # Abort path (or a server that ignored SIGTERM): the whole tree goes, right now — first
        # through the containment (a subreaper launcher must live to kill what it holds).
        if proc.returncode is None:
            box.abort()
            if not await _exited(proc, _REAP, pidfd):
                _signal_group(proc, signal.SIGKILL)
                await _exited(proc, _REAP, pidfd)
        # Helpers the leader left behind in its group or containment, whether it exited just now or long ago.
        await _sweep_group(proc, TERM_GRACE if graceful else 0)
        await box.sweep(TERM_GRACE if graceful else 0)


@asynccontextmanager
async def stdio_process(spec: ServerSpec, containment: str = "auto") -> AsyncIterator[asyncio.subprocess.Process]:
    """Spawn `spec`'s command with piped stdin/stdout; yields the process (on Linux, usually the
    containment's launcher, which exits with the server's status).

    Leaving normally shuts the child down gracefully; leaving by an exception (cancellation
    included) kills its whole tree immediately. The child is always reaped before we return.
    """
    box = contain(containment)
    try:
        proc = await asyncio.create_subprocess_exec(
            *box.wrap([spec.command, *spec.args], TERM_GRACE, spec.env, spec.cwd),
            stdin=asyncio.subprocess.PIPE,
            stdout=asyncio.subprocess.PIPE,
            env=spec.env,
            cwd=spec.cwd,
            start_new_session=sys.platform != "win32",
            limit=1 << 16,
            pass_fds=box.pass_fds,
        )
    except BaseException:
        box.release()
        raise
    pidfd = _open_pidfd(proc)
    watcher = asyncio.ensure_future(_watch_exit(proc, pidfd, box))
    graceful = False
    try:
        await box.started(proc.pid)  # a server that cannot start fails here, as a direct spawn would
        yield proc
        graceful = True
    finally:
        try:
            await _stop(proc, graceful, pidfd, box)
        finally:
            box.release()
            watcher.cancel()
            await asyncio.gather(watcher, return_exceptions=True)
            if pidfd is not None:
                os.close(pidfd)
            # The child is reaped; release its pipes even if a reader stopped early (a flooding
            # server), so no transport outlives us. asyncio's Process has no public close().
            transport = getattr(proc, "_transport", None)
            if transport is not None:
                transport.close()
