"""`RunResult`, its status/limit vocabulary, and the client's public type aliases.

Data only: what a run hands back and the shapes of the callables a `Client` accepts.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Callable, Literal, Optional, TypedDict

from ..types import Request

__all__ = [
    "RunResult",
    "RUN_STATUS_DONE",
    "RUN_STATUS_PENDING",
    "RUN_STATUS_INCOMPLETE",
    "RUN_STATUSES",
    "LIMIT_MAX_TURNS",
    "LIMIT_COMPLETION",
    "LIMIT_TIMEOUT",
    "ClientStyle",
    "ErrorTier",
    "ErrorInfo",
    "ErrorClassifier",
    "WaitFor",
    "Hooks",
    "MetricEvent",
    "OnMetric",
    "zero_usage",
]

RUN_STATUS_DONE = "done"
RUN_STATUS_PENDING = "pending"
RUN_STATUS_INCOMPLETE = "incomplete"
RUN_STATUSES = (RUN_STATUS_DONE, RUN_STATUS_PENDING, RUN_STATUS_INCOMPLETE)
LIMIT_MAX_TURNS = "maxTurns"
LIMIT_COMPLETION = "completion"
LIMIT_TIMEOUT = "timeout"

ClientStyle = Literal["openai", "anthropic"]
ErrorTier = Literal["retry", "fail"]


class ErrorInfo(TypedDict, total=False):
    """What `on_error` sees for one failed attempt."""

    error: Any
    status: int
    attempt: int
    retryable: bool


ErrorClassifier = Callable[[ErrorInfo], ErrorTier]
WaitFor = Callable[[Request], Any]
Hooks = Any
MetricEvent = dict[str, Any]
OnMetric = Callable[[MetricEvent], None]


def zero_usage() -> dict[str, int]:
    """A fresh usage dict with all three counters at 0."""
    return {"prompt_tokens": 0, "completion_tokens": 0, "total_tokens": 0}


@dataclass
class RunResult:
    """The outcome of one run: final text, the working transcript, and what happened on the way.

    `tool_calls` entries are `{"name", "args", "output", "is_error", "metadata"}` in call order;
    `limit` is set iff `status == "incomplete"`, `pending` iff `status == "pending"`. `output` is
    the validated value of a run given an `output_type` (structured.py), else None.
    """

    text: str
    messages: list[dict[str, Any]]
    tool_calls: list[dict[str, Any]] = field(default_factory=list)
    tool_call_count: int = 0
    turns: int = 0
    usage: dict[str, int] = field(default_factory=zero_usage)
    model: str = ""
    status: Literal["done", "pending", "incomplete"] = "done"
    limit: Optional[str] = None
    pending: Optional[Request] = None
    output: Any = None
