"""Bounded directory walk shared by skill discovery and the `skill` tool's file sample.

Symlinked directories and files are followed; a directory is entered only if its `realpath` has
not been entered before (cycle guard); `node_modules` and `.git` directories and unreadable
directories are skipped. Files come out in code-point order of their `/`-relative path: each
directory's children are visited sorted by `name` (files) or `name + "/"` (directories), which is
exactly that global order, so a caller wanting the first *n* files can stop early instead of
walking the whole tree. Every directory entry looked at counts against `max_entries`; past it the
walk stops and says so (`truncated`).

Synchronous on purpose: callers run it in a worker thread, never on the event loop.
"""

from __future__ import annotations

import os
from dataclasses import dataclass, field
from typing import Callable, Optional

__all__ = ["SKIPPED_DIR_NAMES", "WalkResult", "walk_files"]

SKIPPED_DIR_NAMES = frozenset({"node_modules", ".git"})


@dataclass
class WalkResult:
    """Files found as `(path, rel)`: `path` is `os.path.join`ed from the root, `rel` is `/`-joined."""

    files: list[tuple[str, str]] = field(default_factory=list)
    truncated: bool = False


@dataclass
class _Child:
    key: str
    path: str
    rel: str
    is_dir: bool


class _Walk:
    def __init__(self, max_entries: int) -> None:
        self.left = max_entries
        self.result = WalkResult()

    def children(self, dir_path: str, prefix: str) -> list[_Child]:
        found: list[_Child] = []
        try:
            with os.scandir(dir_path) as entries:
                for entry in entries:
                    if self.left <= 0:
                        self.result.truncated = True
                        break
                    self.left -= 1
                    try:
                        is_dir = entry.is_dir()  # follows symlinks
                        if not is_dir and not entry.is_file():
                            continue  # dangling link, socket, fifo...
                    except OSError:
                        continue
                    if is_dir and entry.name in SKIPPED_DIR_NAMES:
                        continue
                    key = entry.name + "/" if is_dir else entry.name
                    found.append(_Child(key, entry.path, prefix + entry.name, is_dir))
        except OSError:
            pass  # unreadable directory: skipped, whatever was listed so far is kept
        found.sort(key=lambda c: c.key)
        return found


def walk_files(
    root: str,
    *,
    include: Callable[[str], bool],
    seed_root: bool,
    max_entries: int,
    max_files: Optional[int] = None,
) -> WalkResult:
    """Regular files under `root` whose base name passes `include`, in `/`-relative path order.

    `seed_root=False` lets a symlink inside the tree re-enter the root once (discovery's rule);
    `True` marks the root as entered up front. Stops after `max_files` files if given.
    """
    walk = _Walk(max_entries)
    seen: set[str] = {os.path.realpath(root)} if seed_root else set()
    stack = [iter(walk.children(root, ""))]
    files = walk.result.files
    while stack:
        child = next(stack[-1], None)
        if child is None:
            stack.pop()
            continue
        if child.is_dir:
            real = os.path.realpath(child.path)
            if real not in seen:
                seen.add(real)
                stack.append(iter(walk.children(child.path, child.rel + "/")))
        elif include(os.path.basename(child.rel)):
            files.append((child.path, child.rel))
            if max_files is not None and len(files) >= max_files:
                break
    return walk.result
