"""`RunResult`, its status/limit/finish vocabularies, and the client's public type aliases.

Data only: what a run hands back and the shapes of the callables a `Client` accepts.

Finish reasons are one neutral vocabulary across the wires (`FINISH_REASONS`): `stop` (a final
answer), `tool_calls`, `length` (cut at the output limit), `refusal`, `content_filter`, `pause`
(the provider paused a long turn: Anthropic `pause_turn`) and `error` (the provider reported an
error; the client raises `ProviderError` for it, so a result never carries it). The provider's own
value travels beside it (`provider_finish_reason`). A run whose last reply did not finish — cut at
the output limit, refused, filtered — is `status="incomplete"` with the `limit` naming why
(`LIMIT_MAX_OUTPUT_TOKENS`, `LIMIT_REFUSAL`, `LIMIT_CONTENT_FILTER`), never `done`.

Usage is `prompt_tokens` (ALL input, cache reads and writes included), `completion_tokens` and
`total_tokens`, plus — only when the provider reported a non-zero figure — the details
`cached_tokens` (input read from a prompt cache), `cache_creation_tokens` (input written to one)
and `reasoning_tokens` (output spent on reasoning). Both details are parts of the totals, not
additions to them.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Callable, Literal, Optional, Protocol, TypedDict, TypeGuard, runtime_checkable

from .._encoded import EncodedList
from ..types import Request, Tool, ToolContext, ToolResult

RUN_STATUS_DONE = "done"
RUN_STATUS_PENDING = "pending"
RUN_STATUS_INCOMPLETE = "incomplete"
RUN_STATUSES = (RUN_STATUS_DONE, RUN_STATUS_PENDING, RUN_STATUS_INCOMPLETE)
LIMIT_MAX_TURNS = "maxTurns"
LIMIT_COMPLETION = "completion"
LIMIT_TIMEOUT = "timeout"
LIMIT_MAX_OUTPUT_TOKENS = "maxOutputTokens"
"""The reply was cut at the provider's output limit (`max_tokens` / `max_output_tokens`)."""
LIMIT_REFUSAL = "refusal"
"""The model refused; the refusal's text is the result's `text`."""
LIMIT_CONTENT_FILTER = "contentFilter"
"""The provider's content filter withheld or cut the reply."""

FINISH_STOP = "stop"
FINISH_TOOL_CALLS = "tool_calls"
FINISH_LENGTH = "length"
FINISH_REFUSAL = "refusal"
FINISH_CONTENT_FILTER = "content_filter"
FINISH_PAUSE = "pause"
FINISH_ERROR = "error"
FINISH_REASONS = (FINISH_STOP, FINISH_TOOL_CALLS, FINISH_LENGTH, FINISH_REFUSAL, FINISH_CONTENT_FILTER, FINISH_PAUSE,
                  FINISH_ERROR)
USAGE_DETAILS = ("cached_tokens", "cache_creation_tokens", "reasoning_tokens")
"""The usage detail keys, present in a usage dict only when the provider reported them non-zero."""

ClientStyle = Literal["openai", "anthropic", "responses"]
ErrorTier = Literal["retry", "fail"]


class ErrorInfo(TypedDict, total=False):
    """What `on_error` sees for one failed attempt."""

    error: Any
    status: int
    attempt: int
    retryable: bool
    error_type: str  # the provider's own error type or code, when its error body names one


ErrorClassifier = Callable[[ErrorInfo], ErrorTier]
WaitFor = Callable[[Request], Any]
Hooks = Any
MetricEvent = dict[str, Any]
OnMetric = Callable[[MetricEvent], None]


@runtime_checkable
class HookReply(Protocol):
    """What a hook's truthy reply is read through: `.get` (a dict, or any object that has it)."""

    def get(self, key: str, /) -> Any: ...


class Toolset(Protocol):
    """What a run asks of its toolkit (`toolnexus.Toolkit` is one; `None` means no tools)."""

    def get(self, name: str) -> Optional[Tool]: ...

    async def execute(self, name: str, args: Any = None, ctx: Optional[ToolContext] = None) -> ToolResult: ...

    def skills_prompt(self) -> str: ...

    def to_openai(self) -> list[dict[str, Any]]: ...

    def to_anthropic(self) -> list[dict[str, Any]]: ...


@runtime_checkable
class SharedDeclarations(Protocol):
    """A toolkit that keeps its declarations encoded once per change (`Toolkit.declarations`)."""

    def declarations(self, style: str) -> EncodedList: ...


def declares_shared(toolkit: object) -> TypeGuard[SharedDeclarations]:
    """Whether `toolkit`'s own class offers `declarations` (a wrapper delegating by `__getattr__`
    does not count: its extra tools would be missing from the inner toolkit's list)."""
    return issubclass(type(toolkit), SharedDeclarations)


def zero_usage() -> dict[str, int]:
    """A fresh usage dict with all three counters at 0."""
    return {"prompt_tokens": 0, "completion_tokens": 0, "total_tokens": 0}


@dataclass
class RunResult:
    """The outcome of one run: final text, the working transcript, and what happened on the way.

    `tool_calls` entries are `{"name", "args", "output", "is_error", "metadata"}` in call order;
    `limit` is set iff `status == "incomplete"`, `pending` iff `status == "pending"`. `output` is
    the validated value of a run given an `output_type` (_structured.py), else None.
    `finish_reason` is how the last reply ended, in the neutral vocabulary (`FINISH_REASONS`), and
    `provider_finish_reason` the provider's own word for it; both None when no reply was read.
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
    finish_reason: Optional[str] = None
    provider_finish_reason: Optional[str] = None
