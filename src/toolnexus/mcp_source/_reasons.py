"""Why an MCP connection failed, in one line that names the real cause.

`describe_error` is what every MCP failure shows users — `mcp_reasons()`, the load warning, a
tool call's error result: the innermost telling exception of an exception group, "timed out" for
a timeout, "could not connect to <url>: connection refused" rather than the transport's class
name, an HTTP refusal by its status.
"""

from __future__ import annotations

import asyncio
import os
import socket
import sys
from typing import Optional

from ._handshake import http_refusal


def leaf(exc: BaseException) -> BaseException:
    """The most telling exception inside (possibly nested) exception groups."""
    while isinstance(exc, BaseExceptionGroup):
        leaves = list(exc.exceptions)
        exc = next((e for e in leaves if not isinstance(e, asyncio.CancelledError)), leaves[0])
    return exc


def _os_cause(exc: BaseException) -> Optional[OSError]:
    seen = 0
    cur: Optional[BaseException] = exc
    while cur is not None and seen < 8:
        if isinstance(cur, OSError) and (cur.errno or isinstance(cur, socket.gaierror)):
            return cur
        cur, seen = cur.__cause__ or cur.__context__, seen + 1
    return None


def os_reason(exc: BaseException) -> Optional[str]:
    """The OS error under `exc`, in words ("connection refused"), if there is one."""
    cause = _os_cause(exc)
    if cause is None:
        return None
    if isinstance(cause, socket.gaierror):
        return str(cause.strerror or cause).lower()
    return os.strerror(cause.errno).lower() if cause.errno and cause.errno > 0 else str(cause)


def describe_error(exc: BaseException) -> str:
    """A one-line reason naming the real cause (not `timed out` for a refused connection)."""
    exc = leaf(exc)
    if isinstance(exc, TimeoutError):
        return "timed out"
    reason = _http_reason(exc)
    if reason is not None:
        return reason
    return str(exc) or type(exc).__name__


def _http_reason(exc: BaseException) -> Optional[str]:
    """The reason for an httpx2 failure (a remote server's): an HTTP refusal, or the OS error under
    a failed connect. httpx2 is only loaded when a remote server was configured."""
    httpx2 = sys.modules.get("httpx2")
    if httpx2 is None:
        return None
    if isinstance(exc, httpx2.HTTPStatusError):  # the legacy SSE transport's refusal
        return str(http_refusal(exc.response.status_code, str(exc.request.url)))
    if isinstance(exc, httpx2.TransportError):
        reason = os_reason(exc)
        if reason is not None:
            try:
                where = str(exc.request.url)
            except RuntimeError:
                where = "server"
            return f"could not connect to {where}: {reason}"
    return None
