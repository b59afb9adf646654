"""The Toolkit: every tool source assembled behind one name → `Tool` table.

Sources are loaded in a fixed order — MCP servers, the `skill` tool, the built-ins, remote A2A
agents, then the caller's `extra_tools` — and the first tool to claim a name keeps it (an extra
tool may shadow a built-in of the same name). `execute` routes a call by name.

Deliberate choices beyond the pinned baseline (core.md §8):
- `execute` never lets a tool's exception escape: it becomes an error result naming the tool, with
  `metadata["error_type"]` naming the class; the traceback is logged at DEBUG.
- `execute` accepts the arguments as a JSON string too; unknown names list close matches.
- `register()` honours `disable_tools`; unknown `disable_tools` / `disable_skills` entries and
  tool names a provider would reject (`^[a-zA-Z0-9_-]{1,64}$`) are warned about once.
- When `mcp_config` is a file path, its reserved keys (`builtins`, `agents`, `a2a`, `mcpServer`)
  are honoured exactly as for a dict config.
- `mcp_reasons()` sits next to the pinned `mcp_status()`: `{server: reason}` for each failed server.
- `refresh()` re-lists MCP tools (a server's `tools/list_changed`) and re-assembles the table.
- After `close()` the toolkit lists no tools and `execute` answers `toolkit closed`; `close()` is
  idempotent.
This module does no network or process work itself: each source module does its own.
"""

from __future__ import annotations

import asyncio
import difflib
import inspect
import json
import re
from collections.abc import Awaitable, Callable
from typing import TYPE_CHECKING, Any, Optional, Union

from . import adapters
from ._diag import tool_raised, warn, warn_once
from .types import McpStatus, Tool, ToolContext, ToolResult
from .errors import ConfigError, ToolnexusTypeError

if TYPE_CHECKING:  # pragma: no cover
    from ._encoded import EncodedList
    from .a2a import Agent as A2AAgent
    from .skill import SkillDef, SkillSource

__all__ = ["Toolkit", "create_toolkit", "RESERVED_CONFIG_KEYS"]

RESERVED_CONFIG_KEYS = ("builtins", "agents", "a2a", "mcpServer")
_VALID_NAME = re.compile(r"^[a-zA-Z0-9_-]{1,64}$")


def _check_relay_names(tools: list[Tool]) -> None:
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
    ) -> None:
        _check_relay_names(list(extra_tools))
        self._mcp = mcp
        self._skill = skill
        self.a2a_config = a2a_config
        self.mcp_server_config = mcp_server_config
        self._disabled = set(disable_tools or [])
        self._closed = False
        self._builtins = list(builtins)
        self._agents = list(agents)
        self._extra = list(extra_tools)
        self._registered: list[Tool] = []
        self._by_name: dict[str, Tool] = {}
        self._declared: dict[str, tuple[tuple[Any, ...], Any]] = {}  # style -> (tools key, declarations)
        self._assemble(warn_unknown_disabled=True)

    def _assemble(self, *, warn_unknown_disabled: bool = False) -> None:
        """(Re)build the name table: MCP → skill → builtins (minus shadowed) → agents → extras → registered."""
        extra_names = {t.name for t in self._extra}
        candidates: list[Tool] = []
        candidates += list(getattr(self._mcp, "tools", None) or [])
        if self._skill is not None:
            candidates.append(self._skill.tool)
        candidates += [t for t in self._builtins if t.name not in extra_names]
        candidates += self._agents + self._extra

        self._by_name = {}
        for t in candidates:
            if t.name not in self._disabled:
                self._add(t)
        for t in self._registered:
            self._by_name.setdefault(t.name, t)
        if warn_unknown_disabled:  # disabled names that matched nothing: likely a typo
            # (a builtin shadowed by an extra shares the extra's name, so candidates cover it)
            for name in sorted(self._disabled - {t.name for t in candidates}):
                warn_once(f"disable_tools:{name}", f'[toolnexus] disable_tools name "{name}" matched no tool')

    def _add(self, t: Tool) -> bool:
        if t.name in self._by_name:
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
        """The skill catalogue for the system prompt; `""` without a skill source."""
        return self._skill.prompt() if self._skill is not None else ""

    def mcp_status(self) -> dict[str, McpStatus]:
        """Each configured MCP server's status (`connected`, `failed`, `disabled`), in config order."""
        return dict(getattr(self._mcp, "status", None) or {})

    def mcp_reasons(self) -> dict[str, str]:
        """Why each `failed` MCP server failed, in config order (the logged reason); `{}` if none did."""
        return dict(getattr(self._mcp, "reasons", None) or {})

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
            if self._add(t):
                self._registered.append(t)
        return self

    async def refresh(self) -> "Toolkit":
        """Re-list the MCP servers' tools (e.g. after `tools/list_changed`) and re-assemble.

        The assembly rules are the constructor's; tools added with `register()` stay, after the
        sources. Without an MCP source this changes nothing.
        """
        if self._closed or self._mcp is None or not hasattr(self._mcp, "refresh"):
            return self
        await self._mcp.refresh()
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
                args = json.loads(args) if args.strip() else {}
            except (json.JSONDecodeError, RecursionError) as exc:
                return ToolResult(output=f"invalid arguments for {name}: not valid JSON ({exc})", is_error=True)
            if not isinstance(args, dict):
                return ToolResult(
                    output=f"invalid arguments for {name}: expected a JSON object, got {type(args).__name__}",
                    is_error=True,
                )
        try:
            return await t.execute(args or {}, ctx)
        except Exception as exc:  # noqa: BLE001 - the tool boundary
            return ToolResult(output=f"tool {name} failed: {type(exc).__name__}: {exc}", is_error=True,
                              metadata=tool_raised(name, exc))

    # ------------------------------------------------------------------ lifecycle

    async def close(self) -> None:
        """Close the MCP source; afterwards the toolkit is empty. Safe to call twice."""
        if self._closed:
            return
        self._closed = True
        if self._mcp is not None:
            await self._mcp.close()

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
        from .a2a import Agent as A2AAgent, agent_tools

        ag = (
            agent_or_card_url
            if isinstance(agent_or_card_url, A2AAgent)
            else A2AAgent(card=agent_or_card_url, headers=headers, timeout=timeout, poll_every=poll_every)
        )
        return self.register(*(await agent_tools(ag)))

    def skill_infos(self) -> list[Any]:
        """The loaded skills (`SkillInfo`, after filters), in load order; `[]` without skills."""
        return [] if self._skill is None else list(self._skill.skills.values())

    async def serve(self, addr: str, *, client: Any = None, a2a: Optional[dict[str, Any]] = None,
                    on_task: Any = None, mcp: Optional[dict[str, Any]] = None, on_call: Any = None,
                    limits: Any = None) -> Any:
        """Serve this toolkit over A2A and `/mcp` until `stop()` (see `toolnexus.serve`)."""
        from .serve import serve_toolkit

        return await serve_toolkit(self, addr, client=client, a2a=a2a, on_task=on_task, mcp=mcp, on_call=on_call,
                                   limits=limits)


async def _read_config_file(path: str) -> dict[str, Any]:
    from .mcp_source import read_config_file

    return await asyncio.to_thread(read_config_file, path)


async def _provider_defs(provider: Callable[[], Any]) -> list["SkillDef"]:
    """Call the skill provider (a sync one in a thread: it may do I/O) and check what it gave."""
    from .skill import SkillDef

    try:
        if inspect.iscoroutinefunction(provider):
            result = await provider()
        else:
            result = await asyncio.to_thread(provider)
        if inspect.isawaitable(result):
            result = await result
        defs = list(result or [])
        bad = [type(d).__name__ for d in defs if not isinstance(d, SkillDef)]
        if bad:
            raise ToolnexusTypeError(f"expected a list of SkillDef, got an item of type {bad[0]}")
        return defs
    except Exception as exc:  # noqa: BLE001 - a failing provider contributes nothing
        warn(f"[toolnexus] skill provider failed: {exc}")
        return []


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
) -> Toolkit:
    """Load every configured source and assemble a `Toolkit` (core.md §4.1)."""
    extra_tools = list(extra_tools or [])
    _check_relay_names(extra_tools)  # the constructor checks too; here it fails before MCP connects

    config: Optional[dict[str, Any]] = None
    if isinstance(mcp_config, str):
        config = await _read_config_file(mcp_config)
    elif isinstance(mcp_config, dict):
        config = dict(mcp_config)

    mcp = None
    if config is not None:
        from .mcp_source import load_mcp_with_context

        mcp = await load_mcp_with_context(config, wait_for=wait_for, cancel=cancel)

    reserved = config or {}
    try:
        skill_source = None
        if skills_dir is not None or skills is not None or skill_provider is not None:
            from .skill import aload_skills

            defs = list(skills or [])
            if skill_provider is not None:
                defs += await _provider_defs(skill_provider)
            # `disable_skills` entries join the filter as `False`; an explicit filter entry wins.
            # Unknown names are reported by the skill filter itself.
            filt = dict(skills_filter or {})
            for name in disable_skills or []:
                filt.setdefault(name, False)
            skill_source = await aload_skills(
                skills_dir, skills=defs or None, filter=filt or None, sample_limit=skill_sample_limit
            )

        from .builtin import select_builtins

        builtins_cfg = builtins if builtins is not None else reserved.get("builtins")
        if builtins_cfg is not None and not isinstance(builtins_cfg, (bool, dict)):
            builtins_cfg = None
        builtin_tools = select_builtins(builtins_cfg)

        agent_tools_list: list[Tool] = []
        all_agents = list(agents or [])
        if isinstance(reserved.get("agents"), dict):
            from .a2a import parse_agents_config

            all_agents += parse_agents_config(reserved["agents"])
        if all_agents:
            agent_tools_list = await _resolve_agents(all_agents)

        return Toolkit(
            mcp,
            skill_source,
            builtin_tools,
            agent_tools_list,
            extra_tools,
            a2a_config=reserved.get("a2a"),
            mcp_server_config=reserved.get("mcpServer"),
            disable_tools=disable_tools,
        )
    except BaseException:
        if mcp is not None:
            await mcp.close()
        raise


async def _resolve_agents(all_agents: list["A2AAgent"]) -> list[Tool]:
    from .a2a import agent_tools

    results = await asyncio.gather(*(agent_tools(a) for a in all_agents), return_exceptions=True)
    tools: list[Tool] = []
    for ag, res in zip(all_agents, results):
        if isinstance(res, BaseException):
            if not isinstance(res, Exception):
                raise res
            warn(f'[toolnexus] A2A agent "{ag.card}" failed: {res}')
            continue
        tools += res
    return tools
