"""One warmed-up interpreter for the doc examples' Python programs: import once, fork per program.

A Python block of the docs is a program a user runs with `python file.py`. Starting a fresh
interpreter and importing toolnexus, the MCP SDK, httpx, pydantic and starlette costs about a
second per block on a busy 2-core machine, for thirty-odd blocks. `Zygote` starts ONE interpreter
that imports all of that, then, per program, forks a child that becomes exactly what `python
file.py` would be: its own working directory, environment, `sys.argv`, `sys.path[0]` (the
script's folder), stdin from /dev/null, stdout and stderr to files, `__name__ == "__main__"`, the
exit code of `SystemExit` (1 and a traceback for an uncaught exception), and `atexit` handlers
run before it leaves. The child leads its own process group, so a timeout kills whatever it
started too.

What it deliberately is not: a way to run the `toolnexus` command (the CLI blocks run the
installed console script, a real process each), nor used where `fork` is missing or the warm
interpreter has started a thread (forking threads is unsafe) — `run` then falls back to a fresh
`python file.py`, which is also what the README's first example always gets.
"""

from __future__ import annotations

import json
import os
import selectors
import signal
import subprocess
import sys
import tempfile
import threading
from pathlib import Path
from typing import Any, Optional

__all__ = ["Zygote"]

WARM = ("toolnexus", "toolnexus.agents", "toolnexus.client", "toolnexus.stores", "toolnexus.stores._sqlite",
        "toolnexus.toolkit", "toolnexus.native", "toolnexus.mcp_source", "toolnexus.mcp_serve", "toolnexus.serve",
        "toolnexus.classifier", "toolnexus.judge", "toolnexus.judge_batteries", "toolnexus.content",
        "toolnexus.relay", "toolnexus.http", "toolnexus.a2a", "httpx", "mcp", "pydantic")

_SERVER = r'''
import atexit, importlib, json, os, runpy, sys, threading, traceback

for name in sys.argv[1:]:
    importlib.import_module(name)


def child(req):
    os.setpgid(0, 0)
    for fd, path, flags in ((0, os.devnull, os.O_RDONLY), (1, req["stdout"], os.O_WRONLY | os.O_TRUNC),
                            (2, req["stderr"], os.O_WRONLY | os.O_TRUNC)):
        opened = os.open(path, flags)
        os.dup2(opened, fd)
        os.close(opened)
    sys.stdin = open(0, "r", closefd=False)
    sys.stdout = open(1, "w", buffering=1, encoding="utf-8", closefd=False)
    sys.stderr = open(2, "w", buffering=1, encoding="utf-8", closefd=False)
    os.chdir(req["cwd"])
    os.environ.clear()
    os.environ.update(req["env"])
    sys.argv = [req["script"]]
    sys.path[0] = os.path.dirname(req["script"])
    code = 0
    try:
        runpy.run_path(req["script"], run_name="__main__")
    except SystemExit as exc:
        if exc.code is None:
            code = 0
        elif isinstance(exc.code, int):
            code = exc.code
        else:
            print(exc.code, file=sys.stderr)
            code = 1
    except BaseException:
        traceback.print_exc()
        code = 1
    try:
        atexit._run_exitfuncs()
    finally:
        sys.stdout.flush()
        sys.stderr.flush()
        os._exit(code)


out = sys.stdout
for line in sys.stdin:
    req = json.loads(line)
    if threading.active_count() != 1:
        out.write(json.dumps({"refused": "the warm interpreter has threads"}) + "\n")
        out.flush()
        continue
    pid = os.fork()
    if pid == 0:
        try:
            child(req)
        finally:
            os._exit(70)
    out.write(json.dumps({"pid": pid}) + "\n")
    out.flush()
    _, status = os.waitpid(pid, 0)
    out.write(json.dumps({"code": os.waitstatus_to_exitcode(status)}) + "\n")
    out.flush()
'''


class Zygote:
    """See the module docstring. Use as a context manager; `run` is one program, one at a time."""

    def __init__(self, python: str = sys.executable) -> None:
        self.python = python
        self._lock = threading.Lock()
        self._dir = tempfile.TemporaryDirectory(prefix="doc-zygote-")
        self._proc: Optional[subprocess.Popen[str]] = None

    def __enter__(self) -> "Zygote":
        if hasattr(os, "fork"):
            env = {**os.environ, "PYTHONUNBUFFERED": "1"}
            env.pop("PYTHONPATH", None)
            self._proc = subprocess.Popen([self.python, "-c", _SERVER, *WARM], stdin=subprocess.PIPE,
                                          stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True, env=env,
                                          cwd=self._dir.name)
        return self

    def __exit__(self, *exc: Any) -> None:
        proc, self._proc = self._proc, None
        if proc is not None:
            assert proc.stdin is not None
            proc.stdin.close()
            try:
                proc.wait(timeout=30)
            finally:
                proc.kill()
                proc.wait()
        self._dir.cleanup()

    def _reply(self, timeout: Optional[float]) -> Optional[dict[str, Any]]:
        proc = self._proc
        assert proc is not None and proc.stdout is not None
        with selectors.DefaultSelector() as sel:
            sel.register(proc.stdout, selectors.EVENT_READ)
            if not sel.select(timeout):
                return None
        line = proc.stdout.readline()
        if not line:
            raise RuntimeError("the warm interpreter exited")
        return json.loads(line)

    def run(self, script: Path, cwd: Path, env: dict[str, str], timeout: float) -> subprocess.CompletedProcess:
        """`python script` in `cwd` with `env`, as a forked child of the warm interpreter (or a fresh one)."""
        if self._proc is None or self._proc.poll() is not None:
            return self._fresh(script, cwd, env, timeout)
        with self._lock:
            out, err = Path(self._dir.name) / "stdout", Path(self._dir.name) / "stderr"
            out.write_bytes(b"")
            err.write_bytes(b"")
            request = {"script": str(script), "cwd": str(cwd), "env": env, "stdout": str(out), "stderr": str(err)}
            assert self._proc.stdin is not None
            self._proc.stdin.write(json.dumps(request) + "\n")
            self._proc.stdin.flush()
            started = self._reply(60)
            if started is None or "pid" not in started:
                return self._fresh(script, cwd, env, timeout)
            done = self._reply(timeout)
            if done is None:  # too slow: kill its whole group, then collect the zygote's report
                try:
                    os.killpg(started["pid"], signal.SIGKILL)
                except ProcessLookupError:
                    pass
                self._reply(30)
                raise subprocess.TimeoutExpired([self.python, str(script)], timeout)
            return subprocess.CompletedProcess([self.python, str(script)], done["code"],
                                               out.read_text(encoding="utf-8", errors="replace"),
                                               err.read_text(encoding="utf-8", errors="replace"))

    def _fresh(self, script: Path, cwd: Path, env: dict[str, str], timeout: float) -> subprocess.CompletedProcess:
        return subprocess.run([self.python, str(script)], cwd=cwd, env=env, capture_output=True, text=True,
                              timeout=timeout, stdin=subprocess.DEVNULL)
