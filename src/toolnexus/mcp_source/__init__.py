"""MCP servers as a tool source.

Reads an MCP config (file — JSON or JSONC — or dict; `mcpServers` | `servers` | `mcp` wrappers or
a bare server map), connects every enabled server with the official `mcp` SDK (2.x), and turns
each server tool into a `Tool` named `<server>_<tool>` whose `execute` calls it. Server
elicitations are bridged to the host's `wait_for` as suspension `Request`s
(`elc-<hex ms>-<n>` ids). `list_mcp_tools` is the read-only inventory (nothing stays open).

Choices beyond the pinned baseline, each deliberate:
- Servers connect concurrently; `status`/`tools`/diagnostics keep config order. One server's
  failure (bad entry, non-object entry such as `"$schema": "…"`, spawn error, timeout) never
  affects the others. A refused remote reports its cause (`could not connect to <url>:
  connection refused`), not `timed out`.
- Remote: streamable HTTP first; if anything up to `initialize` fails, legacy SSE on the same URL
  (one `timeout` budget covers both attempts and the tool listing).
- `cancel` is watched during the whole load: in-flight connects abort at once and spawned
  children are killed (their process group), then `asyncio.CancelledError` is raised.
- Local servers: `command` is a list `[exe, *args]` or, Claude-desktop style, an executable name
  with an `args` list (a string is never shell-split). The child gets the full parent
  environment plus `environment`/`env`, unless `inheritEnv` lists the variables to pass on
  (then only those, the basics HOME/LOGNAME/PATH/SHELL/TERM/USER, and `environment`).
  We run our own stdio transport so we hold the child: normal close = close stdin, 2 s grace,
  SIGTERM, SIGKILL; aborted connect = immediate SIGKILL of the group.
- Each connection lives in its own owner task, so `McpSource.close()` works from any task and
  is idempotent; it closes all servers concurrently (not one by one in reverse order), and
  `list_mcp_tools` likewise closes its sessions together at the end. A lost connection (dead child, broken stream)
  reconnects once, lazily, on the next call; a call that was in flight when the server died is not replayed.
- Calls time out after `callTimeout` (ms; default: the server `timeout`) or `ctx.timeout`
  (seconds); `ctx.signal` firing (`toolnexus._abort`) or task cancellation abandons the call
  and the SDK sends `notifications/cancelled`.
- `McpSource.refresh()` re-lists tools (for `notifications/tools/list_changed`; `stale` tells
  whether one arrived) and updates `McpSource.tools` in place.
- SDK models are read through `model_dump(by_alias=True)` so no field (parts, schemas, cursors)
  is silently lost to the 1.x → 2.x attribute renames.

- What a server declares is held to limits (_limits.py: provider-valid names, tool count, schema
  size); an offending tool is dropped and `McpSource.dropped` says why. On Linux a local server's
  whole process tree — `setsid` and double forks included — is held by a cgroup or a subreaper
  launcher (_contain.py) and stopped with it.
- Remote servers that need OAuth sign in as a suspension (`toolnexus.mcp_auth`; _source.py says
  how a run parks and resumes); resources and prompts are reachable as an API and, per server,
  as tools (_catalog.py); log and progress notifications reach the host's hooks and the call's
  trace span; sampling requests are answered by the host's model under its `SamplingPolicy`
  (_sampling.py). Host-side settings are one `McpOptions` (_options.py).

Not here: serving tools over MCP (`toolnexus.mcp_serve`).
"""

from ._catalog import McpPrompt, McpPromptResult, McpResource, McpResourceTemplate
from ._config import (
    DEFAULT_TIMEOUT,
    McpConfig,
    ServerConfig,
    apply_tools_filter,
    expand_env_headers,
    is_enabled,
    is_remote,
    parse_mcp_config,
    read_config_file,
    read_toolkit_config,
)
from ._connection import MAX_LIST_PAGES
from ._convert import answer_to_elicit_result, elicitation_to_request
from ._limits import DroppedTool, PeerLimits
from ._options import McpOptions, SamplingPolicy
from ._source import McpInventory, McpSource, ToolInfo, list_mcp_tools, load_mcp, load_mcp_with_context, mcp_source_of

__all__ = [
    "DEFAULT_TIMEOUT",
    "MAX_LIST_PAGES",
    "DroppedTool",
    "McpConfig",
    "McpInventory",
    "McpOptions",
    "McpPrompt",
    "McpPromptResult",
    "McpResource",
    "McpResourceTemplate",
    "McpSource",
    "PeerLimits",
    "SamplingPolicy",
    "ServerConfig",
    "ToolInfo",
    "answer_to_elicit_result",
    "apply_tools_filter",
    "elicitation_to_request",
    "expand_env_headers",
    "is_enabled",
    "is_remote",
    "list_mcp_tools",
    "load_mcp",
    "load_mcp_with_context",
    "mcp_source_of",
    "parse_mcp_config",
    "read_config_file",
    "read_toolkit_config",
]
