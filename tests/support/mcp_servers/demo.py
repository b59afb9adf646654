"""A small but complete MCP server for tests, on the SDK's low-level `Server`.

Run as a stdio server: `python -m tests.support.mcp_servers.demo [flags]` (or by path). The same
`build_server()` is served over streamable HTTP / SSE by `http_servers.py`.

Tools (original names): `echo`, `structured`, `fail`, `fail_blank`, `media`, `mixed`, `getenv`,
`sleep` (records cancellations), `stats` (cancellations, sleeps in progress), `crash` (SIGKILLs
the process), `ask` / `ask_url` (elicitation), `grow` (adds a tool and sends tools/list_changed),
`pid`, `rpc_error`, `dotted.name`.

Flags: `--ready-fifo PATH` write our pid to PATH first thing (before the slow imports);
`--delay S` sleep before serving (slow start); `--page-size N` paginate tools/list;
`--dup-cursor` always answer the same cursor; `--endless` never stop paginating.
"""

from __future__ import annotations

import os
import sys
import time


def _early_startup(argv: list[str]) -> None:
    """Announce the pid and do the slow start before importing the SDK (which takes ~0.5 s)."""
    if "--ready-fifo" in argv:
        with open(argv[argv.index("--ready-fifo") + 1], "w") as fifo:
            fifo.write(f"{os.getpid()}\n")
    if "--delay" in argv:
        time.sleep(float(argv[argv.index("--delay") + 1]))


if __name__ == "__main__":
    _early_startup(sys.argv[1:])

import argparse
import base64
import json
import logging
import signal
from typing import Any

import anyio
import mcp.types as types
from mcp.server.lowlevel import NotificationOptions, Server

PNG = base64.b64encode(b"\x89PNG\r\n\x1a\n").decode()  # 8 bytes
_OBJ = {"type": "object"}


def _tool(name: str, description: str = "", props: dict[str, Any] | None = None, **extra: Any) -> types.Tool:
    schema: dict[str, Any] = {"type": "object", "properties": props or {}, **extra}
    return types.Tool(name=name, description=description or None, input_schema=schema)


def _text(*texts: str) -> list[types.ContentBlock]:
    return [types.TextContent(type="text", text=t) for t in texts]


def build_server(opts: argparse.Namespace | None = None) -> Server:
    opts = opts or parse_args([])
    tools = [
        _tool("echo", "Echo the text back", {"text": {"type": "string"}}, required=["text"]),
        _tool("structured", "Structured result"),
        _tool("fail", "Error with text"),
        _tool("fail_blank", "Error without text"),
        _tool("media", "Non-text parts only"),
        _tool("mixed", "Text plus an embedded text resource"),
        _tool("getenv", "Read an env var", {"name": {"type": "string"}}),
        _tool("sleep", "Sleep", {"seconds": {"type": "number"}}),
        _tool("stats", "Counters"),
        _tool("crash", "Kill this server"),
        _tool("ask", "Elicit input"),
        _tool("ask_url", "Elicit via URL"),
        _tool("grow", "Add a tool"),
        _tool("pid", "Process id"),
        _tool("rpc_error", "Raise"),
        _tool("header", "Read a request header (HTTP only)", {"name": {"type": "string"}}),
        types.Tool(name="dotted.name", description=None, input_schema={"type": "object"}),
    ]
    stats = {"cancelled": 0, "grown": 0, "sleeping": 0}  # sleeping: `sleep` calls in progress

    async def list_tools(ctx: Any, params: types.PaginatedRequestParams | None) -> types.ListToolsResult:
        cursor = params.cursor if params is not None else None
        if opts.dup_cursor:
            return types.ListToolsResult(tools=tools[:1] if cursor is None else [], next_cursor="same")
        start = int(cursor) if cursor else 0
        if opts.endless:
            return types.ListToolsResult(tools=[], next_cursor=str(start + 1))
        size = opts.page_size or len(tools)
        page = tools[start : start + size]
        nxt = str(start + size) if start + size < len(tools) else None
        return types.ListToolsResult(tools=page, next_cursor=nxt)

    async def call_tool(ctx: Any, params: types.CallToolRequestParams) -> types.CallToolResult:
        args = params.arguments or {}
        name = params.name
        if name == "echo":
            return types.CallToolResult(content=_text(str(args.get("text", ""))))
        if name == "structured":
            return types.CallToolResult(content=_text("ignored"), structured_content={"result": "hi"})
        if name == "fail":
            return types.CallToolResult(content=_text("first", "  ", "second"), is_error=True)
        if name == "fail_blank":
            return types.CallToolResult(content=[], is_error=True)
        if name == "media":
            return types.CallToolResult(
                content=[
                    types.ImageContent(type="image", data=PNG, mime_type="image/png"),
                    types.AudioContent(type="audio", data="AAAA", mime_type="audio/wav"),
                    types.ResourceLink(type="resource_link", uri="https://example.com/a.txt", name="a.txt"),
                    types.EmbeddedResource(
                        type="resource",
                        resource=types.BlobResourceContents(uri="file:///b.bin", blob="AAA=", mime_type=None),
                    ),
                ]
            )
        if name == "mixed":
            return types.CallToolResult(
                content=[
                    types.EmbeddedResource(
                        type="resource",
                        resource=types.TextResourceContents(uri="file:///r.txt", text="resource text"),
                    ),
                    *_text("plain text"),
                ]
            )
        if name == "getenv":
            return types.CallToolResult(content=_text(os.environ.get(str(args.get("name")), "<unset>")))
        if name == "sleep":
            stats["sleeping"] += 1
            try:
                await anyio.sleep(float(args.get("seconds", 10)))
            except anyio.get_cancelled_exc_class():
                stats["cancelled"] += 1
                raise
            finally:
                stats["sleeping"] -= 1
            return types.CallToolResult(content=_text("slept"))
        if name == "stats":
            return types.CallToolResult(content=_text(json.dumps(stats)))
        if name == "crash":
            os.kill(os.getpid(), signal.SIGKILL)
        if name == "ask":
            res = await ctx.session.elicit_form(
                "Your name?",
                {"type": "object", "properties": {"name": {"type": "string"}}},
                related_request_id=ctx.request_id,
            )
            return types.CallToolResult(content=_text(json.dumps({"action": res.action, "content": res.content})))
        if name == "ask_url":
            res = await ctx.session.elicit_url(
                "Log in", "https://auth.example/login", "e1", related_request_id=ctx.request_id
            )
            return types.CallToolResult(content=_text(res.action))
        if name == "grow":
            stats["grown"] += 1
            tools.append(_tool(f"extra{stats['grown']}", "Grown tool"))
            await ctx.session.send_tool_list_changed()
            return types.CallToolResult(content=_text(f"extra{stats['grown']}"))
        if name == "header":
            request = getattr(ctx, "request", None)
            value = request.headers.get(str(args.get("name"))) if request is not None else None
            return types.CallToolResult(content=_text(value if value is not None else "<none>"))
        if name == "pid":
            return types.CallToolResult(content=_text(str(os.getpid())))
        if name.startswith("extra") or name == "dotted.name":
            return types.CallToolResult(content=_text(name))
        raise ValueError(f"boom from {name}")

    return Server("demo", version="1.0.0", on_list_tools=list_tools, on_call_tool=call_tool)


def init_options(server: Server) -> Any:
    return server.create_initialization_options(NotificationOptions(tools_changed=True))


def parse_args(argv: list[str]) -> argparse.Namespace:
    p = argparse.ArgumentParser()
    p.add_argument("--delay", type=float, default=0.0)
    p.add_argument("--ready-fifo", default=None)
    p.add_argument("--page-size", type=int, default=0)
    p.add_argument("--dup-cursor", action="store_true")
    p.add_argument("--endless", action="store_true")
    return p.parse_args(argv)


async def _serve_stdio(opts: argparse.Namespace) -> None:
    from mcp.server.stdio import stdio_server

    server = build_server(opts)
    async with stdio_server() as (read, write):
        await server.run(read, write, init_options(server))


def main() -> None:
    opts = parse_args(sys.argv[1:])
    logging.getLogger().addHandler(logging.NullHandler())  # handler errors are replies, not noise
    anyio.run(_serve_stdio, opts)


if __name__ == "__main__":
    main()
