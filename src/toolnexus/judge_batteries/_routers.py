"""`AgentRouterClassifier` and `ModelRouterClassifier`: route a task to an agent, a request to a model.

Both ask one choice question and act only on a sure pick; anything else (an error, an unsure or
missing answer) returns the caller's `fallback`. The agent router walks a tree level by level:
a sure pick of a node with sub-agents descends into them (joining `path`), a sure pick of a leaf
is the answer. The model router's `before_llm` hook sets that turn's `model` only when it routes
to a model other than the event's.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Optional

from ..classifier._models import ChoiceAnswer
from ..judge import Bands, choice, read, state
from ._common import (
    ROLE_AGENT_ROUTER,
    ROLE_MODEL_ROUTER,
    Hook,
    Memo,
    chain_before_llm,
    field_of,
    first_wins,
    latest_user_text,
)


@dataclass
class AgentVerdict:
    """The chosen `agent` (or the fallback) and the `path` of sure picks that led there."""

    agent: str
    path: list[str] = field(default_factory=list)
    sure: bool = False
    probabilities: Optional[dict[str, float]] = None
    calibrated: bool = True
    error: Optional[str] = None


@dataclass
class ModelVerdict:
    """The chosen `model` (or the fallback); `routed` when a sure pick chose it."""

    model: str
    routed: bool = False
    sure: bool = False
    probabilities: Optional[dict[str, float]] = None
    calibrated: bool = True
    error: Optional[str] = None


class AgentRouterClassifier:
    """Route a task down a tree of agents (see the module docstring)."""

    def __init__(self, classifier: Any, *, bands: Optional[Bands] = None, role: str = "") -> None:
        self.classifier = classifier
        self.bands = bands
        self.role = role or ROLE_AGENT_ROUTER

    async def pick(self, task: Any, agents: Any, fallback: str) -> AgentVerdict:
        verdict = AgentVerdict(fallback)
        level = list(agents or [])
        while level:
            nodes = first_wins([(str(field_of(n, "name") or ""), n) for n in level])
            options = {name: str(field_of(n, "description") or "") for name, n in nodes}
            try:
                decision = await self.classifier.evaluate(state(self.role, {"task": "" if task is None else task}),
                                                          dict([choice("agent", "Which agent should handle `task`?",
                                                                       options)]))
                answer = read(decision, self.bands).get("agent")
            except Exception as e:
                verdict.agent, verdict.sure, verdict.calibrated, verdict.error = fallback, False, False, str(e)
                return verdict
            verdict.calibrated = verdict.calibrated and decision.calibrated
            if answer is None or not isinstance(answer.raw, ChoiceAnswer):
                verdict.agent, verdict.sure = fallback, False
                return verdict
            verdict.probabilities = dict(answer.raw.probabilities)
            picked = answer.raw.choice
            if not answer.sure or picked not in options:
                verdict.agent, verdict.sure = fallback, False
                return verdict
            verdict.path.append(picked)
            children = list(field_of(dict(nodes)[picked], "agents") or [])
            if not children:
                verdict.agent, verdict.sure = picked, True
                return verdict
            level = children
        return verdict


class ModelRouterClassifier:
    """Pick a model per request (see the module docstring)."""

    def __init__(self, classifier: Any, models: Any, *, bands: Optional[Bands] = None, role: str = "") -> None:
        self.classifier = classifier
        merged: dict[str, str] = {}
        for m in models or []:
            merged[str(field_of(m, "id") or "")] = str(field_of(m, "description") or "")  # first position, last text
        self.models = [{"id": k, "description": v} for k, v in merged.items()]
        self.bands = bands
        self.role = role or ROLE_MODEL_ROUTER
        self._memo = Memo()

    async def pick(self, prompt: Any, fallback: str) -> ModelVerdict:
        if not self.models:
            return ModelVerdict(fallback)
        options = {m["id"]: m["description"] for m in self.models}
        try:
            decision = await self.classifier.evaluate(
                state(self.role, {"user_request": "" if prompt is None else prompt}),
                dict([choice("model", "Which model should answer `user_request`?", options)]))
            answer = read(decision, self.bands).get("model")
        except Exception as e:
            return ModelVerdict(fallback, calibrated=False, error=str(e))
        if answer is None or not isinstance(answer.raw, ChoiceAnswer):
            return ModelVerdict(fallback, calibrated=decision.calibrated)
        probabilities = dict(answer.raw.probabilities)
        if answer.sure and answer.raw.choice in options:
            return ModelVerdict(answer.raw.choice, True, True, probabilities, decision.calibrated)
        return ModelVerdict(fallback, False, False, probabilities, decision.calibrated)

    def as_hook(self, next: Optional[Hook] = None) -> Hook:
        """A `before_llm` hook routing the turn to the picked model (that turn only)."""

        async def before_llm(ev: dict) -> Optional[dict]:
            text = latest_user_text(ev.get("messages"))
            current = str(ev.get("model") or "")
            ours: Optional[dict] = None
            if text:
                key = (text, current)
                verdict = self._memo.get(key)
                if verdict is None:
                    verdict = await self.pick(text, current)
                    self._memo.put(key, verdict)
                if verdict.routed and verdict.model != current:
                    ours = {"model": verdict.model}
            return await chain_before_llm(ev, ours, next)

        return before_llm
