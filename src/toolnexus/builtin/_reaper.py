"""A tiny subreaper that `bash` runs each command under (Linux), so nothing the command starts
outlives the call. Run as a script: `python -I -S _reaper.py <linger> <grace> <argv...>`.

Why: the command runs in its own process group and `bash` signals that group on timeout or
cancel — but anything that calls `setsid()` (`setsid cmd &`, daemons, `nohup` with a double fork)
leaves the group, and once the shell exits it is re-parented to init and survives us. There is
no cgroup to put the command in without privileges. What Linux does offer is
`PR_SET_CHILD_SUBREAPER`: orphaned descendants of a subreaper are re-parented to *it*, not to
init. So this process marks itself a subreaper, starts the shell (as its own process group, as
before), and keeps every descendant reachable:

1. It reaps whatever exits while the shell runs, and notes the shell's status.
2. When the shell has exited, it gives the remaining descendants `linger` seconds to finish on
   their own (a background `echo` still flushing), then stops them: SIGTERM to every descendant
   (found through /proc by parent pid, plus the shell's process group), `grace` seconds, then
   SIGSTOP + SIGKILL in rounds until none is left (a stopped process cannot fork away).
3. On SIGTERM (our caller's timeout or cancel) it does step 2 at once, without the linger.
4. It exits with the shell's status: the same exit code, or dies by the same signal.

It also asks to get SIGTERM if its parent dies (`PR_SET_PDEATHSIG`), so a crashed host does not
leave the command running. Standard library only and no imports of toolnexus: it runs isolated
(`-I -S`) for a fast start. Its own errors go to stderr, which is the command's output.
"""

from __future__ import annotations

import ctypes
import errno
import os
import signal
import sys
import time

PR_SET_PDEATHSIG = 1
PR_SET_CHILD_SUBREAPER = 36
_POLL = 0.01


class _Stop(Exception):
    """SIGTERM arrived: stop the whole tree now."""


def _on_term(signum: int, frame: object) -> None:
    raise _Stop()


def _descendants(root: int) -> list[int]:
    """Pids of every live descendant of `root`, from /proc (parents before children)."""
    children: dict[int, list[int]] = {}
    for name in os.listdir("/proc"):
        if not name.isdigit():
            continue
        try:
            with open(f"/proc/{name}/stat", "rb") as handle:
                fields = handle.read().rsplit(b")", 1)[1].split()
        except OSError:
            continue
        if fields[0] in (b"Z", b"X"):
            continue
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


def _reap(block: bool) -> bool:
    """Reap exited children; True when we have no children at all any more."""
    while True:
        try:
            pid, _ = os.waitpid(-1, 0 if block else os.WNOHANG)
        except ChildProcessError:
            return True
        except InterruptedError:  # pragma: no cover - PEP 475 retries; kept for safety
            continue
        if pid == 0:
            return False
        block = False


def _wait_gone(seconds: float) -> bool:
    """Reap as descendants exit; True once none is left within `seconds`."""
    deadline = time.monotonic() + seconds
    while True:
        if _reap(False):
            return True
        if time.monotonic() >= deadline:
            return False
        time.sleep(_POLL)


def _stop_tree(shell_pgid: int, grace: float) -> None:
    me = os.getpid()
    try:
        os.killpg(shell_pgid, signal.SIGTERM)
    except (ProcessLookupError, PermissionError):
        pass
    _signal_all(_descendants(me), signal.SIGTERM)
    if _wait_gone(grace):
        return
    for _ in range(100):  # a tree that forks while we kill it still ends: stopped processes cannot fork
        left = _descendants(me)
        if not left:
            break
        _signal_all(left, signal.SIGSTOP)
        _signal_all(_descendants(me), signal.SIGKILL)
        _wait_gone(0.05)
    _wait_gone(1.0)


def _exit_like(status: int) -> None:
    if os.WIFSIGNALED(status):
        sig = os.WTERMSIG(status)
        sys.stdout.flush()
        if sig not in (signal.SIGKILL, signal.SIGSTOP):
            signal.signal(sig, signal.SIG_DFL)
        os.kill(os.getpid(), sig)
        time.sleep(1)  # the signal ends us; this is only for one that does not (e.g. ignored)
        os._exit(128 + sig)
    os._exit(os.WEXITSTATUS(status) if os.WIFEXITED(status) else 1)


def main(argv: list[str]) -> None:
    linger, grace, command = float(argv[0]), float(argv[1]), argv[2:]
    parent = os.getppid()
    libc = ctypes.CDLL(None, use_errno=True)
    if libc.prctl(PR_SET_CHILD_SUBREAPER, 1, 0, 0, 0) != 0:  # pragma: no cover - Linux >= 3.4
        print(f"bash: cannot become a subreaper: {os.strerror(ctypes.get_errno())}", file=sys.stderr)
    libc.prctl(PR_SET_PDEATHSIG, signal.SIGTERM, 0, 0, 0)
    signal.signal(signal.SIGTERM, _on_term)
    if os.getppid() != parent:  # our caller died before we asked for the signal
        raise SystemExit(1)
    try:
        shell = os.posix_spawnp(command[0], command, os.environ, setpgroup=0,
                                setsigdef=(signal.SIGTERM, signal.SIGINT, signal.SIGPIPE))
    except OSError as exc:
        print(f"bash: {exc}", file=sys.stderr)
        os._exit(127 if exc.errno == errno.ENOENT else 126)
    status = None
    try:
        while status is None:
            pid, code = os.waitpid(-1, 0)
            if pid == shell:
                status = code
        if not _wait_gone(linger):
            _stop_tree(shell, grace)
    except _Stop:
        signal.signal(signal.SIGTERM, signal.SIG_IGN)
        _stop_tree(shell, grace)
        if status is None:
            try:
                _, status = os.waitpid(shell, os.WNOHANG)
            except ChildProcessError:
                status = None
        if not status:
            os._exit(128 + signal.SIGTERM)
    _exit_like(status)


if __name__ == "__main__":
    main(sys.argv[1:])
