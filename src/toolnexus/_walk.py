"""The one directory walker: regular files under a root, in `/`-relative code-point order.

Shared by skill discovery, the `skill` tool's file sample and the `grep`/`glob` built-ins. What
they have in common lives here: `node_modules` and `.git` directories and unreadable directories
are skipped, dotfiles are kept, and files come out in code-point order of their `/`-relative
path. Each directory's children are visited sorted by `name` (files) or `name + "/"`
(directories), which is exactly that global order, so a caller that wants the first *n* files
(or the first *n* grep matches) stops early instead of walking the whole tree.

What differs is a parameter: the symlink policy (`follow_symlinks=True`: symlinked directories
and files are followed and a directory is entered only if its `realpath` has not been entered
before; `False`: symlinks are neither followed nor listed) and an optional budget of directory
entries looked at (`max_entries`; past it the walk stops and `truncated` says so).

Synchronous on purpose: callers run it in a worker thread, never on the event loop.
Not here: what a caller does with the files, or its errors for a missing root.
"""

from __future__ import annotations

import itertools
import os
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from typing import Optional

IGNORE_DIRS: frozenset[str] = frozenset({"node_modules", ".git"})


@dataclass
class _Child:
    key: str
    path: str
    rel: str
    is_dir: bool


class FileWalk:
    """An iterable of `(path, rel)`: `path` is `os.path.join`ed from the root, `rel` is `/`-joined.

    With `follow_symlinks`, `seed_root=False` lets a symlink inside the tree re-enter the root once
    (skill discovery's rule); `True` marks the root as entered up front. Iterate once.
    """

    def __init__(
        self,
        root: str,
        *,
        follow_symlinks: bool = True,
        seed_root: bool = False,
        max_entries: Optional[int] = None,
    ) -> None:
        self.root = root
        self.follow_symlinks = follow_symlinks
        self.seed_root = seed_root
        self.left = max_entries
        self.truncated = False

    def _children(self, dir_path: str, prefix: str) -> list[_Child]:
        found: list[_Child] = []
        try:
            with os.scandir(dir_path) as entries:
                for entry in entries:
                    if self.left is not None:
                        if self.left <= 0:
                            self.truncated = True
                            break
                        self.left -= 1
                    try:
                        if not self.follow_symlinks and entry.is_symlink():
                            continue
                        is_dir = entry.is_dir(follow_symlinks=self.follow_symlinks)
                        if not is_dir and not entry.is_file(follow_symlinks=self.follow_symlinks):
                            continue  # dangling link, socket, fifo...
                    except OSError:
                        continue
                    if is_dir and entry.name in IGNORE_DIRS:
                        continue
                    key = entry.name + "/" if is_dir else entry.name
                    found.append(_Child(key, entry.path, prefix + entry.name, is_dir))
        except OSError:
            pass  # unreadable directory: skipped, whatever was listed so far is kept
        found.sort(key=lambda c: c.key)
        return found

    def __iter__(self) -> Iterator[tuple[str, str]]:
        # The realpath guard only matters when links are followed (no cycles otherwise).
        seen: Optional[set[str]] = None
        if self.follow_symlinks:
            seen = {os.path.realpath(self.root)} if self.seed_root else set()
        stack = [iter(self._children(self.root, ""))]
        while stack:
            child = next(stack[-1], None)
            if child is None:
                stack.pop()
            elif not child.is_dir:
                yield child.path, child.rel
            elif seen is None:
                stack.append(iter(self._children(child.path, child.rel + "/")))
            else:
                real = os.path.realpath(child.path)
                if real not in seen:
                    seen.add(real)
                    stack.append(iter(self._children(child.path, child.rel + "/")))


@dataclass
class WalkResult:
    """Files found as `(path, rel)` (see `FileWalk`), and whether the entry budget ran out."""

    files: list[tuple[str, str]] = field(default_factory=list)
    truncated: bool = False


def walk_files(
    root: str,
    *,
    include: Callable[[str], bool],
    seed_root: bool,
    max_entries: int,
    max_files: Optional[int] = None,
) -> WalkResult:
    """Files under `root` (symlinks followed) whose base name passes `include`; at most `max_files`."""
    walk = FileWalk(root, seed_root=seed_root, max_entries=max_entries)
    kept = ((path, rel) for path, rel in walk if include(rel.rsplit("/", 1)[-1]))
    files = list(itertools.islice(kept, max_files))
    return WalkResult(files, walk.truncated)
