"""Shared pieces for the MCP-serve tests (no tests here): a recording toolkit and real clients.

Every client here is real: the official mcp 2.x `ClientSession` over its streamable-HTTP client,
the high-level `mcp.client.Client`, or raw httpx for wire-level checks.
"""

from __future__ import annotations

import asyncio
import json
from contextlib import asynccontextmanager
from typing import Any, AsyncIterator, Optional

import httpx
from mcp.client.session import ClientSession
from mcp.client.streamable_http import streamable_http_client

from toolnexus import Tool, ToolContext, ToolResult, pending
from toolnexus.toolkit import Toolkit

__all__ = [
    "ACCEPT",
    "ASK_SCHEMA",
    "ECHO_SCHEMA",
    "Recorder",
    "make_toolkit",
    "mcp_session",
    "post_rpc",
    "served",
]

ACCEPT = {"accept": "application/json, text/event-stream", "content-type": "application/json"}
ECHO_SCHEMA = {
    "type": "object",
    "properties": {"x": {"type": "string", "description": "anything"}},
    "required": ["x"],
    "additionalProperties": False,
    "x-vendor": {"kept": [1, 2]},
}
ASK_SCHEMA = {"type": "object", "properties": {"n": {"type": "string"}}, "required": ["n"]}


class Recorder:
    """What the tools saw: every ctx per tool, and events tests can await."""

    def __init__(self) -> None:
        self.contexts: dict[str, list[Optional[ToolContext]]] = {}
        self.slow_started = asyncio.Event()
        self.slow_signalled = asyncio.Event()

    def saw(self, name: str, ctx: Optional[ToolContext]) -> None:
        self.contexts.setdefault(name, []).append(ctx)


def make_toolkit(rec: Recorder, *, mcp_server_config: Optional[dict[str, Any]] = None) -> Toolkit:
    """A toolkit of native tools covering results, parts, errors, suspension and slowness."""

    async def echo(args: dict[str, Any], ctx: Optional[ToolContext] = None) -> ToolResult:
        rec.saw("echo", ctx)
        return ToolResult(f"echo:{args.get('x')}", False, metadata={"secret": "never-sent"})

    async def media(args: dict[str, Any], ctx: Optional[ToolContext] = None) -> ToolResult:
        parts = [
            {"type": "text", "text": "a text part"},
            {"type": "image", "mimeType": "image/png", "data": "iVBORw0KGgo="},
            {"type": "audio", "data": "UklGRg=="},
            {"type": "image", "url": "https://example.test/only-url.png"},
            {"type": "file", "mimeType": "application/pdf", "data": "JVBERi0=", "name": "doc.pdf"},
            {"type": "file", "url": "https://example.test/report.csv", "mimeType": "text/csv"},
        ]
        return ToolResult("with parts", False, parts=parts)

    async def fail(args: dict[str, Any], ctx: Optional[ToolContext] = None) -> ToolResult:
        raise RuntimeError("kaboom")

    async def soft_error(args: dict[str, Any], ctx: Optional[ToolContext] = None) -> ToolResult:
        return ToolResult("not found: widget", True)

    async def ask(args: dict[str, Any], ctx: Optional[ToolContext] = None) -> ToolResult:
        rec.saw("ask", ctx)
        if ctx is None or ctx.answer is None:
            return pending(kind="input", prompt="What is your name?", data={"schema": ASK_SCHEMA})
        return ToolResult(f"hello {ctx.answer.data['n']} ({args.get('greeting', 'hi')})", False)

    async def slow(args: dict[str, Any], ctx: Optional[ToolContext] = None) -> ToolResult:
        rec.saw("slow", ctx)
        rec.slow_started.set()
        assert ctx is not None and ctx.signal is not None
        await ctx.signal.wait()
        rec.slow_signalled.set()
        return ToolResult("aborted", True)

    obj = {"type": "object", "properties": {}}
    obj_str = {"type": "string"}
    tools = [
        Tool("echo", "Echo x back", ECHO_SCHEMA, "native", echo),
        Tool("media", "Returns parts", obj, "native", media),
        Tool("fail", "Always raises", obj, "custom", fail),
        Tool("soft_error", "Returns an error result", obj, "native", soft_error),
        Tool("ask", "Asks for a name", {"type": "object", "properties": {"greeting": obj_str}}, "native", ask),
        Tool("slow", "Waits for the client to go away", obj, "native", slow),
    ]
    return Toolkit(None, None, [], [], tools, mcp_server_config=mcp_server_config)


@asynccontextmanager
async def served(toolkit: Toolkit, addr: str = "127.0.0.1:0", **options: Any) -> AsyncIterator[Any]:
    handle = await toolkit.serve(addr, **options)
    try:
        yield handle
    finally:
        await handle.stop()


@asynccontextmanager
async def mcp_session(url: str, *, http_client: Any = None, **session_kwargs: Any) -> AsyncIterator[ClientSession]:
    """The official client: `ClientSession` over `streamable_http_client`, initialized."""
    async with streamable_http_client(url, http_client=http_client) as streams:
        async with ClientSession(streams[0], streams[1], **session_kwargs) as session:
            await session.initialize()
            yield session


async def post_rpc(
    http: httpx.AsyncClient, url: str, method: str, params: Optional[dict[str, Any]] = None, **headers: str
) -> httpx.Response:
    """One raw JSON-RPC POST (no initialize), with the MCP Accept header unless overridden."""
    body: dict[str, Any] = {"jsonrpc": "2.0", "id": 1, "method": method}
    if params is not None:
        body["params"] = params
    return await http.post(url, content=json.dumps(body), headers={**ACCEPT, **headers})
