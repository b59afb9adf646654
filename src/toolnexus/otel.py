"""OpenTelemetry traces for runs, LLM calls, tool calls, suspensions and resumes (the `otel` extra).

    pip install 'toolnexus[otel]'

    from toolnexus import otel
    otel.instrument()                          # the global TracerProvider
    otel.instrument(tracer_provider=provider)  # or a given one
    ...
    otel.uninstrument()

Opt-in and free when off: nothing imports this module (or OpenTelemetry) unless you do, and an
uninstrumented run costs one global read (`toolnexus.client._tracing`). Once instrumented, every
run of every client is traced — agent-runtime turns included, since each turn is a client run.

The spans (GenAI semantic conventions; the names are checked against the installed
`opentelemetry-semantic-conventions` package by the tests):

| span | kind | attributes |
|---|---|---|
| `invoke_agent [agent]` — one run (one agent turn) | INTERNAL | `gen_ai.operation.name="invoke_agent"`, `gen_ai.provider.name`, `gen_ai.request.model`, `gen_ai.response.model`, usage (the run's totals), `gen_ai.agent.name` (agent turns), `gen_ai.conversation.id` (`ask(id=)`; the handle id for agents), `gen_ai.output.type` (`"json"` with an `output_type`), `server.address` / `server.port`, `toolnexus.run.status` / `turns` / `tool_calls` / `limit` / `finish_reason` (neutral) |
| `chat {model}` — one LLM call (retries inside) | CLIENT | `gen_ai.operation.name="chat"`, provider, `gen_ai.request.model`, `gen_ai.request.stream`, `gen_ai.response.model` / `id` / `finish_reasons` (the provider's own value, streamed or not), usage |

Usage is `gen_ai.usage.input_tokens` (all input, cache reads and writes included) and
`gen_ai.usage.output_tokens`, plus — when the provider reported them — `gen_ai.usage.cache_read.
input_tokens`, `gen_ai.usage.cache_creation.input_tokens` and `gen_ai.usage.reasoning.output_tokens`.
| `execute_tool {tool}` — one tool call, hooks included | INTERNAL | `gen_ai.operation.name="execute_tool"`, `gen_ai.tool.name`, `gen_ai.tool.call.id`, `gen_ai.tool.type="function"`, `toolnexus.tool.source` |
| `toolnexus.wait_for` — the run waiting for a host's answer (`wait_for`) | INTERNAL | `toolnexus.request.id` / `kind`, `toolnexus.answer.ok` |

`gen_ai.provider.name` is the client's wire style (`openai` / `anthropic`): an OpenAI-compatible
server is reported as `openai`, as the conventions ask when the real provider is unknown.
`gen_ai.system`, its deprecated predecessor, carries the same value because many trace backends
still group by it.

Suspensions and resumes:
- a tool that suspends: its `execute_tool` span has `toolnexus.tool.pending=true` and an event
  `toolnexus.suspended` (`toolnexus.request.id`, `toolnexus.request.kind`);
- a run that halts on it (no `wait_for`): the run span has `toolnexus.run.status="pending"`, the
  request id/kind, and the same event;
- answered in process: a `toolnexus.wait_for` span, then an `execute_tool` span for the re-run
  with `toolnexus.tool.resumed=true`, `toolnexus.request.id` and `toolnexus.answer.ok`;
- a durable resume (`run_with_answer` / `ask_with_answer`, an agent's continued turn): a new run
  span with `toolnexus.run.resumed=true`, the request id and answer, and an event
  `toolnexus.resumed`; a replayed agent turn shows the in-process pattern above.

Errors: a run or LLM call that raises ends with status ERROR, `error.type` (the HTTP status for
a provider error, else the exception's class) and the exception recorded; a tool whose result is
an error gets status ERROR and `error.type="tool_error"`. A run abandoned mid-way (cancelled, or
a stream closed early) ends with `toolnexus.run.status="cancelled"`.

A worker of the fleet (`toolnexus.fleet`) wraps each piece of work in a span —
`toolnexus.fleet.run`, `.answer`, `.recover`, `.expire`, `.cancel` — with `toolnexus.run.id`,
`toolnexus.fleet._worker`, `toolnexus.fleet.queued_ms` (how long it waited in the queue) and, for a
recovery, `toolnexus.fleet.takeover` (its holder died holding the lease); the runs it drives nest
under it.

Deliberately not recorded: prompts, completions, tool arguments and results — they routinely
hold personal data and secrets; put what you need on your own spans or use the metrics.

Nesting: a run span is a child of whatever span is current when the run starts, and a tool call
runs with its `execute_tool` span current — so a sub-agent's turn (the `task` tool, `as_tool`),
an HTTP tool with instrumented httpx, or your own spans inside a tool all nest under the call.
"""  # noqa: E501 - Markdown tables, one row per line

from __future__ import annotations

from contextlib import contextmanager
from typing import Any, Iterator, Optional
from urllib.parse import urlsplit

from .errors import MissingExtra

try:
    from opentelemetry import trace
    from opentelemetry.trace import Span, SpanKind, Status, StatusCode
except ImportError as exc:  # pragma: no cover - exercised only without the extra
    raise MissingExtra("toolnexus.otel needs OpenTelemetry: pip install 'toolnexus[otel]'") from exc

from .client import _tracing as tracing
from .types import ToolResult, pending_of

__all__ = ["instrument", "uninstrument", "is_instrumented", "ATTRIBUTES"]

# GenAI and general semantic-convention names (tests compare them with the semconv package)
OPERATION = "gen_ai.operation.name"
PROVIDER = "gen_ai.provider.name"
SYSTEM = "gen_ai.system"
REQUEST_MODEL = "gen_ai.request.model"
REQUEST_STREAM = "gen_ai.request.stream"
RESPONSE_MODEL = "gen_ai.response.model"
RESPONSE_ID = "gen_ai.response.id"
FINISH_REASONS = "gen_ai.response.finish_reasons"
INPUT_TOKENS = "gen_ai.usage.input_tokens"
OUTPUT_TOKENS = "gen_ai.usage.output_tokens"
CACHE_READ_TOKENS = "gen_ai.usage.cache_read.input_tokens"
CACHE_CREATION_TOKENS = "gen_ai.usage.cache_creation.input_tokens"
REASONING_TOKENS = "gen_ai.usage.reasoning.output_tokens"
AGENT_NAME = "gen_ai.agent.name"
CONVERSATION_ID = "gen_ai.conversation.id"
OUTPUT_TYPE = "gen_ai.output.type"
TOOL_NAME = "gen_ai.tool.name"
TOOL_CALL_ID = "gen_ai.tool.call.id"
TOOL_TYPE = "gen_ai.tool.type"
ERROR_TYPE = "error.type"
SERVER_ADDRESS = "server.address"
SERVER_PORT = "server.port"
ATTRIBUTES = (OPERATION, PROVIDER, SYSTEM, REQUEST_MODEL, REQUEST_STREAM, RESPONSE_MODEL, RESPONSE_ID, FINISH_REASONS,
              INPUT_TOKENS, OUTPUT_TOKENS, CACHE_READ_TOKENS, CACHE_CREATION_TOKENS, REASONING_TOKENS, AGENT_NAME,
              CONVERSATION_ID, OUTPUT_TYPE, TOOL_NAME, TOOL_CALL_ID, TOOL_TYPE, ERROR_TYPE, SERVER_ADDRESS, SERVER_PORT)

# ours
RUN_STATUS = "toolnexus.run.status"
RUN_TURNS = "toolnexus.run.turns"
RUN_TOOL_CALLS = "toolnexus.run.tool_calls"
RUN_LIMIT = "toolnexus.run.limit"
RUN_FINISH_REASON = "toolnexus.run.finish_reason"
RUN_RESUMED = "toolnexus.run.resumed"
REQUEST_ID = "toolnexus.request.id"
REQUEST_KIND = "toolnexus.request.kind"
ANSWER_OK = "toolnexus.answer.ok"
TOOL_SOURCE = "toolnexus.tool.source"
TOOL_PENDING = "toolnexus.tool.pending"
TOOL_RESUMED = "toolnexus.tool.resumed"
SUSPENDED_EVENT = "toolnexus.suspended"
RESUMED_EVENT = "toolnexus.resumed"


def _field(value: Any, name: str) -> Any:
    return value.get(name) if isinstance(value, dict) else getattr(value, name, None)


def _request_attributes(request: Any) -> dict[str, Any]:
    out = {}
    for key, attr in ((REQUEST_ID, "id"), (REQUEST_KIND, "kind")):
        value = _field(request, attr)
        if isinstance(value, str) and value:
            out[key] = value
    return out


def _error_type(error: BaseException) -> str:
    status = getattr(error, "status", None)
    return str(status) if isinstance(status, int) else type(error).__qualname__


def _fail(span: Span, error: BaseException) -> None:
    span.set_attribute(ERROR_TYPE, _error_type(error))
    span.record_exception(error)
    span.set_status(Status(StatusCode.ERROR, f"{type(error).__name__}: {error}"))


def _server(base_url: Any) -> dict[str, Any]:
    try:
        parts = urlsplit(str(base_url))
        port = parts.port or (443 if parts.scheme == "https" else 80 if parts.scheme == "http" else None)
    except ValueError:
        return {}
    out: dict[str, Any] = {}
    if parts.hostname:
        out[SERVER_ADDRESS] = parts.hostname
    if port:
        out[SERVER_PORT] = port
    return out


_DETAIL_ATTRIBUTES = (("cached_tokens", CACHE_READ_TOKENS), ("cache_creation_tokens", CACHE_CREATION_TOKENS),
                      ("reasoning_tokens", REASONING_TOKENS))


def _usage(span: Span, usage: Optional[dict[str, int]]) -> None:
    if usage:
        span.set_attribute(INPUT_TOKENS, int(usage.get("prompt_tokens", 0)))
        span.set_attribute(OUTPUT_TOKENS, int(usage.get("completion_tokens", 0)))
        for key, name in _DETAIL_ATTRIBUTES:
            if usage.get(key):
                span.set_attribute(name, int(usage[key]))


class _LlmSpan:
    def __init__(self, span: Span, run: "_RunSpan") -> None:
        self.span = span
        self.run = run

    def end(self, usage: Optional[dict[str, int]], error: Optional[BaseException], response: Any,
            finish: Optional[str] = None) -> None:
        span = self.span
        if finish:
            span.set_attribute(FINISH_REASONS, [finish])
        if isinstance(response, dict):
            if isinstance(response.get("model"), str):
                span.set_attribute(RESPONSE_MODEL, response["model"])
                self.run.response_model = response["model"]
            if isinstance(response.get("id"), str):
                span.set_attribute(RESPONSE_ID, response["id"])
            reasons = [c.get("finish_reason") for c in response.get("choices") or [] if isinstance(c, dict)]
            reasons = [r for r in reasons if isinstance(r, str)] or (
                [response["stop_reason"]] if isinstance(response.get("stop_reason"), str) else [])
            if reasons and not finish:
                span.set_attribute(FINISH_REASONS, reasons)
        _usage(span, usage)
        if error is not None:
            _fail(span, error)
        span.end()


class _ToolSpan:
    def __init__(self, span: Span) -> None:
        self.span = span

    def outcome(self, result: Any) -> None:
        request = pending_of(result)
        if request is not None:
            self.span.set_attribute(TOOL_PENDING, True)
            self.span.add_event(SUSPENDED_EVENT, _request_attributes(request))
        elif isinstance(result, ToolResult) and result.is_error:
            self.span.set_attribute(ERROR_TYPE, "tool_error")
            self.span.set_status(Status(StatusCode.ERROR, "the tool returned an error result"))


class _WaitSpan:
    def __init__(self, span: Span) -> None:
        self.span = span

    def answered(self, answer: Any) -> None:
        self.span.set_attribute(ANSWER_OK, bool(answer is not None and _field(answer, "ok")))


class _RunSpan:
    def __init__(self, tracer: trace.Tracer, loop: tracing.TracedRun, resumed: bool,
                 resume: Optional[tuple[Any, Any]]) -> None:
        endpoint = loop.settings.endpoint
        self.tracer = tracer
        self.common = {PROVIDER: endpoint.style, SYSTEM: endpoint.style, **_server(endpoint.base_url)}
        attributes: dict[str, Any] = {OPERATION: "invoke_agent", REQUEST_MODEL: endpoint.model, **self.common}
        agent = loop.settings.loop.agent_name
        if agent:
            attributes[AGENT_NAME] = agent
        if loop.conversation_id:
            attributes[CONVERSATION_ID] = loop.conversation_id
        if loop.structured:
            attributes[OUTPUT_TYPE] = "json"
        if resumed:
            attributes[RUN_RESUMED] = True
        self.span = tracer.start_span(f"invoke_agent {agent}" if agent else "invoke_agent", kind=SpanKind.INTERNAL,
                                      attributes=attributes)
        if resume is not None:
            pending, answer = resume
            event = {**_request_attributes(pending), ANSWER_OK: bool(_field(answer, "ok"))}
            self.span.set_attributes(event)
            self.span.add_event(RESUMED_EVENT, event)
        self.context = trace.set_span_in_context(self.span)
        self.ended = False
        self.response_model: Optional[str] = None  # what the provider said it ran, when it said

    def _child(self, name: str, kind: SpanKind, attributes: dict[str, Any]) -> Span:
        return self.tracer.start_span(name, context=self.context, kind=kind, attributes=attributes)

    def llm(self, model: str, streaming: bool) -> _LlmSpan:
        return _LlmSpan(self._child(f"chat {model}", SpanKind.CLIENT, {
            OPERATION: "chat", REQUEST_MODEL: model, REQUEST_STREAM: streaming, **self.common}), self)

    @contextmanager
    def tool(self, name: str, call_id: Optional[str], source: str, answer: Any = None) -> Iterator[_ToolSpan]:
        attributes: dict[str, Any] = {OPERATION: "execute_tool", TOOL_NAME: name, TOOL_TYPE: "function",
                                      TOOL_SOURCE: source}
        if call_id:
            attributes[TOOL_CALL_ID] = call_id
        if answer is not None:
            attributes.update({TOOL_RESUMED: True, ANSWER_OK: bool(_field(answer, "ok")),
                               **({REQUEST_ID: answer.id} if isinstance(_field(answer, "id"), str) else {})})
        span = self._child(f"execute_tool {name}", SpanKind.INTERNAL, attributes)
        try:
            with trace.use_span(span, end_on_exit=False, record_exception=False, set_status_on_exception=False):
                yield _ToolSpan(span)
        except Exception as exc:
            _fail(span, exc)
            raise
        finally:
            span.end()

    @contextmanager
    def waiting(self, request: Any) -> Iterator[_WaitSpan]:
        span = self._child("toolnexus.wait_for", SpanKind.INTERNAL, _request_attributes(request))
        try:
            yield _WaitSpan(span)
        except Exception as exc:
            _fail(span, exc)
            raise
        finally:
            span.end()

    def done(self, result: Any) -> None:
        span = self.span
        span.set_attribute(RUN_STATUS, result.status)
        span.set_attribute(RUN_TURNS, result.turns)
        span.set_attribute(RUN_TOOL_CALLS, result.tool_call_count)
        if self.response_model or result.model:
            span.set_attribute(RESPONSE_MODEL, self.response_model or result.model)
        _usage(span, result.usage)
        if result.limit:
            span.set_attribute(RUN_LIMIT, result.limit)
        if result.finish_reason:
            span.set_attribute(RUN_FINISH_REASON, result.finish_reason)
        if result.pending is not None:
            request = _request_attributes(result.pending)
            span.set_attributes(request)
            span.add_event(SUSPENDED_EVENT, request)
        self._end()

    def fail(self, error: BaseException) -> None:
        self.span.set_attribute(RUN_STATUS, "error")
        _fail(self.span, error)
        self._end()

    def close(self) -> None:
        if not self.ended:
            self.span.set_attribute(RUN_STATUS, "cancelled")
            self._end()

    def _end(self) -> None:
        if not self.ended:
            self.ended = True
            self.span.end()


class _Tracer:
    def __init__(self, tracer: trace.Tracer) -> None:
        self.tracer = tracer

    def start_run(self, loop: tracing.TracedRun, *, resumed: bool, resume: Optional[tuple[Any, Any]]) -> _RunSpan:
        return _RunSpan(self.tracer, loop, resumed, resume)

    @contextmanager
    def job(self, name: str, attributes: dict[str, Any]) -> Iterator[None]:
        with self.tracer.start_as_current_span(name, kind=SpanKind.INTERNAL, attributes=attributes) as span:
            try:
                yield
            except BaseException as exc:
                _fail(span, exc)
                raise


def instrument(tracer_provider: Optional[trace.TracerProvider] = None) -> None:
    """Trace every run from now on, on `tracer_provider` (default: the global one). Idempotent:
    calling it again switches the provider."""
    from ._version import VERSION as __version__

    tracing.install(_Tracer(trace.get_tracer("toolnexus", __version__, tracer_provider=tracer_provider)))


def uninstrument() -> None:
    """Stop tracing (runs already started finish their spans)."""
    tracing.install(None)


def is_instrumented() -> bool:
    return tracing.installed() is not None
