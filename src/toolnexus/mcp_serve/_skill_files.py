"""A served toolkit's own resources and prompts: its skills' files, and sources that have some.

`toolkit_catalog(tools, skill_infos, sources, profile)` gives the `resources` / `prompts` providers `Toolkit.serve`
and `toolnexus serve --mcp-stdio` hand to the server (the profile's own `resources` / `prompts`
are added by the server builder):

- skills' files, while the profile serves the `skill` tool and does not set `skill_files: False`:
  each skill's instructions as `skill://<name>/SKILL.md` (`text/markdown`), and for a skill on disk
  the files of its directory (the first `MAX_SKILL_FILES` in path order, walked once per directory
  in a worker thread) as `skill://<name>/<path>`. The `skill` tool already hands these
  instructions and file names to any caller; this serves the files themselves, and only those:
  a path is read only if it still resolves inside the skill's directory (no symlink out of it), no
  part of it starts with `.` (no `.env`, no `.git`), and it is at most `MAX_SKILL_FILE_BYTES`.
  A file that is UTF-8 text is sent as text, anything else as a blob.
- every toolkit source that is a `ResourceCatalog` (its `served_resources()` / `served_prompts()`).
"""

from __future__ import annotations

import asyncio
import functools
import mimetypes
import os
from collections.abc import Callable, Iterable
from typing import Any, Optional
from urllib.parse import quote

from .._walk import walk_files
from ..resources import Prompt, Resource, ResourceCatalog, ResourceError
from ._config import MCPServeConfig, exposed_mcp_tools

MAX_SKILL_FILES = 100
MAX_SKILL_FILE_BYTES = 4 * 1024 * 1024
_MAX_WALK_ENTRIES = 2000
_SKILL_FILE = "SKILL.md"


def _read_skill_file(directory: str, rel: str) -> Any:
    """The file's text (or bytes), if it is still inside `directory` and small enough."""
    if any(part.startswith(".") for part in rel.split("/")):
        raise ResourceError(f"{rel}: hidden files are not served")
    root = os.path.realpath(directory)
    path = os.path.realpath(os.path.join(root, *rel.split("/")))
    if os.path.commonpath([root, path]) != root:
        raise ResourceError(f"{rel}: resolves outside the skill's directory")
    size = os.path.getsize(path)
    if size > MAX_SKILL_FILE_BYTES:
        raise ResourceError(f"{rel}: {size} bytes is over the {MAX_SKILL_FILE_BYTES} bytes served per file")
    with open(path, "rb") as fh:
        data = fh.read(MAX_SKILL_FILE_BYTES + 1)
    try:
        return data.decode("utf-8")
    except UnicodeDecodeError:
        return data


def _same(text: str) -> str:
    return text


def _walk(directory: str) -> list[str]:
    walked = walk_files(directory, include=lambda base: base != _SKILL_FILE and not base.startswith("."),
                        seed_root=True, max_entries=_MAX_WALK_ENTRIES, max_files=MAX_SKILL_FILES)
    return [rel for _, rel in walked.files if not any(p.startswith(".") for p in rel.split("/"))]


class SkillFiles:
    """The skills' files as resources: `await SkillFiles(toolkit.skill_infos)()`."""

    def __init__(self, infos: Callable[[], list[Any]]) -> None:
        self._infos = infos
        self._walked: dict[str, list[str]] = {}

    async def _files(self, directory: str) -> list[str]:
        if directory not in self._walked:
            self._walked[directory] = await asyncio.to_thread(_walk, directory)
        return self._walked[directory]

    async def __call__(self) -> list[Resource]:
        out: list[Resource] = []
        for info in self._infos():
            base = f"skill://{quote(info.name, safe='')}/"
            out.append(Resource(base + _SKILL_FILE, functools.partial(_same, info.content),
                                name=f"{info.name}/{_SKILL_FILE}", description=info.description,
                                mime_type="text/markdown"))
            if info.origin != "fs":
                continue
            directory = os.path.dirname(info.location)
            for rel in await self._files(directory):
                out.append(Resource(base + quote(rel), functools.partial(_read_skill_file, directory, rel),
                                    name=f"{info.name}/{rel}", mime_type=mimetypes.guess_type(rel)[0]))
        return out


def toolkit_catalog(tools: Callable[[], list[Any]], skill_infos: Optional[Callable[[], list[Any]]],
                    sources: Iterable[Any], profile: MCPServeConfig
                    ) -> tuple[Optional[Callable[[], Any]], Optional[Callable[[], Any]]]:
    """`(resources, prompts)` providers for a toolkit (its `tools`, `skill_infos`, `sources`) under
    `profile`; None for a part it has none of."""
    catalogs = [s for s in sources if isinstance(s, ResourceCatalog)]
    files = None
    if skill_infos is not None and profile.get("skill_files") is not False and skill_infos():
        files = SkillFiles(skill_infos)
    if files is None and not catalogs:
        return None, None

    def skill_served() -> bool:
        return any(t.name == "skill" and t.source == "skill" for t in exposed_mcp_tools(tools(), profile))

    async def resources() -> list[Resource]:
        out = list(await files()) if files is not None and skill_served() else []
        for catalog in catalogs:
            out += catalog.served_resources()
        return out

    def prompts() -> list[Prompt]:
        return [p for catalog in catalogs for p in catalog.served_prompts()]

    return resources, (prompts if catalogs else None)
