"""Canonical content parts: normalising a user prompt list and policing unsupported/oversize parts.

The canonical part dict (what transcripts store; wire dialects map it per turn):

    {"type": "text", "text": str}
    {"type": "image" | "audio" | "file", "mimeType": str, "data": <base64 str>, "url": str?, "name": str?}

A non-text part carries `data` (base64) or `url` (or both). The transcript keeps parts in this
form; `wire/openai.py` and `wire/anthropic.py` translate them for their wire each turn.

Policy (`on_unsupported_part` / `max_part_bytes`): by default a part the user attached that the
wire cannot carry, or that is larger than `max_part_bytes`, raises `ContentPartError` before any
HTTP; the same problem in a tool-derived part degrades to a placeholder text (warned once).
`"error"` makes both raise, `"text"` makes both degrade.

Not here: encoders from files/bytes (core content-part API) and the wire shapes themselves.
"""

from __future__ import annotations

import base64
import binascii
from dataclasses import dataclass
from typing import Any, Optional

from .._diag import warn_once
from .errors import ContentPartError

__all__ = [
    "MEDIA_TYPES",
    "DEFAULT_MAX_PART_BYTES",
    "PartPolicy",
    "normalize_prompt",
    "part_bytes",
    "placeholder_text",
    "media_parts_summary",
]

MEDIA_TYPES = ("image", "audio", "file")
DEFAULT_MAX_PART_BYTES = 20 * 1024 * 1024


def _check_part(part: dict[str, Any], where: str) -> dict[str, Any]:
    kind = part.get("type")
    if kind == "text":
        if not isinstance(part.get("text"), str):
            raise ContentPartError(f"toolnexus: {where}: text part needs a string `text`")
        return {"type": "text", "text": part["text"]}
    if kind not in MEDIA_TYPES:
        raise ContentPartError(
            f"toolnexus: {where}: unknown part type {kind!r} (expected text, image, audio or file)"
        )
    mime = part.get("mimeType")
    if not isinstance(mime, str) or "/" not in mime:
        raise ContentPartError(f"toolnexus: {where}: {kind} part needs a `mimeType` like 'image/png'")
    data, url = part.get("data"), part.get("url")
    if data is None and not url:
        raise ContentPartError(f"toolnexus: {where}: {kind} part needs base64 `data` or a `url`")
    if data is not None:
        if not isinstance(data, str):
            raise ContentPartError(f"toolnexus: {where}: {kind} part `data` must be a base64 string")
        try:
            base64.b64decode(data, validate=True)
        except (binascii.Error, ValueError):
            raise ContentPartError(f"toolnexus: {where}: {kind} part `data` is not valid base64") from None
    out = {"type": kind, "mimeType": mime}
    for key in ("data", "url", "name"):
        if part.get(key) is not None:
            out[key] = part[key]
    return out


def normalize_prompt(prompt: Any) -> Any:
    """A `str` prompt unchanged; a list of strings/part dicts as canonical part dicts, order kept."""
    if isinstance(prompt, str):
        return prompt
    if not isinstance(prompt, (list, tuple)):
        raise ContentPartError(f"toolnexus: prompt must be a str or a list of content parts, got {type(prompt).__name__}")
    parts = []
    for i, item in enumerate(prompt):
        where = f"prompt part {i}"
        if isinstance(item, str):
            parts.append({"type": "text", "text": item})
        elif isinstance(item, dict):
            parts.append(_check_part(item, where))
        elif hasattr(item, "to_dict"):
            parts.append(_check_part(item.to_dict(), where))
        else:
            raise ContentPartError(f"toolnexus: {where}: expected a str or a part dict, got {type(item).__name__}")
    return parts


def part_bytes(part: dict[str, Any]) -> int:
    """Decoded size of a part's base64 `data` (0 for URL-only parts)."""
    data = part.get("data")
    if not isinstance(data, str):
        return 0
    return len(data) * 3 // 4 - data[-2:].count("=")


def placeholder_text(part: dict[str, Any], why: str) -> str:
    """What replaces a part the wire cannot carry."""
    return f"[{part.get('type')} part ({part.get('mimeType')}) omitted: {why}]"


@dataclass
class PartPolicy:
    """How a dialect treats parts it cannot send. See the module docstring."""

    on_unsupported: Optional[str] = None
    max_bytes: Optional[int] = None

    def check_size(self, part: dict[str, Any]) -> Optional[str]:
        """A reason string when the part is too large, else None."""
        limit = self.max_bytes if self.max_bytes is not None else DEFAULT_MAX_PART_BYTES
        size = part_bytes(part)
        return f"{size} bytes exceeds max_part_bytes {limit}" if size > limit else None

    def reject(self, part: dict[str, Any], why: str, *, user: bool, wire: str) -> dict[str, Any]:
        """Raise for a user part (or policy "error"), else a placeholder text part (warn once)."""
        raises = self.on_unsupported == "error" or (user and self.on_unsupported != "text")
        if raises:
            origin = "user-attached" if user else "tool-derived"
            raise ContentPartError(f"toolnexus: {origin} {part.get('type')} part ({part.get('mimeType')}) "
                                   f"cannot be sent on the {wire} wire: {why}")
        text = placeholder_text(part, why)
        warn_once(f"part:{wire}:{part.get('type')}:{part.get('mimeType')}:{why}", f"[toolnexus] {text}")
        return {"type": "text", "text": text}


def media_parts_summary(messages: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """`{type, mimeType, bytes}` for every non-text part in a canonical transcript (llm metric)."""
    out: list[dict[str, Any]] = []

    def visit(parts: Any) -> None:
        if isinstance(parts, list):
            for p in parts:
                if isinstance(p, dict) and p.get("type") in MEDIA_TYPES and "mimeType" in p:
                    out.append({"type": p["type"], "mimeType": p["mimeType"], "bytes": part_bytes(p)})

    for m in messages:
        if not isinstance(m, dict):
            continue
        visit(m.get("parts"))
        content = m.get("content")
        visit(content)
        if isinstance(content, list):
            for block in content:
                if isinstance(block, dict):
                    visit(block.get("parts"))
    return out
