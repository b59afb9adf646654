"""Building parts from what a caller has at hand: a path, an open binary file, bytes, a URL.

`image()`, `file()` and `audio()` fix the part type; the source decides the rest. In order: an
`os.PathLike` is a path; an object with a callable `read()` is read now (and left open); bytes
need an explicit `mime_type`; a `data:` URL keeps its base64 payload as given; an `http(s)://`
URL becomes a URL part (fetched by the provider, not by us); any other string is a path. The mime
type comes from `mime_type` when given, else from the extension table (`MEDIA_TYPES`). Paths and
handles default the part's `name` to the basename; no path is stored in the part.

Choices beyond the 0.21 rules:
- the extension must belong to the constructor's type: `image("doc.pdf")` is refused instead of
  making an image part of `application/pdf` (pass `mime_type` to override);
- a URL's extension is read from its path, so `a.png?sig=1` is a PNG;
- the size limit (`max_part_bytes`, else the process-wide one) is checked before reading where
  possible: a path is `stat`ed first, and at most limit + 1 bytes are read from a file or stream.

Not here: validation rules and the dict form (`_parts.py`), provider blocks (`_blocks.py`).
"""

from __future__ import annotations

import base64
import os
import re
import urllib.parse
from typing import Any, Optional

from ._errors import ContentPartError
from ._parts import MEDIA_TYPES, ContentPart, decoded_len, get_max_part_bytes, validate

_DATA_URL = re.compile(r"^data:([^;,]*)((?:;[^;,]*)*),(.*)$", re.DOTALL)
_NO_SOURCE = "a content part needs a path, bytes, or a URL"


def text(value: str) -> ContentPart:
    """A text part."""
    return validate(ContentPart("text", text=value))  # type: ignore[return-value]


def part(*, type: str, mimeType: Optional[str] = None, data: Optional[str] = None,
         url: Optional[str] = None, name: Optional[str] = None, text: Optional[str] = None) -> ContentPart:
    """A part from its fields, validated."""
    return validate(ContentPart(type, text=text, mimeType=mimeType, data=data, url=url, name=name))  # type: ignore[return-value]


def image(source: Any, *, mime_type: Optional[str] = None, name: Optional[str] = None,
          max_part_bytes: Optional[int] = None) -> ContentPart:
    """An image part from a path, an open binary file, bytes, a `data:` URL or an http(s) URL."""
    return _build("image", source, mime_type, name, max_part_bytes)


def file(source: Any, *, mime_type: Optional[str] = None, name: Optional[str] = None,
         max_part_bytes: Optional[int] = None) -> ContentPart:
    """A file (document) part; sources as for `image`."""
    return _build("file", source, mime_type, name, max_part_bytes)


def audio(source: Any, *, mime_type: Optional[str] = None, name: Optional[str] = None,
          max_part_bytes: Optional[int] = None) -> ContentPart:
    """An audio part; sources as for `image`."""
    return _build("audio", source, mime_type, name, max_part_bytes)


# -- the shared builder ---------------------------------------------------------------------------


def _too_big(n: int, limit: int) -> ContentPartError:
    return ContentPartError(f"content part is {n} decoded bytes, over the maxPartBytes limit of {limit}")


def _table_mime(kind: str, ext: str, mime_type: Optional[str], *, missing: str, unknown: str) -> str:
    """The mime for `ext` (lower-cased, no dot): the explicit one, else the table's (type-checked)."""
    if mime_type:
        return mime_type
    if not ext:
        raise ContentPartError(missing)
    entry = MEDIA_TYPES.get(ext.lower())
    if entry is None:
        raise ContentPartError(unknown)
    mime, table_kind = entry
    if table_kind != kind:
        raise ContentPartError(f'".{ext}" makes a {table_kind} part ({mime}), not {"an" if kind != "file" else "a"} '
                               f"{kind} part — use {table_kind}(), or pass an explicit mime_type")
    return mime


def _extension(path: str) -> str:
    return os.path.splitext(os.path.basename(path))[1][1:]


def _finish(kind: str, mime: str, raw: Optional[bytes], url: Optional[str], name: Optional[str],
            limit: Optional[int], *, data: Optional[str] = None) -> ContentPart:
    """The validated part; `raw` bytes are encoded, a given base64 `data` is size-checked as is."""
    if raw is not None:
        data = base64.b64encode(raw).decode("ascii")
    size = decoded_len(data)
    if limit is not None and size > limit:
        raise _too_big(size, limit)
    return validate(ContentPart(kind, mimeType=mime, data=data, url=url, name=name))  # type: ignore[return-value]


def _read_limited(read: Any, limit: Optional[int]) -> Any:
    return read() if limit is None else read(limit + 1)


def _stream_size(stream: Any, already: int) -> int:
    """The whole stream's size when it can be learnt without consuming it, else what was read."""
    try:
        if stream.seekable():
            here = stream.tell()
            end = stream.seek(0, os.SEEK_END)
            stream.seek(here)
            return max(already, end - here + already)
    except (AttributeError, OSError, ValueError):
        pass
    return already


def _build(kind: str, source: Any, mime_type: Optional[str], name: Optional[str],
           max_part_bytes: Optional[int]) -> ContentPart:
    limit = max_part_bytes if max_part_bytes is not None else get_max_part_bytes()
    if isinstance(source, os.PathLike):
        return _from_path(kind, os.fsdecode(os.fspath(source)), mime_type, name, limit)
    if isinstance(source, (bytes, bytearray, memoryview)):
        if not len(source):
            raise ContentPartError(_NO_SOURCE)
        if not mime_type:
            raise ContentPartError("mime_type is required when building a part from bytes")
        return _finish(kind, mime_type, bytes(source), None, name, limit)
    read = getattr(source, "read", None)
    if callable(read) and not isinstance(source, str):
        return _from_stream(kind, source, read, mime_type, name, limit)
    if not isinstance(source, str) or not source:
        raise ContentPartError(_NO_SOURCE)
    if source.startswith("data:"):
        return _from_data_url(kind, source, mime_type, name, limit)
    if source.startswith(("http://", "https://")):
        mime = _table_mime(kind, _extension(urllib.parse.urlsplit(source).path), mime_type,
                           missing="mime_type is required for a URL whose extension is not in the media table",
                           unknown="mime_type is required for a URL whose extension is not in the media table")
        return _finish(kind, mime, None, source, name, limit)
    return _from_path(kind, source, mime_type, name, limit)


def _from_path(kind: str, path: str, mime_type: Optional[str], name: Optional[str],
               limit: Optional[int]) -> ContentPart:
    ext = _extension(path)
    mime = _table_mime(kind, ext, mime_type, missing="file has no extension — pass an explicit mime_type",
                       unknown=f'unknown file extension ".{ext}" — pass an explicit mime_type')
    if limit is not None:
        size = os.stat(path).st_size
        if size > limit:
            raise _too_big(size, limit)
    with open(path, "rb") as f:
        raw = _read_limited(f.read, limit)
    return _finish(kind, mime, raw, None, name or os.path.basename(path), limit)


def _from_stream(kind: str, stream: Any, read: Any, mime_type: Optional[str], name: Optional[str],
                 limit: Optional[int]) -> ContentPart:
    raw = _read_limited(read, limit)
    if isinstance(raw, (bytearray, memoryview)):
        raw = bytes(raw)
    if not isinstance(raw, bytes):
        raise ContentPartError("a file-like content part source must be opened in binary mode — its read() "
                               f"returned {type(raw).__name__}, not bytes")
    if limit is not None and len(raw) > limit:
        raise _too_big(_stream_size(stream, len(raw)), limit)
    handle_name = getattr(stream, "name", None)
    handle_name = handle_name if isinstance(handle_name, str) and handle_name else None
    if handle_name is None and not mime_type:
        raise ContentPartError("mime_type is required for a file-like source with no name")
    if handle_name is not None:
        ext = _extension(handle_name)
        mime = _table_mime(kind, ext, mime_type, missing="file has no extension — pass an explicit mime_type",
                           unknown=f'unknown file extension ".{ext}" — pass an explicit mime_type')
    else:
        mime = mime_type  # type: ignore[assignment]
    default_name = os.path.basename(handle_name) if handle_name else None
    return _finish(kind, mime, raw, None, name or default_name, limit)


def _from_data_url(kind: str, url: str, mime_type: Optional[str], name: Optional[str],
                   limit: Optional[int]) -> ContentPart:
    m = _DATA_URL.match(url)
    params = m.group(2).split(";")[1:] if m else []
    if m is None or "base64" not in (p.strip().lower() for p in params):
        raise ContentPartError("only base64 data: URLs are supported")
    mime = mime_type or m.group(1).strip()
    if not mime:
        raise ContentPartError("data: URL carries no mime type")
    return _finish(kind, mime, None, None, name, limit, data=m.group(3))
