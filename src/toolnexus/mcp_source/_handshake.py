"""Telling a program that is not an MCP server from a slow one, while `initialize` is in flight.

Without this, a configured command that is not an MCP server costs the whole `timeout` (30 s by
default) and then says only `timed out`: the SDK skips stdout lines it cannot parse and waits on.
`HandshakeGuard` watches what the transport hands the session until the `initialize` reply, and
ends the handshake at once, with a reason that says what to do, when:

- the first thing on stdout is not JSON-RPC (`echo hello`, an HTTP server's log line) and no
  JSON-RPC message follows within `JUNK_GRACE` seconds: an MCP server writes only JSON-RPC
  messages to stdout. A server that prints a banner and then answers within that time still connects (the
  skipped line is warned about once); `"strictStdout": false` on the server entry turns the
  check off (the handshake then waits for the whole `timeout`, as the SDKs do);
- stdout ends (the program exited, or closed it) before the reply: the exit code is named when
  the process is gone within `EXIT_WAIT` seconds.

A program that prints nothing and never exits cannot be told from a slow server; it still ends
at `timeout`. What the guard never does: judge messages after the handshake (a live server's
stray line is skipped, as before), or read the child's stderr (that stays the user's terminal's).

`spawn_failure` is the same idea for a command that cannot start at all: the reason names the
executable (or the `cwd`) instead of a bare `[Errno 2]`; `http_refusal` for a remote server that
answers with an HTTP error: the status, the URL without its secrets, and what to check.
"""

from __future__ import annotations

import asyncio
import os
from typing import Any, Awaitable, Optional, TypeVar

from .._diag import warn_once
from .._redact import redact_url
from ..errors import ToolnexusRuntimeError, ToolnexusValueError

T = TypeVar("T")
EXIT_WAIT = 1.0
JUNK_GRACE = 5.0  # seconds: a banner, then a server still loading (an SDK import, npx)
_SHOWN = 80
_POLL = 0.02


class NotJsonRpc(ToolnexusValueError):
    """A line a server wrote on stdout that is not a JSON-RPC message (handed to the session)."""

    def __init__(self, line: bytes) -> None:
        text = line.decode("utf-8", errors="replace").strip()
        self.line = text if len(text) <= _SHOWN else text[:_SHOWN] + "…"
        super().__init__(f"not a JSON-RPC message: {self.line!r}")


class HandshakeFailed(ToolnexusRuntimeError):
    """The program did not complete the MCP handshake; the message is the reason shown to users."""


class HandshakeGuard:
    """Watches one connection's incoming items until `run(initialize)` returns (see module doc).

    `seen` and `ended` are called by the wrapper around the transport's read stream; `process` is
    the stdio child (None for a remote server, which has no stdout to judge and no exit code).
    """

    def __init__(self, *, strict: bool = True, process: Any = None, server: str = "") -> None:
        self.strict = strict
        self.process = process
        self.server = server
        self._failure: asyncio.Future[str] = asyncio.get_running_loop().create_future()
        self._done = False
        self._ended = False
        self._junk: Optional[str] = None
        self._timer: Optional[asyncio.TimerHandle] = None

    def seen(self, item: Any) -> None:
        if self._done or self._failure.done():
            return
        if isinstance(item, NotJsonRpc):
            if self.strict and self._junk is None:
                self._junk = item.line
                self._timer = asyncio.get_running_loop().call_later(JUNK_GRACE, self._not_mcp)
        elif not isinstance(item, Exception):
            self._done = True  # it speaks JSON-RPC: from here on only the session judges
            self._stop_timer()
            if self._junk is not None:
                warn_once(f"stdout-junk:{self.server}",
                          f'[toolnexus] MCP server "{self.server}" wrote a line that is not JSON-RPC to stdout before '
                          f"its first message: {self._junk!r} (skipped; an MCP server should log to stderr)")

    def _not_mcp(self) -> None:
        if not self._done and not self._failure.done():
            self._failure.set_result(self._junk_reason())

    def _junk_reason(self) -> str:
        return (f"not an MCP server: its first line on stdout is not JSON-RPC: {self._junk!r} (an MCP server "
                'writes only JSON-RPC messages there and logs to stderr; "strictStdout": false skips such lines)')

    def _stop_timer(self) -> None:
        if self._timer is not None:
            self._timer.cancel()
            self._timer = None

    def ended(self) -> None:
        if not self._done and not self._failure.done():
            self._ended = True
            self._failure.set_result("")  # the reason needs the exit code: worked out in `run`

    async def run(self, handshake: Awaitable[T]) -> T:
        """Await `handshake` (the session's `initialize`), ending it at once when the guard trips."""
        task = asyncio.ensure_future(handshake)
        waiters: list[asyncio.Future[Any]] = [task, self._failure]
        try:
            await asyncio.wait(waiters, return_when=asyncio.FIRST_COMPLETED)
        except BaseException:
            task.cancel()
            await asyncio.gather(task, return_exceptions=True)
            raise
        finally:
            self._stop_timer()
        if not task.done() or (task.exception() is not None and self._failure.done()):
            task.cancel()
            await asyncio.gather(task, return_exceptions=True)
            raise HandshakeFailed(await self._reason())
        self._done = True
        return task.result()

    async def _reason(self) -> str:
        reason = self._failure.result()
        if not self._ended:
            return reason
        if self._junk is not None:  # it printed something else and went away: the junk says more
            return self._junk_reason()
        code = await self._exit_code()
        if code is None:
            how = "closed its stdout"
        else:
            how = f"was killed by signal {-code}" if code < 0 else f"exited with code {code}"
        return f"{how} before answering initialize: is the command an MCP server? (its stderr may say more)"

    async def _exit_code(self) -> Optional[int]:
        """The child's exit code, once it is gone (bounded wait: it may have closed stdout only)."""
        proc = self.process
        if proc is None:
            return None
        deadline = asyncio.get_running_loop().time() + EXIT_WAIT
        while proc.returncode is None and asyncio.get_running_loop().time() < deadline:
            await asyncio.sleep(_POLL)
        return proc.returncode


def spawn_failure(command: str, cwd: Optional[str], exc: OSError) -> Exception:
    """A clear reason for a local server whose command could not be started at all."""
    if cwd is not None and not os.path.isdir(cwd):
        return HandshakeFailed(f'cannot start the server: "cwd" {cwd!r} is not a directory')
    if isinstance(exc, FileNotFoundError):
        where = "" if os.sep in command else " on PATH"
        return HandshakeFailed(f'cannot start "{command}": no such executable{where} (check "command", or install it)')
    if isinstance(exc, PermissionError):
        return HandshakeFailed(f'cannot start "{command}": permission denied (is it executable?)')
    return HandshakeFailed(f'cannot start "{command}": {exc.strerror or exc}')


_REFUSALS = {
    401: 'the server wants credentials: check "headers" (e.g. "Authorization": "Bearer ${TOKEN}")',
    403: 'the server refused these credentials: check "headers" and what the token may access',
    404: 'no MCP endpoint there: check "url" (it often ends in /mcp, or /sse for the legacy transport)',
}


def http_refusal(status: int, url: str) -> Exception:
    """A clear reason for a remote server that answered with an HTTP error status."""
    hint = _REFUSALS.get(status)
    return HandshakeFailed(f"HTTP {status} from {redact_url(url)}" + (f": {hint}" if hint else ""))
