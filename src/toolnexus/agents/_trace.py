"""The runtime's trace: a bounded ring of pinned lines plus structured transition events.

`AgentRuntime.trace` stays the pinned shape — a list of `"<id>: <event>"` strings — but is a
`TraceRing`: a `list` subclass that keeps only the newest `limit` entries,
so a long-lived runtime does not grow without bound. Indexing, slicing, `in`, iteration, `len` and
`==` with a plain list all work as before; `dropped` counts what the bound discarded.

`AgentRuntime.events` is a second ring (same bound) of one dict per state transition:
`{"handle", "from", "to", "detail", "at"}` with `at` read from the runtime's clock. The string
trace is kept for parity; the events are what a host should consume programmatically.

Choices (ours): the default bound is `DEFAULT_TRACE_LIMIT` (10 000 lines, far above any fixture);
`None` (or `math.inf`, so it can pass through `rt_opts`, where `None` means "default") is
unbounded; `0` keeps nothing. Only `append`, `extend`, `insert` and `+=` enforce the bound —
assigning to a slice is the caller's business.

This module does not decide what is traced; the runtime does.
"""

from __future__ import annotations

import math
from typing import Any, Iterable, Optional, SupportsIndex

from ..errors import ToolnexusValueError

DEFAULT_TRACE_LIMIT = 10_000


def check_trace_limit(limit: Any) -> Optional[int]:
    """Normalise a `trace_limit` option: a non-negative int, or None for unbounded."""
    if limit is None or (isinstance(limit, float) and math.isinf(limit) and limit > 0):
        return None
    if isinstance(limit, bool) or not isinstance(limit, int) or limit < 0:
        raise ToolnexusValueError(
            f"toolnexus.agents: trace_limit must be an integer >= 0 or None (unbounded), got {limit!r}"
        )
    return limit


class TraceRing(list[Any]):
    """A list that keeps only its newest `limit` items (`None`: unbounded)."""

    def __init__(self, limit: Optional[int] = DEFAULT_TRACE_LIMIT, items: Iterable[Any] = ()) -> None:
        super().__init__(items)
        self.limit = check_trace_limit(limit)
        self.dropped = 0
        self._trim()

    def _trim(self) -> None:
        if self.limit is not None and len(self) > self.limit:
            excess = len(self) - self.limit
            del self[:excess]
            self.dropped += excess

    def append(self, item: Any) -> None:
        super().append(item)
        self._trim()

    def extend(self, items: Iterable[Any]) -> None:
        super().extend(items)
        self._trim()

    def insert(self, index: SupportsIndex, item: Any) -> None:
        super().insert(index, item)
        self._trim()

    def __iadd__(self, items: Iterable[Any]) -> "TraceRing":  # type: ignore[misc]
        self.extend(items)
        return self


def transition_event(handle_id: str, prior: str, to: str, detail: str, at: float) -> dict[str, Any]:
    """One structured transition: which handle, from which state, to which, why, and when."""
    return {"handle": handle_id, "from": prior, "to": to, "detail": detail, "at": at}
