"""Resources and prompts of connected MCP servers: the shapes a host reads, and the tools a model uses.

A host reads them through `McpSource` (`list_resources`, `read_resource`, `list_prompts`,
`get_prompt`, ...), which returns these dataclasses and the server's own content items (wire
dicts: `{"uri", "mimeType", "text"}` or `{..., "blob"}`; prompt messages `{"role", "content"}`).
A model reads them through tools, offered per server when its entry asks (`"resourceTools": true`,
`"promptTools": true`) and the server declares the capability: `<server>_list_resources`,
`<server>_read_resource` (`uri`), `<server>_list_prompts`, `<server>_get_prompt` (`name`,
`arguments`). Text comes back as the tool's output; binary contents and images as parts (files
and images the client sends on to the model). Listings shown to a model are cut at
`MAX_LISTED` entries.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from typing import Any, Optional

from ..types import ToolResult

MAX_LISTED = 200
_OCTET = "application/octet-stream"


@dataclass
class McpResource:
    """A resource a server lists."""

    server: str
    uri: str
    name: str
    description: Optional[str] = None
    mime_type: Optional[str] = None
    size: Optional[int] = None


@dataclass
class McpResourceTemplate:
    """A parameterised resource URI (RFC 6570 template) a server lists."""

    server: str
    uri_template: str
    name: str
    description: Optional[str] = None
    mime_type: Optional[str] = None


@dataclass
class McpPrompt:
    """A prompt a server lists; `arguments` are its `{"name", "description", "required"}` entries."""

    server: str
    name: str
    description: Optional[str] = None
    arguments: list[dict[str, Any]] = field(default_factory=list)


@dataclass
class McpPromptResult:
    """A prompt got with arguments: its messages as the server sent them (`{"role", "content"}`)."""

    server: str
    name: str
    description: Optional[str]
    messages: list[dict[str, Any]]


def _str(value: Any) -> Optional[str]:
    return value if isinstance(value, str) else None


def resource_of(server: str, item: dict[str, Any]) -> McpResource:
    size = item.get("size")
    return McpResource(server, str(item.get("uri", "")), str(item.get("name") or item.get("uri", "")),
                       _str(item.get("description")), _str(item.get("mimeType")),
                       size if isinstance(size, int) and not isinstance(size, bool) else None)


def template_of(server: str, item: dict[str, Any]) -> McpResourceTemplate:
    return McpResourceTemplate(server, str(item.get("uriTemplate", "")), str(item.get("name") or ""),
                               _str(item.get("description")), _str(item.get("mimeType")))


def prompt_of(server: str, item: dict[str, Any]) -> McpPrompt:
    args = [a for a in item.get("arguments") or [] if isinstance(a, dict)]
    return McpPrompt(server, str(item.get("name", "")), _str(item.get("description")), args)


def prompt_result(server: str, name: str, result: dict[str, Any]) -> McpPromptResult:
    messages = [m for m in result.get("messages") or [] if isinstance(m, dict)]
    return McpPromptResult(server, name, _str(result.get("description")), messages)


def _more(total: int) -> list[str]:
    return [f"… and {total - MAX_LISTED} more"] if total > MAX_LISTED else []


def render_resource_list(resources: list[McpResource], templates: list[McpResourceTemplate]) -> str:
    lines = [f"{r.uri} — {r.name}" + (f" ({r.mime_type})" if r.mime_type else "")
             + (f": {r.description}" if r.description else "") for r in resources[:MAX_LISTED]]
    lines += _more(len(resources))
    if templates:
        lines.append("Templates (fill in the {placeholders}):")
        lines += [f"{t.uri_template} — {t.name}" + (f": {t.description}" if t.description else "")
                  for t in templates[:MAX_LISTED]]
        lines += _more(len(templates))
    return "\n".join(lines) if lines else "(no resources)"


def render_prompt_list(prompts: list[McpPrompt]) -> str:
    lines = []
    for p in prompts[:MAX_LISTED]:
        args = ", ".join(str(a.get("name")) + ("" if a.get("required") else "?") for a in p.arguments)
        lines.append(f"{p.name}({args})" + (f": {p.description}" if p.description else ""))
    lines += _more(len(prompts))
    return "\n".join(lines) if lines else "(no prompts)"


def _content_parts(items: list[dict[str, Any]]) -> tuple[list[str], list[dict[str, Any]]]:
    """Texts and parts of resource contents or content blocks."""
    texts: list[str] = []
    parts: list[dict[str, Any]] = []
    for item in items:
        kind = item.get("type")
        if kind == "resource" and isinstance(item.get("resource"), dict):
            item = item["resource"]
            kind = None
        if kind == "text" and isinstance(item.get("text"), str):
            texts.append(item["text"])
        elif kind in ("image", "audio") and isinstance(item.get("data"), str):
            parts.append({"type": kind, "mimeType": item.get("mimeType") or _OCTET, "data": item["data"]})
        elif kind is None and isinstance(item.get("text"), str):
            texts.append(item["text"])
        elif kind is None and isinstance(item.get("blob"), str):
            parts.append({"type": "file", "mimeType": item.get("mimeType") or _OCTET, "data": item["blob"],
                          "name": str(item.get("uri", ""))})
        elif kind == "resource_link":
            texts.append(f"(resource link: {item.get('uri')})")
    return texts, parts


def render_contents(server: str, uri: str, result: dict[str, Any]) -> ToolResult:
    contents = [c for c in result.get("contents") or [] if isinstance(c, dict)]
    texts, parts = _content_parts(contents)
    output = "\n".join(texts)
    if not output and parts:
        output = "\n".join(f"{p['type']} {p.get('name') or ''} ({p['mimeType']})".replace("  ", " ") for p in parts)
    return ToolResult(output or f"(resource {uri} is empty)", False, {"server": server, "uri": uri}, parts or None)


def render_prompt(result: McpPromptResult) -> ToolResult:
    lines: list[str] = []
    parts: list[dict[str, Any]] = []
    for message in result.messages:
        content = message.get("content")
        texts, found = _content_parts(content if isinstance(content, list) else [content] if isinstance(content, dict)
                                      else [])
        parts += found
        lines.append(f"{message.get('role', 'user')}: " + "\n".join(texts))
    head = [result.description] if result.description else []
    return ToolResult("\n\n".join(head + lines) or json.dumps(result.messages), False,
                      {"server": result.server, "prompt": result.name}, parts or None)
