"""`toolnexus worker`: its usage errors and failures are one line and an exit code, never a
traceback; a working worker is exercised by `test_temporal_processes.py`."""

from __future__ import annotations

import importlib.util
import subprocess
import sys
from pathlib import Path

import pytest

TESTS = Path(__file__).resolve().parent


def worker_cli(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "toolnexus", "worker", *args], capture_output=True, text=True,
                          timeout=60, cwd=str(TESTS), env={"PATH": "", "PYTHONPATH": str(TESTS)})


def test_worker_needs_an_address_and_agents():
    done = worker_cli("--agents", "support.temporal_agents:AGENTS")
    assert done.returncode == 2
    assert "or --temporal HOST:PORT, and at least one --agents MODULE:ATTR" in done.stderr
    assert "Traceback" not in done.stderr


def test_a_bad_agents_spec_is_a_usage_error_naming_it():
    done = worker_cli("--temporal", "127.0.0.1:1", "--agents", "support.no_such_module:X")
    assert done.returncode == 2 and "--agents" in done.stderr and "no_such_module" in done.stderr
    assert "Traceback" not in done.stderr


@pytest.mark.skipif(importlib.util.find_spec("temporalio") is None, reason="needs the temporalio SDK")
def test_an_unreachable_server_is_one_line_and_exit_1():
    done = worker_cli("--temporal", "127.0.0.1:1", "--agents", "support.temporal_agents:AGENTS",
                      "--api-key", "sk-cli-secret-4242")
    assert done.returncode == 1
    assert "cannot reach the Temporal server at 127.0.0.1:1" in done.stderr
    assert "Traceback" not in done.stderr and "sk-cli-secret-4242" not in done.stderr


def test_the_command_is_listed_with_its_flags():
    done = subprocess.run([sys.executable, "-m", "toolnexus", "--help"], capture_output=True, text=True, timeout=60)
    assert done.returncode == 0 and "worker" in done.stdout and "--temporal HOST:PORT" in done.stdout
