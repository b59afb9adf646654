"""The `bash` built-in: run one shell command, bounded in time and in output.

How a command runs (POSIX):
- `[*shell, command]` via `asyncio.create_subprocess_exec` in a new session (so the command and
  everything it starts share one process group), stdin from `/dev/null` (a command that reads
  stdin sees end-of-file at once instead of hanging on the host's terminal), stdout and stderr on
  one pipe that the event loop drains as data arrives.
- Output is bounded while it is drained: the first `bash_output_head` and the last
  `bash_output_tail` bytes are kept (10 000 + 20 000 by default), and when anything was dropped a
  marker between them notes the total size. Decoding is UTF-8 with replacement.
- Timeout (ms, default 60000; non-positive ⇒ default), capped at `BASH_MAX_TIMEOUT_MS`
  (600 000 ms = 10 minutes; `builtins["bash_max_timeout_ms"]` changes it): a model asking for
  `1e12` gets the cap, and `metadata["timeoutCappedAt"]` says so. On timeout: SIGTERM to the
  whole tree, up to `KILL_GRACE_MS` for it to exit, then SIGKILL. Task cancellation does the
  same, then re-raises.
- Nothing the command starts outlives the call (Linux): the shell runs under a small subreaper
  (`_reaper.py`, `PR_SET_CHILD_SUBREAPER`), so even `setsid cmd &` or a double-forked daemon,
  which leave the process group, stay reachable. When the shell exits, what it left running gets
  `bash_exit_linger` (0.25 s) to finish, then is stopped the same way (SIGTERM, grace, SIGKILL).
  Costs one small Python start per command. Elsewhere (macOS, BSD) only the process
  group is signalled, as before, and a background job still holding the output pipe when the
  shell exits is stopped after the linger; one that detached itself can survive there.
Windows (untested here): the pinned probe order, `taskkill /T /F` at once on timeout/cancel.

Not here: confinement of `workdir` (`_paths.py`). Confinement does not sandbox the command itself.
"""

from __future__ import annotations

import asyncio
import codecs
import dataclasses
import errno
import os
import shutil
import signal
import subprocess
import sys
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Awaitable, Callable, Optional

from ..errors import ToolnexusRuntimeError
from ..types import Tool, ToolContext, ToolResult
from ._paths import resolve_dir
from ._settings import BuiltinSettings
from ._tooling import build_tool, object_schema, optional_str, positive_number, prop, required_str

BASH_DESCRIPTION = "Run a shell command and return its combined stdout+stderr. Non-zero exit is an error."
BASH_SCHEMA = object_schema(
    {
        "command": prop("string", "The shell command to run"),
        "workdir": prop("string", "Working directory (default: process cwd)"),
        "timeout": prop("number", "Timeout in milliseconds (default 60000)"),
        "description": prop("string", "Human-readable description of the command"),
    },
    ["command"],
)

DEFAULT_TIMEOUT_MS = 60000
_WINDOWS = os.name == "nt"
_REAPER = os.path.join(os.path.dirname(os.path.abspath(__file__)), "_reaper.py")
_REAPER_MARGIN = 1.0  # seconds the subreaper gets beyond its own grace before we SIGKILL it


def _use_reaper() -> bool:
    return sys.platform.startswith("linux") and bool(sys.executable) and os.path.isfile(_REAPER)


def _reaped(argv: Sequence[str], settings: BuiltinSettings) -> list[str]:
    """`argv` run under the subreaper; a missing executable fails here, as a direct spawn would."""
    if not _available(argv[0]):
        raise FileNotFoundError(errno.ENOENT, os.strerror(errno.ENOENT), argv[0])
    return [sys.executable, "-I", "-S", _REAPER, repr(settings.bash_exit_linger), repr(settings.kill_grace), *argv]


# ---------------------------------------------------------------------------------- shell probe


def shell_candidates() -> list[tuple[str, ...]]:
    """The argv prefixes probed, in order, for this platform."""
    if not _WINDOWS:
        return [("/bin/sh", "-c"), ("sh", "-c")]
    candidates: list[tuple[str, ...]] = []
    comspec = os.environ.get("COMSPEC")
    if comspec:
        candidates.append((comspec, "/d", "/s", "/c"))
    return candidates + [
        ("cmd.exe", "/d", "/s", "/c"),
        ("pwsh", "-NoProfile", "-Command"),
        ("powershell", "-NoProfile", "-Command"),
        ("bash", "-lc"),
    ]


def _available(program: str) -> bool:
    if os.path.isabs(program):
        return os.path.isfile(program) and os.access(program, os.X_OK)
    return shutil.which(program) is not None


def find_shell(candidates: Optional[Sequence[tuple[str, ...]]] = None) -> tuple[str, ...]:
    """The first available candidate, else the pinned `RuntimeError`."""
    tried = list(shell_candidates() if candidates is None else candidates)
    for argv in tried:
        if _available(argv[0]):
            return argv
    names = ", ".join(argv[0] for argv in tried)
    raise ToolnexusRuntimeError(
        f"no shell interpreter found (tried: {names}); set builtins['shell'], "
        "or disable the bash builtin with builtins['tools']['bash'] = False"
    )


# ------------------------------------------------------------------------------ bounded output


class _Output(asyncio.Protocol):
    """Pipe reader that keeps the head and tail of the stream and counts every byte."""

    def __init__(self, head_limit: int, tail_limit: int) -> None:
        self.head_limit = head_limit
        self.tail_limit = tail_limit
        self.head = bytearray()
        self.tail = bytearray()
        self.total = 0
        self.closed: asyncio.Future[None] = asyncio.get_running_loop().create_future()

    def data_received(self, data: bytes) -> None:
        self.total += len(data)
        room = self.head_limit - len(self.head)
        if room > 0:
            self.head += data[:room]
            data = data[room:]
        if data:
            self.tail += data
            if len(self.tail) > self.tail_limit:
                del self.tail[: len(self.tail) - self.tail_limit]

    def eof_received(self) -> None:
        self._mark_closed()

    def connection_lost(self, exc: Optional[Exception]) -> None:
        self._mark_closed()

    def _mark_closed(self) -> None:
        if not self.closed.done():
            self.closed.set_result(None)

    async def wait_closed(self) -> None:
        """Until the pipe reports end-of-file; cancelling the wait leaves the future alone."""
        await asyncio.shield(self.closed)

    @property
    def truncated(self) -> bool:
        return self.total > len(self.head) + len(self.tail)

    def text(self) -> str:
        if not self.truncated:
            return bytes(self.head + self.tail).decode("utf-8", "replace")
        head = codecs.getincrementaldecoder("utf-8")("replace").decode(bytes(self.head), final=False)
        tail = bytes(self.tail)
        skip = 0
        while skip < min(3, len(tail)) and tail[skip] & 0xC0 == 0x80:  # a cut multi-byte character
            skip += 1
        marker = (
            f"\n[bash: output truncated — {self.total} bytes in all; "
            f"kept the first {len(self.head)} and the last {len(tail)}]\n"
        )
        return head + marker + tail[skip:].decode("utf-8", "replace")


# ----------------------------------------------------------------------------- process control


def _signal_group(proc: asyncio.subprocess.Process, sig: int) -> bool:
    """Send `sig` to the command's process group (POSIX); False when no process of it is left."""
    try:
        os.killpg(proc.pid, sig)
        return True
    except (ProcessLookupError, PermissionError):
        return False


async def _windows_taskkill(pid: int) -> bool:
    killer = await asyncio.create_subprocess_exec(
        "taskkill", "/T", "/F", "/PID", str(pid), stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL
    )
    return await killer.wait() == 0


async def _within(seconds: float, *steps: Callable[[], Awaitable[Any]]) -> bool:
    """Run `steps` one after another; False if they did not all finish within `seconds`."""
    try:
        async with asyncio.timeout(seconds):
            for step in steps:
                await step()
        return True
    except TimeoutError:
        return False


async def _stop_tree(proc: asyncio.subprocess.Process, output: _Output, grace: float) -> bool:
    """SIGTERM the group, allow `grace` seconds, SIGKILL what is left, reap the shell.

    Returns whether the group was signalled (the `killedTree` metadata). A cancellation during
    the grace period skips straight to SIGKILL.
    """
    if _WINDOWS:
        killed = await _windows_taskkill(proc.pid)
        await proc.wait()
        return killed
    killed = _signal_group(proc, signal.SIGTERM)
    try:
        if not await _within(grace, proc.wait, output.wait_closed):
            _signal_group(proc, signal.SIGKILL)
        await proc.wait()
    except asyncio.CancelledError:
        _signal_group(proc, signal.SIGKILL)
        raise
    return killed


@dataclass
class CommandOutcome:
    """How a command ended: its exit code, or a timeout (then `killed_tree` says if a group was hit)."""

    output: str
    exit_code: Optional[int]
    timed_out: bool
    killed_tree: bool
    total_bytes: int
    truncated: bool


class _Drain:
    """Feeds the child's combined output into an `_Output` and can let go of the pipe at will.

    POSIX: our own `os.pipe()` read by the event loop, so closing our end works even while a
    background job still holds the other. Windows: asyncio's pipe, pumped by a task.
    """

    def __init__(self, output: _Output) -> None:
        self.output = output
        self._close: Callable[[], Any] = lambda: None
        if _WINDOWS:
            self.stdout_arg: Any = subprocess.PIPE
            self._fds: tuple[int, int] = (-1, -1)
        else:
            self._fds = os.pipe()
            self.stdout_arg = self._fds[1]

    def _close_write_end(self) -> None:
        if self._fds[1] >= 0:
            os.close(self._fds[1])
            self._fds = (self._fds[0], -1)

    def abort(self) -> None:
        """The spawn failed: release both ends."""
        self._close_write_end()
        if self._fds[0] >= 0:
            os.close(self._fds[0])
            self._fds = (-1, -1)

    async def start(self, proc: asyncio.subprocess.Process) -> None:
        self._close_write_end()
        if _WINDOWS:
            self._close = asyncio.create_task(self._pump(proc)).cancel
            return
        read_end = os.fdopen(self._fds[0], "rb", buffering=0)
        self._fds = (-1, -1)
        transport, _ = await asyncio.get_running_loop().connect_read_pipe(lambda: self.output, read_end)
        self._close = transport.close

    async def _pump(self, proc: asyncio.subprocess.Process) -> None:
        assert proc.stdout is not None
        while chunk := await proc.stdout.read(1 << 16):
            self.output.data_received(chunk)
        self.output.eof_received()

    def close(self) -> None:
        self._close()


async def run_command(argv: Sequence[str], cwd: str, timeout: float, settings: BuiltinSettings) -> CommandOutcome:
    """Run `argv` under the rules in the module docstring."""
    output = _Output(settings.bash_output_head, settings.bash_output_tail)
    if _use_reaper():
        argv = _reaped(argv, settings)
        settings = dataclasses.replace(settings, kill_grace=settings.kill_grace + _REAPER_MARGIN)
    drain = _Drain(output)
    try:
        proc = await asyncio.create_subprocess_exec(
            *argv,
            cwd=cwd,
            stdin=subprocess.DEVNULL,
            stdout=drain.stdout_arg,
            stderr=subprocess.STDOUT,
            start_new_session=not _WINDOWS,
            creationflags=getattr(subprocess, "CREATE_NEW_PROCESS_GROUP", 0) if _WINDOWS else 0,
        )
    except BaseException:
        drain.abort()
        raise
    timed_out = killed = stopping = False
    try:
        await drain.start(proc)
        if not await _within(timeout, proc.wait):
            timed_out = stopping = True
            killed = await _stop_tree(proc, output, settings.kill_grace)
        elif not await _within(settings.bash_exit_linger, output.wait_closed):
            stopping = True  # a background job still holds the pipe
            await _stop_tree(proc, output, settings.kill_grace)
        await _within(settings.bash_exit_linger, output.wait_closed)
    except BaseException:  # cancellation above all: never leave the command running or unreaped
        if not stopping:  # otherwise _stop_tree has already sent SIGKILL
            await _stop_tree(proc, output, settings.kill_grace)
        raise
    finally:
        drain.close()
    return CommandOutcome(
        output=output.text(),
        exit_code=proc.returncode,
        timed_out=timed_out,
        killed_tree=killed,
        total_bytes=output.total,
        truncated=output.truncated,
    )


# ------------------------------------------------------------------------------------- the tool


def make_bash(settings: BuiltinSettings) -> Tool:
    async def run(args: Mapping[str, Any], ctx: Optional[ToolContext]) -> ToolResult:
        command = required_str(args, "command")
        requested_ms = positive_number(args, "timeout", DEFAULT_TIMEOUT_MS)
        timeout_ms = min(requested_ms, settings.bash_max_timeout_ms)
        cwd = await asyncio.to_thread(resolve_dir, settings, optional_str(args, "workdir"))
        shell: tuple[str, ...] = settings.shell if settings.shell else await asyncio.to_thread(find_shell)
        outcome = await run_command([*shell, command], cwd, timeout_ms / 1000, settings)
        metadata: dict[str, Any] = {"shell": " ".join(shell)}
        text, failed = outcome.output, True
        if outcome.timed_out:
            metadata.update(timedOut=True, killedTree=outcome.killed_tree)
            text = f"bash: command timed out after {int(timeout_ms)}ms\n{outcome.output}"
        else:
            metadata["exitCode"] = outcome.exit_code
            failed = outcome.exit_code != 0
            if failed:
                text = f"{outcome.output}\nbash: command exited with code {outcome.exit_code}"
        if outcome.truncated:
            metadata.update(truncated=True, outputBytes=outcome.total_bytes)
        if requested_ms > timeout_ms:
            metadata["timeoutCappedAt"] = int(timeout_ms)
        return ToolResult(text, failed, metadata)

    return build_tool("bash", BASH_DESCRIPTION, BASH_SCHEMA, run)
