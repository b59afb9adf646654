"""Diagnostics: the pinned `[toolnexus] …` lines, routed through `logging`.

The spec pins the text of every diagnostic. We emit it through `logging.getLogger("toolnexus")`
at WARNING level: with no logging configured, Python's last-resort handler prints exactly the
message to stderr (the historical behaviour); an application that configures logging gets them
as ordinary records it can filter. Values of headers and environment variables never reach here.
"""

from __future__ import annotations

import logging
import threading

__all__ = ["logger", "warn", "warn_once"]

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
