"""The unified LLM client: one tool-calling loop for OpenAI- and Anthropic-style endpoints.

Layout: `client.py` (public `Client`), `settings.py` (its frozen settings), `provider.py` (every
model call) and `keeper.py` (stored conversations), `loop.py` (the one loop), `tool_calls.py` (executing and
resolving calls), `wire/` (provider dialects), `transport.py` (the seam) with `http11.py` (the
default), `httpx_transport.py` and `urllib_transport.py` (loaded on first use), `retry.py`, `streaming.py` + `sse.py`,
`memory.py`, `parts.py`, `errors.py`, `result.py`, `metrics.py` (Prometheus registry), `structured.py` (`output_type=`),
`tracing.py` (the seam `toolnexus.otel` plugs into).
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from .client import DEFAULT_CALL_TIMEOUT_MS, NO_DEADLINE, Client, create_client, create_in_process_client
from .errors import (
    MAX_ERROR_BODY,
    REDACTED,
    ContentPartError,
    ProviderError,
    ProviderResponseError,
    ResponseTooLarge,
    ResumeError,
    RunCancelled,
    RunTimeout,
    _HttpError as _HttpError,  # the 0.21 name of ProviderError, kept importable from here
    capped_error_body,
    redact_identifiers,
    redact_secrets,
    safe_error_body,
)
from .http11 import Http11Transport
from .memory import Conversation, ConversationStore, InMemoryConversationStore
from .metrics import MetricsRegistry
from .result import (
    LIMIT_COMPLETION,
    LIMIT_MAX_TURNS,
    LIMIT_TIMEOUT,
    RUN_STATUS_DONE,
    RUN_STATUS_INCOMPLETE,
    RUN_STATUS_PENDING,
    RUN_STATUSES,
    ClientStyle,
    ErrorClassifier,
    ErrorInfo,
    ErrorTier,
    Hooks,
    MetricEvent,
    OnMetric,
    RunResult,
    WaitFor,
)
from .retry import Timer
from .run_signal import RunSignal, SignalTool, wants_signal
from .settings import ClientSettings, Endpoint, Limits, LoopSettings, RetryPolicy
from .structured import FINAL_RESULT_TOOL, OutputValidationError
from .transport import MAX_RESPONSE_BYTES, HttpTransport, InProcessTransport

if TYPE_CHECKING:  # loaded lazily at run time (see __getattr__ below)
    from .httpx_transport import HttpxTransport
    from .urllib_transport import UrllibTransport

__all__ = [
    "Client", "ClientStyle", "Conversation", "ConversationStore", "ErrorClassifier", "ErrorInfo", "ErrorTier",
    "Hooks", "HttpTransport", "InMemoryConversationStore", "InProcessTransport", "MetricEvent", "OnMetric",
    "RunCancelled", "RunResult", "RunTimeout", "UrllibTransport", "WaitFor", "create_client",
    "create_in_process_client", "ProviderError", "ProviderResponseError", "ContentPartError",
    "ResumeError", "MetricsRegistry", "redact_identifiers", "safe_error_body", "capped_error_body", "REDACTED",
    "MAX_ERROR_BODY", "RUN_STATUS_DONE", "RUN_STATUS_PENDING", "RUN_STATUS_INCOMPLETE", "RUN_STATUSES",
    "LIMIT_MAX_TURNS", "LIMIT_COMPLETION", "LIMIT_TIMEOUT", "HttpxTransport", "Http11Transport",
    "Timer", "OutputValidationError", "FINAL_RESULT_TOOL", "NO_DEADLINE", "DEFAULT_CALL_TIMEOUT_MS",
    "MAX_RESPONSE_BYTES", "ResponseTooLarge", "redact_secrets", "RunSignal", "SignalTool", "wants_signal",
    "ClientSettings", "Endpoint", "Limits", "LoopSettings", "RetryPolicy",
]


def __getattr__(name: str) -> object:
    """`HttpxTransport` and `UrllibTransport` load on first use: importing httpx and urllib.request
    costs time a client on the default transport never needs (figures: docs/performance.md)."""
    if name == "HttpxTransport":
        from .httpx_transport import HttpxTransport

        return HttpxTransport
    if name == "UrllibTransport":
        from .urllib_transport import UrllibTransport

        return UrllibTransport
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
