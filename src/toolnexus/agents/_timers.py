"""`timer(...)`: a tool asks to be called again later, durably — a timer that fires while nothing runs.

A tool returns `timer(seconds=3600)` (or `at=` a datetime) the way it returns `pending(...)`: the
run parks on a request of kind `"timer"` whose `expiresAt` is when it fires. When that time
comes, a worker of the fleet (`toolnexus worker --store ...`) answers it through the runtime's
one expiry rule (`answering.expiry_answer`): the tool is called again with `ctx.answer.ok` true
and `ctx.answer.data == {"timer": "fired", "at": <expiresAt>}`. Anyone may answer it earlier
(`toolnexus answer`, `resume`): ok fires it now, a decline cancels it (the tool is not called
again and the model is told so, as for any declined request).

Without a worker nothing fires it by itself; the request waits in the inbox like any other.
"""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from typing import Optional

from ..client._tool_calls import TIMER_KIND as TIMER_KIND
from ..errors import ToolnexusValueError
from ..types import ToolResult, pending


def timer(*, seconds: Optional[float] = None, at: Optional[datetime] = None, prompt: Optional[str] = None,
          id: Optional[str] = None) -> ToolResult:
    """Park the calling tool until `at` (an aware datetime; naive = UTC) or `seconds` from now."""
    if (seconds is None) == (at is None):
        raise ToolnexusValueError("toolnexus: timer() takes exactly one of seconds= and at=")
    if seconds is not None:
        if isinstance(seconds, bool) or not isinstance(seconds, (int, float)) or seconds < 0:
            raise ToolnexusValueError(f"toolnexus: timer(seconds=) must be a number >= 0, got {seconds!r}")
        when = datetime.now(UTC) + timedelta(seconds=seconds)
    else:
        if not isinstance(at, datetime):
            raise ToolnexusValueError(f"toolnexus: timer(at=) must be a datetime, got {type(at).__name__}")
        when = at if at.tzinfo is not None else at.replace(tzinfo=UTC)
    stamp = when.astimezone(UTC).isoformat(timespec="milliseconds").replace("+00:00", "Z")
    return pending(kind=TIMER_KIND, prompt=prompt or f"wait until {stamp}", id=id, expiresAt=stamp)
