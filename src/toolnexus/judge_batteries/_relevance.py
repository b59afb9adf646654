"""`ToolRelevanceClassifier` / `SkillRelevanceClassifier`: leave out what the request does not need.

One noul per item ("Is the tool `x` needed for the request in `user_request`?"); an item is
dropped only when its answer is a clear "no", so an unsure classifier keeps everything. The tool
battery's `before_llm` hook trims the turn's tool declarations (OpenAI `function` entries or
Anthropic ones) to the kept entries, in order. Skills have `select()` only: feed its `selected`
names into an allowlist only when non-empty — an empty allowlist usually means "all".
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Optional

from ..judge import Bands, noul, read, state
from ._common import (
    DEFAULT_MAX_ITEMS,
    ROLE_SKILL_RELEVANCE,
    ROLE_TOOL_RELEVANCE,
    Hook,
    Memo,
    chain_before_llm,
    check_on_error,
    field_of,
    first_wins,
    latest_user_text,
)


@dataclass
class RelevanceVerdict:
    """Item names kept (`selected`) and left out (`dropped`), each in input order."""

    selected: list[str] = field(default_factory=list)
    dropped: list[str] = field(default_factory=list)
    calibrated: bool = True
    error: Optional[str] = None


def tool_entry_name(entry: Any) -> str:
    """The name of a declared tool: OpenAI `function.name` or Anthropic `name` (non-strings read as "")."""
    fn = entry.get("function") if isinstance(entry, dict) else None
    name = fn.get("name") if isinstance(fn, dict) else (entry.get("name") if isinstance(entry, dict) else None)
    return name if isinstance(name, str) else ""


def _entry_description(entry: Any) -> str:
    fn = entry.get("function") if isinstance(entry, dict) else None
    value = (
        fn.get("description")
        if isinstance(fn, dict)
        else (entry.get("description") if isinstance(entry, dict) else None)
    )
    return value if isinstance(value, str) else ""


class _Relevance:
    _battery = ""
    _noun = ""
    _verb = ""
    _true = ""
    _false = ""
    _role = ""

    def __init__(self, classifier: Any, *, on_error: Optional[str] = None, bands: Optional[Bands] = None,
                 role: str = "", max_items: int = DEFAULT_MAX_ITEMS) -> None:
        self.classifier = classifier
        self.on_error = check_on_error(self._battery, on_error)
        self.bands = bands
        self.role = role or self._role
        self.max_items = max_items
        self._memo = Memo()

    def _question(self, name: str, description: str) -> Any:
        text = f"Is the {self._noun} `{name}` {self._verb} the request in `user_request`?"
        if description:
            text += f" The {self._noun}: {description}"
        return noul(name, text, self._true, self._false)

    async def select(self, prompt: Any, items: Any) -> RelevanceVerdict:
        """Which of `items` (`{name, description}` mappings or objects) the request in `prompt` needs."""
        pairs = first_wins([(str(field_of(i, "name") if field_of(i, "name") is not None else ""),
                             field_of(i, "description") or "") for i in items or []])
        names = [n for n, _ in pairs]
        if not pairs:
            return RelevanceVerdict()
        if len(pairs) > self.max_items:  # too many to ask about: leave the input untouched
            return RelevanceVerdict(selected=names)
        try:
            decision = await self.classifier.evaluate(
                state(self.role, {"user_request": "" if prompt is None else prompt}),
                dict(self._question(n, str(d)) for n, d in pairs))
            answers = read(decision, self.bands)
        except Exception as e:
            if self.on_error == "open":
                return RelevanceVerdict(selected=names, calibrated=False, error=str(e))
            return RelevanceVerdict(dropped=names, calibrated=False, error=str(e))
        dropped = [n for n in names if n in answers and answers[n].band == "no"]
        return RelevanceVerdict([n for n in names if n not in dropped], dropped, decision.calibrated)


class ToolRelevanceClassifier(_Relevance):
    """Pick the tools a request needs (see the module docstring)."""

    _battery = "ToolRelevance"
    _noun, _verb = "tool", "needed for"
    _true = "the request cannot be done well without this tool"
    _false = "the request can be done without this tool"
    _role = ROLE_TOOL_RELEVANCE

    def as_hook(self, next: Optional[Hook] = None) -> Hook:
        """A `before_llm` hook trimming the turn's `tools` to the relevant ones."""

        async def before_llm(ev: dict) -> Optional[dict]:
            text = latest_user_text(ev.get("messages"))
            tools = ev.get("tools") or []
            ours: Optional[dict] = None
            if text and tools:
                names = [tool_entry_name(t) for t in tools]
                key = (text, tuple(names))
                verdict = self._memo.get(key)
                if verdict is None:
                    verdict = await self.select(text, [{"name": n, "description": _entry_description(t)}
                                                       for n, t in zip(names, tools, strict=True)])
                    self._memo.put(key, verdict)
                if verdict.dropped:
                    dropped = set(verdict.dropped)
                    ours = {"tools": [t for n, t in zip(names, tools, strict=True) if n not in dropped]}
                    kept = tuple(n for n in names if n not in dropped)  # the next turn sees the trimmed list
                    self._memo.put((text, kept), RelevanceVerdict(selected=list(kept), calibrated=verdict.calibrated))
            return await chain_before_llm(ev, ours, next)

        return before_llm


class SkillRelevanceClassifier(_Relevance):
    """Pick the skills a request needs (`select()` only)."""

    _battery = "SkillRelevance"
    _noun, _verb = "skill", "relevant to"
    _true = "the skill's instructions would help with this request"
    _false = "the skill is unrelated to this request"
    _role = ROLE_SKILL_RELEVANCE
