"""The top-level ASGI app of a served toolkit: `/mcp` first, then the A2A routes, else 404.

Routes, checked in order:
1. path `/mcp` (any query): the MCP endpoint when an MCP profile is present; otherwise `404 not
   found` at once, even with A2A on — an MCP client pointed at an A2A-only server gets a clear
   answer instead of a JSON-RPC reply it cannot read.
2. A2A profile present: the A2A endpoint (the card, JSON-RPC on every other POST path).
3. Everything else: `404 not found`.
Lifespan and websocket scopes are ignored (the listener turns both off).
"""

from __future__ import annotations

from typing import Any, Optional

from ..mcp_serve._http import Receive, Send, send_text

MCP_PATH = "/mcp"


class ServeApp:
    """Dispatch one request to the MCP endpoint, the A2A endpoint, or 404."""

    def __init__(self, mcp: Optional[Any], a2a: Optional[Any]) -> None:
        self.mcp = mcp
        self.a2a = a2a

    async def __call__(self, scope: dict[str, Any], receive: Receive, send: Send) -> None:
        if scope.get("type") != "http":
            return
        if scope.get("path") == MCP_PATH:
            if self.mcp is not None:
                await self.mcp(scope, receive, send)
            else:
                await send_text(send, 404, "not found")
            return
        if self.a2a is not None:
            await self.a2a(scope, receive, send)
            return
        await send_text(send, 404, "not found")
