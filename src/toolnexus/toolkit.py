"""The Toolkit: tool sources assembled behind one name → `Tool` table, and routing by name.

A `ToolSource` (see `tool_source.py`) lists its tools, refreshes and closes; the toolkit knows
no source by name. `create_toolkit` only composes — each source reads its own options and config
block — in a fixed order: MCP servers, the `skill` tool, the built-ins, remote A2A agents, then
the caller's `extra_tools`. The first tool to claim a name keeps it, except that a source may
shadow a kind of source: the caller's tools shadow the built-ins (a custom `bash` replaces the
built-in). `Toolkit.from_sources` takes any sources in the order given.

Deliberate choices beyond the pinned baseline:
- `execute` never lets a tool's exception escape: it becomes an error result naming the tool, with
  `metadata["error_type"]` naming the class; the traceback is logged at DEBUG.
- `execute` accepts the arguments as a JSON string too; unknown names list close matches.
- `register()` honours `disable_tools`; unknown `disable_tools` / `disable_skills` entries and
  tool names a provider would reject (`^[a-zA-Z0-9_-]{1,64}$`) are warned about once.
- When `mcp_config` is a file path, its reserved keys (`builtins`, `agents`, `a2a`, `mcpServer`, `llm`)
  are honoured exactly as for a dict config.
- `mcp_reasons()` sits next to the pinned `mcp_status()`: `{server: reason}` for each failed server.
- `approvals=` (a `toolnexus.approvals.ApprovalPolicy`, a mapping of names / globs / `source:`
  globs, or a list of names) gates the tools it names, on any source; a tool that declares
  `needs_approval` itself (a native tool, an MCP server's `requireApproval`) is gated whatever the
  policy says. The table holds the gated tools, so everything that runs or serves them asks first;
  a policy name that matches no tool is warned about once.
- `refresh()` refreshes every source (MCP re-lists its servers' tools) and re-assembles the table.
- After `close()` the toolkit lists no tools and `execute` answers `toolkit closed`; `close()` is
  idempotent and closes every source, even when one of them fails to close.
This module does no network or process work itself: each source does its own.
"""

from __future__ import annotations

import asyncio
import difflib
import re
from collections.abc import Awaitable, Callable, Iterable
from typing import TYPE_CHECKING, Any, Optional, Union

from . import adapters
from ._diag import tool_raised, warn, warn_once
from ._shapes import strict_loads
from .approvals import ApprovalPolicy, enforce
from .errors import ConfigError
from .tool_source import SkillCatalog, StatusReporting, ToolList, ToolSource, as_mcp_source, as_skill_source
from .types import McpStatus, Tool, ToolContext, ToolResult

if TYPE_CHECKING:  # pragma: no cover
    from ._encoded import EncodedList
    from .a2a import RemoteAgent as A2AAgent
    from .skill import SkillDef, SkillSource

__all__ = ["Toolkit", "create_toolkit", "extra_source", "RESERVED_CONFIG_KEYS"]

RESERVED_CONFIG_KEYS = ("builtins", "agents", "a2a", "mcpServer", "llm")  # llm: the command's model settings
_VALID_NAME = re.compile(r"^[a-zA-Z0-9_-]{1,64}$")


def _check_relay_names(tools: list[Tool]) -> None:
    if not any(t.source == "relay" for t in tools):
        return  # nothing to check: the built-in tools' package is not loaded for it (a cold ~30 modules)
    from .builtin import BUILTIN_NAMES

    clashes = sorted({t.name for t in tools if t.source == "relay" and t.name in BUILTIN_NAMES})
    if clashes:
        raise ConfigError("toolnexus: relay tool name collides with a built-in tool: " + ", ".join(clashes))


class Toolkit:
    """An ordered, deduplicated set of tools from every source, with routing by name."""

    def __init__(
        self,
        mcp: Any,
        skill: Optional["SkillSource"],
        builtins: list[Tool],
        agents: list[Tool],
        extra_tools: list[Tool],
        a2a_config: Optional[dict[str, Any]] = None,
        mcp_server_config: Optional[dict[str, Any]] = None,
        disable_tools: Optional[list[str]] = None,
        approvals: Any = None,
    ) -> None:
        sources: list[ToolSource] = []
        if mcp is not None:
            sources.append(as_mcp_source(mcp))
        if skill is not None:
            sources.append(as_skill_source(skill))
        sources += [ToolList("builtin", builtins), ToolList("a2a", agents), extra_source(extra_tools)]
        self._setup(sources, a2a_config, mcp_server_config, disable_tools, approvals)

    @classmethod
    def from_sources(
        cls,
        sources: Iterable[ToolSource],
        *,
        disable_tools: Optional[list[str]] = None,
        a2a_config: Optional[dict[str, Any]] = None,
        mcp_server_config: Optional[dict[str, Any]] = None,
        approvals: Any = None,
    ) -> "Toolkit":
        """A toolkit over `sources`, assembled in the order given (the first to claim a name keeps it).

        The toolkit owns the sources from here: `close()` closes them. `approvals`: see the module docstring.
        """
        listed = list(sources)
        for source in listed:
            if type(source) is not ToolList and not isinstance(source, ToolSource):
                raise ConfigError(
                    f"toolnexus: {type(source).__name__} is not a tool source: it needs kind, shadows, "
                    "list_tools(), async refresh() and async close() (toolnexus.tool_source.ToolSource)"
                )
        kit = cls.__new__(cls)
        kit._setup(listed, a2a_config, mcp_server_config, disable_tools, approvals)
        return kit

    def _setup(self, sources: list[ToolSource], a2a_config: Optional[dict[str, Any]],
               mcp_server_config: Optional[dict[str, Any]], disable_tools: Optional[list[str]],
               approvals: Any = None) -> None:
        self._sources = sources
        self.approvals: Optional[ApprovalPolicy] = ApprovalPolicy.of(approvals)
        self._gated: dict[int, tuple[Tool, Tool]] = {}  # id(tool) -> (tool, its gated copy): stable identities
        # capabilities, found once (a runtime protocol check is slow, and these are read every run)
        self._catalog_source: Optional[SkillCatalog] = next(
            (s for s in sources if type(s) is not ToolList and isinstance(s, SkillCatalog)), None)
        self._status_sources: list[StatusReporting] = [
            s for s in sources if type(s) is not ToolList and isinstance(s, StatusReporting)]
        self.a2a_config = a2a_config  # serve profiles, read by `serve()`
        self.mcp_server_config = mcp_server_config
        self._disabled = set(disable_tools or [])
        self._closed = False
        self._registered: list[Tool] = []
        self._by_name: dict[str, Tool] = {}
        self._said_duplicate: set[str] = set()  # each duplicate is reported once, not at every refresh
        self._declared: dict[str, tuple[tuple[Any, ...], Any]] = {}  # style -> (tools key, declarations)
        self._assemble(warn_unknown_disabled=True)

    @property
    def sources(self) -> list[ToolSource]:
        """The sources this toolkit assembles, in priority order (a new list)."""
        return list(self._sources)

    def _assemble(self, *, warn_unknown_disabled: bool = False) -> None:
        """(Re)build the name table: each source's tools in source order, minus shadowed and
        disabled names, first name wins; then the registered tools."""
        listed = [(source, source.list_tools()) for source in self._sources]
        _check_relay_names([t for _, tools in listed for t in tools])
        shadowed: dict[str, set[str]] = {}  # kind -> names a shadowing source claims
        for source, tools in listed:
            for kind in source.shadows:
                shadowed.setdefault(kind, set()).update(t.name for t in tools)
        candidates = [t for source, tools in listed for t in tools
                      if t.name not in shadowed.get(source.kind, ())]

        self._by_name = {}
        for t in candidates:
            if t.name not in self._disabled:
                self._add(self._approved(t))
        for t in self._registered:
            self._by_name.setdefault(t.name, t)
        if warn_unknown_disabled:  # disabled names that matched nothing: likely a typo
            # (a tool that was shadowed shares its shadow's name, so candidates cover it)
            for name in sorted(self._disabled - {t.name for t in candidates}):
                warn_once(f"disable_tools:{name}", f'[toolnexus] disable_tools name "{name}" matched no tool')
            if self.approvals:
                for pattern in self.approvals.unmatched(candidates):
                    warn_once(f"approvals:{pattern}", f'[toolnexus] approvals name "{pattern}" matched no tool')
        if self._gated:  # forget the gated copies of tools no source lists any more
            live = {id(t) for t in self._by_name.values()}
            self._gated = {k: v for k, v in self._gated.items() if id(v[1]) in live}

    def _approved(self, t: Tool) -> Tool:
        """`t` gated as its own declaration or the toolkit's policy asks (the same copy every time)."""
        if not self.approvals and not t.needs_approval:
            return t
        held = self._gated.get(id(t))
        if held is not None and held[0] is t:
            return held[1]
        gated = enforce(t, self.approvals)
        self._gated[id(t)] = (t, gated)
        return gated

    def _add(self, t: Tool) -> bool:
        if t.name in self._by_name:
            if t.name not in self._said_duplicate:
                self._said_duplicate.add(t.name)
                warn(f'[toolnexus] duplicate tool name "{t.name}" — keeping first')
            return False
        if not _VALID_NAME.match(t.name):
            warn_once(
                f"name:{t.name}",
                f'[toolnexus] tool name "{t.name}" does not match ^[a-zA-Z0-9_-]{{1,64}}$ — providers may reject it',
            )
        self._by_name[t.name] = t
        return True

    # ------------------------------------------------------------------ factory

    @classmethod
    async def create(cls, *args: Any, **kwargs: Any) -> "Toolkit":
        """Same parameters as `create_toolkit`."""
        return await create_toolkit(*args, **kwargs)

    # ------------------------------------------------------------------ queries

    def tools(self) -> list[Tool]:
        """A new list, in assembly order (registered tools last)."""
        return [] if self._closed else list(self._by_name.values())

    def get(self, name: str) -> Optional[Tool]:
        return None if self._closed else self._by_name.get(name)

    def skills_prompt(self) -> str:
        """The skill catalogue for the system prompt (the first skill source's); `""` without one."""
        catalog = self._catalog_source
        return catalog.prompt() if catalog is not None else ""

    def mcp_status(self) -> dict[str, McpStatus]:
        """Each configured MCP server's status (`connected`, `failed`, `disabled`), in config order."""
        out: dict[str, McpStatus] = {}
        for source in self._status_sources:
            out.update(source.status or {})
        return out

    def mcp_reasons(self) -> dict[str, str]:
        """Why each `failed` MCP server failed, in config order (the logged reason); `{}` if none did."""
        out: dict[str, str] = {}
        for source in self._status_sources:
            out.update(source.reasons or {})
        return out

    def to_openai(self) -> list[dict[str, Any]]:
        return adapters.to_openai(self.tools())

    def to_anthropic(self) -> list[dict[str, Any]]:
        return adapters.to_anthropic(self.tools())

    def to_gemini(self) -> list[dict[str, Any]]:
        return adapters.to_gemini(self.tools())

    def declarations(self, style: str) -> "EncodedList":
        """The tools as `style` ("openai" | "anthropic") declares them: one shared list, encoded
        to JSON once per change of the toolkit, that the client sends every turn as it is.

        Treat it as read-only (`to_openai()` / `to_anthropic()` give copies to edit). A change is
        a tool added, removed or replaced, or a tool's name, description or schema object
        replaced; editing a schema dict in place is not noticed.
        """
        from ._encoded import EncodedList

        tools = self.tools()
        key = tuple((id(t), t.name, t.description, id(t.input_schema)) for t in tools)
        cached = self._declared.get(style)
        if cached is not None and cached[0] == key:
            return cached[1]
        shape = adapters.to_anthropic if style == "anthropic" else adapters.to_openai
        declared = EncodedList(shape(tools))
        self._declared[style] = (key, declared)
        return declared

    # ------------------------------------------------------------------ mutation

    def register(self, *tools: Tool) -> "Toolkit":
        """Add tools after construction: first name wins, `disable_tools` applies."""
        _check_relay_names(list(tools))
        for t in tools:
            if t.name in self._disabled:
                continue
            t = self._approved(t)
            if self._add(t):
                self._registered.append(t)
        return self

    async def refresh(self) -> "Toolkit":
        """Refresh every source in order (MCP re-lists its servers' tools, e.g. after
        `tools/list_changed`) and re-assemble.

        The assembly rules are the constructor's; tools added with `register()` stay, after the
        sources. Sources with nothing to re-read (the built-ins, the caller's tools) change nothing.
        """
        if self._closed:
            return self
        for source in self._sources:
            await source.refresh()
        self._assemble()
        return self

    # ------------------------------------------------------------------ execution

    async def execute(
        self, name: str, args: Union[dict[str, Any], str, None] = None, ctx: Optional[ToolContext] = None
    ) -> ToolResult:
        """Run tool `name`. Failures of any kind come back as error results, never exceptions."""
        if self._closed:
            return ToolResult(output=f"toolkit closed: cannot run {name}", is_error=True)
        t = self._by_name.get(name)
        if t is None:
            matches = difflib.get_close_matches(name, list(self._by_name), n=3, cutoff=0.6)
            hint = f" (did you mean: {', '.join(matches)}?)" if matches else ""
            return ToolResult(output=f"Unknown tool: {name}{hint}", is_error=True)
        if isinstance(args, str):
            try:
                args = strict_loads(args) if args.strip() else {}
            except (ValueError, RecursionError) as exc:  # NaN and Infinity are not JSON either
                return ToolResult(output=f"invalid arguments for {name}: not valid JSON ({exc})", is_error=True)
            if not isinstance(args, dict):
                return ToolResult(
                    output=f"invalid arguments for {name}: expected a JSON object, got {type(args).__name__}",
                    is_error=True,
                )
        try:
            return await t.execute(args or {}, ctx)
        except Exception as exc:
            return ToolResult(output=f"tool {name} failed: {type(exc).__name__}: {exc}", is_error=True,
                              metadata=tool_raised(name, exc))

    # ------------------------------------------------------------------ lifecycle

    async def close(self) -> None:
        """Close every source (MCP connections and processes); afterwards the toolkit is empty.

        Safe to call twice. Every source is closed even if one fails; the first failure is then raised.
        """
        if self._closed:
            return
        self._closed = True
        failure: Optional[Exception] = None
        for source in self._sources:  # in order; most have nothing to close, and cost no task
            try:
                await source.close()
            except Exception as exc:
                failure = failure or exc
        if failure is not None:
            raise failure

    async def __aenter__(self) -> "Toolkit":
        return self

    async def __aexit__(self, *exc: Any) -> None:
        await self.close()

    # ------------------------------------------------------------------ later areas

    async def add_agent(
        self,
        agent_or_card_url: Union["A2AAgent", str],
        *,
        headers: Optional[dict[str, str]] = None,
        timeout: Optional[int] = None,
        poll_every: Optional[int] = None,
    ) -> "Toolkit":
        """Resolve a remote A2A agent and register its skills as tools (errors propagate)."""
        from .a2a import RemoteAgent as A2AAgent, agent_tools

        ag = (
            agent_or_card_url
            if isinstance(agent_or_card_url, A2AAgent)
            else A2AAgent(card=agent_or_card_url, headers=headers, timeout=timeout, poll_every=poll_every)
        )
        return self.register(*(await agent_tools(ag)))

    def skill_infos(self) -> list[Any]:
        """The loaded skills (`SkillInfo`, after filters), in load order; `[]` without skills."""
        catalog = self._catalog_source
        return [] if catalog is None else list(catalog.skills.values())

    async def serve(self, addr: str, *, client: Any = None, a2a: Optional[dict[str, Any]] = None,
                    on_task: Any = None, mcp: Optional[dict[str, Any]] = None, on_call: Any = None,
                    limits: Any = None) -> Any:
        """Serve this toolkit over A2A and `/mcp` until `stop()` (see `toolnexus.serve`)."""
        from .serve import serve_toolkit

        return await serve_toolkit(self, addr, client=client, a2a=a2a, on_task=on_task, mcp=mcp, on_call=on_call,
                                   limits=limits)


def extra_source(tools: Iterable[Tool]) -> ToolList:
    """The caller's own tools as a source: they shadow built-ins of the same name."""
    return ToolList("extra", tools, shadows=("builtin",))


async def create_toolkit(
    mcp_config: Union[str, dict[str, Any], None] = None,
    skills_dir: Union[str, list[str], None] = None,
    skills: Optional[list["SkillDef"]] = None,
    skill_provider: Optional[Callable[[], Union[list["SkillDef"], Awaitable[list["SkillDef"]]]]] = None,
    skills_filter: Optional[dict[str, bool]] = None,
    skill_sample_limit: int = 0,
    extra_tools: Optional[list[Tool]] = None,
    builtins: Union[bool, dict[str, Any], None] = None,
    agents: Optional[list["A2AAgent"]] = None,
    wait_for: Any = None,
    disable_tools: Optional[list[str]] = None,
    disable_skills: Optional[list[str]] = None,
    cancel: Optional[asyncio.Event] = None,
    approvals: Any = None,
    mcp_options: Any = None,
) -> Toolkit:
    """Load every configured source and assemble a `Toolkit`.

    Composition only: each source package reads its own options and config block. MCP loads
    first (a fired `cancel` aborts it with `asyncio.CancelledError`); if a later source fails,
    the servers already connected are closed before the error propagates. `approvals` names the
    tools whose calls wait for a human's approval (`toolnexus.approvals.ApprovalPolicy`).
    `mcp_options` (a `toolnexus.mcp_source.McpOptions`) holds the host's MCP settings: the OAuth
    token store, sampling, notification hooks, limits.
    """
    policy = ApprovalPolicy.of(approvals)  # a malformed policy fails before anything connects
    extras = extra_source(extra_tools or [])
    _check_relay_names(extras.list_tools())  # the toolkit checks too; here it fails before MCP connects

    config = None
    sources: list[ToolSource] = []
    if mcp_config is not None:
        from .mcp_source import load_mcp_with_context, read_toolkit_config

        config = await read_toolkit_config(mcp_config)
        if config is not None:
            sources.append(await load_mcp_with_context(config, wait_for=wait_for, cancel=cancel, options=mcp_options))
    try:
        if skills_dir is not None or skills is not None or skill_provider is not None:
            from .skill._options import skill_source_from_options

            skill = await skill_source_from_options(skills_dir, skills, skill_provider, skills_filter,
                                                    skill_sample_limit, disable_skills)
            if skill is not None:
                sources.append(skill)

        if builtins is False:  # none wanted: the built-ins' package (~30 modules) is not loaded to learn that
            sources.append(ToolList("builtin", []))
        else:
            from .builtin import builtins_source

            sources.append(builtins_source(builtins, config))
        if agents or isinstance((config or {}).get("agents"), dict):
            from .a2a._source import agents_source

            sources.append(await agents_source(agents, config))
        sources.append(extras)
        return Toolkit.from_sources(
            sources,
            disable_tools=disable_tools,
            a2a_config=(config or {}).get("a2a"),
            mcp_server_config=(config or {}).get("mcpServer"),
            approvals=policy,
        )
    except BaseException:
        await asyncio.gather(*(s.close() for s in sources), return_exceptions=True)
        raise
