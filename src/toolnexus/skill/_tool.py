"""The `skill` tool: hands the model one skill's instructions, base location and a file sample.

The pinned output block is built here. For a filesystem skill the sample is the skill
directory's files (every `SKILL.md` excluded) in `/`-relative code-point order, capped by the
sample limit; the walk runs in a worker thread, stops as soon as the sample is full or the entry
cap is hit, and is cached per directory for the life of the source (skill directories are
treated as static resources: files added later are not seen until the skills are reloaded).
Data skills list their declared `resources` instead; nothing is read for them.
"""

from __future__ import annotations

import asyncio
import os
import pathlib
import threading
from collections.abc import Mapping
from typing import Any, Optional

from .._walk import walk_files
from ..types import JSONSchema, Tool, ToolContext, ToolResult
from ._model import SkillInfo

SKILL_TOOL_DESCRIPTION = (
    "Load a specialized skill when the task at hand matches one of the skills listed in the system prompt.\n"
    "\n"
    "Use this tool to inject the skill's instructions and resources into current conversation. The output "
    "may contain detailed workflow guidance as well as references to scripts, files, etc in the same "
    "directory as the skill.\n"
    "\n"
    "The skill name must match one of the skills listed in your system prompt."
)

DEFAULT_SAMPLE = 10
MAX_SAMPLE_WALK_ENTRIES = 20_000  # directory entries looked at per sample; bounds huge skill dirs
SKILL_FILE = "SKILL.md"


def skill_tool_schema() -> JSONSchema:
    """A fresh copy of the pinned input schema."""
    return {
        "type": "object",
        "properties": {"name": {"type": "string", "description": "The name of the skill to load"}},
        "required": ["name"],
        "additionalProperties": False,
    }


def render_skill_block(name: str, content: str, base: str, files: Optional[list[str]]) -> str:
    """The pinned `<skill_content>` block; `files=None` means no file block at all."""
    lines = [
        f'<skill_content name="{name}">',
        f"# Skill: {name}",
        "",
        content.strip(),
        "",
        f"Base directory for this skill: {base}",
        "Relative paths in this skill (e.g., scripts/, reference/) are relative to this base directory.",
    ]
    if files is not None:
        lines += ["Note: file list is sampled.", "", "<skill_files>"]
        lines.append("\n".join(f"<file>{f}</file>" for f in files))
        lines.append("</skill_files>")
    lines.append("</skill_content>")
    return "\n".join(lines)


class _DirSampler:
    """Per-source cache of directory samples; one walk per directory even under concurrent calls."""

    def __init__(self, limit: int) -> None:
        self._limit = limit
        self._cache: dict[str, list[str]] = {}
        self._locks: dict[str, threading.Lock] = {}
        self._guard = threading.Lock()

    def sample(self, directory: str) -> list[str]:
        with self._guard:
            lock = self._locks.setdefault(directory, threading.Lock())
        with lock:
            if directory not in self._cache:
                walked = walk_files(
                    directory,
                    include=lambda base_name: base_name != SKILL_FILE,
                    seed_root=True,
                    max_entries=MAX_SAMPLE_WALK_ENTRIES,
                    max_files=self._limit,
                )
                self._cache[directory] = [path for path, _ in walked.files]
            return self._cache[directory]


def _not_found(name: str, skills: Mapping[str, SkillInfo]) -> ToolResult:
    available = ", ".join(sorted(skills)) or "none"
    return ToolResult(f'Skill "{name}" not found. Available skills: {available}', True)


def create_skill_tool(skills: Mapping[str, SkillInfo], sample_limit: int = 0) -> Tool:
    """The `skill` tool over `skills`. `sample_limit`: 0 ⇒ 10 files, negative ⇒ no file block."""
    effective = DEFAULT_SAMPLE if sample_limit == 0 else sample_limit
    sampler = _DirSampler(max(effective, 0))

    async def execute(args: Optional[Mapping[str, Any]] = None, ctx: Optional[ToolContext] = None) -> ToolResult:
        name = str((args if isinstance(args, Mapping) else {}).get("name", ""))
        info = skills.get(name)
        if info is None:
            return _not_found(name, skills)
        files: Optional[list[str]] = None
        if info.origin == "fs":
            directory = os.path.dirname(info.location)
            base = pathlib.Path(os.path.abspath(directory)).as_uri()
            if effective > 0:
                files = await asyncio.to_thread(sampler.sample, directory)
            where = directory
        else:
            base = info.base or ""
            if effective > 0 and info.resources:
                files = list(info.resources[:effective])
            where = base
        output = render_skill_block(name, info.content, base, files)
        return ToolResult(output, False, metadata={"name": name, "dir": where})

    return Tool(
        name="skill",
        description=SKILL_TOOL_DESCRIPTION,
        input_schema=skill_tool_schema(),
        source="skill",
        execute=execute,
    )
