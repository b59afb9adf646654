"""Skills: instruction bundles the model loads on demand through the `skill` tool.

A skill is a `SKILL.md` file (YAML frontmatter with `name`/`description`, Markdown body) found
under one or more roots, or a `SkillDef` given as data (directly or by a `SkillProvider`).
`load_skills` merges them into a `SkillSource`: the skills by name, the `skill` tool that serves
them, and the typed list of what was skipped. `SkillSource.prompt()` is the catalog to put in a
system prompt. `list_skills` reports the same without building anything.

Not here: executing a skill's scripts (the model uses other tools for that) and watching skill
directories for changes (reload to pick changes up).

Submodules: `model` (data + prompt), `frontmatter` (parsing), `loader` (discovery, merge,
filter), `tool` (the `skill` tool); the bounded directory walk is `toolnexus._walk`, shared with
the `grep`/`glob` built-ins.
"""

from __future__ import annotations

from ._loader import (
    MAX_DISCOVERY_ENTRIES,
    alist_skills,
    aload_skills,
    list_skills,
    load_skills,
)
from ._model import (
    SKILLS_PROMPT_PREAMBLE,
    SkillDef,
    SkillInfo,
    SkillInventory,
    SkillProvider,
    SkillSkip,
    SkillSkipReason,
    SkillSource,
)
from ._tool import MAX_SAMPLE_WALK_ENTRIES, SKILL_TOOL_DESCRIPTION

__all__ = [
    "MAX_DISCOVERY_ENTRIES",
    "MAX_SAMPLE_WALK_ENTRIES",
    "SKILLS_PROMPT_PREAMBLE",
    "SKILL_TOOL_DESCRIPTION",
    "SkillDef",
    "SkillInfo",
    "SkillInventory",
    "SkillProvider",
    "SkillSkip",
    "SkillSkipReason",
    "SkillSource",
    "alist_skills",
    "aload_skills",
    "list_skills",
    "load_skills",
]
