"""Server-sent events: bytes in, `SseEvent`s out, per the SSE dispatch rules.

Lines end at `\\n` (a trailing `\\r` is stripped); `event:` sets the event name, `data:` lines
accumulate (joined by `\\n`), a blank line dispatches, comments (`:`) and other fields are ignored,
and a trailing partial line / undispatched event is flushed at EOF.

One leniency a careful client needs: some gateways omit the blank line between `data:` lines.
When a multi-line `data` is not valid JSON but every line on its own is, `json_payloads()` yields
them one by one instead of dropping the event.

Bounded: one line, and one event's accumulated data, may hold at most `max_event_bytes`
(`MAX_EVENT_BYTES`, 8 MiB, by default); a peer that sends more without a line break or a blank
line gets `InputTooLarge` instead of growing our buffer without end. Scanning for line breaks
resumes where the last scan stopped, so a long line arriving in many small chunks costs linear
time, not quadratic.

Not here: reading the socket (transport) or knowing what the JSON means (wire dialects).
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from typing import Any, Iterator, Optional

from ..errors import InputTooLarge

MAX_EVENT_BYTES = 8 * 1024 * 1024


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

    def __init__(self, max_event_bytes: int = MAX_EVENT_BYTES) -> None:
        self.max_event_bytes = max_event_bytes
        self._buffer = bytearray()
        self._scanned = 0  # bytes of `_buffer` known to hold no line break
        self._event: Optional[str] = None
        self._lines: list[str] = []
        self._size = 0  # bytes of data accumulated for the pending event

    def _too_large(self, what: str) -> InputTooLarge:
        return InputTooLarge(f"toolnexus: the server-sent event stream sent {what} longer than "
                             f"{self.max_event_bytes} bytes; refusing to buffer more")

    def feed(self, chunk: bytes) -> list[SseEvent]:
        self._buffer += chunk
        out: list[SseEvent] = []
        start = 0
        while True:
            cut = self._buffer.find(b"\n", max(start, self._scanned))
            if cut < 0:
                break
            raw = bytes(self._buffer[start:cut])
            start, self._scanned = cut + 1, 0
            self._line(raw.rstrip(b"\r").decode("utf-8", errors="replace"), out)
        if start:
            del self._buffer[:start]
        self._scanned = len(self._buffer)
        if len(self._buffer) > self.max_event_bytes:
            raise self._too_large("a line")
        return out

    def close(self) -> list[SseEvent]:
        out: list[SseEvent] = []
        if self._buffer:
            raw, self._buffer, self._scanned = bytes(self._buffer), bytearray(), 0
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
            self._size += len(value) + 1
            if self._size > self.max_event_bytes:
                raise self._too_large("one event")
            self._lines.append(value)
        elif name == "event":
            self._event = value.strip()

    def _dispatch(self, out: list[SseEvent]) -> None:
        if self._lines:
            out.append(SseEvent(self._event, self._lines))
        self._event, self._lines, self._size = None, [], 0


def json_payloads(event: SseEvent) -> Iterator[Any]:
    """The event's JSON payload(s). `[DONE]` is yielded as the string "[DONE]"; bad JSON skipped."""
    text = event.data.strip()
    if text == "[DONE]":
        yield "[DONE]"
        return
    try:
        value = json.loads(text)
    except (ValueError, RecursionError):
        pass
    else:
        yield value
        return
    if len(event.lines) < 2:
        return
    for line in event.lines:
        line = line.strip()
        if line == "[DONE]":
            yield "[DONE]"
            continue
        try:
            value = json.loads(line)
        except (ValueError, RecursionError):
            continue
        yield value
