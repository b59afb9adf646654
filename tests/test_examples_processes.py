"""Examples that cross a process boundary run as real subprocesses and print their `ok:` line."""

from __future__ import annotations

import asyncio
import sys
from pathlib import Path

EXAMPLES = Path(__file__).resolve().parent.parent / "examples"


async def test_agent_tree_suspended_in_one_process_resumes_in_another():
    proc = await asyncio.create_subprocess_exec(
        sys.executable, str(EXAMPLES / "agents_two_processes.py"),
        stdout=asyncio.subprocess.PIPE, stderr=asyncio.subprocess.PIPE)
    out, err = await asyncio.wait_for(proc.communicate(), timeout=60)
    assert proc.returncode == 0, err.decode()
    assert out.decode().splitlines() == [
        "suspended: let it through? | tokens so far: 8",
        "ok: resumed in a fresh process | turns: 3 | tokens: 20",
    ]
