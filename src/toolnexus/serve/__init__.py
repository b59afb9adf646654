"""Serving a toolkit over HTTP: `Toolkit.serve(addr, ...)` → `ServeHandle`.

Routes, checked in order:
1. MCP profile present and path `/mcp` (any query) → the MCP endpoint (`serve.mcp_app`).
2. Everything else → 404 `not found`.
The A2A routes (agent card, JSON-RPC `SendMessage`/`GetTask`) arrive with the A2A serve issue:
until then an A2A profile (`a2a=`, the config's `a2a` block), `client` or `on_task` is accepted
and noted with a one-time warning, and only `/mcp` is served.

MCP profile = `mcp` if not None, else the toolkit's dict-config `mcpServer` block
(`Toolkit.mcp_server_config`). A profile is present iff it is not None: `mcp={}` exposes every
tool. The exposed tools are read from `toolkit.tools()` on every request, so tools registered
after `serve()` are served too (no snapshot).
"""

from __future__ import annotations

from typing import Any, Optional

from .._diag import warn_once
from ..mcp_serve.config import MCPServeConfig, OnCall, check_config
from ..mcp_serve.http import Receive, Send, send_text
from .listener import ServeHandle, parse_addr, start_listener
from .mcp_app import McpEndpoint

__all__ = ["ServeHandle", "parse_addr", "serve_toolkit"]

MCP_PATH = "/mcp"


class _Routes:
    """The top-level ASGI app: `/mcp` first, then 404 (A2A routes come later)."""

    def __init__(self, mcp: Optional[McpEndpoint]) -> None:
        self._mcp = mcp

    async def __call__(self, scope: dict[str, Any], receive: Receive, send: Send) -> None:
        if scope.get("type") != "http":
            return
        if self._mcp is not None and scope.get("path") == MCP_PATH:
            await self._mcp(scope, receive, send)
            return
        await send_text(send, 404, "not found")


async def serve_toolkit(
    toolkit: Any,
    addr: str,
    *,
    client: Any = None,
    a2a: Optional[dict[str, Any]] = None,
    on_task: Any = None,
    mcp: Optional[MCPServeConfig] = None,
    on_call: Optional[OnCall] = None,
) -> ServeHandle:
    """Bind `addr` (`host:port`, port 0 ⇒ ephemeral) and serve `toolkit` until `stop()`."""
    profile = mcp if mcp is not None else getattr(toolkit, "mcp_server_config", None)
    check_config(profile, where="mcp" if mcp is not None else 'config "mcpServer"')
    a2a_profile = a2a if a2a is not None else getattr(toolkit, "a2a_config", None)
    if a2a_profile is not None or client is not None or on_task is not None:
        warn_once(
            "serve-a2a-missing",
            "[toolnexus] serve: A2A routes are not available in this release — serving /mcp only",
        )
    parse_addr(addr)  # a malformed addr fails before anything is built
    endpoint = McpEndpoint(toolkit.tools, dict(profile), on_call) if profile is not None else None
    hooks = [endpoint.abort_in_flight] if endpoint is not None else []
    return await start_listener(_Routes(endpoint), addr, on_stop=hooks)
