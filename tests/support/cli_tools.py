"""Python tools for the CLI tests, loaded by the installed `toolnexus` with `--tools-from cli_tools:TOOLS`.

`echo` answers, `fail` raises, `ask` suspends for input (one-field schema) and greets on the
retry, `approve` suspends for an approval. `RECORDERS`: `note` and `stamp`, not asked about by
default, each appending what it was given to the file `CLI_EFFECTS` names (so a test sees whether
its body ran).
"""

from __future__ import annotations

import json
import os
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


def _recorder(name: str) -> Any:
    async def record(args: dict[str, Any], ctx: Optional[ToolContext] = None) -> ToolResult:
        with open(os.environ.get("CLI_EFFECTS", os.devnull), "a", encoding="utf-8") as fh:
            fh.write(json.dumps({name: args.get("text")}) + "\n")
        return ToolResult(f"{name}: {args.get('text')}", False)

    return record


TEXT_SCHEMA = {"type": "object", "properties": {"text": {"type": "string"}}, "required": ["text"]}
RECORDERS = [
    Tool("note", "Write a note down", TEXT_SCHEMA, "native", _recorder("note")),
    Tool("stamp", "Stamp a document", TEXT_SCHEMA, "native", _recorder("stamp")),
]


def make_tools() -> list[Tool]:
    return list(TOOLS)
