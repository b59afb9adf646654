"""Running the INSTALLED `toolnexus` console script as a subprocess, as a user's shell would.

`TOOLNEXUS` is the script next to the test interpreter (`.venv/bin/toolnexus`). `cli_env()` is
the environment: no provider keys or model settings from the developer's shell (tests set the
ones they mean),
and `tests/support` on `PYTHONPATH` so `--tools-from cli_tools:TOOLS` resolves.
"""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path
from typing import Any, Optional

__all__ = ["SUPPORT", "TOOLNEXUS", "cli_env", "run_cli"]

TOOLNEXUS = str(Path(sys.executable).with_name("toolnexus"))
SUPPORT = str(Path(__file__).resolve().parent)
_KEYS = ("OPENROUTER_API_KEY", "OPENAI_API_KEY", "ANTHROPIC_API_KEY", "TOOLNEXUS_AUTH_TOKEN", "OPENAI_BASE_URL",
         "ANTHROPIC_BASE_URL", "TOOLNEXUS_MODEL")


def cli_env(**extra: str) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if k not in _KEYS}
    env["PYTHONPATH"] = SUPPORT + (os.pathsep + env["PYTHONPATH"] if env.get("PYTHONPATH") else "")
    env.update(extra)
    return env


def run_cli(*args: str, env: Optional[dict[str, str]] = None, input: Optional[str] = None,
            timeout: float = 60, **kwargs: Any) -> subprocess.CompletedProcess:
    """Run `toolnexus <args>` to completion; text mode, output captured."""
    return subprocess.run([TOOLNEXUS, *args], env=env if env is not None else cli_env(), input=input,
                          capture_output=True, text=True, timeout=timeout, **kwargs)


class ServeProcess:
    """`toolnexus serve ...` running in the background; `url` is the line it printed on stdout.

    Use as a context manager: on exit the process gets `stop_signal` and is waited for;
    `returncode`, `stdout` (after the URL line) and `stderr` are then available.
    """

    def __init__(self, *args: str, env: Optional[dict[str, str]] = None, stop_signal: int = 15) -> None:
        self.args = [TOOLNEXUS, "serve", *args]
        self.env = env if env is not None else cli_env()
        self.stop_signal = stop_signal
        self.url = ""
        self.returncode: Optional[int] = None
        self.stdout = ""
        self.stderr = ""

    def __enter__(self) -> "ServeProcess":
        self.proc = subprocess.Popen(self.args, env=self.env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
        line = self._first_line(30.0)
        if not line:
            out, err = self.proc.communicate(timeout=30)
            raise AssertionError(f"serve printed no URL (exit {self.proc.returncode}): {out!r} {err!r}")
        self.url = line.strip()
        return self

    def _first_line(self, timeout: float) -> str:
        import selectors

        assert self.proc.stdout is not None
        with selectors.DefaultSelector() as sel:
            sel.register(self.proc.stdout, selectors.EVENT_READ)
            if not sel.select(timeout):
                self.proc.kill()
                raise AssertionError("serve printed nothing in time")
        return self.proc.stdout.readline()

    def __exit__(self, *exc: Any) -> None:
        try:
            if self.proc.poll() is None:
                self.proc.send_signal(self.stop_signal)
            self.stdout, self.stderr = self.proc.communicate(timeout=30)
        finally:
            self.proc.kill()
        self.returncode = self.proc.returncode
