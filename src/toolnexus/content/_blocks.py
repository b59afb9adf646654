"""Provider blocks: one canonical part as the block an OpenAI- or Anthropic-style endpoint accepts.

`encode_part(part, style)` works from a positive allowlist per (style, part type): a shape is
produced only where the provider is known to take it, and everything else raises
`UnsupportedPartError`, so the caller decides (the client raises for a part the user attached and
sends a text placeholder for one a tool returned).

| part  | openai                                                         | anthropic                               |
|-------|----------------------------------------------------------------|-----------------------------------------|
| text  | `{"type":"text","text"}`                                       | same                                    |
| image | `image_url` with the url or a `data:` URL                      | `image` with a url or base64 `source`   |
| file  | data only: `file` with `filename` and a `data:` URL            | `document` (PDF only), source as image  |
| audio | data only, mp3/wav: `input_audio` with `data` and `format`     | refused                                 |

Choices beyond 0.21: images are limited to the formats both providers document (PNG, JPEG, GIF,
WebP) — `image/bmp` is refused rather than rejected by the provider later — and an Anthropic
`document` takes only `application/pdf`. An image URL part whose mime type is unknown (`""`) is
still sent: the provider fetches and sniffs it. OpenAI file parts keep any mime type, since
OpenAI-compatible gateways differ in what they accept.

Not here: the validation of a part (`_parts.py`) or what to do when a part is refused (the client).
"""

from __future__ import annotations

from typing import Any

from ._errors import UnsupportedPartError
from ._parts import PartLike, _get

STYLES = ("openai", "anthropic")
IMAGE_MIME_TYPES = frozenset({"image/png", "image/jpeg", "image/gif", "image/webp"})
AUDIO_FORMATS = {"audio/mpeg": "mp3", "audio/mp3": "mp3", "audio/wav": "wav", "audio/x-wav": "wav"}
DOCUMENT_MIME_TYPES = frozenset({"application/pdf"})


def _data_url(mime: str, data: str) -> str:
    return f"data:{mime};base64,{data}"


def _image_ok(mime: Any, url: Any) -> bool:
    mime = mime.lower() if isinstance(mime, str) else ""
    return mime in IMAGE_MIME_TYPES or (not mime and bool(url))


def _anthropic_source(mime: str, data: Any, url: Any) -> dict[str, Any]:
    if data:
        return {"type": "base64", "media_type": mime, "data": data}
    return {"type": "url", "url": url}


def encode_part(p: PartLike, style: str) -> dict[str, Any]:
    """The provider block for a canonical part, or `UnsupportedPartError` (see the table above)."""
    kind, mime = _get(p, "type"), _get(p, "mimeType")
    data, url = _get(p, "data"), _get(p, "url")
    if kind == "text" and style in STYLES:
        return {"type": "text", "text": _get(p, "text")}
    if style == "openai":
        if kind == "image" and (data or url) and _image_ok(mime, url):
            return {"type": "image_url", "image_url": {"url": url or _data_url(mime, data)}}
        if kind == "file" and data and mime:
            return {"type": "file", "file": {"filename": _get(p, "name") or "file", "file_data": _data_url(mime, data)}}
        if kind == "audio" and data and isinstance(mime, str) and mime.lower() in AUDIO_FORMATS:
            return {"type": "input_audio", "input_audio": {"data": data, "format": AUDIO_FORMATS[mime.lower()]}}
    elif style == "anthropic":
        if kind == "image" and (data or url) and _image_ok(mime, url):
            return {"type": "image", "source": _anthropic_source(mime, data, url)}
        if kind == "file" and (data or url) and isinstance(mime, str) and mime.lower() in DOCUMENT_MIME_TYPES:
            return {"type": "document", "source": _anthropic_source(mime, data, url)}
    raise UnsupportedPartError(str(kind), mime if isinstance(mime, str) else None, str(style))
