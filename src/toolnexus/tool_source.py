"""What the Toolkit routes over: a `ToolSource` lists tools, refreshes them and closes.

Every source — the MCP servers, the `skill` tool, the built-ins, remote A2A agents, the caller's
own tools, or a source a host writes — meets this one small protocol, so the toolkit assembles
them without knowing any of them by name. Two things a source may add, each explicit:

- `shadows`: the kinds of source whose same-named tools this one displaces. The caller's own
  tools shadow the built-ins (a custom `bash` replaces the built-in one); nothing else does.
- `StatusReporting` (per-server `status` and failure `reasons`) and `SkillCatalog` (the system
  prompt's skill catalogue): capabilities the toolkit surfaces through `mcp_status()`,
  `mcp_reasons()`, `skills_prompt()` and `skill_infos()` when a source has them.

`as_mcp_source` / `as_skill_source` accept the older duck-typed shapes (an object with `.tools`,
`.status`, `close()`; one with `.tool`, `.skills`, `.prompt()`) and wrap them once, at the edge.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any, Protocol, runtime_checkable

from .types import McpStatus, Tool

__all__ = [
    "SkillCatalog",
    "StatusReporting",
    "ToolList",
    "ToolSource",
    "as_mcp_source",
    "as_skill_source",
]


@runtime_checkable
class ToolSource(Protocol):
    """A source of tools the toolkit assembles, in the order it is given."""

    @property
    def kind(self) -> str:
        """"mcp", "skill", "builtin", "a2a", "extra", or a host's own name."""
        ...

    @property
    def shadows(self) -> frozenset[str]:
        """The kinds of source whose same-named tools this one displaces (usually none)."""
        ...

    def list_tools(self) -> list[Tool]:
        """The tools this source offers now, in its own order (a new list)."""
        ...

    async def refresh(self) -> object:
        """Re-read the tools from where they come from; a source with nothing to re-read does nothing."""
        ...

    async def close(self) -> None:
        """Release what the source holds (connections, processes); safe to call twice."""
        ...


@runtime_checkable
class StatusReporting(Protocol):
    """A source made of servers that may each be up or down (MCP)."""

    @property
    def status(self) -> dict[str, McpStatus]: ...

    @property
    def reasons(self) -> dict[str, str]: ...


@runtime_checkable
class SkillCatalog(Protocol):
    """A source that adds a skill catalogue to the system prompt."""

    @property
    def skills(self) -> dict[str, Any]: ...

    def prompt(self) -> str: ...


class ToolList:
    """A fixed list of tools as a source: the built-ins, resolved agents, the caller's tools."""

    __slots__ = ("kind", "shadows", "_tools")

    def __init__(self, kind: str, tools: Iterable[Tool], *, shadows: Iterable[str] = ()) -> None:
        self.kind = kind
        self.shadows = frozenset(shadows)
        self._tools = list(tools)

    def list_tools(self) -> list[Tool]:
        return list(self._tools)

    async def refresh(self) -> None:
        return None

    async def close(self) -> None:
        return None

    def __repr__(self) -> str:
        return f"ToolList({self.kind!r}, {[t.name for t in self._tools]!r})"


class _McpShape:
    """An object with `.tools`, `.status` (and maybe `.reasons`, `refresh()`), `close()`, as a source."""

    kind = "mcp"
    shadows: frozenset[str] = frozenset()

    def __init__(self, inner: Any) -> None:
        self._inner = inner

    @property
    def status(self) -> dict[str, McpStatus]:
        return dict(getattr(self._inner, "status", None) or {})

    @property
    def reasons(self) -> dict[str, str]:
        return dict(getattr(self._inner, "reasons", None) or {})

    def list_tools(self) -> list[Tool]:
        return list(getattr(self._inner, "tools", None) or [])

    async def refresh(self) -> object:
        refresh = getattr(self._inner, "refresh", None)
        return await refresh() if refresh is not None else None

    async def close(self) -> None:
        await self._inner.close()


class _SkillShape:
    """An object with `.tool`, `.skills` and `.prompt()`, as a source."""

    kind = "skill"
    shadows: frozenset[str] = frozenset()

    def __init__(self, inner: Any) -> None:
        self._inner = inner

    @property
    def skills(self) -> dict[str, Any]:
        return dict(getattr(self._inner, "skills", None) or {})

    def prompt(self) -> str:
        return str(self._inner.prompt())

    def list_tools(self) -> list[Tool]:
        return [self._inner.tool]

    async def refresh(self) -> None:
        return None

    async def close(self) -> None:
        return None


def as_mcp_source(source: Any) -> ToolSource:
    """`source` itself when it is a `ToolSource`, else its MCP-shaped object wrapped as one."""
    return source if isinstance(source, ToolSource) else _McpShape(source)


def as_skill_source(source: Any) -> ToolSource:
    """`source` itself when it is a `ToolSource`, else its skill-shaped object wrapped as one."""
    return source if isinstance(source, ToolSource) else _SkillShape(source)
