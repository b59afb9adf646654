"""Replacing a file atomically, written once: every place that rewrites a whole file uses it.

A write never truncates the target in place. The new bytes go to a staging file beside it —
named `.<name>.<12 hex>.tmp`, created exclusively, so two writers never share one and a leftover
is recognisable as ours — which then replaces the target with `os.replace` (atomic on POSIX and
Windows). A crash, a full disk or an exception at any point leaves the old file or the new one,
never half of either, and never a staging file once the call returned or raised.

The guarantees differ per caller, so they are options rather than variants of the code:
- `fsync=True` (the default): the staging file is flushed to disk before the rename and the
  directory after it, so the new file survives power loss, not only a crash of this process.
  A directory that cannot be opened for syncing (platforms without directory handles) is
  skipped; a sync that fails is an error. `fsync=False` keeps atomicity only (the file tools).
- `mode`: the permission bits the file ends with. None keeps an existing file's bits, and a new
  file gets `0o666` minus the umask, like any `open()`. The staging file is created owner-only
  whenever the final bits are known, so it is never readable by more people than the result.
- `follow_links=True` writes *through* a symlink at the path (the link stays a link); by default
  a link is replaced by the file, which is what `os.replace` does.
- `parents=True` creates missing parent directories (and removes them again if the write fails).

`stage_write` + `StagedWrite.commit` split a write in two, which lets a caller stage many files
before renaming the first (and discard them all if one fails). Everything here blocks; callers run
it on a worker thread, never on the event loop. A `str` is written as UTF-8, bytes as they are.
"""

from __future__ import annotations

import errno
import os
import stat
from dataclasses import dataclass, field
from typing import Optional, Union

_OPEN_FLAGS = os.O_WRONLY | os.O_CREAT | os.O_EXCL | getattr(os, "O_BINARY", 0)


def staging_name(target: str) -> str:
    """A fresh staging path beside `target`: `.<name>.<12 hex>.tmp`."""
    parent, name = os.path.split(target)
    return os.path.join(parent, f".{name}.{os.urandom(6).hex()}.tmp")


def file_mode(path: str) -> Optional[int]:
    """Permission bits of an existing file, or None."""
    try:
        return stat.S_IMODE(os.stat(path).st_mode)
    except FileNotFoundError:
        return None


def fsync_dir(path: str) -> None:
    """Flush a directory's entries (a rename in it) to disk; skipped where directories cannot be opened."""
    try:
        fd = os.open(path, os.O_RDONLY)
    except OSError:
        return
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


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
    """A staging file holding the new content of `target`, not yet renamed over it."""

    target: str
    tmp: str
    created_dirs: list[str] = field(default_factory=list)
    fsync: bool = False

    def commit(self) -> None:
        """Rename the staging file over the target (then sync the directory, with `fsync`)."""
        try:
            os.replace(self.tmp, self.target)
        except OSError as exc:  # name the target, not our staging file
            raise OSError(exc.errno, exc.strerror, self.target) from exc
        if self.fsync:
            fsync_dir(os.path.dirname(os.path.abspath(self.target)))

    def discard(self) -> None:
        """Remove the staging file and any directory created for it (only if still empty)."""
        try:
            os.unlink(self.tmp)
        except FileNotFoundError:
            pass
        _remove_dirs(self.created_dirs)


def stage_write(path: str, data: Union[bytes, str], *, mode: Optional[int] = None, fsync: bool = True,
                follow_links: bool = False, parents: bool = False) -> StagedWrite:
    """Write `data` to a staging file beside `path` (see the module docstring for the options)."""
    target = os.path.realpath(path) if follow_links and os.path.islink(path) else path
    if os.path.isdir(target):
        raise IsADirectoryError(errno.EISDIR, os.strerror(errno.EISDIR), path)
    parent = os.path.dirname(os.path.abspath(target))
    created = _make_parents(parent) if parents else []
    if mode is None:
        mode = file_mode(target)
    staged = StagedWrite(target=target, tmp=staging_name(target), created_dirs=created, fsync=fsync)
    payload = data.encode("utf-8") if isinstance(data, str) else data
    try:
        fd = os.open(staged.tmp, _OPEN_FLAGS, 0o600 if mode is not None else 0o666)
        with os.fdopen(fd, "wb") as handle:
            handle.write(payload)
            if fsync:
                handle.flush()
                os.fsync(handle.fileno())
        if mode is not None:
            os.chmod(staged.tmp, mode)
    except BaseException:
        staged.discard()
        raise
    return staged


def write_atomic(path: str, data: Union[bytes, str], *, mode: Optional[int] = None, fsync: bool = True,
                 follow_links: bool = False, parents: bool = False) -> None:
    """Replace (or create) `path` with `data` in one rename (see the module docstring)."""
    staged = stage_write(path, data, mode=mode, fsync=fsync, follow_links=follow_links, parents=parents)
    try:
        staged.commit()
    except BaseException:
        staged.discard()
        raise
