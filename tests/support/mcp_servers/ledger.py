"""A one-tool MCP server with a visible side effect, for the approval tests: `record(text)` appends
`text` as one line to the file `--ledger PATH` and answers `recorded <text>`.

`python ledger.py --ledger PATH` serves over stdio; `--http` serves streamable HTTP on
127.0.0.1:<free port> instead, prints `http://127.0.0.1:<port>/mcp` on stdout and runs until
stdin closes (or a signal), so a test runs it as a real subprocess either way.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path
from typing import Any

import anyio
import mcp.types as types
from mcp.server.lowlevel import NotificationOptions, Server

SCHEMA = {"type": "object", "properties": {"text": {"type": "string"}}, "required": ["text"],
          "additionalProperties": False}


def build_server(ledger: Path) -> Server:
    tool = types.Tool(name="record", description="Record a line in the ledger.", input_schema=SCHEMA)

    async def list_tools(ctx: Any, params: Any) -> types.ListToolsResult:
        return types.ListToolsResult(tools=[tool])

    async def call_tool(ctx: Any, params: types.CallToolRequestParams) -> types.CallToolResult:
        text = str((params.arguments or {}).get("text", ""))
        with ledger.open("a", encoding="utf-8") as fh:
            fh.write(text + "\n")
        return types.CallToolResult(content=[types.TextContent(type="text", text=f"recorded {text}")])

    return Server("ledger", on_list_tools=list_tools, on_call_tool=call_tool)


async def _stdio(ledger: Path) -> None:
    from mcp.server.stdio import stdio_server

    server = build_server(ledger)
    async with stdio_server() as (read, write):
        await server.run(read, write, server.create_initialization_options(NotificationOptions()))


def _http(ledger: Path) -> None:
    sys.path.insert(0, str(Path(__file__).resolve().parent.parent.parent))
    from support.mcp_servers.http_servers import serve_app

    with serve_app(build_server(ledger).streamable_http_app()) as base:
        print(base + "/mcp", flush=True)
        sys.stdin.read()  # until the test closes our stdin


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--ledger", required=True)
    parser.add_argument("--http", action="store_true")
    opts = parser.parse_args()
    ledger = Path(opts.ledger)
    if opts.http:
        _http(ledger)
    else:
        anyio.run(_stdio, ledger)


if __name__ == "__main__":
    main()
