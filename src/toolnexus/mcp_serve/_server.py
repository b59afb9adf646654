"""`build_mcp_server`: toolkit tools (and resources and prompts) behind an mcp 2.x low-level `Server`.

Handlers are constructor kwargs (`on_list_tools`, `on_call_tool`, ...), as mcp 2.x wants. The tool
set is read on every request from a list or a zero-argument provider (`Toolkit.tools`), so tools
registered after the server was built are listed and callable; resources and prompts likewise
(`toolnexus.mcp_serve._catalog`), served only when given. `logging/setLevel` is always served (tools
may log). What the server remembers per connection — log level, subscriptions — lives in its
`Peers` (`toolnexus.mcp_serve._peers`); it can answer one stateless HTTP exchange, serve a
long-lived stdio/in-memory connection, or many HTTP sessions (`toolnexus.mcp_serve._sessions`).

Each call's `ToolContext` carries `signal` (the HTTP client hung up, or the server is stopping),
`answer` (on the re-run after an elicitation) and `caller` (log, progress, sampling, SSE polling).
An elicitation's answer says who gave it (`answered_by`: the identity the HTTP endpoint
authenticated; None on stdio) and is checked against the profile's `answerers` before the tool
runs again: a group's request answered by someone not in the group, or by nobody known, ends the
call with `invalid answer for <prompt>: <why>` (`toolnexus.approvals._answerers.caller_problem`).
"""

from __future__ import annotations

import inspect
import time
from collections.abc import Awaitable, Callable, Mapping
from typing import Any, Optional, Union

import mcp_types as mtypes
from mcp.server.lowlevel import Server
from mcp.server.request_state import RequestStateBoundary, RequestStateSecurity
from mcp.shared.exceptions import MCPError

from .._diag import logger, warn_once
from .._text import strict_text, strict_value
from ..approvals._answerers import caller_problem
from ..types import Answer, Request, Tool, ToolContext, ToolResult, pending_of
from . import _bridge as bridge
from ._catalog import Catalog, PromptsLike as PromptsLike, ResourcesLike as ResourcesLike
from ._config import (
    DEFAULT_NAME,
    DEFAULT_VERSION,
    MCPServeConfig,
    OnCall,
    answerers_of,
    check_config,
    exposed_mcp_tools,
)
from ._content import call_tool_result, listed_tool
from ._peers import McpCaller, Peers
from .errors import ServeTypeError

ToolsLike = Union[list[Tool], Callable[[], list[Tool]]]

# ASGI scope key for the `asyncio.Event` the HTTP layer sets when the client disconnects (or the
# served endpoint stops); tools get it as `ctx.signal`.
DISCONNECT_SCOPE_KEY = "toolnexus.disconnected"

_state_security: Optional[RequestStateSecurity] = None


def _security() -> RequestStateSecurity:
    """One process-wide key seals every `requestState`: a retry may reach a fresh server."""
    global _state_security
    if _state_security is None:
        _state_security = RequestStateSecurity.ephemeral()
    return _state_security


def _disconnect_signal(ctx: Any) -> Any:
    scope = getattr(getattr(ctx, "request", None), "scope", None)
    return scope.get(DISCONNECT_SCOPE_KEY) if isinstance(scope, Mapping) else None


async def _execute(tool: Tool, args: dict[str, Any], tctx: ToolContext) -> tuple[ToolResult, float]:
    """Run the tool; a raise becomes `ToolResult(str(e), True)`. Returns (result, ms)."""
    start = time.perf_counter()
    try:
        result = await tool.execute(args, tctx)
        if not isinstance(result, ToolResult):
            result = ToolResult(f"tool {tool.name} returned {type(result).__name__}, not a ToolResult", True)
    except Exception as exc:
        result = ToolResult(str(exc), True)
    return result, (time.perf_counter() - start) * 1000.0


async def _emit(on_call: Optional[OnCall], event: dict[str, Any]) -> None:
    if on_call is None:
        return
    try:
        outcome = on_call(event)
        if inspect.isawaitable(outcome):
            await outcome
    except Exception as exc:
        logger.debug("toolnexus: MCP serve on_call raised %r (ignored)", exc)


def _warn_uncarriable(tool: Tool) -> None:
    warn_once(
        f"mcp-serve-elicit-schema:{tool.name}",
        f'[toolnexus] MCP serve: tool "{tool.name}" asked for input with a schema MCP elicitation'
        " cannot carry — sent as error text",
    )


class _Calls:
    """The `tools/list` and `tools/call` handlers over a live tool set."""

    def __init__(self, exposed: Callable[[], list[Tool]], on_call: Optional[OnCall], peers: Peers, *,
                 answered_by: Optional[str] = None, cfg: Optional[MCPServeConfig] = None) -> None:
        self.exposed = exposed
        self._on_call = on_call
        self._peers = peers
        self._answered_by = answered_by
        self._answerers = answerers_of(cfg)

    async def list_tools(self, ctx: Any, params: Any) -> mtypes.ListToolsResult:
        listed = [entry for entry in map(listed_tool, self.exposed()) if entry is not None]
        return mtypes.ListToolsResult(tools=listed)

    async def call_tool(self, ctx: Any, params: mtypes.CallToolRequestParams) -> Any:
        tool = next((t for t in self.exposed() if t.name == params.name), None)
        if tool is None:
            raise MCPError(code=mtypes.INVALID_PARAMS, message=f"Unknown tool: {params.name}")
        args = dict(params.arguments or {})
        signal = _disconnect_signal(ctx)

        caller = McpCaller(ctx, self._peers)

        resumed = bridge.resumed_round(tool.name, params, self._answered_by)
        if resumed is not None:  # the caller answered an InputRequiredResult
            return await self._finish_answered(tool, args, signal, caller, *resumed)

        result, ms = await _execute(tool, args, ToolContext(signal=signal, caller=caller))
        req = pending_of(result)
        if req is not None:
            bridged = await self._ask_caller(ctx, tool, args, signal, caller, req)
            if bridged is not None:
                return bridged
        return await self._reply(tool, result, ms)

    async def _ask_caller(self, ctx: Any, tool: Tool, args: dict[str, Any], signal: Any, caller: McpCaller,
                          req: Request) -> Any:
        """Bridge a suspension to the caller when the connection allows it; None ⇒ send it as text."""
        mode = bridge.bridge_mode(ctx, req)
        if mode is None:
            return None
        if mode == "input_required":
            asked = bridge.input_required(tool.name, req, ctx.protocol_version)
            if asked is None:
                _warn_uncarriable(tool)
            return asked  # no on_call: the call is not finished yet
        try:
            answer = await bridge.ask_inline(ctx, req, self._answered_by)
        except MCPError as exc:
            logger.debug("toolnexus: MCP serve elicitation failed: %s", exc)
            return None
        if answer is None:
            _warn_uncarriable(tool)
            return None
        return await self._finish_answered(tool, args, signal, caller, req, answer)

    async def _finish_answered(
        self, tool: Tool, args: dict[str, Any], signal: Any, caller: McpCaller, req: Request, answer: Answer
    ) -> mtypes.CallToolResult:
        """The loop rule: not ok ⇒ declined (no re-run); ok ⇒ one re-run with `ctx.answer` — once the
        caller may answer (a group's request)."""
        refused = caller_problem(req, answer, self._answered_by, self._answerers, "MCP")
        if refused is not None:
            return await self._reply(tool, ToolResult(output=f"invalid answer for {req.prompt}: {refused}",
                                                      is_error=True), 0.0)
        if not answer.ok:
            return call_tool_result(bridge.declined_result(req, answer))
        result, ms = await _execute(tool, args, ToolContext(signal=signal, answer=answer, request=req, caller=caller))
        if pending_of(result) is not None:
            result = bridge.unresolved_result(req)
        return await self._reply(tool, result, ms)

    async def _reply(self, tool: Tool, result: ToolResult, ms: float) -> mtypes.CallToolResult:
        event = {"name": tool.name, "source": tool.source, "ms": ms, "is_error": bool(result.is_error)}
        await _emit(self._on_call, event)
        return call_tool_result(result)


async def strict_replies(ctx: Any, call_next: Callable[[Any], Awaitable[Any]]) -> Any:
    """Server middleware: a reply's strings, and an error's message and data, with each lone
    surrogate made U+FFFD, as on every other wire (`toolnexus._text.strict_value`). The SDK's
    encoder refuses the character: the reply would be an HTTP 500, or lost on stdio."""
    try:
        result = await call_next(ctx)
    except MCPError as exc:
        message, data = strict_text(exc.message), strict_value(exc.data)
        if message is exc.message and data is exc.data:
            raise
        raise MCPError(exc.code, message, data) from None
    return strict_value(result) if isinstance(result, dict) else result


def _server(tools: ToolsLike, cfg: Optional[MCPServeConfig], on_call: Optional[OnCall],
            resources: Optional[ResourcesLike] = None, prompts: Optional[PromptsLike] = None, *,
            answered_by: Optional[str] = None) -> tuple[Server, _Calls, Peers]:
    """The server, its tool handlers and its per-connection state, without checking `cfg`."""
    if callable(tools):
        provider = tools
    elif isinstance(tools, list):
        provider = lambda: tools  # noqa: E731 - the caller's list, read live
    else:
        raise ServeTypeError(
            f"toolnexus: build_mcp_server tools must be a list of Tool or a provider, got {type(tools).__name__}"
        )
    name = cfg.get("name") if cfg else None
    version = cfg.get("version") if cfg else None
    peers = Peers()
    calls = _Calls(lambda: exposed_mcp_tools(list(provider()), cfg), on_call, peers, answered_by=answered_by, cfg=cfg)
    catalog = Catalog(resources, prompts, peers)
    handlers: dict[str, Any] = {}
    if catalog.serves_resources:
        handlers.update(on_list_resources=catalog.list_resources, on_list_resource_templates=catalog.list_templates,
                        on_read_resource=catalog.read_resource, on_subscribe_resource=catalog.subscribe,
                        on_unsubscribe_resource=catalog.unsubscribe)
    if catalog.serves_prompts:
        handlers.update(on_list_prompts=catalog.list_prompts, on_get_prompt=catalog.get_prompt)
    if catalog.serves_resources or catalog.serves_prompts:
        handlers["on_completion"] = catalog.complete
    server: Server = Server(
        DEFAULT_NAME if name is None else name,
        version=DEFAULT_VERSION if version is None else version,
        on_list_tools=calls.list_tools,
        on_call_tool=calls.call_tool,
        **handlers,
    )
    # Registered, not passed as `on_set_logging_level`: that keyword warns (logging is gone from the
    # 2026-07-28 revision), but clients of the earlier revisions set levels and read logs.
    server.add_request_handler("logging/setLevel", mtypes.SetLevelRequestParams, peers.set_level)
    server.middleware.append(RequestStateBoundary(_security(), default_audience=server.name))
    server.middleware.append(strict_replies)  # innermost: it sees the reply the handler shaped
    return server, calls, peers


def build_mcp_server(
    tools: ToolsLike, cfg: Optional[MCPServeConfig] = None, on_call: Optional[OnCall] = None, *,
    resources: Optional[ResourcesLike] = None, prompts: Optional[PromptsLike] = None,
) -> Server:
    """An mcp 2.x low-level `Server` exposing `tools` (a list, or a provider read per request).

    `cfg` (`MCPServeConfig`): `name`/`version` for `serverInfo` (defaults when None; `""` kept)
    and `tools`, the allow-list applied by `exposed_mcp_tools`. `on_call` gets
    `{"name", "source", "ms", "is_error"}` after each finished call (awaited if async; errors
    swallowed). Unknown tools answer a JSON-RPC `-32602` error `Unknown tool: <name>`.
    `resources` / `prompts` (`toolnexus.resources`; a list, or a provider read per request, sync
    or async) are served when given; the profile's own `resources` / `prompts` come after them.
    """
    check_config(cfg, where="build_mcp_server cfg")
    server, calls, _ = _server(tools, cfg, on_call, *_with_profile(resources, prompts, cfg))
    for tool in calls.exposed():  # surface name/schema warnings at build time, not first list
        listed_tool(tool)
    return server


def _with_profile(resources: Optional[ResourcesLike], prompts: Optional[PromptsLike],
                  cfg: Optional[MCPServeConfig]) -> tuple[Optional[ResourcesLike], Optional[PromptsLike]]:
    """`resources` / `prompts` followed by the profile's own lists (None when neither has any)."""
    extra_r = list((cfg or {}).get("resources") or [])
    extra_p = list((cfg or {}).get("prompts") or [])
    return _chain(resources, extra_r), _chain(prompts, extra_p)


def _chain(source: Any, extra: list[Any]) -> Any:
    if not extra:
        return source
    if source is None:
        return extra

    async def both() -> list[Any]:
        value = source() if callable(source) else source
        if inspect.isawaitable(value):
            value = await value
        return [*(value or []), *extra]

    return both


def fresh_server(tools: ToolsLike, cfg: Optional[MCPServeConfig], on_call: Optional[OnCall], *,
                 resources: Optional[ResourcesLike] = None, prompts: Optional[PromptsLike] = None,
                 answered_by: Optional[str] = None) -> Server:
    """Another server like a `build_mcp_server` that already succeeded with these arguments.

    For per-request servers (`toolnexus.serve`): the profile was checked and the build-time
    warnings were given once, at `serve()`, so none of that is repeated on every request.
    `answered_by`: who the endpoint let in (the `by` of its callers' answers).
    """
    return _server(tools, cfg, on_call, *_with_profile(resources, prompts, cfg), answered_by=answered_by)[0]


def session_server(tools: ToolsLike, cfg: Optional[MCPServeConfig], on_call: Optional[OnCall], *,
                   resources: Optional[ResourcesLike] = None, prompts: Optional[PromptsLike] = None,
                   answered_by: Optional[str] = None) -> tuple[Server, Peers]:
    """A long-lived server for many HTTP sessions, and its `Peers` (to forget a session that ended)."""
    server, _, peers = _server(tools, cfg, on_call, *_with_profile(resources, prompts, cfg), answered_by=answered_by)
    return server, peers
