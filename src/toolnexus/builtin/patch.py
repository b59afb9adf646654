"""The `apply_patch` built-in: parse a Begin/End Patch document, stage every change, commit all or none.

Grammar (spec §3.4): `*** Begin Patch`, then `*** Add File: p` / `*** Update File: p` /
`*** Delete File: p` sections, then `*** End Patch`. Add bodies are `+`lines (one `+` removed,
other lines verbatim, joined by `\\n`, no trailing newline added). Update bodies are hunks split at
`@@` lines: `-old`, `+new`, ` context`, and any other line is context as written.

What ours adds over the baseline grammar:
- `*** Move to: q` as the first line of an Update body renames the file (after its hunks apply);
  the target must not exist. `*** End of File` inside a hunk anchors it to the end of the file.
- Each file is staged once: a second operation on the same path sees the first one's result
  (Delete then Add recreates, two Updates compose) instead of overwriting it.
- Hunks match whole lines, never a substring in the middle of a line. The search starts after
  the previous hunk of the same file, then wraps to the top; a hunk whose lines match exactly
  wins over one that only matches ignoring trailing whitespace. Blank lines at the start or end
  of a hunk (separators the model left) are not context.
- Line endings: files are handled as lines plus their own endings, so untouched lines keep
  theirs (CRLF stays CRLF), added lines take the file's dominant ending, a file that ended
  without a newline still does, and a UTF-8 BOM is kept. A pure-addition hunk appends its lines
  and keeps the file's final-newline state. CRLF in the patch text itself is read as LF.
- Commit is atomic across files: every new content is first written to a temp file beside its
  target (parents created), then all are renamed into place, then deletions run. If any step
  fails, files already replaced are restored from their original bytes, new files and created
  directories are removed, and the error says the patch was rolled back.
Result metadata: `{"added": [...], "updated": [...], "deleted": [...]}` (paths as written in the
patch), plus `"moved": {from: to}` when the patch moves files.
Not here: fuzzy matching beyond trailing whitespace, `@@` header anchors (headers are ignored).
"""

from __future__ import annotations

import asyncio
import os
import re
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any, Optional

from ..types import Tool, ToolContext, ToolResult
from ._fsio import StagedWrite, decode_utf8, file_mode, stage_write, write_atomic
from ._paths import resolve_path
from ._settings import BuiltinSettings
from ._tooling import ToolError, build_tool, object_schema, prop

__all__ = ["APPLY_PATCH_DESCRIPTION", "APPLY_PATCH_SCHEMA", "FileOp", "Hunk", "parse_patch", "make_apply_patch"]

APPLY_PATCH_DESCRIPTION = (
    "Apply a patch (Begin/End Patch grammar: Add/Update/Delete File). "
    "Atomic — a non-matching hunk aborts with no writes."
)
APPLY_PATCH_SCHEMA = object_schema(
    {"patchText": prop("string", "The patch text in Begin/End Patch format")}, ["patchText"]
)

_OP_HEADER = re.compile(r"^\*\*\* (Add|Update|Delete) File: (.+)$")
_MOVE = "*** Move to:"
_END_OF_FILE = "*** End of File"
_BOM = "\ufeff"


# -------------------------------------------------------------------------------------- parsing


@dataclass
class Hunk:
    """One `@@` section: `(op, text)` lines with op in `" "`, `"-"`, `"+"`."""

    lines: list[tuple[str, str]] = field(default_factory=list)
    at_eof: bool = False

    @property
    def old(self) -> list[str]:
        return [text for op, text in self.lines if op != "+"]


@dataclass
class FileOp:
    """One file section of a patch."""

    kind: str  # "add" | "update" | "delete"
    path: str
    content: str = ""  # add
    hunks: list[Hunk] = field(default_factory=list)  # update
    move_to: Optional[str] = None  # update


def _trim_blank(raw: list[str]) -> list[str]:
    start, end = 0, len(raw)
    while start < end and raw[start] == "":
        start += 1
    while end > start and raw[end - 1] == "":
        end -= 1
    return raw[start:end]


def _hunk(raw: list[str]) -> Optional[Hunk]:
    hunk = Hunk()
    for line in _trim_blank(raw):
        if line.strip() == _END_OF_FILE:
            hunk.at_eof = True
        elif line[:1] in ("-", "+", " "):
            hunk.lines.append((line[0], line[1:]))
        else:
            hunk.lines.append((" ", line))
    return hunk if hunk.lines or hunk.at_eof else None


def _update_op(path: str, body: list[str]) -> FileOp:
    op = FileOp("update", path)
    if body and body[0].startswith(_MOVE):
        op.move_to = body[0][len(_MOVE) :].strip()
        if not op.move_to:
            raise ToolError(f"empty path in '{body[0]}' (Update File: {path})")
        body = body[1:]
    raw: list[str] = []
    for line in body + ["@@"]:
        if line.startswith(_MOVE):
            raise ToolError(f"'{_MOVE}' must directly follow '*** Update File: {path}'")
        if line.startswith("@@"):
            hunk = _hunk(raw)
            if hunk is not None:
                op.hunks.append(hunk)
            raw = []
        else:
            raw.append(line)
    return op


def _file_op(kind: str, path: str, body: list[str]) -> FileOp:
    if kind == "Add":
        return FileOp("add", path, content="\n".join(line[1:] if line.startswith("+") else line for line in body))
    if kind == "Delete":
        return FileOp("delete", path)
    return _update_op(path, body)


def parse_patch(text: Any) -> list[FileOp]:
    """The file operations of a patch document, or `ToolError` naming what is malformed."""
    if not isinstance(text, str) or not text:
        raise ToolError("patchText is required")
    lines = text.replace("\r\n", "\n").split("\n")
    i = 0
    while i < len(lines) and not lines[i].strip():
        i += 1
    if i == len(lines) or lines[i].strip() != "*** Begin Patch":
        raise ToolError("missing '*** Begin Patch'")
    i += 1
    ops: list[FileOp] = []
    while i < len(lines):
        line = lines[i]
        if line.strip() == "*** End Patch":
            return ops
        i += 1
        if not line.strip():
            continue
        header = _OP_HEADER.match(line)
        if header is None:
            raise ToolError(f"unexpected line: {line}")
        path = header.group(2).strip()
        if not path:
            raise ToolError(f"empty path in: {line}")
        start = i
        while i < len(lines) and not _OP_HEADER.match(lines[i]) and lines[i].strip() != "*** End Patch":
            i += 1
        ops.append(_file_op(header.group(1), path, lines[start:i]))
    raise ToolError("missing '*** End Patch'")


# ------------------------------------------------------------------------------- hunk matching


class _Lines:
    """A text as lines plus each line's own ending (`"\\n"`, `"\\r\\n"` or `""` at EOF)."""

    def __init__(self, text: str) -> None:
        self.bom = text.startswith(_BOM)
        if self.bom:
            text = text[1:]
        self.lines: list[str] = []
        self.eols: list[str] = []
        parts = text.split("\n")
        for index, part in enumerate(parts):
            if index == len(parts) - 1:
                if part:
                    self.lines.append(part)
                    self.eols.append("")
            elif part.endswith("\r"):
                self.lines.append(part[:-1])
                self.eols.append("\r\n")
            else:
                self.lines.append(part)
                self.eols.append("\n")
        self.newline = "\r\n" if self.eols.count("\r\n") > self.eols.count("\n") else "\n"

    def text(self) -> str:
        body = "".join(line + eol for line, eol in zip(self.lines, self.eols))
        return (_BOM if self.bom else "") + body

    def _locate(self, old: list[str], cursor: int, at_eof: bool) -> Optional[int]:
        count, size = len(old), len(self.lines)
        if count > size:
            return None
        if at_eof:
            starts = [size - count]
        else:
            cursor = min(cursor, size - count + 1)
            starts = [*range(cursor, size - count + 1), *range(0, cursor)]
        for same in (str.__eq__, lambda a, b: a.rstrip() == b.rstrip()):
            for start in starts:
                if all(same(self.lines[start + j], old[j]) for j in range(count)):
                    return start
        return None

    def _append(self, hunk: Hunk) -> int:
        added = [text for op, text in hunk.lines if op == "+"]
        if not added:
            return len(self.lines)
        final_eol = self.eols[-1] if self.lines else ""
        if self.lines and not final_eol:
            self.eols[-1] = self.newline
        self.lines += added
        self.eols += [self.newline] * len(added)
        self.eols[-1] = final_eol
        return len(self.lines)

    def apply(self, hunk: Hunk, cursor: int) -> Optional[int]:
        """Apply one hunk at or after `cursor`; the new cursor, or None when it does not match."""
        old = hunk.old
        if not old:
            return self._append(hunk)
        start = self._locate(old, cursor, hunk.at_eof)
        if start is None:
            return None
        lines: list[str] = []
        eols: list[str] = []
        at = start
        for op, text in hunk.lines:
            if op == " ":
                lines.append(self.lines[at])
                eols.append(self.eols[at])
            elif op == "+":
                lines.append(text)
                eols.append(self.newline)
            at += op != "+"
        for j in range(len(eols) - 1):
            eols[j] = eols[j] or self.newline
        if hunk.lines[-1][0] == "+":
            eols[-1] = self.eols[start + len(old) - 1]
        self.lines[start : start + len(old)] = lines
        self.eols[start : start + len(old)] = eols
        return start + len(lines)


def apply_hunks(text: str, hunks: list[Hunk], shown: str) -> str:
    """`text` with every hunk applied in order, or `ToolError` naming the first that does not match."""
    target = _Lines(text)
    cursor = 0
    for number, hunk in enumerate(hunks, start=1):
        moved = target.apply(hunk, cursor)
        if moved is None:
            raise ToolError(f"hunk does not match file contents of {shown} (hunk {number} of {len(hunks)})")
        cursor = moved
    return target.text()


# ------------------------------------------------------------------------------------- staging


@dataclass
class _Entry:
    """One path's state: on disk before the patch, and as staged by the patch so far."""

    real: str
    on_disk: bool
    original: Optional[bytes] = None  # read before the entry is changed, for rollback
    link: Optional[str] = None  # a deleted symlink's target, for rollback
    staged: bool = False
    content: Optional[str] = None  # None while staged ⇒ deleted
    mode: Optional[int] = None  # permission bits of the original; a moved-in file inherits them

    @property
    def present(self) -> bool:
        return self.content is not None if self.staged else self.on_disk

    def read_original(self) -> bytes:
        with open(self.real, "rb") as handle:
            self.original = handle.read()
        self.mode = file_mode(self.real)
        return self.original

    def load(self) -> str:
        if self.staged:
            assert self.content is not None
            return self.content
        return decode_utf8(self.read_original(), self.real)

    def restore(self) -> None:
        """Put a replaced or deleted file back as it was (best effort, for rollback)."""
        try:
            if self.link is not None:
                if os.path.lexists(self.real):
                    os.unlink(self.real)
                os.symlink(self.link, self.real)
            elif self.original is not None:
                write_atomic(self.real, self.original)
            else:
                os.unlink(self.real)
        except OSError:
            pass

    def set(self, content: Optional[str]) -> None:
        self.staged = True
        self.content = content


class _Stage:
    def __init__(self, settings: BuiltinSettings) -> None:
        self.settings = settings
        self.entries: dict[str, _Entry] = {}

    def entry(self, path: str) -> _Entry:
        real = resolve_path(self.settings, path)
        key = os.path.normcase(os.path.abspath(real))
        if key not in self.entries:
            self.entries[key] = _Entry(real=real, on_disk=os.path.lexists(real))
        return self.entries[key]

    def add(self, op: FileOp) -> None:
        entry = self.entry(op.path)
        if entry.present:
            raise ToolError(f"file already exists: {entry.real}")
        entry.set(op.content)

    def delete(self, op: FileOp) -> None:
        entry = self.entry(op.path)
        if not entry.present:
            raise ToolError(f"file not found: {entry.real}")
        if not entry.staged:
            if os.path.islink(entry.real):
                entry.link = os.readlink(entry.real)
            elif os.path.isdir(entry.real):
                raise ToolError(f"not a file: {entry.real}")
            else:
                entry.read_original()
        entry.set(None)

    def update(self, op: FileOp) -> None:
        entry = self.entry(op.path)
        if entry.staged and entry.content is None:
            raise ToolError(f"file not found: {entry.real}")
        updated = apply_hunks(entry.load(), op.hunks, entry.real)
        if op.move_to is None:
            entry.set(updated)
            return
        dest = self.entry(op.move_to)
        if dest is not entry:
            if dest.present:
                raise ToolError(f"move target already exists: {dest.real}")
            dest.mode = entry.mode
            entry.set(None)
        dest.set(updated)

    def commit(self) -> None:
        """Write everything or nothing (see the module docstring)."""
        changed = [e for e in self.entries.values() if e.staged]
        writes = [(e, e.content.encode("utf-8")) for e in changed if e.content is not None]
        writes = [(e, data) for e, data in writes if data != e.original]
        deletes = [e for e in changed if e.content is None and e.on_disk]
        staged: list[tuple[_Entry, StagedWrite]] = []
        done: list[_Entry] = []
        removed: list[_Entry] = []
        try:
            for entry, data in writes:
                mode = None if entry.on_disk else entry.mode
                staged.append((entry, stage_write(entry.real, data, mode, follow_links=entry.link is None)))
            for entry, write in staged:
                write.commit()
                done.append(entry)
            for entry in deletes:
                try:
                    os.unlink(entry.real)
                except FileNotFoundError:
                    pass
                removed.append(entry)
        except Exception as exc:
            _roll_back(staged, done, removed)
            outcome = "patch rolled back" if done or removed else "no file was changed"
            raise ToolError(f"{exc} ({outcome})") from exc


def _roll_back(staged: list[tuple[_Entry, StagedWrite]], done: list[_Entry], removed: list[_Entry]) -> None:
    """Best effort: put back everything touched, drop temp files and the directories we created."""
    for entry in done:
        entry.restore()
    for _, write in staged:
        write.discard()  # a committed temp is gone already; this removes directories we created
    for entry in removed:
        entry.restore()


# ------------------------------------------------------------------------------------ the tool


def _summary(ops: list[FileOp]) -> ToolResult:
    metadata: dict[str, Any] = {"added": [], "updated": [], "deleted": []}
    moved: dict[str, str] = {}
    for op in ops:
        metadata[{"add": "added", "update": "updated", "delete": "deleted"}[op.kind]].append(op.path)
        if op.move_to is not None:
            moved[op.path] = op.move_to
    if moved:
        metadata["moved"] = moved
    count = len(ops)
    return ToolResult(f"Applied patch: {count} file operation{'' if count == 1 else 's'}", False, metadata=metadata)


def make_apply_patch(settings: BuiltinSettings) -> Tool:
    def work(ops: list[FileOp]) -> None:
        stage = _Stage(settings)
        for op in ops:
            getattr(stage, op.kind)(op)
        stage.commit()

    async def run(args: Mapping[str, Any], ctx: Optional[ToolContext]) -> ToolResult:
        ops = parse_patch(args.get("patchText"))
        await asyncio.to_thread(work, ops)
        return _summary(ops)

    return build_tool("apply_patch", APPLY_PATCH_DESCRIPTION, APPLY_PATCH_SCHEMA, run)
