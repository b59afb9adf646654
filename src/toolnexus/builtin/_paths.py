"""Turning a path argument into the path a built-in tool may touch.

Relative paths join `base_dir` when one is set. With `confine_to_base_dir`, the joined path is
canonicalised (symlinks of the existing part resolved, `..` folded, case-normalised) and refused
unless it stays inside the canonical `base_dir`. The tool then uses the joined path itself, so a
symlink inside the base stays a symlink (deleting it removes the link, not its target); a link
that points outside is refused. Without confinement `base_dir` is only a default directory (a
warning at construction says so). Confinement guards the paths tools are given; it is not a
sandbox against a concurrent process swapping a directory for a symlink.

These functions touch the file system (`realpath`); callers run them in a worker thread.
Not here: anything about *what* the tool does with the path.
"""

from __future__ import annotations

import os
import re
from typing import Optional

from ._settings import BuiltinSettings
from ._tooling import ToolError

_RESERVED = re.compile(r"^(con|prn|aux|nul|conin\$|conout\$|com[0-9¹²³]|lpt[0-9¹²³])$", re.IGNORECASE)


def is_reserved_device_name(path: str) -> bool:
    """True when some component of `path` is a Windows device name (`NUL`, `com1.txt`, ...)."""
    for part in re.split(r"[\\/]", path):
        stem = part.split(".", 1)[0].rstrip(" ")
        if stem and _RESERVED.match(stem):
            return True
    return False


def _canonical(path: str) -> str:
    return os.path.normcase(os.path.realpath(path))


def _base_dir(settings: BuiltinSettings) -> Optional[str]:
    if settings.confine and not settings.base_dir:
        raise ToolError("confine_to_base_dir is set but base_dir is empty")
    return settings.base_dir


def resolve_path(settings: BuiltinSettings, path: str) -> str:
    """The path to operate on for the argument `path`, or `ToolError` when confinement refuses it."""
    base = _base_dir(settings)
    joined = os.path.join(base, path) if base and not os.path.isabs(path) else path
    if not settings.confine:
        return joined
    assert base is not None
    if os.name == "nt" and is_reserved_device_name(path):
        raise ToolError(f"{path} names a reserved device, which is not a file inside {base}")
    root = _canonical(base)
    target = _canonical(joined)
    if target != root and not target.startswith(root.rstrip(os.sep) + os.sep):
        raise ToolError(f"{path} resolves outside baseDir {base}")
    return joined


def resolve_dir(settings: BuiltinSettings, path: Optional[str]) -> str:
    """A directory argument (`workdir`, grep/glob `path`); absent ⇒ `base_dir` or the cwd."""
    if path:
        return resolve_path(settings, path)
    return _base_dir(settings) or os.getcwd()
