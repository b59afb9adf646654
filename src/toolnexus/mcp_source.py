"""MCP servers as a tool source: configuration parsing now, connections with the MCP issue.

What is here is the part the Toolkit needs today: reading an MCP config (file or dict, with the
`mcpServers` | `servers` | `mcp` wrappers and the reserved top-level keys), the enable/remote
rules and `${ENV}` header expansion (core.md C3, mcp-skills-builtins.md §1.2).

Deliberately NOT here yet: connecting to servers. Until the MCP source lands, every enabled
server reports status `"failed"` with a diagnostic that says so, and contributes no tools; a
disabled server reports `"disabled"`. Config files accept `//` and `/* */` comments (JSONC).
"""

from __future__ import annotations

import asyncio
import json
import os
import re
from contextlib import AsyncExitStack
from dataclasses import dataclass, field
from typing import Any, Optional, Union

from ._diag import warn
from .types import Answer, JSONSchema, McpStatus, Request, Tool, new_request_id

__all__ = [
    "DEFAULT_TIMEOUT",
    "answer_to_elicit_result",
    "apply_tools_filter",
    "elicitation_to_request",
    "McpConfig",
    "McpInventory",
    "McpSource",
    "ServerConfig",
    "ToolInfo",
    "expand_env_headers",
    "is_enabled",
    "is_remote",
    "load_mcp",
    "load_mcp_with_context",
    "list_mcp_tools",
    "parse_mcp_config",
    "read_config_file",
]

DEFAULT_TIMEOUT = 30.0
MAX_LIST_PAGES = 1000
ServerConfig = dict[str, Any]
McpConfig = dict[str, ServerConfig]
_RESERVED = ("builtins", "agents", "a2a", "mcpServer")
_ENV = re.compile(r"\$\{([A-Za-z0-9_]+)\}")
_COMMENTS = re.compile(r'("(?:\\.|[^"\\])*")|//[^\n]*|/\*.*?\*/', re.S)


@dataclass
class ToolInfo:
    name: str
    description: str
    input_schema: JSONSchema


@dataclass
class McpInventory:
    tools: dict[str, list[ToolInfo]]
    status: dict[str, McpStatus]


@dataclass
class McpSource:
    tools: list[Tool]
    status: dict[str, McpStatus]
    _stack: AsyncExitStack = field(repr=False)

    async def close(self) -> None:
        await self._stack.aclose()


def read_config_file(path: str) -> dict[str, Any]:
    """Read a JSON (or JSONC) config file; errors name the file."""
    with open(path, encoding="utf-8") as fh:
        text = fh.read()
    try:
        data = json.loads(_COMMENTS.sub(lambda m: m.group(1) or "", text))
    except json.JSONDecodeError as exc:
        raise ValueError(f"toolnexus: config file {path} is not valid JSON: {exc}") from None
    if not isinstance(data, dict):
        raise ValueError(f"toolnexus: config file {path} must hold a JSON object, got {type(data).__name__}")
    return data


def parse_mcp_config(input: Union[str, dict[str, Any]]) -> McpConfig:  # noqa: A002 - pinned name
    """The server map of a config: the first of `mcpServers`/`servers`/`mcp`, else the bare map."""
    data = read_config_file(input) if isinstance(input, str) else dict(input)
    for key in ("mcpServers", "servers", "mcp"):
        if key in data:
            return data[key]
    return {k: v for k, v in data.items() if k not in _RESERVED}


def is_enabled(cfg: ServerConfig) -> bool:
    if cfg.get("disabled") is True:
        return False
    return cfg.get("enabled") is not False


def is_remote(cfg: ServerConfig) -> bool:
    kind = cfg.get("type")
    if kind == "remote":
        return True
    if kind == "local":
        return False
    return isinstance(cfg.get("url"), str)


def expand_env_headers(headers: Optional[dict[str, str]]) -> Optional[dict[str, str]]:
    """`${NAME}` in header values → the environment value (or `""`); values are never logged."""
    if headers is None:
        return None
    return {k: _ENV.sub(lambda m: os.environ.get(m.group(1), ""), v) for k, v in headers.items()}


async def load_mcp_with_context(
    input: Union[str, dict[str, Any]],  # noqa: A002
    wait_for: Any = None,
    *,
    cancel: Optional[asyncio.Event] = None,
) -> McpSource:
    """Load the configured servers (placeholder: reports enabled servers as failed, see module doc)."""
    servers = parse_mcp_config(input) if not isinstance(input, str) else await asyncio.to_thread(parse_mcp_config, input)
    status: dict[str, McpStatus] = {}
    for name, cfg in servers.items():
        if cancel is not None and cancel.is_set():
            raise asyncio.CancelledError()
        if isinstance(cfg, dict) and not is_enabled(cfg):
            status[name] = "disabled"
            continue
        status[name] = "failed"
        warn(f'[toolnexus] MCP server "{name}" failed: MCP client connections are not available in this release yet')
    return McpSource(tools=[], status=status, _stack=AsyncExitStack())


async def load_mcp(input: Union[str, dict[str, Any]], wait_for: Any = None) -> McpSource:  # noqa: A002
    return await load_mcp_with_context(input, wait_for=wait_for)


async def list_mcp_tools(input: Union[str, dict[str, Any]], *, cancel: Optional[asyncio.Event] = None) -> McpInventory:  # noqa: A002
    source = await load_mcp_with_context(input, cancel=cancel)
    return McpInventory(tools={}, status=source.status)


def apply_tools_filter(server: str, defs: list[Any], filter: Optional[dict[str, bool]]) -> list[Any]:  # noqa: A002
    """Per-server allowlist by original tool name: any `True` ⇒ only those; else drop `False` ones."""
    if not filter:
        return list(defs)
    names = {getattr(d, "name", None) for d in defs}
    for key in filter:
        if key not in names:
            warn(f'[toolnexus] server "{server}" tools filter name "{key}" matched no tool')
    if any(v is True for v in filter.values()):
        return [d for d in defs if filter.get(d.name) is True]
    return [d for d in defs if filter.get(d.name) is not False]


def elicitation_to_request(params: Any) -> Request:
    """An MCP elicitation as a suspension `Request` (url mode ⇒ authorization, else input)."""
    message = getattr(params, "message", None)
    prompt = str(message) if message is not None else ""
    rid = new_request_id("elc")
    if getattr(params, "mode", None) == "url":
        return Request(id=rid, kind="authorization", prompt=prompt, url=getattr(params, "url", None) or None)
    schema = getattr(params, "requested_schema", None) or getattr(params, "requestedSchema", None)
    if schema is not None and hasattr(schema, "model_dump"):
        schema = schema.model_dump(by_alias=True, exclude_none=True)
    return Request(id=rid, kind="input", prompt=prompt, data={"schema": schema} if schema else None)


def answer_to_elicit_result(answer: Optional[Answer]) -> Any:
    """`ok` ⇒ accept with `data`; reason `declined` ⇒ decline; anything else (or None) ⇒ cancel."""
    from mcp.types import ElicitResult

    if answer is not None and answer.ok:
        return ElicitResult(action="accept", content=answer.data or {})
    if answer is not None and answer.reason == "declined":
        return ElicitResult(action="decline")
    return ElicitResult(action="cancel")
