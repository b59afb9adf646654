"""The launcher a local MCP server starts through on Linux, so nothing it starts outlives it.

Run as a script, never imported: `python -I -S _reaper.py STATUS_FD GRACE -- argv...`, where
cgroup v2 cannot hold the server (_contain.py). It reports to the parent with one line on
STATUS_FD (then the fd closes: the parent reads it to its end):

- `subreaper`: the launcher marks itself a child subreaper
  (`PR_SET_CHILD_SUBREAPER`), so orphaned descendants are re-parented to it rather than to init,
  starts the server as its child (same process group), and closes its own copies of stdin and
  stdout so the pipes behave as if the server held them alone. When the server exits it stops
  every remaining descendant (SIGTERM, GRACE seconds, then SIGSTOP + SIGKILL in rounds) and exits
  with the server's status. SIGTERM from the parent stops the server and all descendants the
  same way; SIGUSR1 kills them all at once (an aborted connect). If the parent dies, the launcher
  gets SIGTERM (`PR_SET_PDEATHSIG`).
- `error <errno>`: the server could not be started (the parent reports it as it would a failed
  spawn); the launcher exits 127.

Standard library only; `-I -S` keeps its start near 20 ms.
"""

from __future__ import annotations

import ctypes
import os
import signal
import sys
import time

PR_SET_PDEATHSIG = 1
PR_SET_CHILD_SUBREAPER = 36
_POLL = 0.01


class _Stop(Exception):
    def __init__(self, now: bool) -> None:
        super().__init__()
        self.now = now


def _on_signal(signum: int, frame: object) -> None:
    raise _Stop(now=signum == signal.SIGUSR1)


def _descendants(root: int) -> list[int]:
    """Live descendants of `root` (from /proc; parents before children)."""
    children: dict[int, list[int]] = {}
    for name in os.listdir("/proc"):
        if not name.isdigit():
            continue
        try:
            with open(f"/proc/{name}/stat", "rb") as handle:
                fields = handle.read().rsplit(b")", 1)[1].split()
        except OSError:
            continue
        if fields[0] not in (b"Z", b"X"):
            children.setdefault(int(fields[1]), []).append(int(name))
    found: list[int] = []
    todo = [root]
    while todo:
        for pid in children.get(todo.pop(), []):
            found.append(pid)
            todo.append(pid)
    return found


def _signal_all(pids: list[int], sig: int) -> None:
    for pid in pids:
        try:
            os.kill(pid, sig)
        except (ProcessLookupError, PermissionError):
            pass


def _reap(server: int, status: list[int]) -> bool:
    """Reap exited children (noting the server's status); True when none is left."""
    while True:
        try:
            pid, code = os.waitpid(-1, os.WNOHANG)
        except ChildProcessError:
            return True
        if pid == 0:
            return False
        if pid == server:
            status.append(code)


def _wait_gone(seconds: float, server: int, status: list[int]) -> bool:
    deadline = time.monotonic() + seconds
    while not _reap(server, status):
        if time.monotonic() >= deadline:
            return False
        time.sleep(_POLL)
    return True


def _stop_tree(grace: float, server: int, status: list[int]) -> None:
    me = os.getpid()
    if grace > 0:
        _signal_all(_descendants(me), signal.SIGTERM)
        if _wait_gone(grace, server, status):
            return
    for _ in range(100):  # stopped processes cannot fork away while we kill them
        left = _descendants(me)
        if not left:
            break
        _signal_all(left, signal.SIGSTOP)
        _signal_all(_descendants(me), signal.SIGKILL)
        _wait_gone(0.05, server, status)
    _wait_gone(1.0, server, status)


def _exit_like(status: list[int]) -> None:
    code = status[0] if status else None
    if code is None:
        os._exit(128 + signal.SIGTERM)
    if os.WIFSIGNALED(code):
        sig = os.WTERMSIG(code)
        if sig not in (signal.SIGKILL, signal.SIGSTOP):
            signal.signal(sig, signal.SIG_DFL)
        os.kill(os.getpid(), sig)
        time.sleep(1)
        os._exit(128 + sig)
    os._exit(os.WEXITSTATUS(code) if os.WIFEXITED(code) else 1)


def _say(fd: int, text: str) -> None:
    try:
        os.write(fd, (text + "\n").encode())
    except OSError:
        pass


def _supervise(fd: int, grace: float, command: list[str]) -> None:
    libc = ctypes.CDLL(None, use_errno=True)
    libc.prctl(PR_SET_CHILD_SUBREAPER, 1, 0, 0, 0)
    parent = os.getppid()
    libc.prctl(PR_SET_PDEATHSIG, signal.SIGTERM, 0, 0, 0)
    signal.signal(signal.SIGTERM, _on_signal)
    signal.signal(signal.SIGUSR1, _on_signal)
    if os.getppid() != parent:  # the parent died before we asked for the signal
        os._exit(1)
    try:
        server = os.posix_spawnp(command[0], command, os.environ,
                                 setsigdef=(signal.SIGTERM, signal.SIGINT, signal.SIGPIPE, signal.SIGUSR1))
    except OSError as exc:
        _say(fd, f"error {exc.errno}")
        os._exit(127)
    _say(fd, "subreaper")
    os.close(fd)
    null = os.open(os.devnull, os.O_RDWR)
    os.dup2(null, 0)
    os.dup2(null, 1)
    os.close(null)
    status: list[int] = []
    try:
        while not status:
            pid, code = os.waitpid(-1, 0)
            if pid == server:
                status.append(code)
        _stop_tree(grace, server, status)
    except _Stop as stop:
        signal.signal(signal.SIGTERM, signal.SIG_IGN)
        signal.signal(signal.SIGUSR1, signal.SIG_IGN)
        _stop_tree(0 if stop.now else grace, server, status)
    _exit_like(status)


def main(argv: list[str]) -> None:
    fd, grace = int(argv[0]), float(argv[1])
    os.set_inheritable(fd, False)
    _supervise(fd, grace, argv[3:])


if __name__ == "__main__":
    main(sys.argv[1:])
