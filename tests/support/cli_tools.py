"""Python tools for the CLI tests, loaded by the installed `toolnexus` with `--tools-from cli_tools:TOOLS`.

`echo` answers, `fail` raises, `ask` suspends for input (one-field schema) and greets on the
retry, `approve` suspends for an approval.
"""

from __future__ import annotations

from typing import Any, Optional

from toolnexus import Tool, ToolContext, ToolResult, pending

OBJ: dict[str, Any] = {"type": "object", "properties": {}}
NAME_SCHEMA = {"type": "object", "properties": {"name": {"type": "string"}}, "required": ["name"]}


async def _echo(args: dict[str, Any], ctx: Optional[ToolContext] = None) -> ToolResult:
    return ToolResult(f"echo:{args.get('x')}", False)


async def _fail(args: dict[str, Any], ctx: Optional[ToolContext] = None) -> ToolResult:
    raise RuntimeError("kaboom from fail")


async def _ask(args: dict[str, Any], ctx: Optional[ToolContext] = None) -> ToolResult:
    if ctx is None or ctx.answer is None:
        return pending(kind="input", prompt="What is your name?", data={"schema": NAME_SCHEMA})
    return ToolResult(f"hello {(ctx.answer.data or {}).get('name')}", False)


async def _approve(args: dict[str, Any], ctx: Optional[ToolContext] = None) -> ToolResult:
    if ctx is None or ctx.answer is None:
        return pending(kind="approval", prompt="Deploy to production?")
    return ToolResult("deployed", False)


TOOLS = [
    Tool("echo", "Echo x back", {"type": "object", "properties": {"x": {"type": "string"}}}, "native", _echo),
    Tool("fail", "Always raises", OBJ, "native", _fail),
    Tool("ask", "Asks for a name", OBJ, "native", _ask),
    Tool("approve", "Asks for approval", OBJ, "native", _approve),
]


def make_tools() -> list[Tool]:
    return list(TOOLS)
