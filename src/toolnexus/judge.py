"""Simple judgments on top of the classifier: named questions, bands, rule gates, and recorded tapes.

    from toolnexus.judge import noul, ask, gate, Rule
    answers = await ask(clf, {"text": msg}, [noul("toxic", "Is `text` toxic?")])
    answers["toxic"].band                                  # "no" | "uncertain" | "yes"
    outcome = await gate(clf, {"text": msg}, [noul("toxic", "Is `text` toxic?")],
                         [Rule("toxic", "block", at_least=0.7)])

Reading a decision (`read`) puts a noul probability into a band (`Bands.noul`: below `low` is
"no", above `high` is "yes", else "uncertain") and marks a choice or score answer `sure` when its
confidence is above `high` (and a choice is not near-uniform). `decide` walks a policy's rules in
order and returns the first decisive outcome; when the classifier is unsure — a missing answer,
an uncertain one, a rule that cannot apply — it escalates with a suspension `Request`, so a host
can ask a human and resume (the client's suspension machinery applies unchanged).

A `Tape` records every decision a program asks for under a call name, and replays them later
through a `static` classifier — a deterministic test of code that uses judgments.

Choices beyond 0.21:
- an escalation's `Request.data["answers"]` holds plain JSON dicts (the answer's wire fields plus
  `band` and `sure`), so a pending request can be stored and resumed; `Outcome.answers` keeps the
  `JudgeAnswer` objects;
- inputs are checked: `Bands(low > high)` (or outside 0..1) raises, `state()` keeps the role
  argument even when `data` has a `role` key, and `question_from_wire` refuses an unknown `type`
  instead of reading it as a score.

Not here: the classifier itself (`toolnexus.classifier`) or the ready-made batteries
(`toolnexus.judge_batteries`).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Mapping, Optional, Sequence, Union

from .classifier._classifier import Classifier, create_classifier
from .classifier._models import (
    ChoiceAnswer,
    ChoiceQuestion,
    ClassifierError,
    Decision,
    DecisionAnswer,
    NoulAnswer,
    NoulCriteria,
    NoulQuestion,
    Question,
    RecordedDecision,
    ScoreQuestion,
)
from .classifier._wire import answer_wire, questions_wire
from .types import Request

__all__ = [
    "Bands", "DEFAULT_BANDS", "NamedQuestion", "noul", "choice", "score", "questions", "state", "context",
    "JudgeAnswer", "read", "ask", "Rule", "Policy", "Outcome", "decide", "gate", "static_classifier",
    "decision_wire", "question_from_wire", "Tape",
]

NamedQuestion = tuple[str, Question]


@dataclass(frozen=True)
class Bands:
    """Where a noul probability stops being "no" (`low`) and starts being "yes" (`high`)."""

    low: float = 0.30
    high: float = 0.70

    def __post_init__(self) -> None:
        for name in ("low", "high"):
            value = getattr(self, name)
            if isinstance(value, bool) or not isinstance(value, (int, float)) or not 0 <= value <= 1:
                raise ClassifierError(f"judge: Bands.{name} must be a number within 0..1, got {value!r}")
        if self.low > self.high:
            raise ClassifierError(f"judge: Bands(low={self.low}, high={self.high}) has low above high")

    def noul(self, p: float) -> str:
        return "no" if p < self.low else "yes" if p > self.high else "uncertain"

    def sure(self, confidence: float, near_uniform: bool = False) -> bool:
        return confidence > self.high and not near_uniform


DEFAULT_BANDS = Bands()


# -- building questions and states ------------------------------------------------------------------------


def noul(name: str, instructions: str, true: str = "", false: str = "") -> NamedQuestion:
    """A named noul question; `criteria` only when `true` or `false` is given."""
    return (name, NoulQuestion(instructions, NoulCriteria(true, false) if true or false else None))


def choice(name: str, instructions: str, options: Mapping[str, str]) -> NamedQuestion:
    """A named choice question over `options` (id -> meaning)."""
    return (name, ChoiceQuestion(instructions, dict(options)))


def score(name: str, instructions: str, levels: Sequence[str]) -> NamedQuestion:
    """A named score question on the ordered `levels` (lowest first)."""
    return (name, ScoreQuestion(instructions, list(levels)))


def questions(qs: Any) -> dict[str, Question]:
    """Named questions as the classifier's mapping, order kept; a repeated name is an error."""
    if isinstance(qs, Mapping):
        return dict(qs)
    out: dict[str, Question] = {}
    for item in qs:
        name, question = item
        if name in out:
            raise ClassifierError(f'duplicate question name "{name}"')
        out[name] = question
    return out


def state(role: str, data: Any) -> dict[str, Any]:
    """A classifier state: `{"role": role, **data}` for a mapping (the role argument wins), else
    `{"role": role, "data": data}`."""
    if isinstance(data, Mapping):
        return {"role": role, **{k: v for k, v in data.items() if k != "role"}}
    return {"role": role, "data": data}


def context(ctx: Any, message: Any, extra: Optional[Mapping[str, Any]] = None) -> dict[str, Any]:
    """`{"context": ctx, "message": message, **extra}`."""
    return {"context": ctx, "message": message, **(extra or {})}


# -- reading answers -------------------------------------------------------------------------------------


@dataclass
class JudgeAnswer:
    """One answer read through bands: a noul gets a `band`, a choice or score gets `sure`."""

    raw: DecisionAnswer
    band: Optional[str] = None
    sure: Optional[bool] = None

    @property
    def type(self) -> str:
        return self.raw.type

    @property
    def uncertain(self) -> bool:
        if isinstance(self.raw, NoulAnswer):
            return self.band == "uncertain"
        return not self.sure

    def value(self) -> float:
        """The noul probability, the choice's confidence, or the score."""
        if isinstance(self.raw, NoulAnswer):
            return self.raw.noul
        if isinstance(self.raw, ChoiceAnswer):
            return self.raw.confidence
        return self.raw.score

    def choice(self) -> str:
        if not isinstance(self.raw, ChoiceAnswer):
            raise ClassifierError(f"judge: answer is a {self.type} answer, not choice")
        return self.raw.choice

    def to_dict(self) -> dict[str, Any]:
        """Plain JSON: the answer's wire fields plus `band` and `sure`."""
        return {**answer_wire(self.raw), "band": self.band, "sure": self.sure}


def read(decision: Decision, bands: Optional[Bands] = None) -> dict[str, JudgeAnswer]:
    """Every answer of `decision` through `bands` (default `DEFAULT_BANDS`)."""
    b = bands or DEFAULT_BANDS
    out: dict[str, JudgeAnswer] = {}
    for key, a in decision.answers.items():
        if isinstance(a, NoulAnswer):
            out[key] = JudgeAnswer(a, band=b.noul(a.noul))
        elif isinstance(a, ChoiceAnswer):
            out[key] = JudgeAnswer(a, sure=b.sure(a.confidence, a.near_uniform))
        else:
            out[key] = JudgeAnswer(a, sure=b.sure(a.confidence))
    return out


async def ask(classifier: Classifier, st: Mapping[str, Any], qs: Any,
              bands: Optional[Bands] = None) -> dict[str, JudgeAnswer]:
    """Evaluate the named questions about `st` and read the answers through `bands`."""
    decision = await classifier.evaluate(dict(st), questions(qs))
    return read(decision, bands)


# -- rules and gates ----------------------------------------------------------------------------------------


@dataclass
class Rule:
    """Fire `action` when question `question`'s value is `below` / `at_least` a bound, or its choice `is_` an id."""

    question: str
    action: str
    below: Optional[float] = None
    at_least: Optional[float] = None
    is_: Optional[str] = None
    target: str = ""


@dataclass
class Policy:
    """Rules in order, a `default` action when none fires, bands, and whether uncertain answers skip a rule."""

    rules: Sequence[Rule]
    default: str = ""
    bands: Optional[Bands] = None
    skip_uncertain: bool = False


@dataclass
class Outcome:
    """What a gate decided: an `action` (and `target`), or an escalation carrying a suspension `Request`."""

    action: str = ""
    target: str = ""
    escalated: bool = False
    request: Optional[Request] = None
    answers: dict[str, JudgeAnswer] = field(default_factory=dict)


def _escalate(rule_id: str, question: str, reason: str, ans: dict[str, JudgeAnswer]) -> Outcome:
    request = Request(id=f"gate:{rule_id}", kind="input", prompt=f"Classifier is unsure about {question!r} ({reason}).",
                      data={"question": question, "reason": reason,
                            "answers": {k: a.to_dict() for k, a in ans.items()}})
    return Outcome("needs_input", "", True, request, ans)


def decide(ans: dict[str, JudgeAnswer], policy: Policy) -> Outcome:
    """The first decisive rule's outcome, an escalation, or `Outcome(answers=ans)` when none fires."""
    for i, rule in enumerate(policy.rules):
        q = rule.question
        answer = ans.get(q)
        if answer is None:
            return _escalate(f"{i}:{q}", q, f'missing answer "{q}"', ans)
        if answer.uncertain:
            if policy.skip_uncertain:
                continue
            return _escalate(f"{i}:{q}", q, f'uncertain answer "{q}"', ans)
        if rule.is_ is not None:
            if not isinstance(answer.raw, ChoiceAnswer):
                return _escalate(f"{i}:{q}", q, f"is-rule on {answer.type} answer {q!r}", ans)
            if answer.raw.choice == rule.is_:
                return Outcome(rule.action, rule.target)
            continue
        if rule.below is None and rule.at_least is None:
            return _escalate(f"{i}:{q}", q, f"rule on {q!r} has no below / at_least / is", ans)
        if isinstance(answer.raw, ChoiceAnswer):
            return _escalate(f"{i}:{q}", q, f"numeric rule on choice answer {q!r}", ans)
        v = answer.value()
        if rule.below is not None and v < rule.below:
            return Outcome(rule.action, rule.target)
        if rule.at_least is not None and v >= rule.at_least:
            return Outcome(rule.action, rule.target)
    return Outcome(answers=ans)


async def gate(classifier: Classifier, st: Mapping[str, Any], qs: Any, rules: Union[Sequence[Rule], Policy],
               bands: Optional[Bands] = None) -> Outcome:
    """`ask` then `decide`. A `Policy` also supplies a default action, else escalates with `no rule fired`."""
    if not isinstance(rules, Policy):
        return decide(await ask(classifier, st, qs, bands), Policy(list(rules)))
    policy = rules
    ans = await ask(classifier, st, qs, bands or policy.bands)
    outcome = decide(ans, policy)
    if outcome.escalated or outcome.action:
        return outcome
    if policy.default:
        return Outcome(policy.default)
    return _escalate("default", "", "no rule fired", ans)


# -- recordings -----------------------------------------------------------------------------------------------


def decision_wire(d: Decision) -> dict[str, Any]:
    """A decision in its response shape (usage dropped): `{"model", "answers", "calibrated"}`."""
    return {"model": d.model, "answers": {k: answer_wire(a) for k, a in d.answers.items()}, "calibrated": d.calibrated}


def question_from_wire(w: Mapping[str, Any]) -> Question:
    """A question from its wire projection; a missing key is a `KeyError`, an unknown type an error."""
    kind = w["type"]
    if kind == "noul":
        criteria = w.get("criteria")
        return NoulQuestion(w["instructions"], None if criteria is None else NoulCriteria(criteria["true"],
                                                                                          criteria["false"]))
    if kind == "choice":
        return ChoiceQuestion(w["instructions"], dict(w["criteria"]))
    if kind == "score":
        return ScoreQuestion(w["instructions"], list(w["criteria"]))
    raise ClassifierError(f"judge: unknown question type {kind!r} (expected noul, choice or score)")


def static_classifier(*records: Any, model: Optional[str] = None) -> Classifier:
    """A `static` classifier from `(state, questions, response)` records (questions: a mapping or named list)."""
    decisions = [RecordedDecision(st, questions(qs), response) for st, qs, response in records]
    return create_classifier(style="static", decisions=decisions, model=model)


class Tape:
    """Record decisions per call name from a `live` classifier, or replay `recorded` ones."""

    def __init__(self, live: Optional[Classifier] = None, recorded: Optional[Mapping[str, dict]] = None,
                 model: Optional[str] = None) -> None:
        self.live = live
        self.recorded: dict[str, dict[str, Any]] = dict(recorded or {})
        self.model = model if model is not None else (live.model if live is not None else None)

    def call(self, name: str) -> Classifier:
        """The classifier to use for call `name`: recording when live, else replaying."""
        if self.live is not None:
            live = self.live

            async def forward(st: Any, qs: Mapping[str, Question]) -> Decision:
                d = await live.evaluate(st, qs)
                self.recorded[name] = {"state": st, "questions": questions_wire(qs), "response": decision_wire(d)}
                return d

            return create_classifier(style="custom", evaluate=forward, model=self.model)
        record = self.recorded.get(name)
        if record is None:
            def missing(st: Any, qs: Any) -> Decision:
                raise ClassifierError(f'tape: no recorded decision for call "{name}"')

            return create_classifier(style="custom", evaluate=missing, model=self.model)
        qs = {k: question_from_wire(w) for k, w in record["questions"].items()}
        return static_classifier((record["state"], qs, record["response"]), model=self.model)


