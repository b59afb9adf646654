"""The `apply_patch` document as text: parse it, and apply its hunks to a file's text. Pure.

Grammar: `*** Begin Patch`, then `*** Add File: p` / `*** Update File: p` /
`*** Delete File: p` sections, then `*** End Patch`. Add bodies are `+`lines (one `+` removed,
other lines verbatim, joined by `\\n`, no trailing newline added). Update bodies are hunks split at
`@@` lines: `-old`, `+new`, ` context`, and any other line is context as written.

What ours adds over the baseline grammar:
- `*** Move to: q` as the first line of an Update body renames the file (the staging in `patch`
  carries it out). `*** End of File` inside a hunk anchors it to the end of the file.
- Hunks match whole lines, never a substring in the middle of a line. The search starts after
  the previous hunk of the same file, then wraps to the top; a hunk whose lines match exactly
  wins over one that only matches ignoring trailing whitespace. Blank lines at the start or end
  of a hunk (separators the model left) are not context.
- Line endings: a text is handled as lines plus their own endings, so untouched lines keep
  theirs (CRLF stays CRLF), added lines take the text's dominant ending, a text that ended
  without a newline still does, and a UTF-8 BOM is kept. A pure-addition hunk appends its lines
  and keeps the final-newline state. CRLF in the patch text itself is read as LF.
Not here: files (`patch` stages and commits them), fuzzy matching beyond trailing whitespace,
`@@` header anchors (headers are ignored).
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from typing import Any, Optional

from ._tooling import ToolError

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
        body = "".join(line + eol for line, eol in zip(self.lines, self.eols, strict=True))
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
