"""What `toolnexus run` shows while the agent works: which tools ran, as they run.

- On a terminal, the spinner (`interactive.Progress`) names what is happening now:
  `⠋ waiting for the model… 3s`, or `⠋ running lookup… 1s` while a tool runs.
- `--verbose` adds one line per tool call on stderr, on a terminal or not: `→ lookup
  {"term": "HTTP/3"}` when the call starts and `← lookup ok 12 ms` (or `← lookup error 3 ms:
  <first line of the error>`) when it ends. A call that suspends shows only its start; its
  question follows (or `status: pending`). Arguments are cut at `MAX_SHOWN` characters, and every
  line goes through the `Console`, which scrubs the API key.

stdout is never touched: scripts read the answer there. Not here: the spinner itself
(`interactive.Progress`), the REPL (`run`).
"""

from __future__ import annotations

import json
import time
from typing import Any, Optional

from ..types import ToolResult
from ._common import Console
from ._interactive import Progress

MAX_SHOWN = 200


def _shown(value: Any, limit: int = MAX_SHOWN) -> str:
    try:
        text = json.dumps(value, ensure_ascii=False, default=str)
    except (TypeError, ValueError):
        text = repr(value)
    return text if len(text) <= limit else text[: limit - 1] + "…"


def _first_line(text: Any, limit: int = 160) -> str:
    lines = str(text or "").strip().splitlines()
    line = lines[0] if lines else ""
    return line if len(line) <= limit else line[: limit - 1] + "…"


class Activity:
    """The client hooks behind the spinner's label and the `--verbose` lines (see the module docstring)."""

    def __init__(self, console: Console, progress: Progress, verbose: bool = False) -> None:
        self._console, self._progress, self.verbose = console, progress, verbose
        self._started: dict[str, float] = {}

    def hooks(self) -> dict[str, Any]:
        if not self._progress.enabled and not self.verbose:
            return {}
        return {"before_llm": self._before_llm, "after_llm": self._after_llm, "before_tool": self._before_tool,
                "after_tool": self._after_tool}

    def _before_llm(self, _event: dict[str, Any]) -> None:
        self._progress.start()

    def _after_llm(self, _event: dict[str, Any]) -> None:
        self._progress.stop()

    def _before_tool(self, event: dict[str, Any]) -> None:
        name = str(event.get("name"))
        self._started[str(event.get("id"))] = time.monotonic()
        if self.verbose:
            self._progress.line(f"→ {name} {_shown(event.get('args') or {})}")
        self._progress.start(f"running {name}")

    def _after_tool(self, event: dict[str, Any]) -> None:
        name = str(event.get("name"))
        started: Optional[float] = self._started.pop(str(event.get("id")), None)
        if not self._started:
            self._progress.start()  # back to waiting for the model
        if not self.verbose:
            return
        ms = f" {(time.monotonic() - started) * 1000:.0f} ms" if started is not None else ""
        result = event.get("result")
        if isinstance(result, ToolResult) and result.is_error:
            self._progress.line(f"← {name} error{ms}: {_first_line(result.output)}")
        else:
            self._progress.line(f"← {name} ok{ms}")
