"""The `grep` and `glob` built-ins, with the glob matcher they share.

They walk with `toolnexus._walk.FileWalk` (the walker skills use too) in its no-symlink mode:
symlinks (to files or directories) are neither followed nor listed, `IGNORE_DIRS` are skipped,
dotfiles are kept, unreadable directories are skipped, and files come in `/`-separated relative
path order (code point). A start path that is a file yields nothing; a missing start directory
is an error. The walk is lazy, so both tools stop walking once `limit` is reached; the walk (and
grep's reads) runs in one worker thread.

Glob patterns compile to an anchored regex: `**` ⇒ `.*` (also eating one following `/`), `*` ⇒
`[^/]*`, `?` ⇒ `[^/]`, everything else literal (no classes, no braces). A pattern without `/`
matches the basename at any depth; with `/` it matches the whole relative path.

Choices of ours: grep skips binary files (a NUL byte in the first 8 KiB, or not
valid UTF-8) and counts them in `metadata["skippedBinary"]` when there are any; a trailing `\\r`
(CRLF files) is not part of the matched or printed line; `limit <= 0` means "no limit" for both
tools.

Bounded, because the pattern comes from the model and the files can be anything:
- Time. Patterns keep Python `re` syntax (checked with `re`, so the error texts are `re`'s), but
  matching runs on the `regex` engine with a timeout and with the GIL released: a pattern that
  backtracks exponentially (`(a+)+$`, `(a|aa)+$`) on some line is stopped once that one line
  took `grep_line_budget` (1 s), and a whole call is stopped after `grep_regex_budget` (60 s),
  each with an error saying so; the event loop is never held meanwhile. The timeout costs a
  little per line over plain `re` (figures in docs/performance.md).
  Why `regex` and not a linear-time engine such as RE2: RE2 drops backreferences and lookaround
  (patterns models do write), and its Python binding was much slower per line here; `regex`
  matches at `re`'s speed, accepts every `re` pattern, and is imported on the first grep only.
  The glob matcher (`include` and `glob`) compiles to a regex too; repeated `*` / `**` are
  collapsed and it uses the same engine and budget.
- Memory. Files are read in 1 MiB chunks, never whole: at most `grep_max_file_bytes` (64 MiB) of
  one file is scanned (then a notice line says the rest was not), a line longer than
  `grep_max_line_bytes` (1 MiB) is matched on its first MiB, and a matched line is shown up to
  `grep_show_line_chars` (2000) characters plus `…`.
- Only regular files are read: the walk lists no FIFOs, devices or sockets, and each file is
  opened non-blocking and checked again, so a FIFO swapped in cannot hang the worker.
"""

from __future__ import annotations

import asyncio
import errno
import itertools
import os
import re
import time
from collections.abc import Iterator, Mapping
from typing import Any, Optional

from .._walk import IGNORE_DIRS as IGNORE_DIRS, FileWalk
from ..errors import ToolnexusError
from ..types import Tool, ToolContext, ToolResult
from ._fsio import open_regular
from ._paths import resolve_dir
from ._settings import BuiltinSettings
from ._tooling import ToolError, build_tool, number_arg, object_schema, optional_str, prop, required_str

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
_CHUNK = 1 << 20


class _Budget:
    """Time limits on one call's regex matching: `per_line` seconds for any single search (far
    more than a sane pattern ever needs on one line, so exceeding it means catastrophic
    backtracking) and `total` seconds for the whole call. Either raises `ToolError`."""

    def __init__(self, per_line: float, total: float) -> None:
        self.per_line = per_line
        self.total = total
        self.deadline = time.monotonic() + total

    def left(self) -> float:
        left = self.deadline - time.monotonic()
        if left <= 0:
            raise ToolError(f"stopped after {self.total:g}s of matching; narrow the path, the include "
                            "filter or the pattern")
        return min(left, self.per_line)

    def exhausted(self) -> ToolError:
        if self.deadline - time.monotonic() <= 0:
            return ToolError(f"stopped after {self.total:g}s of matching; narrow the path, the include "
                             "filter or the pattern")
        return ToolError(
            f"the pattern took more than {self.per_line:g}s to match one line and was stopped; it probably "
            "backtracks exponentially (nested quantifiers such as (a+)+ or (a|aa)+) — simplify it"
        )


def compile_pattern(pattern: str, flags: int = 0) -> Any:
    """`pattern` in `re` syntax (re's error text), compiled for the `regex` engine."""
    try:
        re.compile(pattern, flags)
    except re.error as exc:
        raise ToolError(f"invalid regex: {exc}") from None
    import regex

    try:
        return regex.compile(pattern, flags | regex.VERSION0)
    except regex.error as exc:  # pragma: no cover - re accepted it; kept for safety
        raise ToolError(f"invalid regex: {exc}") from None


def _search(compiled: Any, text: str, budget: _Budget) -> bool:
    try:
        return compiled.search(text, timeout=budget.left(), concurrent=True) is not None
    except TimeoutError:
        raise budget.exhausted() from None


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
            if not out or out[-1] != ".*":  # `**/**` is one `**`: repeated `.*` only adds backtracking
                out.append(".*")
            i += 3 if pattern.startswith("/", i + 2) else 2
            continue
        if char == "*":
            if out and out[-1] == "[^/]*":
                i += 1
                continue
            out.append("[^/]*")
        elif char == "?":
            out.append("[^/]")
        else:
            out.append(re.escape(char))
        i += 1
    return "^" + "".join(out) + "$"


def glob_matcher(pattern: str, budget: Optional[_Budget] = None) -> Any:
    """A predicate on `/`-relative paths: basename match without `/` in the pattern, else full path.

    Matching is bounded by `budget` (1 s per path, 60 s in all, when not given), like grep's."""
    compiled = compile_pattern(glob_to_regex(pattern), re.DOTALL)
    spent = budget or _Budget(1.0, 60.0)
    if "/" in pattern:
        return lambda rel: _search(compiled, rel, spent)
    return lambda rel: _search(compiled, rel.rsplit("/", 1)[-1], spent)


def _limit(args: Mapping[str, Any]) -> Optional[int]:
    value = number_arg(args, "limit")
    limit = DEFAULT_LIMIT if value is None else int(value)
    return limit if limit > 0 else None


class _FileScan:
    """One file's matches, read in bounded chunks (see the module docstring)."""

    def __init__(self, settings: BuiltinSettings) -> None:
        self.settings = settings
        self.capped: list[str] = []  # files scanned only up to the per-file cap

    def lines(self, full: str, rel: str) -> Optional[Iterator[tuple[int, bytes]]]:
        """`(number, raw line)` of a text file; None when unreadable. Raises `_Binary`."""
        try:
            handle = open_regular(full, rel)
        except (OSError, ToolError):
            return None
        return self._lines(handle, rel)

    def _lines(self, handle: Any, rel: str) -> Iterator[tuple[int, bytes]]:
        cap, long_line = self.settings.grep_max_file_bytes, self.settings.grep_max_line_bytes
        number, pending, dropping, read = 0, bytearray(), False, 0
        with handle:
            while read < cap:
                chunk = handle.read(min(_CHUNK, cap - read))
                if not chunk:
                    break
                if read == 0 and b"\0" in chunk[:_BINARY_SNIFF]:
                    raise _Binary()
                read += len(chunk)
                start = 0
                while True:
                    cut = chunk.find(b"\n", start)
                    piece = chunk[start:] if cut < 0 else chunk[start:cut]
                    if not dropping:
                        pending += piece[: max(0, long_line - len(pending))]
                        dropping = len(pending) >= long_line
                    if cut < 0:
                        break
                    number += 1
                    yield number, bytes(pending)
                    pending, dropping, start = bytearray(), False, cut + 1
            else:
                if handle.read(1):
                    self.capped.append(rel)
        yield number + 1, bytes(pending)


class _Binary(ToolnexusError):
    """The file is not UTF-8 text."""


def _shown(line: str, limit: int) -> str:
    return line if len(line) <= limit else line[:limit] + "…"


def _grep(root: str, compiled: Any, include: Optional[str], limit: Optional[int],
          settings: BuiltinSettings) -> ToolResult:
    budget = _Budget(settings.grep_line_budget, settings.grep_regex_budget)
    accept = glob_matcher(include, budget) if include else None
    scan = _FileScan(settings)
    matches: list[str] = []
    skipped = 0
    for rel, full in _files_under(root):
        if accept is not None and not accept(rel):
            continue
        lines = scan.lines(full, rel)
        if lines is None:
            continue
        found: list[str] = []
        try:
            for number, raw in lines:
                try:
                    line = raw.decode("utf-8")
                except UnicodeDecodeError:
                    if len(raw) >= settings.grep_max_line_bytes:  # cut mid-character at the line cap
                        line = raw.decode("utf-8", "ignore")
                    else:
                        raise _Binary() from None
                if line.endswith("\r"):
                    line = line[:-1]
                if (limit is None or len(matches) + len(found) < limit) and _search(compiled, line, budget):
                    found.append(f"{rel}:{number}:{_shown(line, settings.grep_show_line_chars)}")
        except _Binary:
            skipped += 1
            continue
        matches += found
        if limit is not None and len(matches) >= limit:
            break
    return _grep_result(matches, skipped, scan.capped, settings.grep_max_file_bytes)


def _grep_result(matches: list[str], skipped: int, capped: list[str], cap: int) -> ToolResult:
    metadata: dict[str, Any] = {"count": len(matches)}
    if skipped:
        metadata["skippedBinary"] = skipped
    text = "\n".join(matches)
    if capped:
        metadata["partialFiles"] = capped
        notice = f"[grep: only the first {cap} bytes of {', '.join(capped)} were searched]"
        text = f"{text}\n{notice}" if text else notice
    return ToolResult(text, False, metadata=metadata)


def make_grep(settings: BuiltinSettings) -> Tool:
    def work(path: Optional[str], pattern: str, include: Optional[str], limit: Optional[int]) -> ToolResult:
        compiled = compile_pattern(pattern)
        return _grep(resolve_dir(settings, path), compiled, include, limit, settings)

    async def run(args: Mapping[str, Any], ctx: Optional[ToolContext]) -> ToolResult:
        pattern = required_str(args, "pattern")
        include = optional_str(args, "include")
        return await asyncio.to_thread(work, optional_str(args, "path"), pattern, include, _limit(args))

    return build_tool("grep", GREP_DESCRIPTION, GREP_SCHEMA, run, idempotent=True)


def make_glob(settings: BuiltinSettings) -> Tool:
    def work(path: Optional[str], pattern: str, limit: Optional[int]) -> ToolResult:
        accept = glob_matcher(pattern)
        matching = (rel for rel, _ in _files_under(resolve_dir(settings, path)) if accept(rel))
        hits = list(itertools.islice(matching, limit))
        return ToolResult("\n".join(hits), False, metadata={"count": len(hits)})

    async def run(args: Mapping[str, Any], ctx: Optional[ToolContext]) -> ToolResult:
        pattern = required_str(args, "pattern")
        return await asyncio.to_thread(work, optional_str(args, "path"), pattern, _limit(args))

    return build_tool("glob", GLOB_DESCRIPTION, GLOB_SCHEMA, run, idempotent=True)
