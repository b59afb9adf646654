"""`make demo` (`python -m toolnexus.demo`): the seed's scenario across an agent team, end to end."""

from __future__ import annotations

import asyncio
import sys


async def test_demo_suspends_at_the_child_resumes_and_prints_trace_and_final_text():
    proc = await asyncio.create_subprocess_exec(
        sys.executable, "-m", "toolnexus.demo", stdout=asyncio.subprocess.PIPE, stderr=asyncio.subprocess.PIPE
    )
    out, err = await asyncio.wait_for(proc.communicate(), timeout=30)
    assert proc.returncode == 0, err.decode()
    text = out.decode()
    assert "status: pending" in text
    assert "the host is asked: 'Deploy build 42 to production?'  (from root/release-manager.1)" in text
    assert "status: done | turns: 3 | total tokens: 96" in text
    for line in (
        'root/release-manager.1/deployer.1: running→suspended DURABLE (pending "approval", path preserved)',
        "root/release-manager.1/deployer.1: suspended→idle (Answer accepted, checkpoint restored)",
        "root/release-manager.1: task replay → REATTACH to root/release-manager.1/deployer.1 (state idle)",
    ):
        assert line in text
    assert text.rstrip().endswith(
        "Release finished. Deployer reports: Build 42 is live (deployed build 42 to production, approved by demo operator)."
    )
