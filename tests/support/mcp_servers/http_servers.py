"""The demo MCP server over HTTP on 127.0.0.1 (free port), served by uvicorn in a thread.

`serve_streamable()` mounts the SDK's streamable-HTTP app at `/mcp` (optionally with a slow
`initialize`); `serve_sse_only()` mounts
only the legacy SSE transport (`GET /sse` + `POST /messages/`), so a streamable-HTTP `initialize`
against `/sse` fails and a client has to fall back to SSE. Both yield the base URL and stop the
server (and its thread) on exit.
"""

from __future__ import annotations

import asyncio
import socket
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

import uvicorn
from mcp.server.sse import SseServerTransport
from starlette.applications import Starlette
from starlette.responses import Response
from starlette.routing import Mount, Route

from .demo import build_server, init_options

__all__ = ["serve_app", "serve_streamable", "serve_sse_only"]


@contextmanager
def serve_app(app: Any) -> Iterator[str]:
    """Run an ASGI app on 127.0.0.1:<free port> in a thread; yields `http://127.0.0.1:<port>`."""
    sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    sock.bind(("127.0.0.1", 0))
    port = sock.getsockname()[1]
    server = uvicorn.Server(uvicorn.Config(app, log_level="critical", lifespan="on", timeout_graceful_shutdown=0.5))
    thread = threading.Thread(target=lambda: asyncio.run(server.serve(sockets=[sock])), daemon=True)
    thread.start()
    try:
        while not server.started:  # readiness flag flips once the socket is listening
            if not thread.is_alive():
                raise RuntimeError("uvicorn thread died during startup")
            thread.join(0.01)
        yield f"http://127.0.0.1:{port}"
    finally:
        server.should_exit = True
        thread.join(10)
        sock.close()


def _is_initialize(scope: Any) -> bool:
    return (scope["type"] == "http" and scope["method"] == "POST"
            and not any(k.lower() == b"mcp-session-id" for k, _ in scope["headers"]))


def _rendezvous_initialize(app: Any, parties: int) -> Any:
    """Hold each session-less POST (`initialize`) until `parties` of them have arrived."""
    arrived = 0
    everyone: asyncio.Event | None = None

    async def wrapped(scope: Any, receive: Any, send: Any) -> None:
        nonlocal arrived, everyone
        if _is_initialize(scope):
            everyone = everyone or asyncio.Event()
            arrived += 1
            if arrived >= parties:
                everyone.set()
            try:
                await asyncio.wait_for(everyone.wait(), 5.0)
            except TimeoutError:
                await Response("initialize arrived alone: connects were not concurrent", status_code=503)(
                    scope, receive, send)
                return
        await app(scope, receive, send)

    return wrapped


def _slow_initialize(app: Any, seconds: float) -> Any:
    """Delay every session-less POST (the `initialize`) by `seconds`: a slow-to-start server."""

    async def wrapped(scope: Any, receive: Any, send: Any) -> None:
        if scope["type"] == "http" and scope["method"] == "POST":
            if not any(k.lower() == b"mcp-session-id" for k, _ in scope["headers"]):
                await asyncio.sleep(seconds)  # simulated server latency, not test synchronisation
        await app(scope, receive, send)

    return wrapped


@contextmanager
def serve_streamable(initialize_delay: float = 0.0, initialize_rendezvous: int = 0) -> Iterator[str]:
    """The demo server's streamable-HTTP endpoint; yields the `/mcp` URL.

    `initialize_rendezvous=N` holds every `initialize` until N of them are in flight at once (or
    5 s pass, after which the held ones are answered with 503): only clients that connect
    concurrently get through.
    """
    app = build_server().streamable_http_app()
    if initialize_delay:
        app = _slow_initialize(app, initialize_delay)
    if initialize_rendezvous:
        app = _rendezvous_initialize(app, initialize_rendezvous)
    with serve_app(app) as base:
        yield base + "/mcp"


@contextmanager
def serve_sse_only() -> Iterator[str]:
    """The demo server behind the legacy SSE transport only; yields the `/sse` URL."""
    server = build_server()
    sse = SseServerTransport("/messages/")

    async def handle_sse(request: Any) -> Response:
        async with sse.connect_sse(request.scope, request.receive, request._send) as (read, write):
            await server.run(read, write, init_options(server))
        return Response()

    app = Starlette(
        routes=[Route("/sse", handle_sse, methods=["GET"]), Mount("/messages/", app=sse.handle_post_message)]
    )
    with serve_app(app) as base:
        yield base + "/sse"
