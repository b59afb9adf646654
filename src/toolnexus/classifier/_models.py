"""The classifier's public shapes: questions, answers, decisions, the transport seam and constants.

A question is one of three typed forms — a `noul` (a probability that a statement is true), a
`choice` among option ids, or a `score` on an ordered rubric — and an answer has the matching
type. A `Decision` is the answers to one `evaluate` call, keyed like the questions, plus the model
that answered, its token usage and whether the probabilities are calibrated.

All shapes are plain dataclasses (field order is the positional order) so callers can build,
compare and record them; nothing here does I/O.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Literal, Mapping, Optional, Protocol, Union, runtime_checkable

from ..errors import ToolnexusError

DEFAULT_CLASSIFIER_BASE_URL = "https://api.typesafe.ai/v1"
DEFAULT_CLASSIFIER_MODEL = "jev-latest"
DEFAULT_CLASSIFIER_API_KEY_ENV = "TYPESAFE_API_KEY"
DEFAULT_CLASSIFIER_TIMEOUT = 10.0  # seconds, one attempt
MAX_CHOICE_OPTIONS = 255
MIN_SCORE_LEVELS = 2
MAX_SCORE_LEVELS = 10
NEAR_UNIFORM_TOLERANCE = 0.05
METRIC_CLASSIFIER_EVALUATE = "classifier.evaluate"
METRIC_CLASSIFIER_WARNING = "classifier.warning"
CLASSIFIER_BACKENDS: dict[str, dict[str, str]] = {
    "typesafe": {"base_url": "https://api.typesafe.ai/v1", "model": "jev-latest", "api_key_env": "TYPESAFE_API_KEY"},
    "openrouter": {"base_url": "https://openrouter.ai/api/v1", "model": "typesafe/jev-1.13",
                   "api_key_env": "OPENROUTER_API_KEY"},
}

ClassifierStyle = Literal["systemone", "llm", "custom", "static"]
ClassifierBackend = Literal["typesafe", "openrouter"]


class ClassifierError(ToolnexusError):
    """Anything a classifier, a judgment or a battery cannot do: bad input, a failed call, a bad answer."""


# -- questions ---------------------------------------------------------------------------------------


@dataclass
class NoulCriteria:
    """What `true` and `false` mean for a noul question."""

    true: str = ""
    false: str = ""


@dataclass
class NoulQuestion:
    """How likely is a statement about the state to be true? Answered with a probability."""

    instructions: str
    criteria: Optional[NoulCriteria] = None
    type: str = "noul"


@dataclass
class ChoiceQuestion:
    """Which option fits the state? `criteria` maps option id -> what picking it means."""

    instructions: str
    criteria: dict[str, str] = field(default_factory=dict)
    type: str = "choice"


@dataclass
class ScoreQuestion:
    """Where does the state sit on an ordered rubric? `criteria` lists the levels, lowest first."""

    instructions: str
    criteria: list[str] = field(default_factory=list)
    type: str = "score"


Question = Union[NoulQuestion, ChoiceQuestion, ScoreQuestion]


def choice_over(instructions: str, items: Mapping[str, str]) -> ChoiceQuestion:
    """A choice question over `items` (option id -> meaning), order kept."""
    return ChoiceQuestion(instructions, dict(items))


# -- answers -----------------------------------------------------------------------------------------


@dataclass
class NoulAnswer:
    """The probability (0..1) that the statement is true."""

    noul: float
    type: str = "noul"


@dataclass
class ChoiceAnswer:
    """The picked option, the distribution over options, and how sure the model is."""

    choice: str
    probabilities: dict[str, float]
    confidence: float
    near_uniform: bool = False
    type: str = "choice"


def _level_order(key: str) -> tuple[int, str]:
    return (len(key), key)


@dataclass
class ScoreAnswer:
    """A (possibly fractional) rubric score, the legend of levels, their distribution and a confidence."""

    score: float
    legend: dict[str, str]
    probabilities: dict[str, float]
    confidence: float
    type: str = "score"

    def levels(self) -> list[str]:
        """The legend's level texts in numeric key order ("2" before "10")."""
        return [self.legend[k] for k in sorted(self.legend, key=_level_order)]


DecisionAnswer = Union[NoulAnswer, ChoiceAnswer, ScoreAnswer]


@dataclass
class ClassifierUsage:
    """Tokens the classifier spent; `cost` is None when the backend did not say (not zero)."""

    input_tokens: int = 0
    output_tokens: int = 0
    cost: Optional[float] = None


_KINDS = {"noul": NoulAnswer, "choice": ChoiceAnswer, "score": ScoreAnswer}


@dataclass
class Decision:
    """The answers to one `evaluate` call, keyed like its questions.

    `unanswered` holds the keys whose answer came back unusable — of the wrong type, outside its
    range, a choice that was not offered, or answering no question asked — with why: such an
    answer is never in `answers`, and reading it raises that reason. A question with no answer at
    all is simply absent; reading it raises `no answer … in this decision` (as in 0.21, a decision
    fails only where it is read; `create_classifier(strict=True)` fails `evaluate` instead).
    """

    model: str = ""
    answers: dict[str, DecisionAnswer] = field(default_factory=dict)
    usage: ClassifierUsage = field(default_factory=ClassifierUsage)
    calibrated: bool = True
    unanswered: dict[str, str] = field(default_factory=dict)

    def _typed(self, key: str, wanted: str) -> Any:
        if key in self.unanswered:
            raise ClassifierError(self.unanswered[key])
        if key not in self.answers:
            raise ClassifierError(f"classifier: no answer {key!r} in this decision")
        answer = self.answers[key]
        actual = getattr(answer, "type", type(answer).__name__)
        if not isinstance(answer, _KINDS[wanted]):
            raise ClassifierError(f"classifier: answer {key!r} is a {actual} answer, not {wanted}")
        return answer

    def noul(self, key: str) -> NoulAnswer:
        return self._typed(key, "noul")

    def choice(self, key: str) -> ChoiceAnswer:
        return self._typed(key, "choice")

    def score(self, key: str) -> ScoreAnswer:
        return self._typed(key, "score")


@dataclass
class RecordedDecision:
    """A canned response for a `static` classifier: this state and these questions get `response`."""

    state: Any
    questions: Mapping[str, Question]
    response: Union[Mapping[str, Any], bytes, str]


# -- the transport seam ---------------------------------------------------------------------------------


@dataclass
class ClassifierResponse:
    """What a classifier transport hands back: status, raw body, and the raw `Retry-After` header."""

    status: int
    body: bytes
    retry_after: Optional[str] = None


@runtime_checkable
class ClassifierTransport(Protocol):
    """One POST. A plain `post` may block (it runs on a worker thread); an `async def post` is awaited."""

    def post(self, url: str, headers: dict[str, str], body: bytes, timeout: float) -> ClassifierResponse: ...
