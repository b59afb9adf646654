"""`serve_metrics(worker, host, port)`: the worker's metrics at `GET /metrics`, Prometheus text.

A minimal HTTP/1.1 responder on asyncio streams (one request per connection, a bounded request
head, 404 for anything else): a scrape endpoint needs no more, and it adds no dependency to a
worker. Bind it to loopback or a private interface; the metrics hold no secrets but name agents.
"""

from __future__ import annotations

import asyncio
from typing import Any

_HEAD_LIMIT = 8192


async def serve_metrics(worker: Any, host: str, port: int) -> asyncio.AbstractServer:
    """Start serving; close the returned server to stop."""

    async def handle(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        try:
            head = await asyncio.wait_for(reader.readuntil(b"\r\n\r\n"), 10)
        except (TimeoutError, asyncio.IncompleteReadError, asyncio.LimitOverrunError, ConnectionError):
            writer.close()
            return
        line = head.split(b"\r\n", 1)[0].decode("latin-1").split()
        if len(line) >= 2 and line[0] == "GET" and line[1].split("?", 1)[0] == "/metrics":
            body = worker.metrics().encode()
            status, kind = "200 OK", "text/plain; version=0.0.4; charset=utf-8"
        else:
            body, status, kind = b"not found\n", "404 Not Found", "text/plain; charset=utf-8"
        writer.write(f"HTTP/1.1 {status}\r\nContent-Type: {kind}\r\nContent-Length: {len(body)}\r\n"
                     "Connection: close\r\n\r\n".encode() + body)
        try:
            await writer.drain()
        finally:
            writer.close()

    return await asyncio.start_server(handle, host, port, limit=_HEAD_LIMIT)
