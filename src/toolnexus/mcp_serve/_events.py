"""`SessionEvents`: one HTTP session's recent outbound messages, so a dropped SSE stream can resume.

The streamable-HTTP transport stores every message it sends (and a "priming" event that opens
each stream) and, when a client reconnects with `Last-Event-ID`, replays what came after that id
on the same stream. One store per session: event ids are per session, and a replay can never
reach another session's messages (stream ids are request ids, which sessions share).

Bounded: the oldest events go once there are more than `max_events`, or more than `max_bytes` of
message text (the newest event is always kept, whatever its size). A client that reconnects
after its events were dropped gets nothing replayed — the same as a server without resumability.
"""

from __future__ import annotations

import itertools
from collections import OrderedDict
from typing import Optional

from mcp.server.streamable_http import EventCallback, EventId, EventMessage, EventStore, StreamId
from mcp_types import JSONRPCMessage

DEFAULT_MAX_EVENTS = 1000
DEFAULT_MAX_EVENT_BYTES = 4 * 1024 * 1024


class SessionEvents(EventStore):
    """A bounded in-memory event store for one session (see the module docstring)."""

    def __init__(self, max_events: int = DEFAULT_MAX_EVENTS, max_bytes: int = DEFAULT_MAX_EVENT_BYTES) -> None:
        self._max_events = max_events
        self._max_bytes = max_bytes
        self._ids = itertools.count(1)
        self._events: OrderedDict[str, tuple[StreamId, Optional[JSONRPCMessage], int]] = OrderedDict()
        self._bytes = 0

    @property
    def count(self) -> int:
        """How many events are kept (never `__len__`: the transport tests the store for truth)."""
        return len(self._events)

    async def store_event(self, stream_id: StreamId, message: Optional[JSONRPCMessage]) -> EventId:
        event_id = str(next(self._ids))
        size = len(message.model_dump_json(by_alias=True, exclude_unset=True)) if message is not None else 0
        self._events[event_id] = (stream_id, message, size)
        self._bytes += size
        while len(self._events) > 1 and (len(self._events) > self._max_events or self._bytes > self._max_bytes):
            _, (_, _, dropped) = self._events.popitem(last=False)
            self._bytes -= dropped
        return event_id

    async def replay_events_after(self, last_event_id: EventId, send_callback: EventCallback) -> Optional[StreamId]:
        found = self._events.get(last_event_id)
        if found is None:
            return None
        stream_id = found[0]
        later = False
        for event_id, (stream, message, _) in list(self._events.items()):
            if later and stream == stream_id and message is not None:
                await send_callback(EventMessage(message, event_id))
            later = later or event_id == last_event_id
        return stream_id
