"""The `/mcp` endpoint: guards, then one stateless MCP exchange with a fresh server.

Order of checks: Host/Origin (421/403) → bearer token when the profile sets `auth_token` (401)
→ body cap (413, `max_body_bytes`, default 4 MiB) → the exchange itself
(`toolnexus.mcp_serve.http.mcp_exchange`: 405 for non-POST, 406 for a bad `Accept`, 500
`mcp error` if the transport crashes). A fresh `Server` is built per request over the tools the
provider gives for that request (read once; a provider that raises ⇒ 500 `mcp error`), so tools
registered after `serve()` are listed and nothing is shared between clients. The profile is
checked, and tool name/schema warnings given, once at `serve()`, not per request.
Each call's `ctx.signal` fires when its client disconnects, and for every call in flight when
the server stops (`abort_in_flight`), so cooperative tools end within the shutdown grace period.
"""

from __future__ import annotations

import asyncio
from typing import Any, Optional

from mcp.server.lowlevel import Server

from .._diag import logger
from ..mcp_serve import build_mcp_server
from ..mcp_serve.config import DEFAULT_MAX_BODY_BYTES, MCPServeConfig, OnCall
from ..mcp_serve.http import Receive, Send, mcp_exchange, send_text
from ..mcp_serve.server import ToolsLike, fresh_server
from .guard import BodyTooLarge, ClientGone, HostGuard, bearer_ok, read_body

__all__ = ["McpEndpoint"]



class McpEndpoint:
    """ASGI app for `/mcp` over a tool provider and an MCP serve profile."""

    def __init__(self, tools: ToolsLike, profile: MCPServeConfig, on_call: Optional[OnCall] = None) -> None:
        build_mcp_server(tools, profile, on_call)  # check the profile and warn now, at serve() time
        self._tools, self._profile, self._on_call = tools, profile, on_call
        self._guard = HostGuard(profile.get("allowed_hosts"), profile.get("allowed_origins"))
        self._limit: int = profile.get("max_body_bytes") or DEFAULT_MAX_BODY_BYTES
        self._token: Optional[str] = profile.get("auth_token")
        self._in_flight: set[asyncio.Event] = set()

    def _make_server(self) -> Server:
        """This request's server over this request's tools (the provider is read once, here)."""
        tools = self._tools
        return fresh_server(list(tools()) if callable(tools) else tools, self._profile, self._on_call)

    def abort_in_flight(self) -> None:
        """Fire `ctx.signal` of every call in flight (the server is stopping)."""
        for signal in list(self._in_flight):
            signal.set()

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
        try:
            server = self._make_server()
        except Exception:  # noqa: BLE001 - e.g. a tool provider that raised
            logger.debug("toolnexus: building the MCP server failed", exc_info=True)
            await send_text(send, 500, "mcp error")
            return
        signal = asyncio.Event()
        self._in_flight.add(signal)
        try:
            await mcp_exchange(server, scope, body, receive, send, disconnected=signal)
        finally:
            self._in_flight.discard(signal)
