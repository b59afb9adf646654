"""The `/mcp` endpoint: guards, then a stateful session or one stateless MCP exchange.

Order of checks: Host/Origin (421/403) → bearer token when the profile sets `auth_token` (401)
→ body cap (413, `max_body_bytes`, default 4 MiB) → routing:

- a request naming a session (`Mcp-Session-Id`) goes to that session (`SessionHost`): POST, the
  `GET` event stream (also resumed with `Last-Event-ID`) and `DELETE`; an unknown id is 404;
- an `initialize` (of the handshake revisions) from a client that declares capabilities
  (sampling, elicitation, roots, ...) opens a session: server-to-client requests — elicitation
  for a tool's `pending(kind="input")`, sampling — and notifications then reach it over HTTP
  as they do over stdio;
- everything else is one stateless exchange with a fresh server (`mcp_exchange`): a client that
  declares nothing gets single JSON replies and no session id, as before; a request carrying a
  progress token (or, on 2026-07-28, a log-level opt-in) is answered as an SSE stream so the
  call's progress and log notifications reach it. `GET`/`DELETE` without a session are 405.
The profile's `sessions: False` turns sessions off (every request stateless: e.g. behind a load
balancer without sticky sessions); `max_sessions` and `session_idle_timeout` bound them.

The stateless path builds a fresh `Server` per request over the tools the provider gives for that
request (read once; a provider that raises ⇒ 500 `mcp error`); sessions share one long-lived
server whose handlers read the providers per request. The profile is checked, and tool
name/schema warnings given, once at `serve()`. Each request's `ctx.signal` fires when its client
disconnects, and for every request in flight when the server stops; `aclose()` also ends every
session and stream, so `stop()` does not wait for an open event stream.
"""

from __future__ import annotations

import asyncio
import json
from collections.abc import Mapping
from typing import Any, Optional

from mcp.server.lowlevel import Server
from mcp_types import LOG_LEVEL_META_KEY
from mcp_types.version import HANDSHAKE_PROTOCOL_VERSIONS, LATEST_HANDSHAKE_VERSION

from .._diag import logger
from ..mcp_serve import build_mcp_server
from ..mcp_serve._config import (
    DEFAULT_MAX_BODY_BYTES,
    DEFAULT_MAX_SESSIONS,
    DEFAULT_SESSION_IDLE_TIMEOUT,
    MCPServeConfig,
    OnCall,
    answered_by,
)
from ..mcp_serve._http import Receive, Send, mcp_exchange, replayed, send_text
from ..mcp_serve._server import PromptsLike, ResourcesLike, ToolsLike, fresh_server, session_server
from ..mcp_serve._sessions import SessionHost
from .guard import BodyTooLarge, ClientGone, HostGuard, bearer_ok, header, read_body

SESSION_GRACE = 1.0  # seconds calls in sessions get to answer once `stop()` fired their `ctx.signal`


def _json_object(body: bytes) -> Optional[Mapping[str, Any]]:
    try:
        value = json.loads(body)
    except (ValueError, RecursionError):
        return None
    return value if isinstance(value, Mapping) else None


def opens_session(scope: dict[str, Any], body: bytes) -> Optional[str]:
    """For an `initialize` (handshake revisions) whose client declares a capability: the protocol
    version the session will speak (the one asked for if we speak it, else our latest). Else None."""
    version = header(scope, b"mcp-protocol-version")
    if (version is not None and version not in HANDSHAKE_PROTOCOL_VERSIONS) or b"initialize" not in body:
        return None
    message = _json_object(body)
    if message is None or message.get("method") != "initialize":
        return None
    params = message.get("params")
    capabilities = params.get("capabilities") if isinstance(params, Mapping) else None
    if not (isinstance(capabilities, Mapping) and any(v is not None for v in capabilities.values())):
        return None
    asked = params.get("protocolVersion") if isinstance(params, Mapping) else None
    return asked if asked in HANDSHAKE_PROTOCOL_VERSIONS else LATEST_HANDSHAKE_VERSION


def wants_stream(body: bytes) -> bool:
    """A request whose `_meta` asks for notifications: a progress token, or a log level (2026-07-28)."""
    if b"progressToken" not in body and LOG_LEVEL_META_KEY.encode() not in body:
        return False
    message = _json_object(body)
    params = message.get("params") if message is not None else None
    meta = params.get("_meta") if isinstance(params, Mapping) else None
    return isinstance(meta, Mapping) and (meta.get("progressToken") is not None or LOG_LEVEL_META_KEY in meta)


class McpEndpoint:
    """ASGI app for `/mcp` over a tool provider and an MCP serve profile."""

    def __init__(self, tools: ToolsLike, profile: MCPServeConfig, on_call: Optional[OnCall] = None, *,
                 resources: Optional[ResourcesLike] = None, prompts: Optional[PromptsLike] = None) -> None:
        # check the profile and warn now, at serve() time
        build_mcp_server(tools, profile, on_call, resources=resources, prompts=prompts)
        self._tools, self._profile, self._on_call = tools, profile, on_call
        self._resources, self._prompts = resources, prompts
        self._guard = HostGuard(profile.get("allowed_hosts"), profile.get("allowed_origins"))
        self._limit: int = profile.get("max_body_bytes") or DEFAULT_MAX_BODY_BYTES
        self._token: Optional[str] = profile.get("auth_token")
        self._answered_by = answered_by(profile)  # every caller let in holds the token
        self._sessions_on = profile.get("sessions") is not False
        self._host: Optional[SessionHost] = None
        self._in_flight: set[asyncio.Event] = set()
        self._session_calls: set[asyncio.Task[Any]] = set()

    def _make_server(self) -> Server:
        """This request's server over this request's tools (the provider is read once, here)."""
        tools = self._tools
        return fresh_server(list(tools()) if callable(tools) else tools, self._profile, self._on_call,
                            resources=self._resources, prompts=self._prompts, answered_by=self._answered_by)

    def _session_host(self) -> SessionHost:
        if self._host is None:
            server, peers = session_server(self._tools, self._profile, self._on_call, resources=self._resources,
                                           prompts=self._prompts, answered_by=self._answered_by)
            self._host = SessionHost(
                server, on_end=peers.forget,
                max_sessions=self._profile.get("max_sessions") or DEFAULT_MAX_SESSIONS,
                idle_timeout=float(self._profile.get("session_idle_timeout") or DEFAULT_SESSION_IDLE_TIMEOUT))
        return self._host

    @property
    def open_sessions(self) -> int:
        return self._host.open_sessions if self._host is not None else 0

    def abort_in_flight(self) -> None:
        """Fire `ctx.signal` of every request in flight (the server is stopping)."""
        for signal in list(self._in_flight):
            signal.set()

    async def aclose(self) -> None:
        """Stopping: fire every `ctx.signal`, give calls in sessions `SESSION_GRACE` seconds to answer,
        then end every session and its streams (open `GET` streams never finish on their own)."""
        self.abort_in_flight()
        if self._session_calls:
            await asyncio.wait(set(self._session_calls), timeout=SESSION_GRACE)
        if self._host is not None:
            await self._host.aclose()

    async def __call__(self, scope: dict[str, Any], receive: Receive, send: Send) -> None:
        refusal = self._guard.refusal(scope)
        if refusal is not None:
            await send_text(send, *refusal)
            return
        if self._token is not None and not bearer_ok(scope, self._token):
            await send_text(send, 401, "unauthorized", [(b"www-authenticate", b"Bearer")])
            return
        try:
            body = await read_body(scope, receive, self._limit)
        except BodyTooLarge:
            await send_text(send, 413, "request body too large")
            return
        except ClientGone:
            return
        signal = asyncio.Event()
        self._in_flight.add(signal)
        try:
            session_id = header(scope, b"mcp-session-id") if self._sessions_on else None
            opening = None
            if session_id is None and self._sessions_on and scope.get("method") == "POST":
                opening = opens_session(scope, body)
            if session_id is not None or opening is not None:
                await self._in_session(session_id, opening, scope, body, receive, send, signal)
            else:
                await self._stateless(scope, body, receive, send, signal)
        finally:
            self._in_flight.discard(signal)

    async def _in_session(self, session_id: Optional[str], opening: Optional[str], scope: dict[str, Any], body: bytes,
                          receive: Receive, send: Send, signal: asyncio.Event) -> None:
        host = self._session_host()
        task = asyncio.current_task() if scope.get("method") == "POST" else None
        if task is not None:
            self._session_calls.add(task)
        try:
            async with replayed(scope, body, receive, send, signal) as (scope, replay, tracked_send, state):
                try:
                    if session_id is None:
                        await host.open(opening or LATEST_HANDSHAKE_VERSION, scope, replay, tracked_send)
                    else:
                        await host.handle(session_id, scope, replay, tracked_send)
                except Exception:
                    logger.debug("toolnexus: MCP serve session transport failed", exc_info=True)
                    if not state.started:
                        await send_text(send, 500, "mcp error")
        finally:
            if task is not None:
                self._session_calls.discard(task)

    async def _stateless(self, scope: dict[str, Any], body: bytes, receive: Receive, send: Send,
                         signal: asyncio.Event) -> None:
        try:
            server = self._make_server()
        except Exception:
            logger.debug("toolnexus: building the MCP server failed", exc_info=True)
            await send_text(send, 500, "mcp error")
            return
        await mcp_exchange(server, scope, body, receive, send, disconnected=signal,
                           json_response=not wants_stream(body))
