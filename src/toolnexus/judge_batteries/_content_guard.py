"""`ContentGuardClassifier`: screen text entering or leaving an agent, one noul per dimension.

A clear "yes" on any dimension flags it and blocks; an unsure or missing one asks for review;
otherwise the text is allowed. The `before_llm` hook screens the latest user text and raises
`ContentGuardBlocked` on a block, so the run stops before that turn's request is sent ("review"
passes like "allow"; the verdict is there for callers who want to act on it).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Optional

from ..judge import Bands, noul, read, state
from ._common import (
    DEFAULT_DIMENSIONS,
    ROLE_CONTENT_GUARD,
    ContentGuardBlocked as ContentGuardBlocked,
    Hook,
    Memo,
    chain_before_llm,
    check_on_error,
    field_of,
    first_wins,
    latest_user_text,
)


@dataclass
class ContentVerdict:
    """`action` is "block", "review" or "allow"; `scores` the probability per answered dimension."""

    action: str = ""
    flagged: list[str] = field(default_factory=list)
    uncertain: list[str] = field(default_factory=list)
    scores: dict[str, float] = field(default_factory=dict)
    calibrated: bool = False
    error: Optional[str] = None


class ContentGuardClassifier:
    """Screen text (see the module docstring)."""

    def __init__(self, classifier: Any, *, on_error: Optional[str] = None, bands: Optional[Bands] = None,
                 role: str = "", dimensions: Optional[list[dict[str, str]]] = None) -> None:
        self.classifier = classifier
        self.on_error = check_on_error("ContentGuard", on_error)
        self.bands = bands
        self.role = role or ROLE_CONTENT_GUARD
        self.dimensions = list(dimensions or DEFAULT_DIMENSIONS)
        self._memo = Memo()

    async def check(self, text: Any) -> ContentVerdict:
        dims = first_wins([(str(field_of(d, "name") or ""), str(field_of(d, "instructions") or ""))
                           for d in self.dimensions])
        try:
            decision = await self.classifier.evaluate(state(self.role, {"text": "" if text is None else text}),
                                                      dict(noul(name, instructions) for name, instructions in dims))
            answers = read(decision, self.bands)
        except Exception as e:
            return ContentVerdict("allow" if self.on_error == "open" else "block", error=str(e))
        verdict = ContentVerdict(calibrated=decision.calibrated)
        for name, _ in dims:
            a = answers.get(name)
            if a is None:
                verdict.uncertain.append(name)
                continue
            verdict.scores[name] = a.value()
            if a.band == "yes":
                verdict.flagged.append(name)
            elif a.band == "uncertain":
                verdict.uncertain.append(name)
        verdict.action = "block" if verdict.flagged else "review" if verdict.uncertain else "allow"
        return verdict

    def as_hook(self, next: Optional[Hook] = None) -> Hook:
        """A `before_llm` hook that raises `ContentGuardBlocked` when the latest user text is blocked."""

        async def before_llm(ev: dict) -> Optional[dict]:
            text = latest_user_text(ev.get("messages"))
            if text:
                verdict = self._memo.get(text)
                if verdict is None:
                    verdict = await self.check(text)
                    self._memo.put(text, verdict)
                if verdict.action == "block":
                    if verdict.error is not None:
                        raise ContentGuardBlocked("content guard blocked: classifier error")
                    raise ContentGuardBlocked("content guard blocked: " + ", ".join(verdict.flagged))
            return await chain_before_llm(ev, None, next)

        return before_llm
