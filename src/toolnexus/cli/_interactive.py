"""Terminal niceties for `toolnexus run`: reading lines, a progress indicator, answering prompts.

- `LineReader` reads stdin lines on a daemon thread and hands them to the loop, so waiting for
  input never blocks the event loop and Ctrl-C never waits for a pending `readline`. The REPL and
  the suspension prompts share it, so no line is read twice or lost.
- `Progress` shows `⠋ waiting for the model… 3s` on stderr while a model call is in flight (and
  `⠋ running lookup… 1s` while a tool runs, see `cli._activity`), and only when stderr is a
  terminal (a redirected stderr stays clean for scripts). It is driven by the client's hooks and
  always cleared before anything is printed.
- `TtyAnswerer` is the client's `wait_for` in an interactive REPL: it shows a suspended tool's
  request on stderr and reads the answer. `approval` takes y/n; `authorization` shows the link
  and waits for Enter; anything else (`input`, `question`, …) takes one line of text, sent as
  `{"text": ...}` (or under the schema's single property name when the request has a one-field
  schema). `/decline` declines any request. Never used when stdin or stderr is not a terminal.
  An approval gate's request (`toolnexus.approvals`) gets the approval prompt instead: tool,
  source, agent and arguments, then `approve? [y/N/e(dit)/a(lways)]` (`cli.approvals`). A
  sign-in to an MCP server behind OAuth (`kind="auth"`) prints the authorization address, opens
  the browser (`$BROWSER` decides which; `BROWSER=true` opens none) and listens on the request's
  loopback redirect address (`toolnexus.mcp_auth.LoopbackCallback`): the sign-in completes when
  the browser comes back. A person whose browser runs elsewhere pastes the address it ended on
  instead; `/decline` declines.
"""

from __future__ import annotations

import asyncio
import sys
import threading
import time
from typing import Any, Optional

from ..approvals import is_approval_request
from ..types import Answer, Request
from ._approvals import approval_prompt
from ._common import Console

_FRAMES = "⠋⠙⠹⠸⠼⠴⠦⠧⠇⠏"
DECLINE = "/decline"


def is_interactive() -> bool:
    try:
        return sys.stdin.isatty() and sys.stderr.isatty()
    except (AttributeError, ValueError):
        return False


class LineReader:
    """stdin lines through an `asyncio.Queue`; `None` at end of input."""

    def __init__(self, stream: Any = None) -> None:
        self._stream = stream if stream is not None else sys.stdin
        self._queue: asyncio.Queue[Optional[str]] = asyncio.Queue()
        self._loop = asyncio.get_running_loop()
        self._thread = threading.Thread(target=self._pump, name="toolnexus-stdin", daemon=True)
        self._thread.start()

    def _pump(self) -> None:
        while True:
            try:
                line = self._stream.readline()
            except (OSError, ValueError):
                line = ""
            try:
                self._loop.call_soon_threadsafe(self._queue.put_nowait, line if line else None)
            except RuntimeError:  # the loop is gone: the program is exiting
                return
            if not line:
                return

    async def readline(self) -> Optional[str]:
        """The next line without its newline, or None at end of input."""
        line = await self._queue.get()
        if line is None:
            self._queue.put_nowait(None)  # stay at EOF for later readers
            return None
        return line.rstrip("\r\n")


class Progress:
    """A spinner on stderr while the model is working (a no-op when stderr is not a terminal)."""

    def __init__(self, console: Console, enabled: Optional[bool] = None) -> None:
        self._console = console
        try:
            tty = console.stderr.isatty()
        except (AttributeError, ValueError):
            tty = False
        self.enabled = tty if enabled is None else enabled
        self._task: Optional[asyncio.Task[None]] = None
        self.label = "waiting for the model"
        self._since = time.monotonic()

    def hooks(self) -> dict[str, Any]:
        if not self.enabled:
            return {}
        return {"before_llm": lambda _event: self.start(), "after_llm": lambda _event: self.stop()}

    def start(self, label: str = "waiting for the model") -> None:
        if label != self.label or self._task is None:
            self.label, self._since = label, time.monotonic()
        if self.enabled and self._task is None:
            self._task = asyncio.get_running_loop().create_task(self._spin())

    def line(self, text: str) -> None:
        """Print `text` on stderr as a line of its own (the spinner, if any, redraws below it)."""
        if self._task is not None:
            self._console.stderr.write("\r\033[K")
        self._console.err(text)

    def stop(self) -> None:
        task, self._task = self._task, None
        if task is not None:
            task.cancel()
            self._console.stderr.write("\r\033[K")
            self._console.stderr.flush()

    async def _spin(self) -> None:
        i = 0
        while True:
            elapsed = int(time.monotonic() - self._since)
            self._console.stderr.write(f"\r\033[K{_FRAMES[i % len(_FRAMES)]} {self.label}… {elapsed}s")
            self._console.stderr.flush()
            i += 1
            await asyncio.sleep(0.1)


def _single_field(req: Request) -> Optional[str]:
    schema = (req.data or {}).get("schema") if isinstance(req.data, dict) else None
    props = schema.get("properties") if isinstance(schema, dict) else None
    return next(iter(props)) if isinstance(props, dict) and len(props) == 1 else None


class TtyAnswerer:
    """The REPL's `wait_for`: ask the person at the terminal (see the module docstring)."""

    def __init__(self, console: Console, lines: LineReader, progress: Optional[Progress] = None) -> None:
        self._console, self._lines, self._progress = console, lines, progress

    async def __call__(self, req: Request) -> Optional[Answer]:
        if self._progress is not None:
            self._progress.stop()
        if is_approval_request(req):
            return await approval_prompt(self._console, self._lines, req)
        if req.kind == "auth" and req.url:
            return await self._sign_in(req)
        c = self._console
        c.err(f"? {req.prompt}")
        if req.url:
            c.err(f"  {req.url}")
        if req.kind == "approval":
            c.err("  approve? [y/N] ", end="")
        elif req.kind == "authorization":
            c.err(f"  press Enter when done ({DECLINE} to decline) ", end="")
        else:
            c.err(f"  answer ({DECLINE} to decline): ", end="")
        line = await self._lines.readline()
        if line is None or line.strip() == DECLINE:
            return Answer(id=req.id, ok=False, reason="declined")
        text = line.strip()
        if req.kind == "approval":
            ok = text.lower() in ("y", "yes")
            return Answer(id=req.id, ok=ok, reason=None if ok else "declined")
        if req.kind == "authorization":
            return Answer(id=req.id, ok=True)
        field = _single_field(req)
        return Answer(id=req.id, ok=True, data={field or "text": text})

    async def _sign_in(self, req: Request) -> Answer:
        """An MCP server's OAuth sign-in: the browser's loopback redirect, or a pasted address."""
        from ..errors import ConfigError
        from ..mcp_auth import LoopbackCallback, callback_answer

        c = self._console
        c.err(f"? {req.prompt}")
        c.err(f"  open this address to sign in: {req.url}")
        redirect = str((req.data or {}).get("redirect_uri") or "")
        landing: Optional[asyncio.Future[Any]] = None
        try:
            helper = LoopbackCallback(redirect, announce=lambda _text: None)
        except ConfigError:  # not a loopback redirect: the browser lands elsewhere, the person pastes it
            c.err("  then paste the address your browser ended on here", end="")
        else:
            landing = asyncio.ensure_future(helper(req))
            c.err("  waiting for your browser to come back (or paste the address it ended on)", end="")
        c.err(f" ({DECLINE} to decline): ", end="")
        won = await _first(asyncio.ensure_future(self._lines.readline()), landing)
        if won is not landing:
            line = won.result()
            if line is None or line.strip() in ("", DECLINE):
                return Answer(id=req.id, ok=False, reason="declined")
            return callback_answer(req.id, line.strip())
        c.err()
        assert landing is not None
        answer: Answer = landing.result()
        c.err("  signed in" if answer.ok else "  the sign-in was refused")
        return answer


async def _first(reading: "asyncio.Future[Optional[str]]", landing: "Optional[asyncio.Future[Any]]") -> Any:
    """Whichever comes first: a line typed at the terminal, or the browser's redirect (an answer).
    A loopback listener that could not start (its port taken) leaves the terminal the only way."""
    pending: set[asyncio.Future[Any]] = {reading} if landing is None else {reading, landing}
    try:
        while True:
            done, pending = await asyncio.wait(pending, return_when=asyncio.FIRST_COMPLETED)
            if reading in done:
                return reading
            assert landing is not None
            if landing.exception() is None and landing.result() is not None:
                return landing
            if not pending:
                return reading
    finally:
        for f in pending:
            f.cancel()
