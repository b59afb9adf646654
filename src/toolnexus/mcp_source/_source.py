"""Loading configured MCP servers into a tool source, and the inventory listing.

Servers connect concurrently; results (`status`, `tools`, diagnostics) keep config order. A
failure of one server — a bad entry, a spawn error, a timeout, a refused connection — marks only
that server `failed`, and its reason (the text of the `[toolnexus] MCP server "<name>" failed:
<reason>` log line) is kept in `reasons`, so a program can show it without scraping logs. The
`cancel` event is watched during the whole load and aborts in-flight connects at once (spawned
children are killed), then `asyncio.CancelledError` is raised.

Every server's tool list is vetted (_limits.py): a tool whose name, schema or size a provider
would refuse is dropped, and why is kept in `dropped`.

OAuth, as a suspension (see `toolnexus.mcp_auth`):
- a server that needs a person to sign in before it can be listed stays `failed` with the reason
  "authorization required …" and offers one tool, `<server>_call`: its first call returns the
  `Request(kind="auth")` (the run parks, or the client's `wait_for` answers it); its retry with the
  answer finishes the sign-in, connects, and then lists the server's tools (no `tool` given) or
  runs one (`{"tool": name, "arguments": {...}}`). From then on the source also offers the
  server's own tools (after `refresh()`), and its status is `connected`.
- a connected server whose token stops working mid-session (revoked, no refresh possible) or that
  asks for more scope (403 `insufficient_scope`): the call returns the sign-in `Request`, and the
  call's retry with the answer finishes the sign-in and runs the call again.
- with a `wait_for` given to the load, a sign-in needed at load time is asked right away instead.
"""

from __future__ import annotations

import asyncio
import dataclasses
import json
import sys
from contextlib import AsyncExitStack
from dataclasses import dataclass, field
from typing import Any, Callable, Optional, Union

from .._abort import Aborted, unless_aborted
from .._diag import warn, warn_once
from ..errors import ConfigError, ToolnexusValueError
from ..mcp_auth import AuthorizationRequired, OAuthError, OAuthOptions, TokenVault
from ..types import Answer, JSONSchema, McpStatus, Request, Tool, ToolContext, ToolResult, sanitize
from . import _catalog as catalog
from ._catalog import McpPrompt, McpPromptResult, McpResource, McpResourceTemplate
from ._config import apply_tools_filter, is_enabled, parse_mcp_config, server_spec
from ._connection import Listing, ServerConnection, Watcher, describe_error
from ._convert import build_input_schema, call_result_to_tool_result
from ._limits import DroppedTool, vet_tools
from ._options import McpOptions

_AUTH_ID = "oau-"  # the prefix of every sign-in request's id (mcp_auth mints them)


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
    dropped: dict[str, list[DroppedTool]] = field(default_factory=dict)


@dataclass
class McpSource:
    """Connected servers' tools, every configured server's status, and each failed one's reason.

    `close()` closes every connection (from any task; safe to call twice). `refresh()` re-lists
    the tools of every connected server (e.g. after `notifications/tools/list_changed`, see
    `stale`) and updates `tools` in place. `dropped` says, per server, which listed tools are not
    offered and why. `list_resources` / `read_resource` / `list_prompts` / `get_prompt` reach the
    servers' resources and prompts; `authorizations()` the sign-ins waiting for a person. A
    toolkit `ToolSource` of kind `"mcp"`.
    """

    tools: list[Tool]
    status: dict[str, McpStatus]
    _stack: AsyncExitStack = field(repr=False)
    _servers: list[ServerConnection] = field(default_factory=list, repr=False)
    _by_server: dict[str, list[Tool]] = field(default_factory=dict, repr=False)
    reasons: dict[str, str] = field(default_factory=dict)
    dropped: dict[str, list[DroppedTool]] = field(default_factory=dict)
    _signed_in: bool = field(default=False, repr=False)
    _gateways: dict[str, Tool] = field(default_factory=dict, repr=False)  # `<server>_call`, by server

    kind = "mcp"
    shadows = frozenset[str]()  # unannotated: a class attribute, not a dataclass field

    def list_tools(self) -> list[Tool]:
        return list(self.tools)

    async def close(self) -> None:
        await self._stack.aclose()

    @property
    def stale(self) -> bool:
        """True once a server announced a changed tool list (or was signed in to) that `refresh()`
        has not picked up."""
        return self._signed_in or any(s.stale and not s.closed for s in self._servers)

    async def refresh(self) -> list[Tool]:
        """Re-list every connected server's tools; a server that fails keeps its previous tools."""
        live = [s for s in self._servers if not s.closed and self.status.get(s.spec.name) == "connected"]
        results = await asyncio.gather(*(s.list_tools() for s in live), return_exceptions=True)
        for server, result in zip(live, results, strict=True):
            name = server.spec.name
            if isinstance(result, Listing):
                gateway = [self._gateways[name]] if name in self._gateways else []
                self._by_server[name] = gateway + _server_tools(self, server, result)
            elif isinstance(result, Exception):
                warn(f'[toolnexus] MCP server "{name}" refresh failed: {describe_error(result)}')
            else:
                raise result
        self._signed_in = False
        self._reassemble()
        return self.tools

    def _reassemble(self) -> None:
        order = [s.spec.name for s in self._servers]
        self.tools[:] = [t for name in order for t in self._by_server.get(name, [])]

    def _now_connected(self, server: ServerConnection, listing: Listing) -> None:
        """A server signed in to through `<server>_call`: its own tools join (the gateway stays, so a
        run that saw only the gateway can keep using it)."""
        name = server.spec.name
        if self.status.get(name) == "connected":
            return
        self.status[name] = "connected"
        self.reasons.pop(name, None)
        gateway = [self._gateways[name]] if name in self._gateways else []
        self._by_server[name] = gateway + _server_tools(self, server, listing)
        self._signed_in = True
        self._reassemble()

    # -- resources and prompts ----------------------------------------------------------------------

    def _server(self, name: str) -> ServerConnection:
        for server in self._servers:
            if server.spec.name == name and not server.closed:
                if self.status.get(name) != "connected":
                    raise ToolnexusValueError(f'toolnexus: MCP server "{name}" is {self.status.get(name)}'
                                              + (f" ({self.reasons[name]})" if name in self.reasons else ""))
                return server
        known = ", ".join(s.spec.name for s in self._servers) or "none"
        raise ToolnexusValueError(f'toolnexus: no connected MCP server "{name}" (connected: {known})')

    def _which(self, server: Optional[str], capability: str) -> list[ServerConnection]:
        if server is not None:
            return [self._server(server)]
        return [s for s in self._servers if not s.closed and self.status.get(s.spec.name) == "connected"
                and capability in s.capabilities]

    async def list_resources(self, server: Optional[str] = None) -> list[McpResource]:
        """The resources of one server, or of every connected server that has resources."""
        found: list[McpResource] = []
        for conn in self._which(server, "resources"):
            found += [catalog.resource_of(conn.spec.name, r) for r in await conn.list_of("resources")]
        return found

    async def list_resource_templates(self, server: Optional[str] = None) -> list[McpResourceTemplate]:
        found: list[McpResourceTemplate] = []
        for conn in self._which(server, "resources"):
            found += [catalog.template_of(conn.spec.name, r) for r in await conn.list_of("resourceTemplates")]
        return found

    async def read_resource(self, server: str, uri: str) -> list[dict[str, Any]]:
        """A resource's contents: `{"uri", "mimeType", "text"}` or `{"uri", "mimeType", "blob"}` (base64)."""
        result = await self._server(server).read_resource(uri)
        return [c for c in result.get("contents") or [] if isinstance(c, dict)]

    async def list_prompts(self, server: Optional[str] = None) -> list[McpPrompt]:
        found: list[McpPrompt] = []
        for conn in self._which(server, "prompts"):
            found += [catalog.prompt_of(conn.spec.name, p) for p in await conn.list_of("prompts")]
        return found

    async def get_prompt(self, server: str, name: str, arguments: Optional[dict[str, str]] = None) -> McpPromptResult:
        result = await self._server(server).get_prompt(name, arguments)
        return catalog.prompt_result(server, name, result)

    def authorizations(self) -> dict[str, Request]:
        """The sign-ins waiting for a person, by server (the `Request(kind="auth")` to show them)."""
        out: dict[str, Request] = {}
        for server in self._servers:
            request = server.authorization()
            if request is not None and not server.closed:
                out[server.spec.name] = request
        return out


def mcp_source_of(toolkit: Any) -> Optional[McpSource]:
    """The `McpSource` among a toolkit's sources (`toolkit.sources`), or None."""
    return next((s for s in toolkit.sources if isinstance(s, McpSource)), None)


# --------------------------------------------------------------------------- calls


def _current_span() -> Any:
    """The recording OpenTelemetry span of the tool call running now (`toolnexus.otel` makes it
    current), or None — and nothing is imported when OpenTelemetry is not loaded."""
    trace = sys.modules.get("opentelemetry.trace")
    if trace is None:
        return None
    span = trace.get_current_span()
    return span if span.is_recording() else None


def _span_watcher(span: Any) -> Watcher:
    def watch(kind: str, event: dict[str, Any]) -> None:
        attributes = {f"mcp.{k}": (v if isinstance(v, (str, int, float, bool)) else json.dumps(v, default=str)[:2000])
                      for k, v in event.items() if v is not None}
        span.add_event(f"mcp.{kind}", attributes)

    return watch


def _suspended(request: Request, label: str) -> ToolResult:
    """The call's result while a person must sign in: the run parks on `request` (as `pending()`)."""
    output = request.prompt + ("\n" + request.url if request.url else "")
    return ToolResult(output, True, {"pending": request, "server": label})


async def _apply_answer(server: ServerConnection, ctx: Optional[ToolContext]) -> Optional[ToolResult]:
    """On the retry after a sign-in request: finish the sign-in. An error result if that failed."""
    answer: Optional[Answer] = ctx.answer if ctx is not None else None
    if answer is None or not answer.id.startswith(_AUTH_ID) or server.oauth is None:
        return None
    try:
        await server.sign_in(answer)
    except OAuthError as exc:
        return ToolResult(f"sign-in failed: {exc}", True, {"server": server.spec.name})
    return None


def _failed_call(server: ServerConnection, exc: Exception) -> ToolResult:
    label = server.spec.name
    if isinstance(exc, AuthorizationRequired):
        return _suspended(exc.request, label)
    need = server.authorization()
    if need is not None:
        return _suspended(need, label)
    if server.oauth is not None and server.oauth.problem:
        return ToolResult(f"authorization failed: {server.oauth.problem}", True, {"server": label})
    return ToolResult(describe_error(exc), True, {"server": label})


async def _call(server: ServerConnection, original: str, args: Optional[dict[str, Any]],
                ctx: Optional[ToolContext]) -> ToolResult:
    label = server.spec.name
    answered = await _apply_answer(server, ctx)
    if answered is not None:
        return answered
    timeout = ctx.timeout if ctx is not None and ctx.timeout is not None else server.spec.call_timeout
    signal = ctx.signal if ctx is not None else None
    span = _current_span()
    watcher = _span_watcher(span) if span is not None else None
    listener = server.progress_listener(original, watcher) if watcher or server.options.hooks is not None else None
    if watcher is not None:
        server.watchers.add(watcher)
    try:
        # Abandoning the call makes the SDK send `notifications/cancelled`.
        result = await unless_aborted(server.call(original, args or {}, timeout, listener), signal)
    except Aborted:
        return ToolResult("MCP call cancelled", True, {"server": label})
    except Exception as exc:
        return _failed_call(server, exc)
    finally:
        if watcher is not None:
            server.watchers.discard(watcher)
    return call_result_to_tool_result(result, label)


def _mcp_tool(server: ServerConnection, d: dict[str, Any]) -> Tool:
    original = str(d.get("name", ""))

    async def execute(args: Optional[dict[str, Any]] = None, ctx: Optional[ToolContext] = None) -> ToolResult:
        return await _call(server, original, args, ctx)

    label = server.spec.name
    name = sanitize(label) + "_" + sanitize(original)
    return Tool(name, d.get("description") or "", build_input_schema(d), "mcp", execute,
                needs_approval=server.spec.needs_approval(original), origin=f"{label}/{original}")


def _own_tool(name: str, description: str, schema: JSONSchema,
              run: Callable[[dict[str, Any], Optional[ToolContext]], Any]) -> Tool:
    async def execute(args: Optional[dict[str, Any]] = None, ctx: Optional[ToolContext] = None) -> ToolResult:
        return await run(args or {}, ctx)

    return Tool(name, description, schema, "mcp", execute)


def _object(properties: dict[str, Any], required: Optional[list[str]] = None) -> JSONSchema:
    schema: JSONSchema = {"type": "object", "properties": properties, "additionalProperties": False}
    if required:
        schema["required"] = required
    return schema


async def _guarded(server: ServerConnection, work: Any) -> ToolResult:
    try:
        return await work
    except Exception as exc:
        return _failed_call(server, exc)


def _resource_tools(source: McpSource, server: ServerConnection) -> list[Tool]:
    label, prefix = server.spec.name, sanitize(server.spec.name)

    async def listed(args: dict[str, Any], ctx: Optional[ToolContext]) -> ToolResult:
        async def work() -> ToolResult:
            resources = [catalog.resource_of(label, r) for r in await server.list_of("resources")]
            templates = [catalog.template_of(label, r) for r in await server.list_of("resourceTemplates")]
            return ToolResult(catalog.render_resource_list(resources, templates), False, {"server": label})
        return await _guarded(server, work())

    async def read(args: dict[str, Any], ctx: Optional[ToolContext]) -> ToolResult:
        uri = args.get("uri")
        if not isinstance(uri, str) or not uri:
            return ToolResult('give the "uri" of the resource to read (see ' + prefix + "_list_resources)", True,
                              {"server": label})

        async def work() -> ToolResult:
            return catalog.render_contents(label, uri, await server.read_resource(uri))
        return await _guarded(server, work())

    return [
        _own_tool(f"{prefix}_list_resources", f'List the resources (documents, files, data) the MCP server "{label}" '
                  "offers — their URIs, names and types — and its URI templates. Read one with "
                  f"{prefix}_read_resource.",
                  _object({}), listed),
        _own_tool(f"{prefix}_read_resource", f'Read a resource of the MCP server "{label}" by its URI.',
                  _object({"uri": {"type": "string", "description": "the resource's URI"}}, ["uri"]), read),
    ]


def _prompt_tools(source: McpSource, server: ServerConnection) -> list[Tool]:
    label, prefix = server.spec.name, sanitize(server.spec.name)

    async def listed(args: dict[str, Any], ctx: Optional[ToolContext]) -> ToolResult:
        async def work() -> ToolResult:
            prompts = [catalog.prompt_of(label, p) for p in await server.list_of("prompts")]
            return ToolResult(catalog.render_prompt_list(prompts), False, {"server": label})
        return await _guarded(server, work())

    async def get(args: dict[str, Any], ctx: Optional[ToolContext]) -> ToolResult:
        name, arguments = args.get("name"), args.get("arguments") or {}
        if not isinstance(name, str) or not name or not isinstance(arguments, dict):
            return ToolResult(f'give the prompt\'s "name" (see {prefix}_list_prompts) and its "arguments" as an '
                              "object of strings", True, {"server": label})

        async def work() -> ToolResult:
            result = await server.get_prompt(name, {str(k): str(v) for k, v in arguments.items()})
            return catalog.render_prompt(catalog.prompt_result(label, name, result))
        return await _guarded(server, work())

    return [
        _own_tool(f"{prefix}_list_prompts", f'List the prompt templates the MCP server "{label}" offers, with their '
                  f"arguments (a ? marks an optional one). Get one with {prefix}_get_prompt.", _object({}), listed),
        _own_tool(f"{prefix}_get_prompt",
                  f'Get a prompt template of the MCP server "{label}", filled in with arguments.',
                  _object({"name": {"type": "string", "description": "the prompt's name"},
                           "arguments": {"type": "object", "additionalProperties": {"type": "string"},
                                         "description": "the prompt's arguments"}}, ["name"]), get),
    ]


def _server_tools(source: McpSource, server: ServerConnection, listing: Listing) -> list[Tool]:
    name = server.spec.name
    vetted = vet_tools(name, listing.tools, server.options.limits, overflow=listing.overflow)
    if vetted.dropped:
        source.dropped[name] = vetted.dropped
    else:
        source.dropped.pop(name, None)
    named = server.spec.require_approval
    if isinstance(named, dict):  # a `requireApproval` name that matches none of the server's tools: a typo
        listed = {str(d.get("name", "")) for d in vetted.kept}
        for tool in sorted(set(named) - listed):
            warn_once(f"mcp-approval:{name}:{tool}",
                      f'[toolnexus] MCP server "{name}" requireApproval name "{tool}" matched no tool')
    kept = apply_tools_filter(name, vetted.kept, server.spec.tools_filter)
    tools = [_mcp_tool(server, d) for d in kept]
    capabilities = server.capabilities
    for wanted, capability, make in ((server.spec.resource_tools, "resources", _resource_tools),
                                     (server.spec.prompt_tools, "prompts", _prompt_tools)):
        if not wanted:
            continue
        if capability not in capabilities:
            key = "resourceTools" if capability == "resources" else "promptTools"
            warn_once(f"mcp-cap:{name}:{capability}",
                      f'[toolnexus] MCP server "{name}" declares no {capability}: "{key}" offers nothing')
            continue
        tools += make(source, server)
    return tools


# --------------------------------------------------------------------------- signing in through a tool


def _gateway(source: McpSource, server: ServerConnection) -> Tool:
    """`<server>_call`: the one tool of a server that needs a sign-in before it can be listed."""
    label = server.spec.name
    meta = {"server": label}
    description = (f'Use the MCP server "{label}". It needs the user to sign in before its tools can be listed: '
                   'call this without "tool" to sign in and see its tools, then with {"tool": <name>, '
                   '"arguments": {...}} to run one of them.')
    schema = _object({"tool": {"type": "string", "description": "the server's tool to run (omit to list them)"},
                      "arguments": {"type": "object", "description": "that tool's arguments"}})

    async def run(args: dict[str, Any], ctx: Optional[ToolContext]) -> ToolResult:
        answered = await _apply_answer(server, ctx)
        if answered is not None:
            return answered
        try:
            listing = await server.list_tools()
        except Exception as exc:
            return _failed_call(server, exc)
        source._now_connected(server, listing)
        vetted = vet_tools(label, listing.tools, server.options.limits, overflow=listing.overflow)
        kept = {str(d.get("name")): d for d in apply_tools_filter(label, vetted.kept, server.spec.tools_filter)}
        wanted = args.get("tool")
        if not wanted:
            shown = [{"name": n, "description": d.get("description") or "", "arguments": build_input_schema(d)}
                     for n, d in kept.items()]
            return ToolResult(f'Signed in to "{label}". Its tools (run one with {{"tool": <name>, "arguments": '
                              "{...}}):\n" + json.dumps(shown, ensure_ascii=False), False, meta)
        original = next((n for n in kept if wanted in (n, sanitize(label) + "_" + sanitize(n))), None)
        if original is None:
            return ToolResult(f'"{label}" has no tool {json.dumps(wanted)[:100]}; its tools: {", ".join(kept)}', True,
                              meta)
        arguments = args.get("arguments") or {}
        if not isinstance(arguments, dict):
            return ToolResult('"arguments" must be an object', True, meta)
        return await _call(server, original, arguments, ToolContext(signal=ctx.signal if ctx else None,
                                                                    timeout=ctx.timeout if ctx else None))

    gateway = _own_tool(sanitize(label) + "_call", description, schema, run)
    # it runs any of the server's tools, so it waits for an approval whenever any of them would
    return dataclasses.replace(gateway, needs_approval=bool(server.spec.require_approval), origin=f"{label}/_call")


# --------------------------------------------------------------------------- loading


async def _server_map(input: Union[str, dict[str, Any]]) -> dict[str, Any]:
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


def _vault(options: McpOptions) -> TokenVault:
    auth = options.auth or OAuthOptions()
    return TokenVault(auth.store, auth.key)


async def _connect_all(servers: dict[str, Any], wait_for: Any, cancel: Optional[asyncio.Event],
                       options: McpOptions) -> list[_Slot]:
    """Start every enabled server at once; wait for all of them (or `cancel`)."""
    if cancel is not None and cancel.is_set():
        raise asyncio.CancelledError()
    vault = _vault(options)
    slots: list[_Slot] = []
    for name, cfg in servers.items():
        if isinstance(cfg, dict) and not is_enabled(cfg):
            slots.append((name, None, "disabled"))
            continue
        try:
            conn = ServerConnection(server_spec(name, cfg), wait_for, options, vault)
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


@dataclass
class _Settled:
    status: dict[str, McpStatus] = field(default_factory=dict)
    reasons: dict[str, str] = field(default_factory=dict)
    connected: list[tuple[ServerConnection, Listing]] = field(default_factory=list)
    signing_in: list[ServerConnection] = field(default_factory=list)  # waiting for a person
    idle: list[ServerConnection] = field(default_factory=list)  # failed or disabled: nothing to keep open


def _settle(slots: list[_Slot]) -> _Settled:
    """Statuses, failure reasons and connected servers in config order, with the pinned failure
    diagnostics (the reason logged is the reason kept)."""
    out = _Settled()
    for name, conn, outcome in slots:
        if outcome == "disabled":
            out.status[name] = "disabled"
            continue
        if isinstance(outcome, BaseException):
            error: Optional[BaseException] = outcome
        else:
            error = asyncio.CancelledError("connect cancelled") if outcome.cancelled() else outcome.exception()
        if error is not None:
            out.status[name] = "failed"
            if isinstance(error, AuthorizationRequired) and conn is not None:
                out.reasons[name] = (f"authorization required: a person must sign in (the tool {sanitize(name)}_call "
                                     "asks them; `McpSource.authorizations()` has the request)")
                out.signing_in.append(conn)
            else:
                out.reasons[name] = " ".join(describe_error(error).split())  # one line, for logs and `toolnexus tools`
                if conn is not None:
                    out.idle.append(conn)
            warn(f'[toolnexus] MCP server "{name}" failed: {out.reasons[name]}')
            continue
        out.status[name] = "connected"
        assert conn is not None  # a slot without a connection holds its exception, handled above
        out.connected.append((conn, outcome.result()))
    return out


async def load_mcp_with_context(
    input: Union[str, dict[str, Any]],
    wait_for: Any = None,
    *,
    cancel: Optional[asyncio.Event] = None,
    options: Optional[McpOptions] = None,
) -> McpSource:
    """Connect every enabled server (concurrently) and collect their tools. `options` are the
    host's MCP settings (`McpOptions`: OAuth token store, sampling, hooks, limits)."""
    options = options if options is not None else McpOptions()
    slots = await _connect_all(await _server_map(input), wait_for, cancel, options)
    settled = _settle(slots)
    await _close_all(settled.idle)
    servers = [conn for _, conn, outcome in slots if conn is not None and conn not in settled.idle]
    stack = AsyncExitStack()
    stack.push_async_callback(_close_all, servers)
    source = McpSource(tools=[], status=settled.status, _stack=stack, _servers=servers, reasons=settled.reasons)
    for conn, listing in settled.connected:
        source._by_server[conn.spec.name] = _server_tools(source, conn, listing)
    for conn in settled.signing_in:
        source._gateways[conn.spec.name] = _gateway(source, conn)
        source._by_server[conn.spec.name] = [source._gateways[conn.spec.name]]
    source._reassemble()
    return source


async def load_mcp(input: Union[str, dict[str, Any]], wait_for: Any = None, *,
                   options: Optional[McpOptions] = None) -> McpSource:
    return await load_mcp_with_context(input, wait_for=wait_for, options=options)


async def list_mcp_tools(
    input: Union[str, dict[str, Any]],
    *,
    cancel: Optional[asyncio.Event] = None,
    options: Optional[McpOptions] = None,
) -> McpInventory:
    """Every connected server's tools, unfiltered and under their original names (after the
    limits: `dropped` says what was left out); nothing stays open."""
    options = options if options is not None else McpOptions()
    slots = await _connect_all(await _server_map(input), None, cancel, options)
    try:
        settled = _settle(slots)
    finally:
        await _close_all([conn for _, conn, _ in slots if conn is not None])
    tools: dict[str, list[ToolInfo]] = {}
    dropped: dict[str, list[DroppedTool]] = {}
    for conn, listing in settled.connected:
        vetted = vet_tools(conn.spec.name, listing.tools, options.limits, overflow=listing.overflow)
        tools[conn.spec.name] = [ToolInfo(str(d.get("name", "")), d.get("description") or "", build_input_schema(d))
                                 for d in vetted.kept]
        if vetted.dropped:
            dropped[conn.spec.name] = vetted.dropped
    return McpInventory(tools=tools, status=settled.status, reasons=settled.reasons, dropped=dropped)
