"""Blocking file helpers shared by `write`, `edit` and `apply_patch`; always called from a thread.

Writes never truncate a file in place: the new bytes go to a temporary file beside the target,
which then replaces it with `os.replace` (atomic on POSIX and Windows), so a crash or a full disk
leaves either the old file or the new one. A write is split into *stage* (temp file written,
missing parent directories created and remembered) and *commit* (the rename), which is what lets
`apply_patch` stage every file before it renames the first one, and undo cleanly if staging fails.

Deliberate choices: a symlinked target is written *through* (the link stays a link); an existing
file keeps its permission bits, a new one gets `0o666` minus the umask like any `open()`; no
`fsync` (atomicity, not durability against power loss). Text is bytes-in/bytes-out, so line
endings are never translated.
"""

from __future__ import annotations

import codecs
import errno
import os
import secrets
import stat
from dataclasses import dataclass, field
from typing import BinaryIO, Optional

from ._tooling import ToolError

__all__ = ["StagedWrite", "stage_write", "write_atomic", "decode_utf8", "file_mode", "open_regular", "read_capped"]

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

_OPEN_FLAGS = os.O_WRONLY | os.O_CREAT | os.O_EXCL | getattr(os, "O_BINARY", 0)


def decode_utf8(data: bytes, shown: str, *, cut: bool = False) -> str:
    """Strict UTF-8 decoding with the spec's error text.

    `cut=True`: `data` was cut from a longer text, so an incomplete trailing character is dropped
    rather than reported; invalid bytes are still an error.
    """
    try:
        if cut:
            return codecs.getincrementaldecoder("utf-8")("strict").decode(data, final=False)
        return data.decode("utf-8")
    except UnicodeDecodeError:
        raise ToolError(f"{shown} is not valid UTF-8 text") from None


def file_mode(path: str) -> Optional[int]:
    """Permission bits of an existing file, or None."""
    try:
        return stat.S_IMODE(os.stat(path).st_mode)
    except FileNotFoundError:
        return None


def _make_parents(directory: str) -> list[str]:
    """Create the missing directories above a file; return them outermost first."""
    missing: list[str] = []
    probe = directory
    while not os.path.exists(probe):
        missing.append(probe)
        parent = os.path.dirname(probe)
        if parent == probe:
            break
        probe = parent
    if os.path.exists(probe) and not os.path.isdir(probe):
        raise NotADirectoryError(errno.ENOTDIR, os.strerror(errno.ENOTDIR), probe)
    created: list[str] = []
    try:
        for path in reversed(missing):
            os.mkdir(path)
            created.append(path)
    except BaseException:
        _remove_dirs(created)
        raise
    return created


def _remove_dirs(created: list[str]) -> None:
    for path in reversed(created):
        try:
            os.rmdir(path)
        except OSError:
            pass


@dataclass
class StagedWrite:
    """A temp file holding the new content of `target`, not yet renamed over it."""

    target: str
    tmp: str
    created_dirs: list[str] = field(default_factory=list)

    def commit(self) -> None:
        try:
            os.replace(self.tmp, self.target)
        except OSError as exc:  # name the target, not our temp file
            raise OSError(exc.errno, exc.strerror, self.target) from exc

    def discard(self) -> None:
        """Remove the temp file and any directory created for it (only if still empty)."""
        try:
            os.unlink(self.tmp)
        except FileNotFoundError:
            pass
        _remove_dirs(self.created_dirs)


def stage_write(path: str, data: bytes, mode: Optional[int] = None, follow_links: bool = True) -> StagedWrite:
    """Write `data` to a temp file next to `path` (creating parents); `mode` defaults to the old file's.

    With `follow_links=False` a symlink at `path` is replaced by the file instead of written through.
    """
    target = os.path.realpath(path) if follow_links and os.path.islink(path) else path
    if os.path.isdir(target):
        raise IsADirectoryError(errno.EISDIR, os.strerror(errno.EISDIR), path)
    parent = os.path.dirname(os.path.abspath(target))
    created = _make_parents(parent)
    if mode is None:
        mode = file_mode(target)
    tmp = os.path.join(parent, f".{os.path.basename(target)}.{secrets.token_hex(6)}.tmp")
    staged = StagedWrite(target=target, tmp=tmp, created_dirs=created)
    try:
        fd = os.open(tmp, _OPEN_FLAGS, 0o666)
        with os.fdopen(fd, "wb") as handle:
            handle.write(data)
        if mode is not None:
            os.chmod(tmp, mode)
    except BaseException:
        staged.discard()
        raise
    return staged


def write_atomic(path: str, data: bytes) -> None:
    """Replace (or create) `path` with `data` in one rename."""
    staged = stage_write(path, data)
    try:
        staged.commit()
    except BaseException:
        staged.discard()
        raise
