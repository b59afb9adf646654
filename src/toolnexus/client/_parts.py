"""Content parts inside the client: prompt lists, tool-result parts, and the per-turn part policy.

The part model itself (constructors, validation, the canonical dict form, provider blocks) is
`toolnexus.content`; this module is the client's use of it:

- `normalize_prompt`: a `str` prompt stays a string; a list (`ContentPart`s, part dicts, bare
  strings) becomes canonical part dicts, validated before any HTTP.
- `tool_result_parts`: the parts a tool returned, normalised when the result is recorded
  (`ContentPart` objects become dicts); an invalid one becomes a text placeholder with a warning,
  so a bad tool part can neither crash the run nor reach the provider as `data:None;base64,None`.
- `PartPolicy.encode`: one part for one wire, per turn. The size limit comes first
  (`Client.max_part_bytes`, else the process-wide `toolnexus.content` limit, else none): a part
  the user attached raises `ContentPartError`, a tool-derived one becomes a placeholder. Then the
  wire's block allowlist: a refused part raises `UnsupportedPartError` when the mode
  (`on_unsupported_part`, else "error" for attached and "text" for tool-derived parts) is
  "error", else it becomes a placeholder. Each degradation is announced once per client and key
  as `[toolnexus] {message} — sent as a text placeholder`.
- `media_parts_summary`: `{type, mimeType, bytes}` of every non-text part of a transcript (the
  `llm` metric's `parts`).

Placeholders use the pinned `[unsupported {type} part ({mimeType}, {bytes} bytes)]`; an invalid
tool part (which has no trustworthy mime type or size) reads `[invalid {type} part: {why}]`.

Not here: where parts sit in each wire's messages (`wire/openai.py`, `wire/anthropic.py`).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Optional

from .._diag import warn_once
from ..content._blocks import encode_part
from ..content._errors import ContentPartError, UnsupportedPartError
from ..content._parts import (
    MEDIA_PART_TYPES as MEDIA_PART_TYPES,
    ContentPart,
    _validate,
    get_max_part_bytes,
    is_part_dict,
    normalize_parts,
    part_bytes as part_bytes,
    placeholder_text,
    summarize,
    to_dict,
)

_SUFFIX = " — sent as a text placeholder"


def normalize_prompt(prompt: Any) -> Any:
    """A `str` prompt unchanged; a list of strings / parts as canonical part dicts, order kept."""
    if isinstance(prompt, str):
        return prompt
    if not isinstance(prompt, (list, tuple)):
        raise ContentPartError(
            f"toolnexus: prompt must be a str or a list of content parts, got {type(prompt).__name__}"
        )
    return normalize_parts(list(prompt))


def placeholder_block(part: Any) -> dict[str, Any]:
    """The text block sent instead of `part`."""
    return {"type": "text", "text": placeholder_text(part)}


def degrade_notice(key: str, message: str) -> None:
    """`[toolnexus] {message} — sent as a text placeholder`, once per `key`."""
    warn_once(f"part:{key}", f"[toolnexus] {message}{_SUFFIX}")


def tool_result_parts(parts: Any, tool: str) -> Optional[list[dict[str, Any]]]:
    """A tool's `ToolResult.parts` as canonical dicts (None when empty); invalid ones as placeholders."""
    if not parts:
        return None
    items = parts if isinstance(parts, (list, tuple)) else [parts]
    out: list[dict[str, Any]] = []
    for item in items:
        if isinstance(item, str):
            out.append({"type": "text", "text": item})
            continue
        try:
            out.append(to_dict(_validate(item)))
        except ContentPartError as e:
            kind = item.type if isinstance(item, ContentPart) else item.get("type") if isinstance(item, dict) else None
            label = kind if isinstance(kind, str) and kind else type(item).__name__
            degrade_notice(f"invalid:{tool}:{e}", f"tool {tool!r} returned an invalid content part: {e}")
            out.append({"type": "text", "text": f"[invalid {label} part: {e}]"})
    return out


@dataclass
class PartPolicy:
    """How one client's wire treats parts (see the module docstring). `owner` scopes the warnings."""

    on_unsupported: Optional[str] = None
    max_bytes: Optional[int] = None
    owner: Any = None

    def limit(self) -> Optional[int]:
        return self.max_bytes if self.max_bytes is not None else get_max_part_bytes()

    def _degrade(self, key: str, message: str, part: Any) -> dict[str, Any]:
        degrade_notice(f"{self.owner}:{key}", message)
        return placeholder_block(part)

    def encode(self, part: dict[str, Any], style: str, *, attached: bool) -> dict[str, Any]:
        """The wire block for one canonical part, a placeholder block, or an error (attached parts)."""
        try:
            _validate(part, check_data=False)
        except ContentPartError as e:
            if attached:
                raise
            return self._degrade(f"invalid:{part.get('type')}:{e}", str(e), part)
        limit = self.limit()
        size = part_bytes(part)
        if limit is not None and size > limit:
            error = ContentPartError(f"content part is {size} decoded bytes, over the maxPartBytes limit of {limit}")
            if attached:
                raise error
            return self._degrade(f"toolarge:{part.get('type')}:{part.get('mimeType')}", str(error), part)
        try:
            return encode_part(part, style)
        except UnsupportedPartError as e:
            mode = self.on_unsupported or ("error" if attached else "text")
            if mode == "error":
                raise
            return self._degrade(f"{part.get('type')}:{style}", str(e), part)


def media_parts_summary(messages: list[Any]) -> list[dict[str, Any]]:
    """`{type, mimeType, bytes}` for every non-text part in a canonical transcript (llm metric)."""
    out: list[dict[str, Any]] = []

    def visit(parts: Any) -> None:
        if isinstance(parts, list):
            for p in parts:
                if is_part_dict(p) and p.get("type") in MEDIA_PART_TYPES:
                    out.append(summarize(p))

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
