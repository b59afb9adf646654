"""Issue #11, the process and file rows: runaway commands, regexes and special files never wedge
the process or outlive a call. Real subprocesses, real FIFOs and devices, real MCP servers.

Rows covered: `read` on /dev/zero or a FIFO; grep `(a+)+$` stalling the loop; grep on a huge /
sparse file; an MCP stdio server that spawns children and exits or crashes; an MCP stdout line
without newlines; `bash` `timeout: 1e12`; `setsid cmd &` outliving the call.
"""

from __future__ import annotations

import asyncio
import os
import sys
import time
import tracemalloc

import pytest

from support.mcp_servers.helpers import DEMO, captured_warnings
from toolnexus.builtin import create_builtin_tools
from toolnexus.builtin._search import make_grep
from toolnexus.builtin._settings import BuiltinSettings
from toolnexus.builtin._shell import make_bash
from toolnexus.mcp_source import load_mcp

pytestmark = pytest.mark.skipif(not sys.platform.startswith("linux"), reason="reads /proc; subreaper is Linux")


def tools(cfg=None):
    return {t.name: t for t in create_builtin_tools(cfg)}


def gone_within(pid: int, seconds: float = 5.0) -> bool:
    """Poll /proc (bounded) until `pid` is gone or a zombie."""
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline:
        try:
            with open(f"/proc/{pid}/stat") as fh:
                if fh.read().rsplit(")", 1)[1].split()[0] in ("Z", "X"):
                    return True
        except FileNotFoundError:
            return True
        time.sleep(0.02)
    return False


async def wait_for_file(path, seconds: float = 10.0) -> str:
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline:
        if os.path.exists(path) and open(path).read().strip():
            return open(path).read().strip()
        await asyncio.sleep(0.02)
    raise AssertionError(f"{path} never written")


class Ticker:
    """Counts event-loop turns while a call runs: a held loop would leave it at ~0."""

    def __init__(self):
        self.ticks = 0

    async def __aenter__(self):
        async def tick():
            while True:
                await asyncio.sleep(0.005)
                self.ticks += 1

        self.task = asyncio.create_task(tick())
        return self

    async def __aexit__(self, *exc):
        self.task.cancel()


# --------------------------------------------------------------- read on devices and FIFOs (row 4)


async def test_read_refuses_dev_zero_and_devices_at_once():
    """Row `read on /dev/zero or a FIFO never returns`."""
    for device in ("/dev/zero", "/dev/urandom", "/dev/null"):
        result = await tools()["read"].execute({"path": device})
        assert (
            result.is_error
            and result.output
            == f"read: {device} is a character device, not a regular file; only regular files can be read"
        )


async def test_many_fifo_reads_at_once_neither_hang_nor_wedge_the_other_file_tools(tmp_path):
    """Row: `six of them wedge every file tool in the process` — twelve here, then a normal read."""
    fifos = []
    for i in range(12):
        fifos.append(tmp_path / f"p{i}")
        os.mkfifo(fifos[-1])
    (tmp_path / "ok.txt").write_text("fine")
    kit = tools()
    results = await asyncio.gather(*(kit["read"].execute({"path": str(f)}) for f in fifos))
    assert all(r.is_error and "named pipe (FIFO)" in r.output for r in results)
    assert (await kit["read"].execute({"path": str(tmp_path / "ok.txt")})).output == "fine"
    grep = await kit["grep"].execute({"pattern": "fine", "path": str(tmp_path)})
    assert grep.output == "ok.txt:1:fine"  # the walk skips FIFOs too


# ------------------------------------------------------------------------------ grep regex (row 3)


async def test_a_catastrophic_pattern_is_stopped_and_never_holds_the_loop(tmp_path):
    """Row `a grep pattern like (a+)+$ stalled the whole event loop 6.5 s on a 26-character file`."""
    (tmp_path / "short").mkdir()
    (tmp_path / "short" / "f.txt").write_text("a" * 25 + "!")
    (tmp_path / "long").mkdir()
    (tmp_path / "long" / "g.txt").write_text("a" * 45 + "!")
    grep = make_grep(BuiltinSettings(grep_line_budget=0.5))
    async with Ticker() as ticker:
        nested = await grep.execute({"pattern": r"(a+)+$", "path": str(tmp_path / "short")})
        alternation = await grep.execute({"pattern": r"(a|aa)+$", "path": str(tmp_path / "long")})
    assert nested.output == "" and not nested.is_error  # the engine settles this one at once
    assert alternation.is_error and "took more than 0.5s to match one line" in alternation.output
    assert "simplify it" in alternation.output
    assert ticker.ticks >= 20  # the loop kept turning while the pattern ran (in a worker, GIL released)


async def test_re_syntax_and_error_texts_are_kept(tmp_path):
    import re

    (tmp_path / "f.txt").write_text("abc abc\nxyz\n")
    grep = tools()["grep"]
    back = await grep.execute({"pattern": r"(abc) \1", "path": str(tmp_path)})  # backreference: kept
    look = await grep.execute({"pattern": r"(?<=x)y", "path": str(tmp_path)})  # lookbehind: kept
    assert back.output == "f.txt:1:abc abc" and look.output == "f.txt:2:xyz"
    bad = await grep.execute({"pattern": r"\p{L}", "path": str(tmp_path)})  # regex-only syntax stays invalid
    with pytest.raises(re.error) as info:
        re.compile(r"\p{L}")
    assert bad.output == f"grep: invalid regex: {info.value}"


def _grep_peak(settings, root):
    grep = make_grep(settings)

    def run():
        tracemalloc.start()
        try:
            result = asyncio.run(grep.execute({"pattern": "needle", "path": str(root)}))
            return result, tracemalloc.get_traced_memory()[1]
        finally:
            tracemalloc.stop()

    return run()


def test_grep_on_a_big_text_file_reads_bounded_chunks(tmp_path):
    """Row `grep on a 2 GiB sparse / 600 MiB text file: whole file read` (a 48 MiB file here:
    long lines keep the line count, and so the run time under tracemalloc, small)."""
    line = b"x" * 99_999 + b"\n"
    with open(tmp_path / "big.txt", "wb") as fh:
        block = line * 10  # 1 MB
        for _ in range(48):
            fh.write(block)
        fh.write(b"the needle\n")
    size = os.path.getsize(tmp_path / "big.txt")
    result, peak = _grep_peak(BuiltinSettings(), tmp_path)
    assert result.output.endswith(":the needle") and size > 40 * 1024 * 1024
    assert peak < 12 * 1024 * 1024  # a whole-file read would need > 48 MiB


def test_grep_on_a_sparse_file_is_capped_per_file_and_per_line(tmp_path):
    with open(tmp_path / "sparse.txt", "wb") as fh:
        fh.write(b"needle at the top\n" + b"text " * 2000)
        fh.truncate(2 * 1024 ** 3)  # 2 GiB, mostly a hole of NUL bytes with no newline
    settings = BuiltinSettings(grep_max_file_bytes=8 * 1024 * 1024)
    result, peak = _grep_peak(settings, tmp_path)
    assert result.output.startswith("sparse.txt:1:needle at the top")
    assert "only the first 8388608 bytes of sparse.txt were searched" in result.output
    assert result.metadata["partialFiles"] == ["sparse.txt"]
    assert peak < 8 * 1024 * 1024


# ------------------------------------------------------------------------------------ bash (row 13)


async def test_a_huge_bash_timeout_is_capped():
    """Row `bash timeout: 1e12 accepted unbounded`."""
    result = await tools()["bash"].execute({"command": "echo hi", "timeout": 1e12})
    assert result.output == "hi\n" and result.metadata["timeoutCappedAt"] == 600_000
    small = make_bash(BuiltinSettings(shell=("/bin/sh", "-c"), bash_max_timeout_ms=200, kill_grace=0.2))
    timed = await small.execute({"command": "sleep 30", "timeout": 1e12})
    assert timed.output.startswith("bash: command timed out after 200ms") and timed.metadata["timedOut"]
    custom = tools({"bash_max_timeout_ms": 1234})["bash"]
    assert (await custom.execute({"command": "true", "timeout": 5000})).metadata["timeoutCappedAt"] == 1234


@pytest.mark.parametrize("command", [
    "setsid sleep 30 > /dev/null 2>&1 & echo $!",
    "setsid sh -c 'sleep 30' > /dev/null 2>&1 & echo $!",
    "(setsid sh -c 'sleep 30 > /dev/null 2>&1 & echo $! > \"$PIDFILE\"' &) ; sleep 0.1; cat \"$PIDFILE\"",
])
async def test_setsid_children_do_not_outlive_the_call(tmp_path, command):
    """Row `setsid cmd &: the child outlives the call` (also a double-forked daemon)."""
    bash = make_bash(BuiltinSettings(shell=("/bin/sh", "-c"), kill_grace=0.3))
    os.environ["PIDFILE"] = str(tmp_path / "pid")
    try:
        result = await bash.execute({"command": command})
    finally:
        del os.environ["PIDFILE"]
    pid = int(result.output.strip().splitlines()[-1])
    assert not result.is_error
    assert await asyncio.to_thread(gone_within, pid)


async def test_setsid_children_are_stopped_on_timeout_and_cancel_too(tmp_path):
    bash = make_bash(BuiltinSettings(shell=("/bin/sh", "-c"), kill_grace=0.3))
    pidfile = tmp_path / "pid"
    timed = await bash.execute({"command": f"setsid sleep 30 > /dev/null 2>&1 & echo $! > {pidfile}; sleep 30",
                                "timeout": 300})
    assert timed.metadata["timedOut"] and await asyncio.to_thread(gone_within, int(pidfile.read_text()))
    pidfile.unlink()
    task = asyncio.create_task(
        bash.execute({"command": f"setsid sleep 30 >/dev/null 2>&1 & echo $! > {pidfile}; sleep 30"})
    )
    pid = int(await wait_for_file(pidfile))
    task.cancel()
    with pytest.raises(asyncio.CancelledError):
        await task
    assert await asyncio.to_thread(gone_within, pid)


# ----------------------------------------------------------------------------- MCP stdio (rows 6, 7)


def _spawning_server(pidfile):
    # a real MCP server (the demo) whose launcher first starts a helper in the same process group
    return ["/bin/sh", "-c", f'sleep 300 & echo $! > {pidfile}; exec "$0" "$@"', sys.executable, DEMO]


async def test_helpers_of_an_mcp_server_are_stopped_when_it_is_closed(tmp_path):
    """Row `MCP stdio server that spawns children, then exits`: closed normally."""
    pidfile = tmp_path / "helper"
    source = await load_mcp({"mcpServers": {"s": {"command": _spawning_server(pidfile)}}})
    try:
        assert source.status == {"s": "connected"}
        helper = int(await wait_for_file(pidfile))
    finally:
        await source.close()
    assert await asyncio.to_thread(gone_within, helper)


async def test_helpers_of_an_mcp_server_are_stopped_when_it_crashes(tmp_path):
    """Row `... then exits or crashes`: the leader is SIGKILLed; its helper must not be orphaned."""
    pidfile = tmp_path / "helper"
    source = await load_mcp({"mcpServers": {"s": {"command": _spawning_server(pidfile)}}})
    try:
        helper = int(await wait_for_file(pidfile))
        crash = next(t for t in source.tools if t.name == "s_crash")
        result = await crash.execute({})
        assert result.is_error
        assert await asyncio.to_thread(gone_within, helper)  # swept as soon as the leader died, before any close
    finally:
        await source.close()


async def test_an_mcp_stdout_line_without_newlines_is_capped(tmp_path, monkeypatch):
    """Row `MCP stdout line without newlines: unbounded buffer`."""
    import toolnexus.mcp_source._stdio as stdio

    monkeypatch.setattr(stdio, "MAX_LINE_BYTES", 1 << 20)
    flood = "import sys, time\nsys.stdout.write('x' * (4 << 20)); sys.stdout.flush(); time.sleep(60)\n"
    with captured_warnings() as warnings:
        source = await load_mcp({"mcpServers": {"flood": {"command": [sys.executable, "-c", flood], "timeout": 20000}}})
    try:
        assert source.status == {"flood": "failed"}
    finally:
        await source.close()
    assert any("longer than 1048576 bytes without a newline" in w for w in warnings)
