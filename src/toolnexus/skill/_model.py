"""The plain data of the skills feature: definitions, discovered skills, skips, the loaded source.

Data only, plus the catalog text a system prompt embeds (`SkillSource.prompt()`). Nothing here
touches the filesystem; discovery lives in `loader`, the `skill` tool in `tool`.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Awaitable, Callable, Literal, Optional, Union

from ..types import Tool

SkillSkipReason = Literal["missing-name", "malformed-frontmatter", "duplicate-name", "unreadable"]

SKILLS_PROMPT_PREAMBLE = (
    "Skills provide specialized instructions and workflows for specific tasks.\n"
    "Use the skill tool to load a skill when a task matches its description."
)
NO_SKILLS_PROMPT = "No skills are currently available."


@dataclass
class SkillDef:
    """A skill given as data (no `SKILL.md`); `base` defaults to `skill://<name>/`."""

    name: str
    content: str
    description: Optional[str] = None
    resources: Optional[list[str]] = None
    base: Optional[str] = None


SkillProvider = Callable[[], Union[list[SkillDef], Awaitable[list[SkillDef]]]]


@dataclass
class SkillInfo:
    """A loaded skill. `location` is the `SKILL.md` path as walked (fs) or the logical base (data)."""

    name: str
    location: str
    content: str
    description: Optional[str] = None
    origin: Literal["fs", "logical"] = "fs"
    resources: Optional[list[str]] = None
    base: Optional[str] = None


@dataclass
class SkillSkip:
    """A candidate that did not load, with a typed reason and a human-readable detail."""

    location: str
    reason: SkillSkipReason
    detail: str = ""


@dataclass
class SkillInventory:
    """What `list_skills` found: the skills that would load, and everything skipped."""

    skills: list[SkillInfo]
    skipped: list[SkillSkip]


def render_skills_prompt(skills: "dict[str, SkillInfo] | list[SkillInfo]") -> str:
    """The catalog: described skills (`""` counts) sorted by name in code-point order."""
    infos = skills.values() if isinstance(skills, dict) else skills
    described = sorted((s for s in infos if s.description is not None), key=lambda s: s.name)
    if not described:
        return NO_SKILLS_PROMPT
    lines = [SKILLS_PROMPT_PREAMBLE, "", "## Available Skills"]
    lines += [f"- **{s.name}**: {s.description}" for s in described]
    return "\n".join(lines)


@dataclass
class SkillSource:
    """Loaded skills plus the `skill` tool serving them; `skipped` says what did not load and why.

    A toolkit `ToolSource` of kind `"skill"` offering the one `skill` tool; the skills are read
    at load, so `refresh()` and `close()` have nothing to do.
    """

    skills: dict[str, SkillInfo]
    tool: Tool
    skipped: list[SkillSkip] = field(default_factory=list)

    kind = "skill"
    shadows = frozenset[str]()  # unannotated: a class attribute, not a dataclass field

    def prompt(self) -> str:
        """The system-prompt catalog of these skills (pinned preamble)."""
        return render_skills_prompt(self.skills)

    def list_tools(self) -> list[Tool]:
        return [self.tool]

    async def refresh(self) -> None:
        return None

    async def close(self) -> None:
        return None
