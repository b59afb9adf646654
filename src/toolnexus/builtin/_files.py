"""The `read`, `write` and `edit` built-ins.

All file work runs in a worker thread; the event loop only awaits it. Text is handled as UTF-8
bytes, so line endings are never translated: a CRLF file reads back with its `\\r\\n` and an edit
changes only the bytes it replaces.

Choices of ours:
- `read` caps text output at `read_max_bytes` (256 KiB). It streams the file line by line and stops
  at the cap, ending the output with a notice that says which `offset` continues; a single line
  longer than the cap is cut. Media files above `media_max_bytes` (20 MiB) are refused.
- `edit` on a CRLF file: when `oldString` is not found as given but contains bare `\\n`, it is
  retried with `\\r\\n` line breaks (and `newString` gets the same), because models send LF.
- `edit` needs `newString` to be a string (`""` deletes); anything else is an error rather than
  a silent `"None"`.
- Only regular files are read: a FIFO, a device (`/dev/zero`, `/dev/tty`) or a socket is refused
  with an error before anything blocks on it (`_fsio.open_regular`); `edit` refuses files above
  `edit_max_bytes` (64 MiB), since it must hold the whole file.
Not here: path confinement (`_paths.py`), atomic writing (`_fsio.py`).
"""

from __future__ import annotations

import asyncio
import base64
import os
from collections.abc import Iterator, Mapping
from typing import Any, BinaryIO, Optional

from ..types import Tool, ToolContext, ToolResult
from ._fsio import decode_utf8, open_regular, read_capped, write_atomic
from ._paths import resolve_path
from ._settings import BuiltinSettings
from ._tooling import ToolError, build_tool, number_arg, object_schema, prop, required_str

READ_DESCRIPTION = (
    "Read a file. A known media file (png/jpg/jpeg/gif/webp/pdf/mp3/wav) comes back as a content part; "
    "otherwise it is read as UTF-8 text, and with offset/limit only that line window is returned."
)
READ_SCHEMA = object_schema(
    {
        "path": prop("string", "Path to the file to read"),
        "offset": prop("number", "1-based line to start from"),
        "limit": prop("number", "Maximum number of lines to read"),
    },
    ["path"],
)
WRITE_DESCRIPTION = "Write content to a file (create/overwrite), creating parent directories."
WRITE_SCHEMA = object_schema(
    {"path": prop("string", "Path to write to"), "content": prop("string", "Content to write")},
    ["path", "content"],
)
EDIT_DESCRIPTION = (
    "Exact-string replace in a file. Default replaces a single unique occurrence; replaceAll replaces all."
)
EDIT_SCHEMA = object_schema(
    {
        "path": prop("string", "Path to the file to edit"),
        "oldString": prop("string", "Exact string to replace"),
        "newString": prop("string", "Replacement string"),
        "replaceAll": prop("boolean", "Replace all occurrences"),
    },
    ["path", "oldString", "newString"],
)

# extension -> (mime type, content-part type)
MEDIA_TYPES: dict[str, tuple[str, str]] = {
    ".png": ("image/png", "image"),
    ".jpg": ("image/jpeg", "image"),
    ".jpeg": ("image/jpeg", "image"),
    ".gif": ("image/gif", "image"),
    ".webp": ("image/webp", "image"),
    ".pdf": ("application/pdf", "file"),
    ".mp3": ("audio/mpeg", "audio"),
    ".wav": ("audio/wav", "audio"),
}


# ---------------------------------------------------------------------------------------- read


def _read_media(real: str, shown: str, mime: str, kind: str, cap: int) -> ToolResult:
    with open_regular(real, shown) as handle:
        size = os.fstat(handle.fileno()).st_size
        if size > cap:
            raise ToolError(f"{shown} is {size} bytes, above the {cap}-byte limit for media files")
        data = handle.read()
    part = {
        "type": kind,
        "mimeType": mime,
        "data": base64.b64encode(data).decode("ascii"),
        "name": os.path.basename(shown),
    }
    return ToolResult(f"{shown} ({mime}, {len(data)} bytes)", False, parts=[part])


def _elements(handle: BinaryIO, bound: int) -> Iterator[tuple[bytes, bool]]:
    """The file's `"\\n"`-separated elements (as `text.split("\\n")` would give), each cut to `bound`.

    Yields `(element, was_cut)`. Reading is bounded: a line longer than `bound` is skipped past in
    chunks rather than held in memory.
    """
    while True:
        chunk = handle.readline(bound + 1)
        if not chunk:
            break
        if chunk.endswith(b"\n"):
            yield chunk[:-1], False
            continue
        if len(chunk) <= bound:  # last line, no newline after it
            yield chunk, False
            return
        found_newline = False
        while rest := handle.readline(1 << 16):
            if rest.endswith(b"\n"):
                found_newline = True
                break
        yield chunk[:bound], True
        if not found_newline:
            return
    yield b"", False  # what follows the final "\n" (or the one element of an empty file)


def _read_text(real: str, shown: str, offset: int, limit: Optional[int], cap: int) -> ToolResult:
    out: list[str] = []
    used = 0
    with open_regular(real, shown) as handle:
        size = os.fstat(handle.fileno()).st_size
        for number, (element, cut) in enumerate(_elements(handle, cap), start=1):
            if number < offset:
                continue
            if limit is not None and len(out) >= limit:
                break
            cost = len(element) + (1 if out else 0)
            if not cut and used + cost <= cap:
                out.append(decode_utf8(element, shown))
                used += cost
                continue
            if not out:  # this one line alone is over the cap: show its start
                out.append(decode_utf8(element[:cap], shown, cut=True))
                notice = (
                    f"[read: line {number} is longer than {cap} bytes and was cut; "
                    f"continue with offset={number + 1}]"
                )
                next_offset = number + 1
            else:
                notice = (
                    f"[read: output capped at {cap} bytes of a {size}-byte file; "
                    f"continue with offset={number}]"
                )
                next_offset = number
            text = "\n".join(out) + "\n\n" + notice
            return ToolResult(text, False, metadata={"truncated": True, "nextOffset": next_offset})
    return ToolResult("\n".join(out), False)


def _line_window(args: Mapping[str, Any]) -> tuple[int, Optional[int]]:
    offset = number_arg(args, "offset")
    limit = number_arg(args, "limit")
    return (1 if offset is None else max(1, int(offset))), (None if limit is None else max(0, int(limit)))


def make_read(settings: BuiltinSettings) -> Tool:
    def work(path: str, offset: int, limit: Optional[int]) -> ToolResult:
        real = resolve_path(settings, path)
        media = MEDIA_TYPES.get(os.path.splitext(path)[1].lower())
        if media is not None:
            return _read_media(real, path, media[0], media[1], settings.media_max_bytes)
        return _read_text(real, path, offset, limit, settings.read_max_bytes)

    async def run(args: Mapping[str, Any], ctx: Optional[ToolContext]) -> ToolResult:
        path = required_str(args, "path")
        offset, limit = _line_window(args)
        return await asyncio.to_thread(work, path, offset, limit)

    return build_tool("read", READ_DESCRIPTION, READ_SCHEMA, run, idempotent=True)


# --------------------------------------------------------------------------------------- write


def make_write(settings: BuiltinSettings) -> Tool:
    def work(path: str, data: bytes) -> None:
        write_atomic(resolve_path(settings, path), data)

    async def run(args: Mapping[str, Any], ctx: Optional[ToolContext]) -> ToolResult:
        path = required_str(args, "path")
        content = args.get("content")
        data = ("" if content is None else str(content)).encode("utf-8")
        await asyncio.to_thread(work, path, data)
        return ToolResult(f"Wrote {len(data)} bytes to {path}", False, metadata={"bytes": len(data)})

    return build_tool("write", WRITE_DESCRIPTION, WRITE_SCHEMA, run)


# ---------------------------------------------------------------------------------------- edit


def _replace(text: str, old: str, new: str, replace_all: bool, shown: str) -> tuple[str, int]:
    count = text.count(old)
    if count == 0 and "\n" in old and "\r\n" not in old and "\r\n" in text:
        old, new = old.replace("\n", "\r\n"), new.replace("\r\n", "\n").replace("\n", "\r\n")
        count = text.count(old)
    if count == 0:
        raise ToolError(f"oldString not found in {shown}")
    if count > 1 and not replace_all:
        raise ToolError(f"oldString is not unique in {shown} ({count} occurrences); use replaceAll")
    return text.replace(old, new), count


def make_edit(settings: BuiltinSettings) -> Tool:
    def work(path: str, old: str, new: str, replace_all: bool) -> int:
        real = resolve_path(settings, path)
        text = decode_utf8(read_capped(real, path, settings.edit_max_bytes), path)
        updated, count = _replace(text, old, new, replace_all, path)
        write_atomic(real, updated.encode("utf-8"))
        return count

    async def run(args: Mapping[str, Any], ctx: Optional[ToolContext]) -> ToolResult:
        path = required_str(args, "path")
        old = required_str(args, "oldString")
        new = args.get("newString")
        if not isinstance(new, str):
            raise ToolError('newString is required (a string; "" deletes oldString)')
        count = await asyncio.to_thread(work, path, old, new, args.get("replaceAll") is True)
        noun = "replacement" if count == 1 else "replacements"
        return ToolResult(f"Edited {path} ({count} {noun})", False, metadata={"replacements": count})

    return build_tool("edit", EDIT_DESCRIPTION, EDIT_SCHEMA, run)
