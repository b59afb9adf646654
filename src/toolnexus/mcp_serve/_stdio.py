"""Serving toolkit tools as an MCP server over stdio, for hosts that launch servers as a command.

Desktop hosts (Claude Desktop, VS Code, Cursor) start an MCP server as a child process and speak
newline-delimited JSON-RPC on its stdin/stdout. `serve_mcp_stdio(tools, cfg, on_call)` runs the
same server `/mcp` uses (`build_mcp_server`: the profile's `tools` filter, `on_call`, results and
parts mapped the same way) over the process's stdin/stdout until the host closes stdin.

The connection is one long session with a back channel, so a tool's `pending(kind="input")`
reaches the host as an `elicitation/create` request mid-call (or as an input-required result on
the 2026-07-28 revision), and the tool re-runs with `ctx.answer`; `ctx.log`, `ctx.progress` and
`ctx.sample` reach it too, and so do resource updates for its subscriptions. While serving, the mcp SDK
points fd 1 at stderr, so a stray `print` in a tool cannot corrupt the protocol stream.

Deliberately not here: a token check (a stdio server is reachable only by the process that
started it, which already runs as this user) and the HTTP limits.
"""

from __future__ import annotations

from typing import Any, Optional

from mcp.server.stdio import stdio_server

from ._config import MCPServeConfig, OnCall
from ._server import PromptsLike, ResourcesLike, ToolsLike, build_mcp_server


async def serve_mcp_stdio(tools: ToolsLike, cfg: Optional[MCPServeConfig] = None, on_call: Optional[OnCall] = None,
                          *, stdin: Any = None, stdout: Any = None, resources: Optional[ResourcesLike] = None,
                          prompts: Optional[PromptsLike] = None) -> None:
    """Serve `tools` (and `resources` / `prompts`, as for `build_mcp_server`) over stdio (or the given
    anyio text streams) until the input closes."""
    server = build_mcp_server(tools, cfg, on_call, resources=resources, prompts=prompts)
    async with stdio_server(stdin=stdin, stdout=stdout) as (read_stream, write_stream):
        await server.run(read_stream, write_stream, server.create_initialization_options())
