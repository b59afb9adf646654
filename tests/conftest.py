"""Suite-wide guard: no test leaves a child process, a thread or a temp file behind (issue #11).

At session start we note the threads alive and give the session a private temp directory
(`TMPDIR`, inherited by every subprocess; pytest's own `tmp_path`s live under it too), so what
other processes on the machine do in `/tmp` cannot confuse the check. At session end, after a
short settle time for things that are already shutting down, the session FAILS (exit status 1,
with a report) if any of these remain:

- a child process of the pytest process (running, or a zombie nobody reaped);
- a thread that was not alive at the start (daemon or not), except the bounded, reused thread
  pool the LLM client keeps by design (`toolnexus-transport-*`, see `client/transport.py`);
- an entry in the private temp directory other than pytest's own `pytest-of-*`, or one of our
  atomic-write staging files (`.<name>.<hex>.tmp`) anywhere under pytest's temp paths.

Set `TOOLNEXUS_LEAK_CHECK=0` to skip it (e.g. when running one test under a debugger);
`TOOLNEXUS_LEAK_SETTLE` is the settle time in seconds (default 5). `test_hardening_leakcheck.py`
runs this very file on a leaking and a clean test to show it fails and passes as it should.
"""

from __future__ import annotations

import contextlib
import os
import re
import shutil
import sys
import tempfile
import threading
import time
from collections.abc import AsyncIterator

import pytest

_ENABLED = os.environ.get("TOOLNEXUS_LEAK_CHECK", "1") != "0"
_ALLOWED_THREADS = ("toolnexus-transport",)
_STAGING = re.compile(r"^\..+\.[0-9a-f]{12}\.tmp$")
_SETTLE = float(os.environ.get("TOOLNEXUS_LEAK_SETTLE", "5"))

_private_tmp = tempfile.mkdtemp(prefix="toolnexus-tests-")
os.environ["TMPDIR"] = _private_tmp
tempfile.tempdir = _private_tmp
_baseline_threads: set[int] = set()

# Property tests (tests/test_fuzz_*.py): a bounded profile for `make test`, a long one for
# `make fuzz` (TOOLNEXUS_FUZZ_PROFILE=fuzz). No per-example deadline: timing on a loaded 2-core
# machine is noise; a hang is caught by each fuzz test's pytest timeout instead.
from hypothesis import HealthCheck, settings as _hypothesis_settings  # noqa: E402

_hypothesis_settings.register_profile("toolnexus", max_examples=60, deadline=None, derandomize=True,
                                      suppress_health_check=[HealthCheck.too_slow])
_hypothesis_settings.register_profile("fuzz", max_examples=5000, deadline=None,
                                      suppress_health_check=[HealthCheck.too_slow])
_hypothesis_settings.load_profile(os.environ.get("TOOLNEXUS_FUZZ_PROFILE") or "toolnexus")


@pytest.fixture
async def exits() -> AsyncIterator[contextlib.AsyncExitStack]:
    """Releases registered here run at teardown however the test ends, a failed assert included
    (last registered, first run): `exits.push_async_callback(rt.close, rt.root)`,
    `exits.push_async_callback(rt.aclose)`, `exits.callback(store.close)`. Register right after
    creating the thing, instead of releasing it after the asserts."""
    async with contextlib.AsyncExitStack() as stack:
        yield stack


def _children() -> list[str]:
    """`pid state cmdline` of each child process of this process (Linux /proc)."""
    if not os.path.isdir("/proc/self"):
        return []
    me = os.getpid()
    found = []
    for name in os.listdir("/proc"):
        if not name.isdigit():
            continue
        try:
            with open(f"/proc/{name}/stat", "rb") as fh:
                fields = fh.read().rsplit(b")", 1)[1].split()
            if int(fields[1]) != me:
                continue
            with open(f"/proc/{name}/cmdline", "rb") as fh:
                cmd = fh.read().replace(b"\0", b" ").decode(errors="replace").strip()
        except (OSError, ValueError, IndexError):
            continue
        found.append(f"pid {name} state {fields[0].decode()} {cmd[:120]}")
    return found


def _new_threads() -> list[str]:
    return [f"{t.name} (daemon={t.daemon})" for t in threading.enumerate()
            if t.ident not in _baseline_threads and t.is_alive() and not t.name.startswith(_ALLOWED_THREADS)]


def _temp_leftovers() -> list[str]:
    left = []
    for entry in sorted(os.listdir(_private_tmp)):
        path = os.path.join(_private_tmp, entry)
        if entry.startswith("pytest-of-"):
            for root, _dirs, files in os.walk(path):
                left += [os.path.join(root, f) for f in files if _STAGING.match(f)]
        else:
            left.append(path)
    return left


def _leaks() -> dict[str, list[str]]:
    return {"child processes": _children(), "threads": _new_threads(), "temp files": _temp_leftovers()}


def pytest_sessionstart(session: pytest.Session) -> None:
    _baseline_threads.update(t.ident for t in threading.enumerate() if t.ident is not None)


@pytest.hookimpl(trylast=True)
def pytest_sessionfinish(session: pytest.Session, exitstatus: int) -> None:
    if not _ENABLED or getattr(session.config, "workerinput", None) is not None:
        return
    if session.config.option.collectonly:
        return
    deadline = time.monotonic() + _SETTLE
    leaks = _leaks()
    while any(leaks.values()) and time.monotonic() < deadline:
        time.sleep(0.05)
        leaks = _leaks()
    if not any(leaks.values()):
        return
    lines = ["", "LEAK CHECK FAILED: the suite left these behind (tests/conftest.py):"]
    for kind, items in leaks.items():
        lines += [f"  {kind}:"] + [f"    {item}" for item in items] if items else []
    reporter = session.config.pluginmanager.get_plugin("terminalreporter")
    text = "\n".join(lines)
    if reporter is not None:
        reporter.write_line(text, red=True)
    else:
        print(text, file=sys.stderr)
    session.exitstatus = pytest.ExitCode.TESTS_FAILED


def pytest_unconfigure(config: pytest.Config) -> None:
    shutil.rmtree(_private_tmp, ignore_errors=True)
