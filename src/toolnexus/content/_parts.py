"""The content-part model: `ContentPart`, its validation, its dict form, sizes and token estimates.

A content part is one piece of a message that is not plain prose: an image, a file or an audio
clip (or a text part, so a list can mix them). Transcripts, stores and tool results hold parts as
plain dicts (`to_dict`), so a conversation can be saved as JSON and read back by 0.21 code:

    {"type": "text", "text": str}
    {"type": "image" | "file" | "audio", "mimeType": str, "data": <padded base64> | "url": str, "name"?: str}

A media part carries exactly one of `data` or `url`. Sizes are decoded bytes (what the provider
pays for), computed from the base64 length without decoding; a URL part counts 0 (it is fetched
by the provider, not carried by us).

Choices beyond the 0.21 rules, each to stop a bad part from reaching a provider:
- an image part needs an `image/*` mime type and an audio part an `audio/*` one (a file part takes
  any), and `data` must be valid padded base64;
- `normalize_parts` keeps the pinned error text and records which list item was wrong as a note on
  the exception (visible in the traceback).

Not here: building parts from paths, bytes or URLs (`_sources.py`) and provider blocks (`_blocks.py`).
"""

from __future__ import annotations

import base64
import binascii
import threading
from dataclasses import dataclass
from typing import Any, Mapping, Optional, Union

from ..errors import ToolnexusValueError
from ._errors import ContentPartError

MEDIA_TYPES: dict[str, tuple[str, str]] = {
    "png": ("image/png", "image"),
    "jpg": ("image/jpeg", "image"),
    "jpeg": ("image/jpeg", "image"),
    "gif": ("image/gif", "image"),
    "webp": ("image/webp", "image"),
    "pdf": ("application/pdf", "file"),
    "mp3": ("audio/mpeg", "audio"),
    "wav": ("audio/wav", "audio"),
}
MEDIA_PART_TYPES = ("image", "file", "audio")
PART_TYPES = ("text", *MEDIA_PART_TYPES)
_FIELDS = ("type", "text", "mimeType", "data", "url", "name")


@dataclass
class ContentPart:
    """One content part. Build it with `text()`, `image()`, `file()`, `audio()` or `part()`."""

    type: str
    text: Optional[str] = None
    mimeType: Optional[str] = None
    data: Optional[str] = None
    url: Optional[str] = None
    name: Optional[str] = None

    def to_dict(self) -> dict[str, Any]:
        """The canonical dict form (what transcripts store)."""
        return to_dict(self)


PartLike = Union[ContentPart, Mapping[str, Any]]


def _get(p: Any, key: str) -> Any:
    if isinstance(p, ContentPart):
        return getattr(p, key)
    if isinstance(p, Mapping):
        return p.get(key)
    return None


# -- process-wide size limit ------------------------------------------------------------------

_limit_lock = threading.Lock()
_max_part_bytes: Optional[int] = None


def set_max_part_bytes(limit: Optional[int]) -> None:
    """Set the process-wide limit (decoded bytes) for building parts; `None` removes it."""
    global _max_part_bytes
    if limit is not None and (isinstance(limit, bool) or not isinstance(limit, int) or limit < 0):
        raise ContentPartError(f"max_part_bytes must be None or an int >= 0, got {limit!r}")
    with _limit_lock:
        _max_part_bytes = limit


def get_max_part_bytes() -> Optional[int]:
    """The process-wide part size limit in decoded bytes (`None`: no limit, the default)."""
    return _max_part_bytes


# -- sizes -------------------------------------------------------------------------------------


def decoded_len(data: Any) -> int:
    """Decoded size of a base64 string, from its length and padding (no decoding)."""
    if not isinstance(data, str):
        return 0
    padding = min(2, len(data) - len(data.rstrip("=")))
    return max(0, len(data) // 4 * 3 - padding)


def part_bytes(p: Any) -> int:
    """Decoded bytes a part carries (`data`); 0 for a URL part or anything else."""
    return decoded_len(_get(p, "data"))


def summarize(p: PartLike) -> dict[str, Any]:
    """`{"type", "mimeType", "bytes"}` of a part (the `llm` metric's `parts` entries)."""
    if _get(p, "type") == "text":
        text = _get(p, "text")
        return {"type": "text", "mimeType": None, "bytes": len(text.encode("utf-8")) if isinstance(text, str) else 0}
    return {"type": _get(p, "type"), "mimeType": _get(p, "mimeType"), "bytes": part_bytes(p)}


def estimate_tokens(p: PartLike) -> int:
    """A cheap token estimate: text `max(1, chars // 4)`, media `max(85, bytes // 750)`."""
    if _get(p, "type") == "text":
        text = _get(p, "text")
        return max(1, len(text) // 4 if isinstance(text, str) else 0)
    return max(85, part_bytes(p) // 750)


def describe_part(p: PartLike) -> str:
    """`{type} ({mimeType}, {bytes} bytes)` — how a part is named in warnings."""
    return f"{_get(p, 'type')} ({_get(p, 'mimeType')}, {part_bytes(p)} bytes)"


def placeholder_text(p: PartLike) -> str:
    """The text sent instead of a part a wire cannot carry."""
    return f"[unsupported {_get(p, 'type')} part ({_get(p, 'mimeType')}, {part_bytes(p)} bytes)]"


# -- validation and the dict form ----------------------------------------------------------------


def _check_base64(kind: str, data: str) -> None:
    try:
        if len(data) % 4:
            raise ToolnexusValueError(f"length {len(data)} is not a multiple of 4")
        base64.b64decode(data, validate=True)
    except (binascii.Error, ValueError) as e:
        raise ContentPartError(f"a {kind} part's data is not valid padded base64 ({e})") from None


def validate(p: PartLike) -> PartLike:
    """Check a part (a `ContentPart` or a dict); return it unchanged or raise `ContentPartError`."""
    return _validate(p)


def _validate(p: Any, check_data: bool = True) -> Any:
    """`validate`; `check_data=False` skips decoding the base64 (a part checked once already)."""
    if not isinstance(p, (ContentPart, Mapping)):
        raise ContentPartError(f"not a content part: {type(p).__name__}")
    kind = _get(p, "type")
    if kind == "text":
        if not isinstance(_get(p, "text"), str):
            raise ContentPartError("a text part needs text")
        return p
    if kind not in MEDIA_PART_TYPES:
        raise ContentPartError(f'unknown content part type "{kind}"')
    mime = _get(p, "mimeType")
    if not isinstance(mime, str) or not mime:
        raise ContentPartError(f"a {kind} part needs a mimeType")
    data, url = _get(p, "data"), _get(p, "url")
    if data is not None and url is not None:
        raise ContentPartError(f"a {kind} part carries both data and url — exactly one is allowed")
    if data is None and url is None:
        raise ContentPartError(f"a {kind} part carries neither data nor url — exactly one is required")
    family = {"image": "image/", "audio": "audio/"}.get(kind)
    if family and not mime.lower().startswith(family):
        raise ContentPartError(f'an {kind} part needs a {family}* mimeType, got "{mime}" — '
                               "build it with file() if it is a document")
    if data is not None:
        if not isinstance(data, str):
            raise ContentPartError(f"a {kind} part's data must be a base64 string, got {type(data).__name__}")
        if check_data:
            _check_base64(kind, data)
    if url is not None and (not isinstance(url, str) or not url):
        raise ContentPartError(f"a {kind} part's url must be a non-empty string")
    name = _get(p, "name")
    if name is not None and not isinstance(name, str):
        raise ContentPartError(f"a {kind} part's name must be a string, got {type(name).__name__}")
    return p


def to_dict(p: PartLike) -> dict[str, Any]:
    """The canonical dict: text `{"type","text"}`; media `{"type","mimeType"}` + `data`/`url` + `name`."""
    kind = _get(p, "type")
    if kind == "text":
        return {"type": "text", "text": _get(p, "text")}
    out: dict[str, Any] = {"type": kind, "mimeType": _get(p, "mimeType")}
    for key in ("data", "url"):
        if _get(p, key) is not None:
            out[key] = _get(p, key)
    if _get(p, "name"):
        out["name"] = _get(p, "name")
    return out


def from_dict(d: Mapping[str, Any]) -> ContentPart:
    """A validated `ContentPart` from its dict form (unknown keys ignored)."""
    if not isinstance(d, Mapping):
        raise ContentPartError(f"not a content part: {type(d).__name__}")
    part = ContentPart(**{k: d.get(k) for k in _FIELDS if k != "type"}, type=d.get("type"))  # type: ignore[arg-type]
    validate(part)
    return part


def is_part_dict(d: Any) -> bool:
    """True for a dict in the canonical form: text with str `text`, or media with str `mimeType`."""
    if not isinstance(d, Mapping):
        return False
    kind = d.get("type")
    if kind == "text":
        return isinstance(d.get("text"), str)
    return kind in MEDIA_PART_TYPES and isinstance(d.get("mimeType"), str)


def normalize_parts(items: Any) -> list[dict[str, Any]]:
    """`ContentPart`s, part dicts and bare strings (text) as validated canonical dicts, order kept."""
    if not isinstance(items, (list, tuple)):
        raise ContentPartError(f"not a content part list: {type(items).__name__}")
    out: list[dict[str, Any]] = []
    for i, item in enumerate(items):
        try:
            if isinstance(item, str):
                out.append({"type": "text", "text": item})
            elif isinstance(item, (ContentPart, Mapping)):
                out.append(to_dict(validate(item)))
            else:
                raise ContentPartError(f"not a content part: {type(item).__name__}")
        except ContentPartError as e:
            e.add_note(f"(item {i} of the content part list)")
            raise
    return out
