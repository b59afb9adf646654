"""The `grep` and `glob` built-ins, with the glob matcher they share (spec §3.5).

They walk with `toolnexus._walk.FileWalk` (the walker skills use too) in its no-symlink mode:
symlinks (to files or directories) are neither followed nor listed, `IGNORE_DIRS` are skipped,
dotfiles are kept, unreadable directories are skipped, and files come in `/`-separated relative
path order (code point). A start path that is a file yields nothing; a missing start directory
is an error. The walk is lazy, so both tools stop walking once `limit` is reached; the walk (and
grep's reads) runs in one worker thread.

Glob patterns compile to an anchored regex: `**` ⇒ `.*` (also eating one following `/`), `*` ⇒
`[^/]*`, `?` ⇒ `[^/]`, everything else literal (no classes, no braces). A pattern without `/`
matches the basename at any depth; with `/` it matches the whole relative path.

Choices the spec leaves open: grep skips binary files (a NUL byte in the first 8 KiB, or not
valid UTF-8) and counts them in `metadata["skippedBinary"]` when there are any; a trailing `\\r`
(CRLF files) is not part of the matched or printed line; `limit <= 0` means "no limit" for both
tools.
"""

from __future__ import annotations

import asyncio
import errno
import itertools
import os
import re
from collections.abc import Iterator, Mapping
from typing import Any, Optional

from .._walk import IGNORE_DIRS, FileWalk
from ..types import Tool, ToolContext, ToolResult
from ._paths import resolve_dir
from ._settings import BuiltinSettings
from ._tooling import ToolError, build_tool, number_arg, object_schema, optional_str, prop, required_str

__all__ = [
    "IGNORE_DIRS",
    "GREP_DESCRIPTION",
    "GLOB_DESCRIPTION",
    "GREP_SCHEMA",
    "GLOB_SCHEMA",
    "walk_files",
    "glob_to_regex",
    "glob_matcher",
    "make_grep",
    "make_glob",
]

GREP_DESCRIPTION = "Search file contents by regex under a directory. Output is file:line:text matches."
GREP_SCHEMA = object_schema(
    {
        "pattern": prop("string", "Regular expression to search for"),
        "path": prop("string", "Directory to search (default: process cwd)"),
        "include": prop("string", "Glob filter for file names"),
        "limit": prop("number", "Maximum number of matches (default 100)"),
    },
    ["pattern"],
)
GLOB_DESCRIPTION = "List files matching a glob under a directory. Output is newline-joined relative paths."
GLOB_SCHEMA = object_schema(
    {
        "pattern": prop("string", "Glob pattern to match"),
        "path": prop("string", "Directory to search (default: process cwd)"),
        "limit": prop("number", "Maximum number of results (default 100)"),
    },
    ["pattern"],
)

DEFAULT_LIMIT = 100
_BINARY_SNIFF = 8192


def _files_under(root: str) -> Iterator[tuple[str, str]]:
    """`(relative "/" path, full path)` of the regular files under `root`, lazily, in walk order."""
    if not os.path.lexists(root):
        raise FileNotFoundError(errno.ENOENT, os.strerror(errno.ENOENT), root)
    if not os.path.isdir(root):
        return iter(())
    return ((rel, path) for path, rel in FileWalk(root, follow_symlinks=False))


def walk_files(root: str) -> list[tuple[str, str]]:
    """`(relative "/" path, full path)` of every regular file under `root`, sorted by relative path."""
    return list(_files_under(root))


def glob_to_regex(pattern: str) -> str:
    """The anchored regex source for a glob pattern (rules in the module docstring)."""
    out: list[str] = []
    i = 0
    while i < len(pattern):
        char = pattern[i]
        if pattern.startswith("**", i):
            out.append(".*")
            i += 3 if pattern.startswith("/", i + 2) else 2
            continue
        if char == "*":
            out.append("[^/]*")
        elif char == "?":
            out.append("[^/]")
        else:
            out.append(re.escape(char))
        i += 1
    return "^" + "".join(out) + "$"


def glob_matcher(pattern: str) -> Any:
    """A predicate on `/`-relative paths: basename match without `/` in the pattern, else full path."""
    regex = re.compile(glob_to_regex(pattern), re.DOTALL)
    if "/" in pattern:
        return lambda rel: regex.match(rel) is not None
    return lambda rel: regex.match(rel.rsplit("/", 1)[-1]) is not None


def _limit(args: Mapping[str, Any]) -> Optional[int]:
    value = number_arg(args, "limit")
    limit = DEFAULT_LIMIT if value is None else int(value)
    return limit if limit > 0 else None


def _text_of(full: str) -> tuple[Optional[str], bool]:
    """`(text, False)`; `(None, True)` for a binary file; `(None, False)` when unreadable."""
    try:
        with open(full, "rb") as handle:
            data = handle.read()
    except OSError:
        return None, False
    if b"\0" in data[:_BINARY_SNIFF]:
        return None, True
    try:
        return data.decode("utf-8"), False
    except UnicodeDecodeError:
        return None, True


def _grep(root: str, regex: re.Pattern[str], include: Optional[str], limit: Optional[int]) -> ToolResult:
    accept = glob_matcher(include) if include else None
    matches: list[str] = []
    skipped = 0
    for rel, full in _files_under(root):
        if accept is not None and not accept(rel):
            continue
        text, binary = _text_of(full)
        if text is None:
            skipped += binary
            continue
        for number, line in enumerate(text.split("\n"), start=1):
            if line.endswith("\r"):
                line = line[:-1]
            if regex.search(line):
                matches.append(f"{rel}:{number}:{line}")
                if limit is not None and len(matches) >= limit:
                    return _grep_result(matches, skipped)
    return _grep_result(matches, skipped)


def _grep_result(matches: list[str], skipped: int) -> ToolResult:
    metadata: dict[str, Any] = {"count": len(matches)}
    if skipped:
        metadata["skippedBinary"] = skipped
    return ToolResult("\n".join(matches), False, metadata=metadata)


def make_grep(settings: BuiltinSettings) -> Tool:
    def work(path: Optional[str], regex: re.Pattern[str], include: Optional[str], limit: Optional[int]) -> ToolResult:
        return _grep(resolve_dir(settings, path), regex, include, limit)

    async def run(args: Mapping[str, Any], ctx: Optional[ToolContext]) -> ToolResult:
        pattern = required_str(args, "pattern")
        try:
            regex = re.compile(pattern)
        except re.error as exc:
            raise ToolError(f"invalid regex: {exc}") from None
        include = optional_str(args, "include")
        return await asyncio.to_thread(work, optional_str(args, "path"), regex, include, _limit(args))

    return build_tool("grep", GREP_DESCRIPTION, GREP_SCHEMA, run)


def make_glob(settings: BuiltinSettings) -> Tool:
    def work(path: Optional[str], pattern: str, limit: Optional[int]) -> ToolResult:
        accept = glob_matcher(pattern)
        matching = (rel for rel, _ in _files_under(resolve_dir(settings, path)) if accept(rel))
        hits = list(itertools.islice(matching, limit))
        return ToolResult("\n".join(hits), False, metadata={"count": len(hits)})

    async def run(args: Mapping[str, Any], ctx: Optional[ToolContext]) -> ToolResult:
        pattern = required_str(args, "pattern")
        return await asyncio.to_thread(work, optional_str(args, "path"), pattern, _limit(args))

    return build_tool("glob", GLOB_DESCRIPTION, GLOB_SCHEMA, run)
