"""Blocking file helpers shared by `write`, `edit` and `apply_patch`; always called from a thread.

Writes never truncate a file in place: they go through the library's one atomic write
(`toolnexus._fs`): a staging file beside the target, then `os.replace`, so a crash or a full disk
leaves either the old file or the new one. A write is split into *stage* (staging file written,
missing parent directories created and remembered) and *commit* (the rename), which is what lets
`apply_patch` stage every file before it renames the first one, and undo cleanly if staging fails.

Deliberate choices for the file tools: a symlinked target is written *through* (the link stays a
link); missing parent directories are created; an existing file keeps its permission bits, a new
one gets `0o666` minus the umask like any `open()`; no `fsync` (atomicity, not durability against
power loss). Text is bytes-in/bytes-out, so line endings are never translated.
"""

from __future__ import annotations

import codecs
import os
import stat
from typing import BinaryIO, Optional

from .. import _fs
from .._fs import StagedWrite as StagedWrite, file_mode as file_mode
from ._tooling import ToolError

_KINDS = ((stat.S_ISFIFO, "a named pipe (FIFO)"), (stat.S_ISCHR, "a character device"),
          (stat.S_ISBLK, "a block device"), (stat.S_ISSOCK, "a socket"))


def _not_regular(mode: int) -> Optional[str]:
    for test, kind in _KINDS:
        if test(mode):
            return kind
    return None


def open_regular(path: str, shown: str) -> BinaryIO:
    """Open `path` for reading, refusing anything but a regular file (or a directory, which
    fails as the OS says). A FIFO would block the worker thread forever waiting for a writer,
    `/dev/zero` never ends and a device may have side effects on read — so they are refused from
    `stat` *before* opening, and the opened descriptor is checked again (`fstat`) in case the path
    was swapped in between. The open is non-blocking, so even that race cannot hang."""
    kind = _not_regular(os.stat(path).st_mode)
    if kind is None:
        flags = os.O_RDONLY | getattr(os, "O_NONBLOCK", 0) | getattr(os, "O_NOCTTY", 0) | getattr(os, "O_BINARY", 0)
        try:
            fd = os.open(path, flags)
        except IsADirectoryError:
            raise
        try:
            kind = _not_regular(os.fstat(fd).st_mode)
            if kind is None:
                if hasattr(os, "set_blocking"):
                    os.set_blocking(fd, True)
                return os.fdopen(fd, "rb")
        except BaseException:
            os.close(fd)
            raise
        os.close(fd)
    raise ToolError(f"{shown} is {kind}, not a regular file; only regular files can be read")


def read_capped(path: str, shown: str, cap: int, what: str = "edited") -> bytes:
    """The whole content of a regular file of at most `cap` bytes (else `ToolError`)."""
    with open_regular(path, shown) as handle:
        size = os.fstat(handle.fileno()).st_size
        if size > cap:
            raise ToolError(f"{shown} is {size} bytes, above the {cap}-byte limit for files to be {what}")
        data = handle.read(cap + 1)
    if len(data) > cap:  # grew while we read
        raise ToolError(f"{shown} is above the {cap}-byte limit for files to be {what}")
    return data

def decode_utf8(data: bytes, shown: str, *, cut: bool = False) -> str:
    """Strict UTF-8 decoding with the pinned error text.

    `cut=True`: `data` was cut from a longer text, so an incomplete trailing character is dropped
    rather than reported; invalid bytes are still an error.
    """
    try:
        if cut:
            return codecs.getincrementaldecoder("utf-8")("strict").decode(data, final=False)
        return data.decode("utf-8")
    except UnicodeDecodeError:
        raise ToolError(f"{shown} is not valid UTF-8 text") from None


def stage_write(path: str, data: bytes, mode: Optional[int] = None, follow_links: bool = True) -> StagedWrite:
    """Write `data` to a staging file next to `path` (creating parents); `mode` defaults to the old file's.

    With `follow_links=False` a symlink at `path` is replaced by the file instead of written through.
    """
    return _fs.stage_write(path, data, mode=mode, fsync=False, follow_links=follow_links, parents=True)


def write_atomic(path: str, data: bytes) -> None:
    """Replace (or create) `path` with `data` in one rename."""
    _fs.write_atomic(path, data, fsync=False, follow_links=True, parents=True)
