"""Exposing toolkit tools as an MCP server (SPEC §7C).

`exposed_mcp_tools` (the profile filter) is complete; building and serving the MCP server
arrives with the MCP serve issue and raises a clear `NotImplementedError` until then.
"""

from __future__ import annotations

from typing import Any, Awaitable, Callable, Optional, Union

from .types import Tool

__all__ = ["MCPServeConfig", "OnCall", "build_mcp_server", "exposed_mcp_tools"]

MCPServeConfig = dict[str, Any]
OnCall = Callable[[dict[str, Any]], Union[None, Awaitable[None]]]
DEFAULT_NAME = "toolnexus"
DEFAULT_VERSION = "0.1.0"


def exposed_mcp_tools(tools: list[Tool], cfg: Optional[MCPServeConfig] = None) -> list[Tool]:
    """All tools without a `tools` list; else those named, in toolkit order (`[]` ⇒ none)."""
    if cfg is None or cfg.get("tools") is None:
        return list(tools)
    wanted = set(cfg["tools"])
    return [t for t in tools if t.name in wanted]


def build_mcp_server(tools: list[Tool], cfg: Optional[MCPServeConfig] = None, on_call: Optional[OnCall] = None) -> Any:
    raise NotImplementedError("toolnexus: serving tools over MCP is not available in this release yet")
