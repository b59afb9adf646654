"""`SessionHost`: stateful streamable-HTTP MCP sessions over one long-lived server.

A session opens with an `initialize` that carries no `Mcp-Session-Id`: the host mints an id, starts
the session's message loop (`mcp.server.runner.serve_loop` over an SDK
`StreamableHTTPServerTransport`) and answers with the id in `Mcp-Session-Id`. Every later request
naming the id — POSTs (answered as SSE streams, so notifications and server-to-client requests
such as elicitation and sampling ride them), `GET` (the standalone stream, or a resumed one with
`Last-Event-ID`) and `DELETE` (end the session) — goes to that session's transport. An unknown or
ended id is `404` (the client starts a new session), as the protocol says.

What the host decides, and why:
- one `SessionEvents` store per session, so a dropped stream resumes without ever replaying
  another session's messages; streams suggest a `retry` of `RETRY_MS` to reconnecting clients;
- at most `max_sessions` open at once (another opening request is `503`), and a session with no
  request in flight for `idle_timeout` seconds ends (its id then answers `404`);
- when a session ends, for whatever reason, `on_end(session_id)` is called once (the server
  forgets its log level and subscriptions);
- the revision negotiated at `initialize` decides the session's stream features (the 2025-11-25
  priming event that makes a POST stream resumable, and closing it early for SSE polling), also
  for a request whose `MCP-Protocol-Version` header names an older revision or none — the header
  is then read as the session's revision (handshake revisions compare as their dates);
- `aclose()` ends every session and its streams at once (`ServeHandle.stop()` must not wait for
  a client's open `GET` stream to time out).
Not here: which requests open a session (the `/mcp` endpoint decides), Host/Origin, auth, body cap.
"""

from __future__ import annotations

import asyncio
import uuid
from collections.abc import Callable
from typing import Any, Optional

import anyio
import mcp_types as mtypes
from anyio.abc import TaskGroup, TaskStatus
from mcp.server.lowlevel import Server
from mcp.server.runner import serve_loop
from mcp.server.streamable_http import StreamableHTTPServerTransport
from mcp_types.version import HANDSHAKE_PROTOCOL_VERSIONS

from .._diag import logger
from ._events import SessionEvents
from ._http import Receive, Send, send_json

RETRY_MS = 500
_VERSION_HEADER = b"mcp-protocol-version"


def _speaking(scope: dict[str, Any], version: Optional[str]) -> dict[str, Any]:
    """`scope` with `MCP-Protocol-Version: version` when the request names an older handshake revision
    or none: the session's negotiated revision decides its stream features (see the module docstring)."""
    if version is None:
        return scope
    headers = list(scope.get("headers") or [])
    given = next((v.decode("latin-1") for k, v in headers if k == _VERSION_HEADER), None)
    if given is not None and (given not in HANDSHAKE_PROTOCOL_VERSIONS or given >= version):
        return scope
    headers = [(k, v) for k, v in headers if k != _VERSION_HEADER] + [(_VERSION_HEADER, version.encode())]
    return {**scope, "headers": headers}


def _not_found() -> dict[str, Any]:
    return {"jsonrpc": "2.0", "id": None, "error": {"code": mtypes.INVALID_REQUEST, "message": "Session not found"}}


class SessionHost:
    """The open sessions of one `/mcp` endpoint (see the module docstring)."""

    def __init__(self, server: Server, *, on_end: Callable[[str], None], max_sessions: int,
                 idle_timeout: float) -> None:
        self._server = server
        self._on_end = on_end
        self._max = max_sessions
        self._idle = idle_timeout
        self._sessions: dict[str, StreamableHTTPServerTransport] = {}
        self._versions: dict[str, str] = {}
        self._tg: Optional[TaskGroup] = None
        self._state: Any = None
        self._runner: Optional[asyncio.Task[None]] = None
        self._ready = asyncio.Event()
        self._stopping = asyncio.Event()
        self._lock = asyncio.Lock()

    @property
    def open_sessions(self) -> int:
        return len(self._sessions)

    async def _run(self) -> None:
        try:
            async with self._server.lifespan(self._server) as state, anyio.create_task_group() as tg:
                self._state, self._tg = state, tg
                self._ready.set()
                await self._stopping.wait()
                tg.cancel_scope.cancel()
        finally:
            self._tg = None
            self._ready.set()

    async def _started(self) -> Optional[TaskGroup]:
        async with self._lock:
            if self._runner is None and not self._stopping.is_set():
                self._runner = asyncio.create_task(self._run())
        await self._ready.wait()
        return None if self._stopping.is_set() else self._tg

    async def open(self, version: str, scope: dict[str, Any], receive: Receive, send: Send) -> None:
        """Serve an opening `initialize`: a new session, speaking `version`, whose id the reply carries."""
        tg = await self._started()
        if tg is None:
            await send_json(send, 503, {"jsonrpc": "2.0", "id": None,
                                        "error": {"code": mtypes.INTERNAL_ERROR, "message": "Server is stopping"}})
            return
        if len(self._sessions) >= self._max:
            logger.warning("toolnexus: MCP serve: %d sessions are open — refusing another", len(self._sessions))
            await send_json(send, 503, {"jsonrpc": "2.0", "id": None,
                                        "error": {"code": mtypes.INTERNAL_ERROR, "message": "Too many open sessions"}})
            return
        session_id = uuid.uuid4().hex
        transport = StreamableHTTPServerTransport(mcp_session_id=session_id, is_json_response_enabled=False,
                                                  event_store=SessionEvents(), retry_interval=RETRY_MS,
                                                  idle_timeout=self._idle)
        self._sessions[session_id] = transport
        self._versions[session_id] = version

        async def run_session(*, task_status: TaskStatus[None] = anyio.TASK_STATUS_IGNORED) -> None:
            try:
                async with transport.connect() as (read_stream, write_stream):
                    task_status.started()
                    with transport.idle_scope or anyio.CancelScope():
                        await serve_loop(self._server, read_stream, write_stream, lifespan_state=self._state,
                                         session_id=session_id)
            except Exception:
                logger.warning("toolnexus: MCP serve: session %s failed", session_id, exc_info=True)
            finally:
                await self._discard(session_id, transport)

        established = False
        try:
            await tg.start(run_session)
            status: list[int] = []

            async def watched(message: Any) -> None:
                if message.get("type") == "http.response.start":
                    status.append(message["status"])
                await send(message)

            await transport.handle_request(scope, receive, watched)
            established = bool(status) and status[0] < 400
        finally:
            if not established:
                await self._discard(session_id, transport)

    async def handle(self, session_id: str, scope: dict[str, Any], receive: Receive, send: Send) -> None:
        """Serve a request (POST, GET, DELETE) that names session `session_id`."""
        transport = self._sessions.get(session_id)
        if transport is None:
            await send_json(send, 404, _not_found())
            return
        await transport.handle_request(_speaking(scope, self._versions.get(session_id)), receive, send)
        if transport.is_terminated:  # the client ended it (DELETE)
            await self._discard(session_id, transport)

    async def _discard(self, session_id: str, transport: StreamableHTTPServerTransport) -> None:
        if self._sessions.get(session_id) is transport:
            del self._sessions[session_id]
            self._versions.pop(session_id, None)
            try:
                self._on_end(session_id)
            except Exception:
                logger.debug("toolnexus: MCP serve: on_end raised", exc_info=True)
        if not transport.is_terminated:
            with anyio.CancelScope(shield=True):
                await transport.terminate()

    async def aclose(self) -> None:
        """End every session and stream now; later requests get `503` / `404`."""
        self._stopping.set()
        self._ready.set()
        for session_id, transport in list(self._sessions.items()):
            await self._discard(session_id, transport)
        if self._runner is not None:
            await asyncio.wait({self._runner})
