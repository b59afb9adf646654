"""Mapping onto the MCP wire: a `ToolResult` as `CallToolResult` content, the listed `Tool`, and the
content of prompt messages (the same part mapping, plus MCP resource blocks taken as they are).

One mapping for every protocol revision the SDK speaks (it re-validates per revision on the way
out). What it deliberately does not do: send `ToolResult.metadata` (never leaves the process),
or invent content for parts it cannot express — those are dropped, as pinned for url-only
images/audio, and named in the module docstring of `toolnexus.mcp_serve`.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any, Optional

import mcp_types as mtypes
from pydantic import ValidationError

from .._diag import warn_once
from ..resources import PromptError
from ..types import Tool, ToolResult

OCTET_STREAM = "application/octet-stream"
_MAX_NAME = 64

ContentBlock = Any  # one of the mcp_types content blocks


def _mime(part: Mapping[str, Any]) -> str:
    mime = part.get("mimeType")
    return mime if isinstance(mime, str) and mime else OCTET_STREAM


def _str(part: Mapping[str, Any], key: str) -> Optional[str]:
    value = part.get(key)
    return value if isinstance(value, str) and value else None


def part_to_content(part: Any) -> Optional[ContentBlock]:
    """One content part → one MCP content block, or None when the part has no MCP form."""
    if not isinstance(part, Mapping):
        return None
    kind = part.get("type")
    if kind == "text":
        text = part.get("text")
        return mtypes.TextContent(type="text", text=text) if isinstance(text, str) else None
    if kind in ("image", "audio"):
        data = _str(part, "data")
        if data is None:  # url-only media has no MCP content form
            return None
        cls = mtypes.ImageContent if kind == "image" else mtypes.AudioContent
        return cls(type=kind, data=data, mime_type=_mime(part))
    if kind == "file":
        data, url, name = _str(part, "data"), _str(part, "url"), _str(part, "name")
        if data is not None:
            uri = url or f"file:///{name or 'part'}"
            blob = mtypes.BlobResourceContents(uri=uri, mime_type=_mime(part), blob=data)
            return mtypes.EmbeddedResource(type="resource", resource=blob)
        if url is not None:
            return mtypes.ResourceLink(type="resource_link", uri=url, name=name or url, mime_type=_mime(part))
    return None


def prompt_content(part: Mapping[str, Any]) -> ContentBlock:
    """A prompt message's content: a content part as for tool results, or an MCP resource block as is.

    Raises `PromptError` for a part MCP cannot carry (e.g. a url-only image).
    """
    kind = part.get("type")
    try:
        if kind == "resource":
            return mtypes.EmbeddedResource.model_validate(dict(part))
        if kind == "resource_link":
            return mtypes.ResourceLink.model_validate(dict(part))
    except ValidationError as exc:
        raise PromptError(f"a prompt message holds an invalid {kind} block: {exc.errors()[0]['msg']}") from None
    block = part_to_content(part)
    if block is None:
        raise PromptError(f"a prompt message holds a {kind or 'typeless'} part MCP cannot carry (media needs data)")
    return block


def call_tool_result(result: ToolResult) -> mtypes.CallToolResult:
    """`[TextContent(output), *parts]` with `isError`; metadata is never sent."""
    output = result.output if isinstance(result.output, str) else str(result.output)
    content: list[ContentBlock] = [mtypes.TextContent(type="text", text=output)]
    for part in result.parts or []:
        block = part_to_content(part)
        if block is not None:
            content.append(block)
    return mtypes.CallToolResult(content=content, is_error=bool(result.is_error))


def listed_tool(tool: Tool) -> Optional[mtypes.Tool]:
    """The `tools/list` entry for `tool`, or None (with a one-time warning) if MCP cannot carry it.

    The schema goes out verbatim. MCP requires `inputSchema.type == "object"`: a schema without a
    `type` (e.g. `{}`) gets `"type": "object"` added; one with another type cannot be listed at all
    (sending it would make the SDK reject the whole listing), so that tool is left out.
    """
    if len(tool.name) > _MAX_NAME:
        warn_once(
            f"mcp-serve-long-name:{tool.name}",
            f'[toolnexus] MCP serve: tool name "{tool.name}" is longer than {_MAX_NAME} characters'
            " — LLM providers may reject it",
        )
    schema = tool.input_schema
    if isinstance(schema, Mapping) and "type" not in schema:
        schema = {"type": "object", **schema}
    if not isinstance(schema, Mapping) or schema.get("type") != "object":
        warn_once(
            f"mcp-serve-schema:{tool.name}",
            f'[toolnexus] MCP serve: tool "{tool.name}" has an input schema whose type is not "object"'
            " — not listed",
        )
        return None
    return mtypes.Tool(name=tool.name, description=tool.description, input_schema=dict(schema))
