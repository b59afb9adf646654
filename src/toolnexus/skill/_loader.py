"""Skill loading: discover `**/SKILL.md`, add data skills, merge by name, filter, build the source.

Candidates are every root's discoveries (root order; within a root shallower first, then
`/`-relative path in code-point order), then the data `SkillDef`s. The first skill of a name wins;
later ones are skipped as `duplicate-name` with a diagnostic. A broken skill never crashes a load:
an unreadable or non-UTF-8 file is skipped as `unreadable`, a frontmatter YAML error with no
recoverable `name` as `malformed-frontmatter`, anything else without a name as `missing-name`.

Choices of ours:
- Relative roots are made absolute (`os.path.abspath`) at load, so the `skill` tool can always
  form a `file://` base; diagnostics and locations show the absolute path. Absolute roots are
  walked as given (not normalized). `""` is not a root (it would silently mean the cwd).
- A UTF-8 BOM is stripped; line endings are read in text mode (CRLF ⇒ LF) like any text file.
- `missing-name` skips carry a short detail saying what was missing (there is no YAML error).
- `load_skills` also logs each non-duplicate skip (not pinned); `list_skills` only reports them.
- Discovery stops after `MAX_DISCOVERY_ENTRIES` directory entries per root, with a diagnostic.
- `load_skills`/`list_skills` are synchronous and do file I/O: async callers use `aload_skills`/
  `alist_skills` (worker thread), as the toolkit does with `asyncio.to_thread`.
- A `skills` entry that is not a `SkillDef` is a caller bug: `TypeError` naming its index.
"""

from __future__ import annotations

import asyncio
import os
from collections.abc import Mapping
from typing import Any, Iterable, Optional, Union

from .._diag import warn
from .._walk import walk_files
from ..errors import ToolnexusTypeError
from ._frontmatter import parse_frontmatter
from ._model import SkillDef, SkillInfo, SkillInventory, SkillSkip, SkillSource
from ._tool import SKILL_FILE, create_skill_tool

MAX_DISCOVERY_ENTRIES = 200_000  # directory entries looked at per root

Candidate = Union[SkillInfo, SkillSkip]
Dirs = Union[str, "os.PathLike[str]", Iterable[Union[str, "os.PathLike[str]"]], None]


def _roots(dirs: Dirs) -> list[str]:
    if dirs is None:
        return []
    if isinstance(dirs, (str, os.PathLike)):
        return [os.fspath(dirs)]
    return [os.fspath(d) for d in dirs]


def _read_skill_file(path: str) -> Candidate:
    try:
        with open(path, encoding="utf-8-sig") as handle:  # -sig: a leading BOM is dropped
            text = handle.read()
    except OSError as exc:
        return SkillSkip(path, "unreadable", str(exc))
    except UnicodeDecodeError as exc:
        return SkillSkip(path, "unreadable", f"not valid UTF-8: {exc}")
    front = parse_frontmatter(text)
    name = front.fields.get("name", "")
    if not name:
        if front.yaml_error:
            return SkillSkip(path, "malformed-frontmatter", front.yaml_error)
        if not front.has_block:
            return SkillSkip(path, "missing-name", "no '---' frontmatter block with a name")
        return SkillSkip(path, "missing-name", "frontmatter has no non-empty 'name'")
    return SkillInfo(name, path, front.body, front.fields.get("description"), "fs")


def _discover(root: str) -> list[Candidate]:
    if root == "" or not os.path.isdir(root):
        warn(f"[toolnexus] skills dir not found: {root}")
        return []
    walked = walk_files(
        root,
        include=lambda base_name: base_name == SKILL_FILE,
        seed_root=False,
        max_entries=MAX_DISCOVERY_ENTRIES,
    )
    if walked.truncated:
        warn(f"[toolnexus] skills dir walk stopped after {MAX_DISCOVERY_ENTRIES} entries: {root}")
    ordered = sorted(walked.files, key=lambda pr: (pr[1].count("/") + 1, pr[1]))
    return [_read_skill_file(path) for path, _ in ordered]


def _data_candidate(index: int, d: Any) -> Candidate:
    if not isinstance(d, SkillDef):
        raise ToolnexusTypeError(f"toolnexus: skills[{index}] must be a SkillDef, got {type(d).__name__}")
    if not isinstance(d.name, str) or not d.name.strip():
        return SkillSkip(d.base or "skill://", "missing-name", f"skills[{index}] has an empty name")
    base = d.base or f"skill://{d.name}/"
    return SkillInfo(d.name, base, d.content or "", d.description, "logical", list(d.resources or []), base)


def _candidates(dirs: Dirs, skills: Optional[list[SkillDef]]) -> list[Candidate]:
    found: list[Candidate] = []
    for root in _roots(dirs):
        found += _discover(root if not root or os.path.isabs(root) else os.path.abspath(root))
    found += [_data_candidate(i, d) for i, d in enumerate(skills or [])]
    return found


def _merge(candidates: list[Candidate]) -> tuple[dict[str, SkillInfo], list[SkillSkip]]:
    kept: dict[str, SkillInfo] = {}
    skipped: list[SkillSkip] = []
    for cand in candidates:
        if isinstance(cand, SkillSkip):
            skipped.append(cand)
        elif cand.name in kept:
            first = kept[cand.name].location
            skipped.append(SkillSkip(cand.location, "duplicate-name", f'"{cand.name}" already loaded from {first}'))
            warn(f'[toolnexus] duplicate skill name "{cand.name}" ({cand.location}) \u2014 keeping first')
        else:
            kept[cand.name] = cand
    return kept, skipped


def _apply_filter(skills: dict[str, SkillInfo], flt: Optional[Mapping[str, bool]]) -> dict[str, SkillInfo]:
    """MCP-style allowlist: any `True` ⇒ only those; else drop the `False` names."""
    if not flt:
        return skills
    for key in flt:
        if key not in skills:
            warn(f'[toolnexus] skill filter name "{key}" matched no skill')
    if any(v is True for v in flt.values()):
        return {n: s for n, s in skills.items() if flt.get(n) is True}
    return {n: s for n, s in skills.items() if flt.get(n) is not False}


def load_skills(
    dirs: Optional[Union[str, list[str]]] = None,
    *,
    skills: Optional[list[SkillDef]] = None,
    filter: Optional[dict[str, bool]] = None,
    sample_limit: int = 0,
) -> SkillSource:
    """Load skills from `dirs` (searched for `**/SKILL.md`) and `skills`; does blocking file I/O."""
    if isinstance(sample_limit, bool) or not isinstance(sample_limit, int):
        raise ToolnexusTypeError(f"toolnexus: sample_limit must be an int, got {type(sample_limit).__name__}")
    if filter is not None and not isinstance(filter, Mapping):
        raise ToolnexusTypeError(
            f"toolnexus: skills filter must be a dict of name -> bool, got {type(filter).__name__}"
        )
    kept, skipped = _merge(_candidates(dirs, skills))
    for skip in skipped:
        if skip.reason != "duplicate-name":
            warn(f"[toolnexus] skill skipped ({skip.reason}): {skip.location} \u2014 {skip.detail}")
    kept = _apply_filter(kept, filter)
    return SkillSource(kept, create_skill_tool(kept, sample_limit), skipped)


def list_skills(
    dirs: Optional[Union[str, list[str]]] = None,
    *,
    skills: Optional[list[SkillDef]] = None,
) -> SkillInventory:
    """What `load_skills` would load (no filter) and what it would skip; no tool is built."""
    kept, skipped = _merge(_candidates(dirs, skills))
    return SkillInventory(list(kept.values()), skipped)


async def aload_skills(
    dirs: Optional[Union[str, list[str]]] = None,
    *,
    skills: Optional[list[SkillDef]] = None,
    filter: Optional[dict[str, bool]] = None,
    sample_limit: int = 0,
) -> SkillSource:
    """`load_skills` in a worker thread, so discovery never blocks the event loop."""
    return await asyncio.to_thread(load_skills, dirs, skills=skills, filter=filter, sample_limit=sample_limit)


async def alist_skills(
    dirs: Optional[Union[str, list[str]]] = None,
    *,
    skills: Optional[list[SkillDef]] = None,
) -> SkillInventory:
    """`list_skills` in a worker thread."""
    return await asyncio.to_thread(list_skills, dirs, skills=skills)
