"""Diagnostics: the pinned `[toolnexus] …` lines, routed through `logging`.

The text of every diagnostic is pinned (0.21 users match on it). We emit it through
`logging.getLogger("toolnexus")` at WARNING level: with no logging configured, Python's last-resort handler prints
exactly the message to stderr (the historical behaviour); an application that configures logging gets them
as ordinary records it can filter. Values of headers and environment variables never reach here.

`tool_raised` is the one DEBUG record: a tool that raised reaches the model as its pinned text
only (`str(exc)` for a native tool), so the exception's type and traceback are logged here for
whoever debugs it, and its type goes into the result's metadata under `ERROR_TYPE`.
"""

from __future__ import annotations

import logging
import threading

ERROR_TYPE = "error_type"
"""The `ToolResult.metadata` key naming the exception class of a tool that raised (`"KeyError"`)."""

logger = logging.getLogger("toolnexus")

_seen: set[str] = set()
_seen_lock = threading.Lock()


def warn(text: str) -> None:
    """Emit one diagnostic line."""
    logger.warning(text)


def warn_once(key: str, text: str) -> None:
    """Emit a diagnostic only the first time `key` is seen in this process."""
    with _seen_lock:
        if key in _seen:
            return
        _seen.add(key)
    logger.warning(text)


def tool_raised(name: str, exc: BaseException) -> dict[str, str]:
    """Log a tool's exception (type, message, traceback) at DEBUG; return the result metadata."""
    kind = type(exc).__name__
    if logger.isEnabledFor(logging.DEBUG):
        logger.debug('[toolnexus] tool "%s" raised %s: %s', name, kind, exc,
                     exc_info=(type(exc), exc, exc.__traceback__))
    return {ERROR_TYPE: kind}
