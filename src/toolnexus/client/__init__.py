"""The unified LLM client: one tool-calling loop for OpenAI- and Anthropic-style endpoints.

Layout: `_client.py` (public `Client`), `_settings.py` (its frozen settings), `_provider.py` (every
model call) and `_keeper.py` (stored conversations), `_loop.py` (the one loop), `_tool_calls.py`
(executing and resolving calls), `_wire/` (provider dialects), `_transport.py` (the seam) with
`_http11.py` (the default), `_httpx_transport.py` and `_urllib_transport.py` (loaded on first use),
`_retry.py`, `_streaming.py` + `_sse.py`, `_memory.py`, `_parts.py`, `_errors.py`, `_result.py`,
`_metrics.py` (Prometheus registry), `_structured.py` (`output_type=`), `_tracing.py` (the seam
`toolnexus.otel` plugs into). Every module here is internal: import from `toolnexus.client`.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from ._client import DEFAULT_CALL_TIMEOUT_MS, NO_DEADLINE, Client, create_client, create_in_process_client
from ._errors import (
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
from ._http11 import Http11Transport
from ._memory import Conversation, ConversationStore, InMemoryConversationStore
from ._metrics import MetricsRegistry
from ._result import (
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
from ._retry import Timer
from ._run_signal import RunSignal, SignalTool, wants_signal
from ._settings import ClientSettings, Endpoint, Limits, LoopSettings, RetryPolicy
from ._structured import FINAL_RESULT_TOOL, OutputValidationError
from ._transport import MAX_RESPONSE_BYTES, HttpTransport, InProcessTransport

if TYPE_CHECKING:  # loaded lazily at run time (see __getattr__ below)
    from ._httpx_transport import HttpxTransport
    from ._urllib_transport import UrllibTransport

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
        from ._httpx_transport import HttpxTransport

        return HttpxTransport
    if name == "UrllibTransport":
        from ._urllib_transport import UrllibTransport

        return UrllibTransport
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
