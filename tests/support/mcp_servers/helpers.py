"""Small helpers for the MCP-source tests: demo-server command lines and diagnostics capture."""

from __future__ import annotations

import asyncio
import logging
import os
import sys
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

__all__ = ["DEMO", "demo_cmd", "captured_warnings", "pid_alive", "read_pid"]

DEMO = str(Path(__file__).with_name("demo.py"))


def demo_cmd(*flags: str) -> list[str]:
    """`command` list for a stdio demo server."""
    return [sys.executable, DEMO, *flags]


@contextmanager
def captured_warnings() -> Iterator[list[str]]:
    """Collect `toolnexus` diagnostics (usable from module-scoped fixtures, unlike caplog)."""
    lines: list[str] = []

    class _Collect(logging.Handler):
        def emit(self, record: logging.LogRecord) -> None:
            lines.append(record.getMessage())

    handler = _Collect(logging.WARNING)
    logger = logging.getLogger("toolnexus")
    logger.addHandler(handler)
    try:
        yield lines
    finally:
        logger.removeHandler(handler)


async def read_pid(fifo: str) -> int:
    """Block (in a thread) until a demo server started with `--ready-fifo` announces its pid."""

    def read() -> str:
        with open(fifo) as fh:
            return fh.read()

    return int(await asyncio.to_thread(read))


def pid_alive(pid: int) -> bool:
    """Whether `pid` still exists (a reaped child does not)."""
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    return True
