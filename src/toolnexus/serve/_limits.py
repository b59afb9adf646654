"""Bounding what a client can hold on the HTTP server: header time, body time, connections.

uvicorn's keep-alive timeout only runs *between* requests, so a client that sends half a request
line — or headers, or a body, a byte at a time — holds its connection (and a file descriptor)
forever; a few thousand of them starve real callers at the fd limit. `GuardedH11Protocol` (the
h11 protocol with three bounds added) fixes that at the connection level, before any ASGI app runs:

- `header_timeout`: from a connection's first byte (or from accepting it, for one that sends
  nothing) until its request headers are complete. Over ⇒ the connection is closed.
- `body_timeout`: from the end of the headers until the whole body has arrived. Over ⇒ the
  connection is closed, and the app reading the body sees a disconnect.
- `max_connections`: connections open at once. One over ⇒ answered `503` and closed at once,
  so a flood costs a file descriptor for microseconds, not for a timeout.

Idle keep-alive connections are closed after `keep_alive` seconds (uvicorn's own timer). Once a
request is complete, producing its response takes as long as it takes (a blocking A2A
`SendMessage` waits for the run). `drain_timeout` is how long `ServeHandle.stop()` lets running
A2A tasks finish before cancelling them. Header *size* is bounded by h11 (16 KiB ⇒ 400).
"""

from __future__ import annotations

import asyncio
from dataclasses import dataclass
from typing import Any, Optional

import h11
from uvicorn.protocols.http.h11_impl import H11Protocol

from .._diag import logger
from ..mcp_serve.errors import ServeConfigError

_BUSY = (b"HTTP/1.1 503 Service Unavailable\r\ncontent-type: text/plain; charset=utf-8\r\n"
         b"content-length: 12\r\nconnection: close\r\n\r\nserver busy\n")


@dataclass(frozen=True)
class ServeLimits:
    """Time (seconds) and connection bounds of a served endpoint (see the module docstring)."""

    header_timeout: float = 10.0
    body_timeout: float = 30.0
    keep_alive: float = 5.0
    max_connections: int = 256
    drain_timeout: float = 2.0

    def __post_init__(self) -> None:
        for name in ("header_timeout", "body_timeout", "keep_alive"):
            value = getattr(self, name)
            if isinstance(value, bool) or not isinstance(value, (int, float)) or value <= 0:
                raise ServeConfigError(
                    f"toolnexus: ServeLimits.{name} must be a positive number of seconds, got {value!r}"
                )
        if (
            isinstance(self.drain_timeout, bool)
            or not isinstance(self.drain_timeout, (int, float))
            or self.drain_timeout < 0
        ):
            raise ServeConfigError(
                f"toolnexus: ServeLimits.drain_timeout must be >= 0 seconds, got {self.drain_timeout!r}"
            )
        if (
            isinstance(self.max_connections, bool)
            or not isinstance(self.max_connections, int)
            or self.max_connections < 1
        ):
            raise ServeConfigError(
                f"toolnexus: ServeLimits.max_connections must be a positive integer, got {self.max_connections!r}"
            )


class GuardedH11Protocol(H11Protocol):
    """uvicorn's h11 protocol with header/body deadlines and a connection cap."""

    limits: ServeLimits = ServeLimits()

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self._deadline: Optional[asyncio.TimerHandle] = None
        self._phase: Optional[str] = None  # "header" | "body" | None
        self._refused = False

    def connection_made(self, transport: asyncio.Transport) -> None:  # type: ignore[override]
        super().connection_made(transport)
        if len(self.connections) > self.limits.max_connections:
            self._refused = True
            logger.debug("toolnexus: serve refused a connection: %d open", len(self.connections) - 1)
            transport.write(_BUSY)
            transport.close()
            return
        self._arm("header")

    def data_received(self, data: bytes) -> None:
        if self._refused:
            return
        super().data_received(data)
        self._follow()

    def connection_lost(self, exc: Optional[Exception]) -> None:
        self._disarm()
        super().connection_lost(exc)

    def on_response_complete(self) -> None:
        super().on_response_complete()
        self._follow()

    # ------------------------------------------------------------------ deadlines

    def _follow(self) -> None:
        """Move the deadline to the phase the peer is in now."""
        if self.transport is None or self.transport.is_closing():
            self._disarm()
            return
        state = self.conn.their_state
        if state is h11.IDLE:
            # a fresh request starts with its first byte; an idle keep-alive is uvicorn's business
            if self._phase != "header" and self.conn.trailing_data[0]:
                self._arm("header")
            elif self._phase == "body":
                self._disarm()
        elif state is h11.SEND_BODY:
            if self._phase != "body":
                self._arm("body")
        else:
            self._disarm()

    def _arm(self, phase: str) -> None:
        self._disarm()
        seconds = self.limits.header_timeout if phase == "header" else self.limits.body_timeout
        self._phase = phase
        self._deadline = self.loop.call_later(seconds, self._expire, phase)

    def _disarm(self) -> None:
        if self._deadline is not None:
            self._deadline.cancel()
        self._deadline = None
        self._phase = None

    def _expire(self, phase: str) -> None:
        self._deadline = None
        self._phase = None
        if self.transport is not None and not self.transport.is_closing():
            logger.debug("toolnexus: serve closed a connection: %s not complete in time", phase)
            self.transport.close()


def guarded_protocol(limits: ServeLimits) -> type[GuardedH11Protocol]:
    """A protocol class bound to `limits` (uvicorn builds one protocol instance per connection)."""
    return type("GuardedH11Protocol", (GuardedH11Protocol,), {"limits": limits})
