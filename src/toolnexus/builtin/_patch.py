"""The `apply_patch` built-in: stage every file operation of a patch, then commit all or none.

The document itself (grammar, hunks, line endings) is `_patch_text`; this module applies its
`FileOp`s to files:
- Paths are resolved like every file tool's (`_paths`). Add on an existing file is
  `file already exists`, Delete or Update of a missing one `file not found`.
- Each file is staged once: a second operation on the same path sees the first one's result
  (Delete then Add recreates, two Updates compose) instead of overwriting it. `*** Move to: q`
  renames after the hunks apply; the target must not exist and inherits the file's mode.
- Commit is atomic across files: every new content is first written to a temp file beside its
  target (parents created), then all are renamed into place, then deletions run. If any step
  fails, files already replaced are restored from their original bytes, new files and created
  directories are removed, and the error says the patch was rolled back (or names the paths a
  failed rollback could not restore).
Result metadata: `{"added": [...], "updated": [...], "deleted": [...]}` (paths as written in the
patch), plus `"moved": {from: to}` when the patch moves files.
"""

from __future__ import annotations

import asyncio
import os
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any, Optional

from ..types import Tool, ToolContext, ToolResult
from ._fsio import StagedWrite, decode_utf8, file_mode, read_capped, stage_write, write_atomic
from ._patch_text import FileOp as FileOp, Hunk as Hunk, apply_hunks, parse_patch as parse_patch
from ._paths import resolve_path
from ._settings import EDIT_MAX_BYTES, BuiltinSettings
from ._tooling import ToolError, build_tool, object_schema, prop

APPLY_PATCH_DESCRIPTION = (
    "Apply a patch (Begin/End Patch grammar: Add/Update/Delete File). "
    "Atomic — a non-matching hunk aborts with no writes."
)
APPLY_PATCH_SCHEMA = object_schema(
    {"patchText": prop("string", "The patch text in Begin/End Patch format")}, ["patchText"]
)


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
        self.original = read_capped(self.real, self.real, EDIT_MAX_BYTES, "patched")
        self.mode = file_mode(self.real)
        return self.original

    def load(self) -> str:
        if self.staged:
            assert self.content is not None
            return self.content
        return decode_utf8(self.read_original(), self.real)

    def restore(self) -> bool:
        """Put a replaced or deleted file back as it was (for rollback); False if that failed."""
        try:
            if self.link is not None:
                if os.path.lexists(self.real):
                    os.unlink(self.real)
                os.symlink(self.link, self.real)
            elif self.original is not None:
                write_atomic(self.real, self.original)
            elif os.path.lexists(self.real):
                os.unlink(self.real)
        except OSError:
            return False
        return True

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
            lost = _roll_back(staged, done, removed)
            if lost:
                outcome = "rollback failed, could not restore: " + ", ".join(lost)
            else:
                outcome = "patch rolled back" if done or removed else "no file was changed"
            raise ToolError(f"{exc} ({outcome})") from exc


def _roll_back(staged: list[tuple[_Entry, StagedWrite]], done: list[_Entry], removed: list[_Entry]) -> list[str]:
    """Put back everything touched, drop temp files and the directories we created.

    Best effort: returns the paths that could not be restored, so the error can name them.
    """
    lost = [entry.real for entry in done if not entry.restore()]
    for _, write in staged:
        write.discard()  # a committed temp is gone already; this removes directories we created
    return lost + [entry.real for entry in removed if not entry.restore()]


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
