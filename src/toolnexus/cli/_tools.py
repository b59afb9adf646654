"""`toolnexus tools`: what the toolkit the flags describe holds.

stdout: one line per configured MCP server, in config order, `# mcp <server>: <status>`
(`connected`, `failed` or `disabled`; a failed one adds its reason: `failed (<reason>)`; a server
some of whose tools were dropped for breaking the limits on what a server may declare adds
`(<n> tools dropped)` and one `#   dropped <tool>: <reason>` line each), then one line per tool
in toolkit order, `<name>\\t(<source>)` — built-ins included, as they are on by default.
`--json` prints `{"mcp": {<server>: <status>}, "mcp_reasons": {<server>: <reason>},
"mcp_dropped": {<server>: [{"name", "reason"}]}, "tools": [{"name", "source", "description"}]}`
instead. No model is needed; the toolkit is closed before exiting.
"""

from __future__ import annotations

import json
from typing import Any

from ..mcp_source import DroppedTool, McpSource
from ._common import TOOLKIT_FLAGS, Console, build_toolkit
from ._flags import Flag

NAME = "tools"
SUMMARY = "list the tools (and MCP server status) the configuration gives the agent"
FLAGS = [*TOOLKIT_FLAGS, Flag("json", None, "print one JSON object instead of lines")]


def _dropped(toolkit: Any) -> dict[str, list[DroppedTool]]:
    out: dict[str, list[DroppedTool]] = {}
    for source in toolkit.sources:
        if isinstance(source, McpSource):
            out.update(source.dropped)
    return out


async def execute(opts: dict[str, Any], console: Console) -> int:
    toolkit = await build_toolkit(opts)
    try:
        status = toolkit.mcp_status()
        reasons = toolkit.mcp_reasons()
        dropped = _dropped(toolkit)
        tools = toolkit.tools()
        if opts.get("json"):
            console.out(json.dumps({
                "mcp": dict(status),
                "mcp_reasons": reasons,
                "mcp_dropped": {s: [{"name": d.name, "reason": d.reason} for d in ds] for s, ds in dropped.items()},
                "tools": [{"name": t.name, "source": t.source, "description": t.description} for t in tools],
            }))
            return 0
        for server, state in status.items():
            reason = reasons.get(server)
            if server in dropped:
                reason = (f"{reason}; " if reason else "") + f"{len(dropped[server])} tools dropped"
            console.out(f"# mcp {server}: {state} ({reason})" if reason else f"# mcp {server}: {state}")
            for item in dropped.get(server, []):
                console.out(f"#   dropped {item.name}: {item.reason}")
        for t in tools:
            console.out(f"{t.name}\t({t.source})")
        return 0
    finally:
        await toolkit.close()
