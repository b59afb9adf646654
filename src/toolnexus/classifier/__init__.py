"""Typed decisions: ask a classifier noul / choice / score questions about a state.

    from toolnexus.classifier import create_classifier, NoulQuestion
    clf = create_classifier()                      # SystemOne at api.typesafe.ai, key from TYPESAFE_API_KEY
    d = await clf.evaluate({"text": "..."}, {"toxic": NoulQuestion("Is `text` toxic?")})
    d.noul("toxic").noul                           # a probability, 0..1

Styles: `systemone` (HTTP), `llm` (an ordinary `Client` answers), `custom` (your function),
`static` (recorded responses). `toolnexus.judge` builds simple judgments and rule gates on top,
`toolnexus.judge_batteries` ready-made guards and routers for the client loop.

Layout: `_models.py` (shapes, constants), `_wire.py` (projections, canonical JSON, decoding),
`_systemone.py` (the HTTP call), `_classifier.py` (styles, metrics, batches). Standard library only;
importing builds nothing (the client's transport adapter is loaded on the first call).
"""

from __future__ import annotations

from ._classifier import Classifier, create_classifier
from ._models import (
                     CLASSIFIER_BACKENDS,
                     DEFAULT_CLASSIFIER_API_KEY_ENV,
                     DEFAULT_CLASSIFIER_BASE_URL,
                     DEFAULT_CLASSIFIER_MODEL,
                     DEFAULT_CLASSIFIER_TIMEOUT,
                     MAX_CHOICE_OPTIONS,
                     MAX_SCORE_LEVELS,
                     METRIC_CLASSIFIER_EVALUATE,
                     METRIC_CLASSIFIER_WARNING,
                     MIN_SCORE_LEVELS,
                     NEAR_UNIFORM_TOLERANCE,
                     ChoiceAnswer,
                     ChoiceQuestion,
                     ClassifierBackend,
                     ClassifierError,
                     ClassifierResponse,
                     ClassifierStyle,
                     ClassifierTransport,
                     ClassifierUsage,
                     Decision,
                     DecisionAnswer,
                     NoulAnswer,
                     NoulCriteria,
                     NoulQuestion,
                     Question,
                     RecordedDecision,
                     ScoreAnswer,
                     ScoreQuestion,
                     choice_over,
)
from ._wire import canonical_json, canonical_request, near_uniform, question_wire, questions_wire

__all__ = [
    "DEFAULT_CLASSIFIER_BASE_URL", "DEFAULT_CLASSIFIER_MODEL", "DEFAULT_CLASSIFIER_API_KEY_ENV",
    "DEFAULT_CLASSIFIER_TIMEOUT", "MAX_CHOICE_OPTIONS", "MIN_SCORE_LEVELS", "MAX_SCORE_LEVELS",
    "NEAR_UNIFORM_TOLERANCE", "METRIC_CLASSIFIER_EVALUATE", "METRIC_CLASSIFIER_WARNING", "CLASSIFIER_BACKENDS",
    "ClassifierStyle", "ClassifierBackend", "ClassifierError", "NoulCriteria", "NoulQuestion", "ChoiceQuestion",
    "ScoreQuestion", "Question", "NoulAnswer", "ChoiceAnswer", "ScoreAnswer", "DecisionAnswer", "ClassifierUsage",
    "Decision", "RecordedDecision", "ClassifierResponse", "ClassifierTransport", "choice_over", "question_wire",
    "questions_wire", "canonical_json", "canonical_request", "near_uniform", "create_classifier", "Classifier",
]
