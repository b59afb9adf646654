"""Holding a local MCP server's whole process tree, whatever session its processes move to.

A server runs in its own process group, and the group is swept at close (_stdio.py). A process
that calls `setsid()` leaves the group, and once its parent exits it belongs to init: signalling
the group no longer reaches it. So on Linux the server starts through a small launcher
(`_reaper.py`) that puts it where nothing can leave:

- `cgroup` — when cgroup v2 is mounted, our own cgroup is writable and the kernel has
  `cgroup.kill` (5.14+): a fresh cgroup per server; `/bin/sh` moves itself there and `exec`s the
  server (a few milliseconds; a failed move is said on stderr and the server runs held by its
  process group alone). Every descendant is in it for good. Close signals every process in it
  (SIGTERM, then `cgroup.kill`) and removes the group.
- `subreaper` — otherwise: the launcher becomes the server's parent and a child subreaper, so
  orphaned descendants come to it; it stops them all when the server exits, when we send
  SIGTERM (gracefully) or SIGUSR1 (at once), and when we die.
- `group` — not Linux, or chosen: no launcher, the process group alone (the behaviour before).

`McpOptions.containment` picks one ("auto", the default, is the first that works here). Costs: a
`/bin/sh` start per server with a cgroup; a `python -I -S` start and one idle process beside the
server with a subreaper (figures in docs/performance.md).

Not here: when the server is stopped and how gracefully (_stdio.py).
"""

from __future__ import annotations

import asyncio
import errno
import itertools
import os
import shutil
import signal
import sys
from contextlib import suppress
from functools import lru_cache
from pathlib import Path
from typing import Optional

CONTAINMENTS = ("auto", "cgroup", "subreaper", "group")
_LAUNCHER = str(Path(__file__).with_name("_reaper.py"))
_names = itertools.count(1)
_POLL = 0.02


@lru_cache(maxsize=1)
def _own_cgroup_dir() -> Optional[str]:
    """The directory of this process's cgroup v2 group, or None (no cgroup2 mount, v1 only)."""
    try:
        with open("/proc/self/cgroup") as fh:
            path = next((line.split("::", 1)[1].strip() for line in fh if line.startswith("0::")), None)
        mount = None
        with open("/proc/self/mountinfo") as fh:
            for line in fh:
                left, _, right = line.partition(" - ")
                if right.split(" ", 1)[0] == "cgroup2":
                    mount = left.split(" ")[4]
                    break
    except OSError:
        return None
    if path is None or mount is None:
        return None
    here = os.path.join(mount, path.lstrip("/"))
    return here if os.path.isdir(here) else None


def cgroup_usable() -> bool:
    """Whether `cgroup` containment can work here (cgroup v2, our group writable, `cgroup.kill`)."""
    if not sys.platform.startswith("linux"):
        return False
    here = _own_cgroup_dir()
    return (here is not None and os.access(here, os.W_OK) and os.access(os.path.join(here, "cgroup.procs"), os.W_OK)
            and os.path.exists(os.path.join(here, "cgroup.kill")))


class Containment:
    """How one server's process tree is held (see the module docstring).

    `wrap(argv)` is the command to spawn; `pass_fds` must be passed to the spawn; after it,
    `started()` says whether the server itself could be started (raising the `OSError` a direct
    spawn would have raised). `abort()` kills the whole tree at once; `sweep(grace)` stops what
    is left once the server is gone; `release()` frees what the containment holds.
    """

    def __init__(self, mode: str, group: Optional[str] = None) -> None:
        self.mode = mode
        self.group = group  # the cgroup directory (cgroup mode)
        self._read_fd: Optional[int] = None
        self._write_fd: Optional[int] = None
        self.pid: Optional[int] = None  # the launcher (subreaper) or the server (cgroup, group)

    @property
    def pass_fds(self) -> tuple[int, ...]:
        return (self._write_fd,) if self._write_fd is not None else ()

    def wrap(self, argv: list[str], grace: float, env: Optional[dict[str, str]] = None,
             cwd: Optional[str] = None) -> list[str]:
        """The command to spawn for `argv` (raises the `OSError` a direct spawn would, for a command
        that cannot be started, in the modes where nothing of ours would be there to say it)."""
        if self.mode == "group":
            return argv
        if self.mode == "cgroup" and self.group is not None:
            _resolve(argv[0], env, cwd)
            return ["/bin/sh", "-c", _JOIN, os.path.join(self.group, "cgroup.procs"), *argv]
        self._read_fd, self._write_fd = os.pipe()
        return [sys.executable, "-I", "-S", _LAUNCHER, str(self._write_fd), f"{grace:g}", "--", *argv]

    async def started(self, pid: int) -> None:
        """After the spawn: read the launcher's report (until it closes the pipe)."""
        self.pid = pid
        if self._write_fd is not None:
            os.close(self._write_fd)
            self._write_fd = None
        if self._read_fd is None:
            return
        fd, self._read_fd = self._read_fd, None
        report = await asyncio.to_thread(_read_all, fd)
        lines = report.decode(errors="replace").split()
        if "error" in lines:
            errno = int(lines[lines.index("error") + 1])
            raise OSError(errno, os.strerror(errno))

    def abort(self) -> None:
        """Kill the whole tree now (the launcher does it in `subreaper` mode)."""
        if self.mode == "subreaper" and self.pid is not None:
            with suppress(ProcessLookupError, PermissionError):
                os.kill(self.pid, signal.SIGUSR1)
        elif self.mode == "cgroup":
            self._kill_group()

    async def sweep(self, grace: float) -> None:
        """Stop whatever is left in the cgroup (SIGTERM, `grace`, then `cgroup.kill`)."""
        if self.mode != "cgroup" or self.group is None or not self._populated():
            return
        if grace > 0:
            for pid in self._members():
                with suppress(ProcessLookupError, PermissionError):
                    os.kill(pid, signal.SIGTERM)
            if await self._emptied(grace):
                return
        self._kill_group()
        await self._emptied(2.0)

    def release(self) -> None:
        for fd in (self._read_fd, self._write_fd):
            if fd is not None:
                with suppress(OSError):
                    os.close(fd)
        self._read_fd = self._write_fd = None
        self._remove_group()

    # -- cgroup ------------------------------------------------------------------------------------

    def _members(self) -> list[int]:
        assert self.group is not None
        try:
            with open(os.path.join(self.group, "cgroup.procs")) as fh:
                return [int(line) for line in fh if line.strip()]
        except (OSError, ValueError):
            return []

    def _populated(self) -> bool:
        if self.group is None:
            return False
        try:
            with open(os.path.join(self.group, "cgroup.events")) as fh:
                return any(line.split() == ["populated", "1"] for line in fh)
        except OSError:
            return False

    async def _emptied(self, seconds: float) -> bool:
        deadline = asyncio.get_running_loop().time() + seconds
        while self._populated():
            if asyncio.get_running_loop().time() >= deadline:
                return False
            await asyncio.sleep(_POLL)
        return True

    def _kill_group(self) -> None:
        if self.group is not None:
            with suppress(OSError), open(os.path.join(self.group, "cgroup.kill"), "w") as fh:
                fh.write("1")

    def _remove_group(self) -> None:
        group, self.group = self.group, None
        if group is not None:
            with suppress(OSError):
                os.rmdir(group)


# Joins the cgroup (its `cgroup.procs` is $0), then becomes the server: no process of ours stays.
_JOIN = ('{ echo $$ > "$0"; } 2>/dev/null || echo "toolnexus: could not move the MCP server into its cgroup $0; '
         'processes it starts in new sessions may outlive it" >&2; exec "$@"')


def _resolve(command: str, env: Optional[dict[str, str]], cwd: Optional[str]) -> None:
    """Raise what `exec` would for a command that cannot run (the shell would only say it on stderr)."""
    if os.sep in command:
        path = command if os.path.isabs(command) else os.path.join(cwd or os.getcwd(), command)
        if not os.path.exists(path):
            raise OSError(errno.ENOENT, os.strerror(errno.ENOENT), command)  # a FileNotFoundError
        if not os.access(path, os.X_OK) or os.path.isdir(path):
            raise OSError(errno.EACCES, os.strerror(errno.EACCES), command)  # a PermissionError
        return
    if shutil.which(command, path=(env or os.environ).get("PATH", os.defpath)) is None:
        raise OSError(errno.ENOENT, os.strerror(errno.ENOENT), command)  # a FileNotFoundError


def _read_all(fd: int) -> bytes:
    chunks = []
    try:
        while chunk := os.read(fd, 4096):
            chunks.append(chunk)
    finally:
        os.close(fd)
    return b"".join(chunks)


@lru_cache(maxsize=1)
def _clear_stale(here: str) -> None:
    """Once per process: remove the empty groups a process of ours that died left behind."""
    with suppress(OSError):
        for name in os.listdir(here):
            parts = name.split("-")
            if name.startswith("toolnexus-mcp-") and len(parts) == 4 and parts[2].isdigit():
                try:
                    os.kill(int(parts[2]), 0)
                except ProcessLookupError:
                    with suppress(OSError):
                        os.rmdir(os.path.join(here, name))  # fails (and stays) while a process is in it
                except PermissionError:
                    pass


def contain(mode: str) -> Containment:
    """A containment for one server: `mode` as configured ("auto" picks the best that works here)."""
    linux = sys.platform.startswith("linux")
    if mode == "group" or not linux:
        return Containment("group")
    if mode in ("auto", "cgroup") and cgroup_usable():
        here = _own_cgroup_dir()
        assert here is not None
        _clear_stale(here)
        group = os.path.join(here, f"toolnexus-mcp-{os.getpid()}-{next(_names)}")
        try:
            os.mkdir(group)
        except OSError:
            return Containment("subreaper")
        return Containment("cgroup", group)
    return Containment("subreaper")
