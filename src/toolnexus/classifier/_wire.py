"""The classifier wire: question projections, canonical JSON, and reading a decision back.

`canonical_json` is the one serialisation every request uses (sorted keys, no spaces, UTF-8), so a
request is byte-for-byte reproducible: a `static` classifier keys its recordings on it, and a
recorded tape replays exactly.

Reading a response (`decode_decision`) is strict about shape: anything that is not the documented
JSON is a `ClassifierError` naming where it broke — never an `AttributeError` from deep inside.
`check_decision` then holds the answers to the questions asked (beyond 0.21, which trusted them):
each answer of its question's type, a choice among the offered options, probabilities and
confidences within 0..1, a noul within 0..1, a score within the rubric, and no answer to a
question that was not asked — so, for instance, a router can never route to a model it did not
offer. How it fails is 0.21's by default (lazy): an unusable answer is moved out of `answers`
into `Decision.unanswered` with its reason, a missing one stays missing, and only reading that
key raises — the other answers of the decision stay usable, and 0.21 code that evaluated
questions a backend left unanswered keeps working until it reads them. `strict=True` raises the
first problem from `evaluate` instead, before the caller sees any answer.

Not here: sending anything (`_systemone.py`), styles and metrics (`_classifier.py`).
"""

from __future__ import annotations

import json
import math
from dataclasses import replace
from typing import Any, Mapping, Optional, cast

from ..errors import ToolnexusTypeError
from ._models import (
    MAX_CHOICE_OPTIONS,
    MAX_SCORE_LEVELS,
    MIN_SCORE_LEVELS,
    NEAR_UNIFORM_TOLERANCE,
    ChoiceAnswer,
    ChoiceQuestion,
    ClassifierError,
    ClassifierUsage,
    Decision,
    DecisionAnswer,
    NoulAnswer,
    NoulQuestion,
    Question,
    ScoreAnswer,
    ScoreQuestion,
)


def question_wire(q: Any, key: str = "") -> dict[str, Any]:
    """The JSON projection of one question (`key` only names it in the error)."""
    if isinstance(q, NoulQuestion):
        out: dict[str, Any] = {"type": "noul", "instructions": q.instructions}
        if q.criteria is not None:
            out["criteria"] = {"true": q.criteria.true, "false": q.criteria.false}
        return out
    if isinstance(q, ChoiceQuestion):
        return {"type": "choice", "instructions": q.instructions, "criteria": dict(q.criteria)}
    if isinstance(q, ScoreQuestion):
        return {"type": "score", "instructions": q.instructions, "criteria": list(q.criteria)}
    raise ClassifierError(f"classifier: question {key!r} is not a noul, choice or score question")


def questions_wire(qs: Mapping[str, Question]) -> dict[str, Any]:
    """Every question projected, keyed as given."""
    return {key: question_wire(q, key) for key, q in qs.items()}


def canonical_json(value: Any) -> bytes:
    """Sorted keys, compact separators, non-ASCII kept, UTF-8."""
    return json.dumps(value, sort_keys=True, separators=(",", ":"), ensure_ascii=False).encode("utf-8")


def canonical_request(model: str, questions: Mapping[str, Question]) -> bytes:
    """The canonical JSON of `{"model", "questions"}` (a static recording's request half)."""
    return canonical_json({"model": model, "questions": questions_wire(questions)})


def near_uniform(probabilities: Mapping[str, float]) -> bool:
    """True when every probability is within 0.05 of `1/n` (one option: trivially uniform)."""
    n = len(probabilities)
    if n == 0:
        return False
    if n == 1:
        return True
    return all(abs(p - 1 / n) <= NEAR_UNIFORM_TOLERANCE for p in probabilities.values())


# -- request checks ------------------------------------------------------------------------------------


def check_questions(questions: Mapping[str, Question]) -> None:
    """Option/level counts, in sorted key order; nothing is sent when this raises."""
    if not questions:
        raise ClassifierError("classifier: no questions to evaluate")
    for key in sorted(questions):
        q = questions[key]
        question_wire(q, key)
        if isinstance(q, ChoiceQuestion) and not 1 <= len(q.criteria) <= MAX_CHOICE_OPTIONS:
            raise ClassifierError(f"classifier: question {key!r}: a choice needs 1..{MAX_CHOICE_OPTIONS} options, "
                                  f"got {len(q.criteria)}")
        if isinstance(q, ScoreQuestion) and not MIN_SCORE_LEVELS <= len(q.criteria) <= MAX_SCORE_LEVELS:
            raise ClassifierError(f"classifier: question {key!r}: a score needs {MIN_SCORE_LEVELS}..{MAX_SCORE_LEVELS} "
                                  f"ordered levels, got {len(q.criteria)}")


def degenerate_reason(q: Any) -> Optional[str]:
    """Why a choice with >= 2 options reads the same for every option, or None."""
    if not isinstance(q, ChoiceQuestion) or len(q.criteria) < 2:
        return None
    descriptions = list(q.criteria.items())
    if all(not str(d).strip() for _, d in descriptions):
        return "every description is empty"
    if all(str(d).strip() == str(k) for k, d in descriptions):
        return "every description is just its own option id"
    if len({str(d).strip() for _, d in descriptions}) == 1:
        return "every description is identical"
    return None


# -- decoding ------------------------------------------------------------------------------------------


def _probabilities(raw: Any) -> dict[str, float]:
    if raw is None:
        return {}
    if not isinstance(raw, Mapping):
        raise ToolnexusTypeError(f"probabilities must be an object, got {type(raw).__name__}")
    return {str(k): float(v) for k, v in raw.items()}


def _decode_answer(key: str, raw: Any) -> DecisionAnswer:
    if not isinstance(raw, Mapping):
        raise ClassifierError(f"classifier: answer {key!r} is not a JSON object")
    kind = raw.get("type")
    if kind not in ("noul", "choice", "score"):
        raise ClassifierError(f"classifier: answer {key!r}: unknown type {kind!r}")
    try:
        if kind == "noul":
            return NoulAnswer(float(raw["noul"]))
        confidence = float(raw["confidence"]) if raw.get("confidence") is not None else 0.0
        probabilities = _probabilities(raw.get("probabilities"))
        if kind == "choice":
            if not isinstance(raw["choice"], (str, int)) or isinstance(raw["choice"], bool):
                raise ToolnexusTypeError(f"choice must be an option id, got {type(raw['choice']).__name__}")
            return ChoiceAnswer(str(raw["choice"]), probabilities, confidence, near_uniform(probabilities))
        legend = raw.get("legend")
        if legend is not None and not isinstance(legend, Mapping):
            raise ToolnexusTypeError(f"legend must be an object, got {type(legend).__name__}")
        return ScoreAnswer(float(raw["score"]), {str(k): str(v) for k, v in (legend or {}).items()}, probabilities,
                           confidence)
    except (KeyError, TypeError, ValueError) as e:
        raise ClassifierError(f"classifier: answer {key!r}: malformed {kind} answer: {e}") from None


def _int(raw: Mapping[str, Any], name: str) -> int:
    value = raw.get(name)
    if value is None:
        return 0
    if isinstance(value, bool) or not isinstance(value, (int, float, str)):
        raise ClassifierError(f"classifier: response usage: {name} must be a number, got {type(value).__name__}")
    try:
        return int(value)
    except ValueError:
        raise ClassifierError(f"classifier: response usage: {name} must be a number, got {value!r}") from None


def decode_decision(raw: Any) -> Decision:
    """A `Decision` from a decoded response object (shape errors are `ClassifierError`s)."""
    if not isinstance(raw, Mapping):
        raise ClassifierError("classifier: response is not a JSON object")
    answers = raw.get("answers")
    if answers is None:
        answers = {}
    if not isinstance(answers, Mapping):
        raise ClassifierError(f"classifier: response answers is not a JSON object (got {type(answers).__name__})")
    decoded = {str(key): _decode_answer(str(key), value) for key, value in answers.items()}
    usage_raw = raw.get("usage")
    if usage_raw is not None and not isinstance(usage_raw, Mapping):
        raise ClassifierError(f"classifier: response usage is not a JSON object (got {type(usage_raw).__name__})")
    usage_raw = usage_raw or {}
    cost = usage_raw.get("cost")
    if cost is not None:
        try:
            cost = float(cost)
        except (TypeError, ValueError):
            raise ClassifierError(f"classifier: response usage: cost must be a number, got {cost!r}") from None
    usage = ClassifierUsage(_int(usage_raw, "input_tokens"), _int(usage_raw, "output_tokens"), cost)
    calibrated = raw.get("calibrated")
    return Decision(str(raw.get("model", "")), decoded, usage, True if calibrated is None else bool(calibrated))


def answer_wire(a: DecisionAnswer) -> dict[str, Any]:
    """An answer in its response shape (`near_uniform` is derived on read, never sent)."""
    if isinstance(a, NoulAnswer):
        return {"type": "noul", "noul": a.noul}
    if isinstance(a, ChoiceAnswer):
        return {"type": "choice", "choice": a.choice, "probabilities": dict(a.probabilities),
                "confidence": a.confidence}
    if isinstance(a, ScoreAnswer):
        return {"type": "score", "score": a.score, "legend": dict(a.legend), "probabilities": dict(a.probabilities),
                "confidence": a.confidence}
    raise ClassifierError(f"classifier: not a noul, choice or score answer: {type(a).__name__}")


# -- holding answers to the questions ---------------------------------------------------------------------


def _unit(key: str, what: str, value: Any) -> None:
    if not isinstance(value, (int, float)) or isinstance(value, bool) or math.isnan(value) or not 0 <= value <= 1:
        raise ClassifierError(f"classifier: answer {key!r}: {what} {value!r} is outside 0..1")


_ANSWER_FOR = {NoulQuestion: NoulAnswer, ChoiceQuestion: ChoiceAnswer, ScoreQuestion: ScoreAnswer}


def _answer_problem(key: str, q: Question, a: Any) -> Optional[str]:
    """Why answer `a` does not fit question `q`, or None."""
    if not isinstance(a, _ANSWER_FOR[type(q)]):
        actual = getattr(a, "type", type(a).__name__)
        return f"classifier: answer {key!r} is a {actual} answer, but {key!r} is a {q.type} question"
    answer = cast(DecisionAnswer, a)
    try:
        if isinstance(answer, NoulAnswer):
            _unit(key, "noul", answer.noul)
            return None
        a = answer
        _unit(key, "confidence", a.confidence)
        for option, p in a.probabilities.items():
            _unit(key, f"probability of {option!r}", p)
    except ClassifierError as e:
        return str(e)
    if isinstance(a, ChoiceAnswer):
        offered = list(q.criteria)  # type: ignore[arg-type]
        if a.choice not in offered:
            return (f"classifier: answer {key!r}: choice {a.choice!r} is not an offered option "
                    f"({', '.join(map(repr, offered))})")
        stray = [o for o in a.probabilities if o not in offered]
        if stray:
            return f"classifier: answer {key!r}: probability for {stray[0]!r}, which was not offered"
        return None
    top = len(q.criteria) - 1  # type: ignore[arg-type]
    if not isinstance(a.score, (int, float)) or math.isnan(a.score) or not 0 <= a.score <= top:
        return f"classifier: answer {key!r}: score {a.score!r} is outside the rubric 0..{top}"
    return None


def check_decision(decision: Any, questions: Mapping[str, Question], *, strict: bool = True) -> Decision:
    """`decision` held to `questions` (see the module docstring): with `strict`, itself when every
    question has a fitting answer and there is no other, else raise; otherwise a copy whose unusable
    answers moved to `unanswered` (`decision` itself when there are none)."""
    if not isinstance(decision, Decision):
        raise ClassifierError(f"classifier: expected a Decision, got {type(decision).__name__}")
    if not isinstance(decision.answers, Mapping):
        raise ClassifierError(f"classifier: decision answers must be a dict, got {type(decision.answers).__name__}")
    problems: dict[str, str] = {}
    for key in decision.answers:
        if key not in questions:
            problems[key] = f"classifier: answer {key!r} answers no question that was asked"
            if strict:
                raise ClassifierError(problems[key])
    for key in sorted(questions):
        if key not in decision.answers:
            if strict:
                raise ClassifierError(f"classifier: question {key!r} has no answer in the response")
            continue
        problem = _answer_problem(key, questions[key], decision.answers[key])
        if problem is not None:
            if strict:
                raise ClassifierError(problem)
            problems[key] = problem
    if not problems:
        return decision
    return replace(decision, answers={k: a for k, a in decision.answers.items() if k not in problems},
                   unanswered={**decision.unanswered, **problems})
