"""Exposing toolkit tools — and resources and prompts — as an MCP server, on the mcp 2.x SDK.

- `exposed_mcp_tools(tools, cfg)`: the profile's `tools` allow-list (None ⇒ all, `[]` ⇒ none).
- `build_mcp_server(tools, cfg, on_call, *, resources=, prompts=)`: a low-level
  `mcp.server.lowlevel.Server`; `tools` may be a list or a zero-argument provider (e.g.
  `Toolkit.tools`), read on every request; `resources` / `prompts` likewise (`toolnexus.resources`,
  `@resource` / `@prompt`), plus the profile's own.
- `serve_mcp_http_request(server, method, path, headers, body)`: one stateless streamable-HTTP
  exchange in memory → `(status, headers, body)`. `Toolkit.serve` mounts `/mcp` (see
  `toolnexus.serve._mcp_app`): stateless exchanges, and sessions (`sessions.SessionHost`) for
  clients that declare capabilities.
- `serve_mcp_stdio(tools, cfg, on_call, *, resources=, prompts=)`: the same server over
  stdin/stdout, for hosts that launch MCP servers as a command (`toolnexus serve --mcp-stdio`).

Choices of ours, and known weaknesses we fix:
- Tools are read per request, never snapshotted: a tool `register`ed after `serve()` is listed.
- `execute` gets a `ToolContext`: `signal` is an `asyncio.Event` set when the HTTP client
  disconnects or the served endpoint stops (None off HTTP); `answer` is set on the re-run after
  an elicitation; `caller` carries `ctx.log`, `ctx.progress`, `ctx.sample` to the client
  (`peers.McpCaller`).
- A `pending(kind="input")` suspension is bridged to elicitation on the caller (see
  `mcp_serve.bridge` for when that is possible); otherwise it is sent as error text.
- Unknown tools are a JSON-RPC `-32602` error `Unknown tool: <name>` (mcp 2.x handler errors
  become JSON-RPC errors). `on_call` is not called for them, nor for a round that is waiting for
  the caller's input, nor for a declined input; `ms` is the duration of the execution whose
  result is sent.
- Content: `[text(output), *parts]`; text parts ⇒ text, image/audio with data ⇒ same, file with
  data ⇒ embedded blob (`uri = url or file:///<name or part>`), file with only a url ⇒ resource
  link; url-only media and unknown part types are dropped. `metadata` is never sent.
- Listed schemas are verbatim, except that a schema without `type` gets `"type": "object"`;
  a tool whose schema has another type is not listed (warned once) — MCP cannot carry it.
- Tool names over 64 characters are warned about once (LLM providers reject them).
- `logging/setLevel` is served always; resources (with subscriptions and templates), prompts
  and completion when there are any (`catalog`); skills' files come from `skill_files`.
- Extra profile keys, read by the `/mcp` endpoint: `max_body_bytes` (default 4 MiB ⇒ 413),
  `allowed_hosts` / `allowed_origins` (DNS-rebinding guard, see `toolnexus.serve.guard`),
  `auth_token` (bearer auth ⇒ 401), `allow_unauthenticated_builtins` (see `toolnexus.serve._safety`),
  `sessions`, `max_sessions`, `session_idle_timeout`, `skill_files`. Unknown keys are warned
  about once.
Not here: list-changed notifications (tools, resources and prompts are read live instead), the
2026-07-28 `subscriptions/listen` stream, resumable streams for stateless requests.
"""

from __future__ import annotations

from ._config import (
    DEFAULT_MAX_BODY_BYTES,
    DEFAULT_NAME,
    DEFAULT_VERSION,
    MCPServeConfig,
    OnCall,
    exposed_mcp_tools,
)
from ._http import serve_mcp_http_request
from ._server import PromptsLike, ResourcesLike, ToolsLike, build_mcp_server
from ._stdio import serve_mcp_stdio

__all__ = [
    "DEFAULT_MAX_BODY_BYTES",
    "DEFAULT_NAME",
    "DEFAULT_VERSION",
    "MCPServeConfig",
    "OnCall",
    "PromptsLike",
    "ResourcesLike",
    "ToolsLike",
    "build_mcp_server",
    "exposed_mcp_tools",
    "serve_mcp_http_request",
    "serve_mcp_stdio",
]
