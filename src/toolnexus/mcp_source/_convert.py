"""Mapping between MCP wire shapes and toolnexus types, for both SDK majors.

Every SDK model is read through `model_dump(by_alias=True)` (camelCase wire keys), so the same
code serves mcp 1.x (camelCase attributes) and 2.x (snake_case attributes, camelCase aliases)
instead of silently reading `None` from a renamed attribute. Plain dicts are accepted too.
"""

from __future__ import annotations

import json
from typing import Any, Optional

from ..types import Answer, JSONSchema, Request, ToolResult, new_request_id

_OCTET = "application/octet-stream"


def wire(obj: Any) -> Any:
    """An SDK model (or a mapping) as plain JSON-shaped data with the wire's camelCase keys."""
    if hasattr(obj, "model_dump"):
        return obj.model_dump(by_alias=True, mode="json", exclude_none=True)
    if isinstance(obj, dict):
        return obj
    # Any other object: its attributes, snake_case names turned into the wire's camelCase.
    return {_camel(k): v for k, v in vars(obj).items()} if hasattr(obj, "__dict__") else {}


def _camel(name: str) -> str:
    head, *rest = name.split("_")
    return head + "".join(w[:1].upper() + w[1:] for w in rest)


def build_input_schema(tool: dict[str, Any]) -> JSONSchema:
    """The advertised schema, closed: object type, `properties` present, no extra keys."""
    schema = tool.get("inputSchema") or {}
    return {**schema, "type": "object", "properties": schema.get("properties") or {}, "additionalProperties": False}


def _b64_len(data: str) -> int:
    return len(data) * 3 // 4 - (len(data) - len(data.rstrip("=")))


def _parts(content: list[dict[str, Any]]) -> list[dict[str, Any]]:
    parts: list[dict[str, Any]] = []
    for item in content:
        kind = item.get("type")
        if kind in ("image", "audio") and isinstance(item.get("data"), str) and isinstance(item.get("mimeType"), str):
            parts.append({"type": kind, "mimeType": item["mimeType"], "data": item["data"]})
        elif kind == "resource_link":
            part = {"type": "file", "mimeType": item.get("mimeType") or _OCTET, "url": str(item.get("uri", ""))}
            if item.get("name"):
                part["name"] = item["name"]
            parts.append(part)
        elif kind == "resource" and isinstance((item.get("resource") or {}).get("blob"), str):
            res = item["resource"]
            parts.append(
                {
                    "type": "file",
                    "mimeType": res.get("mimeType") or _OCTET,
                    "data": res["blob"],
                    "name": str(res.get("uri", "")),
                }
            )
    return parts


def _summary(parts: list[dict[str, Any]]) -> str:
    lines = []
    for p in parts:
        size = _b64_len(p["data"]) if isinstance(p.get("data"), str) else 0
        lines.append(f"{p['type']} ({p['mimeType']}, {size} bytes)")
    return "\n".join(lines)


def call_result_to_tool_result(result: Any, server: str) -> ToolResult:
    """A `tools/call` result as a `ToolResult`; metadata names the server."""
    data = wire(result)
    content = [c for c in data.get("content") or [] if isinstance(c, dict)]
    parts = _parts(content) or None
    meta = {"server": server}
    texts = [c["text"] for c in content if c.get("type") == "text" and isinstance(c.get("text"), str)]
    if data.get("isError"):
        output = "\n\n".join(t for t in texts if t.strip()) or "MCP tool returned an error"
        return ToolResult(output, True, meta, parts)
    if data.get("structuredContent") is not None:
        return ToolResult(json.dumps(data["structuredContent"]), False, meta, parts)
    texts += [
        c["resource"]["text"]
        for c in content
        if c.get("type") == "resource" and isinstance((c.get("resource") or {}).get("text"), str)
    ]
    output = "\n".join(texts)
    if output == "" and parts:
        output = _summary(parts)
    return ToolResult(output, False, meta, parts)


def elicitation_to_request(params: Any) -> Request:
    """An MCP elicitation as a suspension `Request` (url mode ⇒ authorization, else input)."""
    data = wire(params)
    message = data.get("message")
    prompt = str(message) if message is not None else ""
    rid = new_request_id("elc")
    if data.get("mode") == "url":
        return Request(id=rid, kind="authorization", prompt=prompt, url=data.get("url") or None)
    schema = data.get("requestedSchema")
    return Request(id=rid, kind="input", prompt=prompt, data={"schema": schema} if schema else None)


def elicit_result_dict(answer: Optional[Answer]) -> dict[str, Any]:
    """`ok` ⇒ accept with `data`; reason `declined` ⇒ decline; anything else (or None) ⇒ cancel."""
    if answer is not None and answer.ok:
        return {"action": "accept", "content": answer.data or {}}
    if answer is not None and answer.reason == "declined":
        return {"action": "decline"}
    return {"action": "cancel"}


def answer_to_elicit_result(answer: Optional[Answer]) -> Any:
    """`elicit_result_dict` as the SDK's `ElicitResult` (for the SDK's session and for callers)."""
    from mcp.types import ElicitResult

    return ElicitResult(**elicit_result_dict(answer))
