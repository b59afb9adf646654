"""Server-sent events: bytes in, `SseEvent`s out, per the SSE dispatch rules.

Lines end at `\\n` (a trailing `\\r` is stripped); `event:` sets the event name, `data:` lines
accumulate (joined by `\\n`), a blank line dispatches, comments (`:`) and other fields are ignored,
and a trailing partial line / undispatched event is flushed at EOF.

One leniency a careful client needs: some gateways omit the blank line between `data:` lines.
When a multi-line `data` is not valid JSON but every line on its own is, `json_payloads()` yields
them one by one instead of dropping the event.

Not here: reading the socket (transport) or knowing what the JSON means (wire dialects).
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from typing import Any, Iterator, Optional

__all__ = ["SseEvent", "SseParser", "json_payloads"]


@dataclass
class SseEvent:
    """One dispatched event: its `event:` name (or None) and its data lines."""

    event: Optional[str]
    lines: list[str] = field(default_factory=list)

    @property
    def data(self) -> str:
        return "\n".join(self.lines)


class SseParser:
    """Incremental parser: `feed(bytes)` and `close()` return the events completed so far."""

    def __init__(self) -> None:
        self._buffer = b""
        self._event: Optional[str] = None
        self._lines: list[str] = []

    def feed(self, chunk: bytes) -> list[SseEvent]:
        self._buffer += chunk
        out: list[SseEvent] = []
        while True:
            cut = self._buffer.find(b"\n")
            if cut < 0:
                return out
            raw, self._buffer = self._buffer[:cut], self._buffer[cut + 1 :]
            self._line(raw.rstrip(b"\r").decode("utf-8", errors="replace"), out)

    def close(self) -> list[SseEvent]:
        out: list[SseEvent] = []
        if self._buffer:
            raw, self._buffer = self._buffer, b""
            self._line(raw.rstrip(b"\r").decode("utf-8", errors="replace"), out)
        self._dispatch(out)
        return out

    def _line(self, line: str, out: list[SseEvent]) -> None:
        if line == "":
            self._dispatch(out)
            return
        if line.startswith(":"):
            return
        name, _, value = line.partition(":")
        if value.startswith(" "):
            value = value[1:]
        if name == "data":
            self._lines.append(value)
        elif name == "event":
            self._event = value.strip()

    def _dispatch(self, out: list[SseEvent]) -> None:
        if self._lines:
            out.append(SseEvent(self._event, self._lines))
        self._event, self._lines = None, []


def json_payloads(event: SseEvent) -> Iterator[Any]:
    """The event's JSON payload(s). `[DONE]` is yielded as the string "[DONE]"; bad JSON skipped."""
    text = event.data.strip()
    if text == "[DONE]":
        yield "[DONE]"
        return
    try:
        yield json.loads(text)
        return
    except ValueError:
        pass
    if len(event.lines) < 2:
        return
    for line in event.lines:
        line = line.strip()
        if line == "[DONE]":
            yield "[DONE]"
            continue
        try:
            yield json.loads(line)
        except ValueError:
            continue
