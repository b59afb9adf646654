"""One stateless streamable-HTTP MCP exchange, over ASGI or in memory; the body replay both modes use.

`mcp_exchange` is the single stateless code path for both the served `/mcp` endpoint and
`serve_mcp_http_request`: a fresh SDK session manager in stateless mode (fresh transport per
request, no `Mcp-Session-Id`, `tools/list` works without `initialize`, both the handshake era and
the 2026-07-28 per-request era), torn down after the one request. It answers in one JSON body,
unless the request asks for a stream (`json_response=False`, which the endpoint chooses for a
request carrying a progress token): then the answer is an SSE stream that carries the call's
progress and log notifications before its result.

HTTP rules applied before the SDK sees the request:
- only `POST` carries MCP: `GET` (the standalone event stream) and every other method get
  `405` with `Allow: POST` at once — a stateless server has nothing to push, and answering
  immediately is what keeps a GET from holding the loop or `stop()` hostage;
- `Accept` must name both `application/json` and `text/event-stream` (wildcards count) ⇒ else 406;
- a crash of the transport before any reply ⇒ `500`, body `mcp error`.
The body arrives already read (the endpoint caps it); `replayed` hands it to the SDK and watches
the remaining ASGI `receive` for `http.disconnect`, which sets the event tools see as `ctx.signal`
(stateful sessions use it too).
Not here: Host/Origin checks, body cap, bearer auth — those belong to the listening endpoint
(`toolnexus.serve._mcp_app`), which knows what it is bound to.
"""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator, Awaitable, Callable, MutableMapping
from contextlib import asynccontextmanager
from typing import Any, Optional

from mcp.server.lowlevel import Server
from mcp.server.streamable_http import check_accept_headers
from mcp.server.streamable_http_manager import StreamableHTTPSessionManager
from starlette.requests import Request as StarletteRequest

from .._diag import logger
from .._text import strict_json
from ._server import DISCONNECT_SCOPE_KEY

Message = MutableMapping[str, Any]
Receive = Callable[[], Awaitable[Message]]
Send = Callable[[Message], Awaitable[None]]
Headers = list[tuple[bytes, bytes]]

_NO_LIMIT = 1 << 62  # the body is already bounded by the caller
_NOT_ACCEPTABLE = "Not Acceptable: Client must accept both application/json and text/event-stream"


async def _send_whole(send: Send, status: int, content_type: bytes, body: bytes, headers: Optional[Headers]) -> None:
    head = [(b"content-type", content_type), (b"content-length", str(len(body)).encode())]
    await send({"type": "http.response.start", "status": status, "headers": head + list(headers or [])})
    await send({"type": "http.response.body", "body": body})


async def send_text(send: Send, status: int, text: str, headers: Optional[Headers] = None) -> None:
    """A complete plain-text response."""
    await _send_whole(send, status, b"text/plain; charset=utf-8", text.encode(), headers)


async def send_json(send: Send, status: int, payload: Any) -> None:
    """A complete JSON response."""
    await _send_whole(send, status, b"application/json", strict_json(payload), None)


async def _watch_disconnect(receive: Receive, events: tuple[asyncio.Event, ...], answered: asyncio.Event) -> None:
    """Set `events` when the client hangs up before the reply is complete.

    ASGI servers also report `http.disconnect` once a response is finished; that is not a
    hang-up, so it is ignored.
    """
    while (await receive()).get("type") != "http.disconnect":
        pass
    if not answered.is_set():
        for event in events:
            event.set()


async def reap_task(task: "asyncio.Task[Any]") -> None:
    """Cancel and wait for `task` without swallowing a cancellation aimed at the caller."""
    task.cancel()
    await asyncio.wait({task})
    if not task.cancelled():
        task.exception()  # retrieved: a receive() failure after the reply is of no interest


@asynccontextmanager
async def replayed(scope: dict[str, Any], body: bytes, receive: Receive, send: Send,
                   disconnected: asyncio.Event) -> AsyncIterator[tuple[dict[str, Any], Receive, Send, "_Started"]]:
    """`(scope, receive, send, started)` for the SDK: `receive` gives `body` once, then waits for a hang-up.

    The scope carries `disconnected` (tools' `ctx.signal`); it is set when the client hangs up
    before the response is complete (and may be set by the caller: the server is stopping). Only a
    real hang-up ends `receive`, so a stopping server still finishes its responses properly.
    `started.started` says whether a response has begun.
    """
    scope = {**scope, DISCONNECT_SCOPE_KEY: disconnected}
    pending_body: list[Message] = [{"type": "http.request", "body": body, "more_body": False}]
    gone = asyncio.Event()

    async def replay() -> Message:
        if pending_body:
            return pending_body.pop()
        await gone.wait()
        return {"type": "http.disconnect"}

    state = _Started()
    answered = asyncio.Event()

    async def tracked_send(message: Message) -> None:
        state.started = state.started or message.get("type") == "http.response.start"
        if message.get("type") == "http.response.body" and not message.get("more_body", False):
            answered.set()  # before sending: the server may report the disconnect right after
        await send(message)

    watcher = asyncio.create_task(_watch_disconnect(receive, (disconnected, gone), answered))
    try:
        yield scope, replay, tracked_send, state
    finally:
        await reap_task(watcher)


class _Started:
    started = False


async def mcp_exchange(
    server: Server,
    scope: dict[str, Any],
    body: bytes,
    receive: Receive,
    send: Send,
    *,
    disconnected: Optional[asyncio.Event] = None,
    json_response: bool = True,
) -> None:
    """Answer one HTTP request (`body` already read) with `server`, statelessly.

    `disconnected` (made here when not given) becomes the tools' `ctx.signal`; the caller may
    also set it, e.g. when the server is stopping. `json_response=False` answers as an SSE stream.
    """
    if scope.get("method") != "POST":
        await send_text(send, 405, "method not allowed", [(b"allow", b"POST")])
        return
    has_json, has_sse = check_accept_headers(StarletteRequest(scope))
    if not (has_json and has_sse):
        error = {"code": -32600, "message": _NOT_ACCEPTABLE}
        await send_json(send, 406, {"jsonrpc": "2.0", "id": None, "error": error})
        return

    disconnected = disconnected if disconnected is not None else asyncio.Event()
    async with replayed(scope, body, receive, send, disconnected) as (scope, replay, tracked_send, state):
        try:
            manager = StreamableHTTPSessionManager(
                app=server, stateless=True, json_response=json_response, max_request_body_size=_NO_LIMIT
            )
            async with manager.run():
                await manager.handle_request(scope, replay, tracked_send)
        except Exception:
            logger.debug("toolnexus: MCP serve transport failed", exc_info=True)
            if not state.started:
                await send_text(send, 500, "mcp error")


def _latin1(value: Any) -> bytes:
    return value.encode("latin-1") if isinstance(value, str) else bytes(value)


async def serve_mcp_http_request(
    server: Server, method: str, path: str, req_headers: Headers, body: bytes
) -> tuple[int, Headers, bytes]:
    """Feed one in-memory HTTP request to `server`; returns (status, headers, body)."""
    raw_path, _, query = path.partition("?")
    scope: dict[str, Any] = {
        "type": "http",
        "asgi": {"version": "3.0", "spec_version": "2.3"},
        "http_version": "1.1",
        "method": method.upper(),
        "scheme": "http",
        "path": raw_path or "/",
        "raw_path": (raw_path or "/").encode(),
        "query_string": query.encode(),
        "root_path": "",
        "headers": [(_latin1(k).lower(), _latin1(v)) for k, v in req_headers],
        "client": ("127.0.0.1", 0),
        "server": ("127.0.0.1", 80),
    }
    status = 500
    headers: Headers = []
    chunks: list[bytes] = []

    async def send(message: Message) -> None:
        nonlocal status, headers
        if message["type"] == "http.response.start":
            status, headers = message["status"], list(message.get("headers") or [])
        elif message["type"] == "http.response.body":
            chunks.append(message.get("body", b""))

    never = asyncio.Event()

    async def receive() -> Message:  # nobody hangs up on an in-memory request
        await never.wait()
        return {"type": "http.disconnect"}

    await mcp_exchange(server, scope, body, receive, send)
    return status, headers, b"".join(chunks)
