"""The session-end leak check (tests/conftest.py) fails a leaking suite and passes a clean one.

Each case runs this suite's own conftest in a separate pytest process on a one-test directory.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path

CONFTEST = Path(__file__).with_name("conftest.py")

LEAKY = '''
import subprocess, tempfile, threading, time

def test_leaks_everything():
    subprocess.Popen(["sleep", "3"])
    threading.Thread(target=time.sleep, args=(3,), daemon=True, name="leaky-thread").start()
    fd, _ = tempfile.mkstemp(prefix="leaked-")
    __import__("os").close(fd)
'''

CLEAN = '''
import subprocess, tempfile, threading, time

def test_cleans_up():
    subprocess.run(["true"], check=True)
    t = threading.Thread(target=time.sleep, args=(0.01,))
    t.start(); t.join()
    with tempfile.NamedTemporaryFile() as fh:
        fh.write(b"x")
'''


def _run(tmp_path: Path, body: str) -> subprocess.CompletedProcess:
    shutil.copy(CONFTEST, tmp_path / "conftest.py")
    (tmp_path / "test_case.py").write_text(body)
    env = {**os.environ, "TOOLNEXUS_LEAK_SETTLE": "0.3", "TOOLNEXUS_LEAK_CHECK": "1"}
    return subprocess.run([sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", "--rootdir", str(tmp_path),
                           str(tmp_path)], capture_output=True, text=True, env=env, cwd=tmp_path, timeout=60)


def test_a_leaking_test_fails_the_session_and_names_each_leak(tmp_path):
    run = _run(tmp_path, LEAKY)
    assert run.returncode == 1, run.stdout + run.stderr
    assert "1 passed" in run.stdout and "LEAK CHECK FAILED" in run.stdout
    assert "sleep 3" in run.stdout and "leaky-thread (daemon=True)" in run.stdout and "leaked-" in run.stdout


def test_a_clean_test_passes(tmp_path):
    run = _run(tmp_path, CLEAN)
    assert run.returncode == 0, run.stdout + run.stderr
    assert "LEAK CHECK FAILED" not in run.stdout
