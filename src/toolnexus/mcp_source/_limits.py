"""What an MCP server may declare: the limits its tool list is held to, and the reasons it is cut.

A server's tool list goes, as it is, into every request we send a model: one tool whose name a
provider refuses (OpenAI and Anthropic both accept only `^[a-zA-Z0-9_-]{1,64}$`) makes every call
fail, and one server that lists 100,000 tools or a megabyte of schema makes every call huge. So
each listed tool is vetted once, when it is listed, and a tool that breaks a rule is dropped —
never the server, never the other tools — with a one-line reason kept for `toolnexus tools`
(`McpSource.dropped`). The rules, in the order they are checked:

- a name: a non-empty string of at most `max_name` (128, MCP's own bound) characters, with no
  control character, and with at least one ASCII letter or digit (the pinned rule replaces every
  other character with `_`, so "日本語" would become an anonymous `___`);
- the prefixed name `<server>_<tool>` is at most `max_prefixed_name` (64) characters, the
  providers' bound;
- two tools of one server that sanitise to the same name: the first listed keeps it;
- `inputSchema`, when present, is a JSON object of at most `max_schema_bytes` (64 KiB) as JSON;
- a description longer than `max_description` (8192) characters is cut (the tool is kept);
- at most `max_tools` (1000) tools per server: listing stops asking for pages once it has them
  (so a flood costs at most one page beyond the limit), and the rest are dropped in one line;
- at most `max_declared_bytes` (4 MiB) of names, descriptions and schemas per server: tools past
  it are dropped.

A page itself is bounded by the transport (one stdio line at most 32 MiB). `dropped` keeps at
most `MAX_REASONS` entries per server; the last one says how many more there were.
"""

from __future__ import annotations

import json
import unicodedata
from dataclasses import dataclass
from typing import Any, Optional

from ..types import sanitize

MAX_REASONS = 100
_SHOWN_NAME = 80


@dataclass(frozen=True)
class PeerLimits:
    """The bounds a server's tool list is held to (see the module docstring)."""

    max_tools: int = 1000
    max_name: int = 128
    max_prefixed_name: int = 64
    max_schema_bytes: int = 64 * 1024
    max_description: int = 8192
    max_declared_bytes: int = 4 * 1024 * 1024


@dataclass(frozen=True)
class DroppedTool:
    """A tool a server listed that we do not offer: its name as shown (cut to 80 characters,
    control characters escaped) and why."""

    name: str
    reason: str


@dataclass
class Vetted:
    """One server's listed tools after vetting: the ones kept (wire dicts, descriptions cut) and
    the ones dropped."""

    kept: list[dict[str, Any]]
    dropped: list[DroppedTool]


def shown_name(name: Any) -> str:
    """A tool name fit for one line of output: control characters escaped, cut to 80 characters."""
    text = name if isinstance(name, str) else repr(name)
    text = "".join(c if unicodedata.category(c) != "Cc" else repr(c)[1:-1] for c in text[: _SHOWN_NAME * 4])
    return text if len(text) <= _SHOWN_NAME else text[: _SHOWN_NAME - 1] + "…"


def _name_problem(name: Any, prefix: str, limits: PeerLimits) -> Optional[str]:
    if not isinstance(name, str) or not name:
        return "it has no name"
    if len(name) > limits.max_name:
        return f"its name is {len(name)} characters; MCP allows at most {limits.max_name}"
    if any(unicodedata.category(c) == "Cc" for c in name):
        return "its name holds a control character"
    if not any(c.isascii() and c.isalnum() for c in name):
        return "its name has no ASCII letter or digit (providers accept only a-z, A-Z, 0-9, _ and -)"
    full = len(prefix) + 1 + len(name)
    if full > limits.max_prefixed_name:
        return (f"its name as offered to models (\"{prefix}_…\") would be {full} characters; providers accept at "
                f"most {limits.max_prefixed_name}")
    return None


def _schema_size(tool: dict[str, Any], limits: PeerLimits) -> tuple[Optional[str], int]:
    """(a problem with the input schema, or None; the schema's size as JSON)."""
    schema = tool.get("inputSchema")
    if schema is None:
        return None, 2
    if not isinstance(schema, dict):
        return "its input schema is not a JSON object", 0
    try:
        size = len(json.dumps(schema, separators=(",", ":"), ensure_ascii=False).encode("utf-8"))
    except (TypeError, ValueError, RecursionError):
        return "its input schema cannot be encoded as JSON (too deep, or not plain data)", 0
    if size > limits.max_schema_bytes:
        return f"its input schema is {size} bytes as JSON; the limit is {limits.max_schema_bytes}", size
    return None, size


def _cut_description(tool: dict[str, Any], limits: PeerLimits) -> dict[str, Any]:
    description = tool.get("description")
    if isinstance(description, str) and len(description) > limits.max_description:
        return {**tool, "description": description[: limits.max_description - 1] + "…"}
    return tool


class _Reasons:
    """At most `MAX_REASONS` entries; then one line saying how many more."""

    def __init__(self) -> None:
        self.items: list[DroppedTool] = []
        self.more = 0

    def add(self, name: str, reason: str) -> None:
        if len(self.items) < MAX_REASONS - 1:
            self.items.append(DroppedTool(name, reason))
        else:
            self.more += 1

    def done(self) -> list[DroppedTool]:
        if self.more:
            return [*self.items, DroppedTool("…", f"and {self.more} more tools dropped (reasons not kept)")]
        return self.items


def vet_tools(server: str, defs: list[dict[str, Any]], limits: PeerLimits, *, overflow: bool = False) -> Vetted:
    """Apply the limits to one server's listed tools (in listing order). `overflow`: listing
    stopped at `max_tools` with more pages to come."""
    prefix = sanitize(server)
    reasons = _Reasons()
    kept: list[dict[str, Any]] = []
    taken: dict[str, str] = {}  # sanitised name -> the original that has it
    budget = limits.max_declared_bytes
    for tool in defs[: limits.max_tools]:
        raw = tool.get("name")
        problem = _name_problem(raw, prefix, limits)
        name = raw if isinstance(raw, str) else ""
        if problem is None:
            first = taken.get(sanitize(name))
            if first is not None:
                problem = f'it has the same name as "{shown_name(first)}" once characters providers refuse become _'
        size = 0
        if problem is None:
            problem, size = _schema_size(tool, limits)
        if problem is None:
            tool = _cut_description(tool, limits)
            size += len(name) + len(str(tool.get("description") or ""))
            if size > budget:
                problem = (f"the server's tools already take {limits.max_declared_bytes - budget} of the "
                           f"{limits.max_declared_bytes} bytes of declarations a server may use")
        if problem is not None:
            reasons.add(shown_name(raw), problem)
            continue
        budget -= size
        taken[sanitize(name)] = name
        kept.append(tool)
    extra = len(defs) - limits.max_tools
    if extra > 0 or overflow:
        count = f"{extra} more" if extra > 0 and not overflow else "more"
        reasons.add("…", f"the server lists more than {limits.max_tools} tools: {count} were dropped"
                         + (" (the rest of its list was not read)" if overflow else ""))
    return Vetted(kept, reasons.done())
