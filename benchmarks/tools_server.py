"""A small MCP server on stdio for the benchmarks: newline-delimited JSON-RPC 2.0, stdlib only.

Tools `get_weather(city)`, `add(a, b)`, `echo(text)`. Answers `initialize` (echoing the client's
protocol version), `tools/list`, `tools/call` and `ping`; ignores notifications. Every framework's
MCP client talks to the same process, so its cost is part of the floor, not of any row.
"""

from __future__ import annotations

import json
import sys
from typing import Any

TOOLS = [
    {"name": "get_weather", "description": "Current weather for a city.",
     "inputSchema": {"type": "object", "properties": {"city": {"type": "string"}}, "required": ["city"]}},
    {"name": "add", "description": "Add two numbers.",
     "inputSchema": {"type": "object", "properties": {"a": {"type": "number"}, "b": {"type": "number"}},
                     "required": ["a", "b"]}},
    {"name": "echo", "description": "Echo the text.",
     "inputSchema": {"type": "object", "properties": {"text": {"type": "string"}}, "required": ["text"]}},
]


def call(name: str, args: dict[str, Any]) -> str:
    if name == "get_weather":
        return "Sunny, 22C" if str(args.get("city")).lower() == "paris" else "Cloudy, 15C"
    if name == "add":
        total = float(args.get("a", 0)) + float(args.get("b", 0))
        return str(int(total)) if total == int(total) else str(total)
    return str(args.get("text", ""))


def answer(msg: dict[str, Any]) -> Any:
    method, params = msg.get("method"), msg.get("params") or {}
    if method == "initialize":
        return {"protocolVersion": params.get("protocolVersion", "2025-06-18"), "capabilities": {"tools": {}},
                "serverInfo": {"name": "bench-tools", "version": "1.0"}}
    if method == "tools/list":
        return {"tools": TOOLS}
    if method == "tools/call":
        return {"content": [{"type": "text", "text": call(params.get("name"), params.get("arguments") or {})}],
                "isError": False}
    if method == "ping":
        return {}
    raise KeyError(method)


def main() -> None:
    for line in sys.stdin:
        if not line.strip():
            continue
        msg = json.loads(line)
        if "id" not in msg:
            continue  # a notification
        try:
            out = {"jsonrpc": "2.0", "id": msg["id"], "result": answer(msg)}
        except KeyError:
            out = {"jsonrpc": "2.0", "id": msg["id"], "error": {"code": -32601, "message": "Method not found"}}
        sys.stdout.write(json.dumps(out) + "\n")
        sys.stdout.flush()


if __name__ == "__main__":
    main()
