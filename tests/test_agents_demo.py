"""`make demo` (`python -m toolnexus._demo`): a durable team run parked in one process, answered in another."""

from __future__ import annotations

import asyncio
import sys


async def test_demo_parks_in_process_one_and_finishes_from_the_store_in_process_two():
    proc = await asyncio.create_subprocess_exec(
        sys.executable, "-m", "toolnexus._demo", stdout=asyncio.subprocess.PIPE, stderr=asyncio.subprocess.PIPE
    )
    out, err = await asyncio.wait_for(proc.communicate(), timeout=60)
    assert proc.returncode == 0, err.decode()
    text = out.decode()
    one, two = text.split("== process 2")
    assert "status: pending (run 'release-42' parked in sqlite:///" in one
    assert "the host is asked: 'Deploy build 42 to production?'  (from root/release-manager.1)" in one
    assert (
        "inbox: run 'release-42' asks 'Deploy build 42 to production?' (kind approval, from root/release-manager.1)"
        in two
    )
    # continued at the halted call: the deployer's model is asked once more, not twice
    assert "status: done | turns: 2 | total tokens: 64" in two
    for line in (
        'root/release-manager.1/deployer.1: running→suspended DURABLE (pending "approval", path preserved)',
        "root/release-manager.1/deployer.1: suspended→idle (Answer accepted, checkpoint restored)",
        "root/release-manager.1: task replay → REATTACH to root/release-manager.1/deployer.1 (state idle)",
    ):
        assert line in two
    assert "runs: [('release-42', 'done')]  pending: 0" in two
    assert text.rstrip().endswith(
        "Release finished. Deployer reports: Build 42 is live "
        "(deployed build 42 to production, approved by demo operator)."
    )
