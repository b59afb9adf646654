"""Loading configured MCP servers into a tool source, and the inventory listing.

Servers connect concurrently; results (`status`, `tools`, diagnostics) keep config order. A
failure of one server — a bad entry, a spawn error, a timeout, a refused connection — marks only
that server `failed`, and its reason (the text of the `[toolnexus] MCP server "<name>" failed:
<reason>` log line) is kept in `reasons`, so a program can show it without scraping logs. The
`cancel` event is watched during the whole load and aborts in-flight connects at once (spawned
children are killed), then `asyncio.CancelledError` is raised.
"""

from __future__ import annotations

import asyncio
from contextlib import AsyncExitStack
from dataclasses import dataclass, field
from typing import Any, Optional, Union

from .._abort import Aborted, unless_aborted
from .._diag import warn, warn_once
from ..types import JSONSchema, McpStatus, Tool, ToolContext, ToolResult, sanitize
from .config import apply_tools_filter, is_enabled, parse_mcp_config, server_spec
from .connection import ServerConnection, describe_error
from .convert import build_input_schema, call_result_to_tool_result
from ..errors import ConfigError

__all__ = ["McpInventory", "McpSource", "ToolInfo", "list_mcp_tools", "load_mcp", "load_mcp_with_context"]


@dataclass
class ToolInfo:
    name: str
    description: str
    input_schema: JSONSchema


@dataclass
class McpInventory:
    tools: dict[str, list[ToolInfo]]
    status: dict[str, McpStatus]
    reasons: dict[str, str] = field(default_factory=dict)


@dataclass
class McpSource:
    """Connected servers' tools, every configured server's status, and each failed one's reason.

    `close()` closes every connection (from any task; safe to call twice). `refresh()` re-lists
    the tools of every connected server (e.g. after `notifications/tools/list_changed`, see
    `stale`) and updates `tools` in place. A toolkit `ToolSource` of kind `"mcp"`.
    """

    tools: list[Tool]
    status: dict[str, McpStatus]
    _stack: AsyncExitStack = field(repr=False)
    _servers: list[ServerConnection] = field(default_factory=list, repr=False)
    _by_server: dict[str, list[Tool]] = field(default_factory=dict, repr=False)
    reasons: dict[str, str] = field(default_factory=dict)

    kind = "mcp"
    shadows = frozenset[str]()  # unannotated: a class attribute, not a dataclass field

    def list_tools(self) -> list[Tool]:
        return list(self.tools)

    async def close(self) -> None:
        await self._stack.aclose()

    @property
    def stale(self) -> bool:
        """True once a server announced a changed tool list that `refresh()` has not picked up."""
        return any(s.stale and not s.closed for s in self._servers)

    async def refresh(self) -> list[Tool]:
        """Re-list every connected server's tools; a server that fails keeps its previous tools."""
        live = [s for s in self._servers if not s.closed]
        results = await asyncio.gather(*(s.list_tools() for s in live), return_exceptions=True)
        by_server: dict[str, list[Tool]] = {}
        for server, result in zip(live, results):
            name = server.spec.name
            if not isinstance(result, BaseException):
                by_server[name] = _server_tools(server, result)
            elif isinstance(result, Exception):
                warn(f'[toolnexus] MCP server "{name}" refresh failed: {describe_error(result)}')
                by_server[name] = self._by_server.get(name, [])
            else:
                raise result
        self._by_server = by_server
        self.tools[:] = [t for tools in by_server.values() for t in tools]
        return self.tools


def _mcp_tool(server: ServerConnection, d: dict[str, Any]) -> Tool:
    original = str(d.get("name", ""))
    label = server.spec.name

    async def execute(args: Optional[dict[str, Any]] = None, ctx: Optional[ToolContext] = None) -> ToolResult:
        timeout = ctx.timeout if ctx is not None and ctx.timeout is not None else server.spec.call_timeout
        signal = ctx.signal if ctx is not None else None
        try:
            # Abandoning the call makes the SDK send `notifications/cancelled`.
            result = await unless_aborted(server.call(original, args or {}, timeout), signal)
        except Aborted:
            return ToolResult("MCP call cancelled", True, {"server": label})
        except Exception as exc:  # noqa: BLE001 - transport/protocol failures become error results
            return ToolResult(describe_error(exc), True, {"server": label})
        return call_result_to_tool_result(result, label)

    name = sanitize(label) + "_" + sanitize(original)
    return Tool(name, d.get("description") or "", build_input_schema(d), "mcp", execute,
                needs_approval=server.spec.needs_approval(original), origin=f"{label}/{original}")


def _server_tools(server: ServerConnection, defs: list[dict[str, Any]]) -> list[Tool]:
    kept = apply_tools_filter(server.spec.name, defs, server.spec.tools_filter)
    named = server.spec.require_approval
    if isinstance(named, dict):  # a `requireApproval` name that matches none of the server's tools: a typo
        listed = {str(d.get("name", "")) for d in defs}
        for tool in sorted(set(named) - listed):
            warn_once(f"mcp-approval:{server.spec.name}:{tool}",
                      f'[toolnexus] MCP server "{server.spec.name}" requireApproval name "{tool}" matched no tool')
    return [_mcp_tool(server, d) for d in kept]


async def _server_map(input: Union[str, dict[str, Any]]) -> dict[str, Any]:  # noqa: A002
    servers = await asyncio.to_thread(parse_mcp_config, input) if isinstance(input, str) else parse_mcp_config(input)
    if not isinstance(servers, dict):
        raise ConfigError(f"toolnexus: the MCP server map must be an object, got {type(servers).__name__}")
    return servers


async def _wait_all(tasks: list[asyncio.Future], cancel: Optional[asyncio.Event]) -> None:
    pending = set(tasks)
    if not pending:
        return
    if cancel is None:
        await asyncio.wait(pending)
        return
    watcher = asyncio.ensure_future(cancel.wait())
    try:
        while pending:
            done, pending = await asyncio.wait(pending | {watcher}, return_when=asyncio.FIRST_COMPLETED)
            if watcher in done:
                raise asyncio.CancelledError()
    finally:
        watcher.cancel()


_Slot = tuple[str, Optional[ServerConnection], Any]  # (name, connection, "disabled" | error | task)


async def _connect_all(servers: dict[str, Any], wait_for: Any, cancel: Optional[asyncio.Event]) -> list[_Slot]:
    """Start every enabled server at once; wait for all of them (or `cancel`)."""
    if cancel is not None and cancel.is_set():
        raise asyncio.CancelledError()
    slots: list[_Slot] = []
    for name, cfg in servers.items():
        if isinstance(cfg, dict) and not is_enabled(cfg):
            slots.append((name, None, "disabled"))
            continue
        try:
            conn = ServerConnection(server_spec(name, cfg), wait_for)
        except ValueError as exc:
            slots.append((name, None, exc))
            continue
        slots.append((name, conn, asyncio.ensure_future(conn.connect())))
    tasks = [s[2] for s in slots if isinstance(s[2], asyncio.Future)]
    try:
        await _wait_all(tasks, cancel)
    except BaseException:
        for task in tasks:
            task.cancel()
        await asyncio.gather(*tasks, return_exceptions=True)
        await _close_all([conn for _, conn, _ in slots if conn is not None])
        raise
    return slots


async def _close_all(servers: list[ServerConnection]) -> None:
    await asyncio.gather(*(s.close() for s in servers), return_exceptions=True)


_Settled = tuple[dict[str, McpStatus], dict[str, str], list[tuple[ServerConnection, list[dict[str, Any]]]]]


def _settle(slots: list[_Slot]) -> _Settled:
    """Statuses, failure reasons and connected servers in config order, with the pinned failure
    diagnostics (the reason logged is the reason kept)."""
    status: dict[str, McpStatus] = {}
    reasons: dict[str, str] = {}
    connected: list[tuple[ServerConnection, list[dict[str, Any]]]] = []
    for name, conn, outcome in slots:
        if outcome == "disabled":
            status[name] = "disabled"
            continue
        if isinstance(outcome, BaseException):
            error: Optional[BaseException] = outcome
        else:
            error = asyncio.CancelledError("connect cancelled") if outcome.cancelled() else outcome.exception()
        if error is not None:
            status[name] = "failed"
            reasons[name] = " ".join(describe_error(error).split())  # one line, for logs and `toolnexus tools`
            warn(f'[toolnexus] MCP server "{name}" failed: {reasons[name]}')
            continue
        status[name] = "connected"
        assert conn is not None  # a slot without a connection holds its exception, handled above
        connected.append((conn, outcome.result()))
    return status, reasons, connected


async def load_mcp_with_context(
    input: Union[str, dict[str, Any]],  # noqa: A002 - pinned name
    wait_for: Any = None,
    *,
    cancel: Optional[asyncio.Event] = None,
) -> McpSource:
    """Connect every enabled server (concurrently) and collect their tools."""
    slots = await _connect_all(await _server_map(input), wait_for, cancel)
    status, reasons, connected = _settle(slots)
    servers = [conn for conn, _ in connected]
    stack = AsyncExitStack()
    stack.push_async_callback(_close_all, servers)
    by_server = {conn.spec.name: _server_tools(conn, defs) for conn, defs in connected}
    tools = [t for group in by_server.values() for t in group]
    return McpSource(tools=tools, status=status, _stack=stack, _servers=servers, _by_server=by_server,
                     reasons=reasons)


async def load_mcp(input: Union[str, dict[str, Any]], wait_for: Any = None) -> McpSource:  # noqa: A002
    return await load_mcp_with_context(input, wait_for=wait_for)


async def list_mcp_tools(
    input: Union[str, dict[str, Any]],  # noqa: A002
    *,
    cancel: Optional[asyncio.Event] = None,
) -> McpInventory:
    """Every connected server's tools, unfiltered and under their original names; nothing stays open."""
    slots = await _connect_all(await _server_map(input), None, cancel)
    try:
        status, reasons, connected = _settle(slots)
    finally:
        await _close_all([conn for _, conn, _ in slots if conn is not None])
    tools = {
        conn.spec.name: [ToolInfo(str(d.get("name", "")), d.get("description") or "", build_input_schema(d)) for d in defs]
        for conn, defs in connected
    }
    return McpInventory(tools=tools, status=status, reasons=reasons)
