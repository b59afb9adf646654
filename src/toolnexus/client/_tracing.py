"""The tracing seam: where a tracer (today only `toolnexus.otel`) plugs into the client loop.

The loop asks `run_span(loop)` once per run. With no tracer installed that is one global read
returning None, and the loop does nothing else — this module imports no tracing library, so a
process that never calls `toolnexus.otel.instrument()` never loads OpenTelemetry.

A tracer implements `Tracer.start_run`, returning a `RunSpan`; the loop reports to it at the
points a run can be observed: each LLM call (`llm` → `LlmSpan`), each tool call and each re-run
of a tool with a host's answer (the `TracedRunner` below, which wraps the turn's `ToolRunner`),
each in-process wait for an answer (`waiting`), and the end of the run (`done` / `fail` /
`close`). `resume_context` marks the runs of a durable resume (`Client.run_with_answer` /
`ask_with_answer`) with the request and answer they apply.

Why a global switch rather than a `Client(tracer=...)` argument: the agent runtime builds a
fresh client for every turn, so a per-client option would have to be threaded through every
layer; an installed tracer covers bare client runs and agent turns alike, the way
OpenTelemetry instrumentations usually work.

Not here: span names and attributes (otel.py).
"""

from __future__ import annotations

import contextvars
from contextlib import AbstractContextManager, contextmanager
from typing import Any, Iterator, Optional, Protocol

from ..types import ToolContext, ToolResult
from ._settings import ClientSettings
from ._tool_calls import CallOutcome, ToolRunner
from ._wire.base import ToolCall


class LlmSpan(Protocol):
    def end(self, usage: Optional[dict[str, int]], error: Optional[BaseException], response: Any,
            finish: Optional[str] = None) -> None:
        """`finish` is the provider's own finish value (streamed calls have no `response`)."""
        ...


class ToolSpan(Protocol):
    def outcome(self, result: ToolResult) -> None: ...


class WaitSpan(Protocol):
    def answered(self, answer: Any) -> None: ...


class RunSpan(Protocol):
    def llm(self, model: str, streaming: bool) -> LlmSpan: ...
    def tool(self, name: str, call_id: Optional[str], source: str,
             answer: Any = None) -> AbstractContextManager[ToolSpan]: ...
    def waiting(self, request: Any) -> AbstractContextManager[WaitSpan]: ...
    def done(self, result: Any) -> None: ...
    def fail(self, error: BaseException) -> None: ...
    def close(self) -> None: ...


class TracedRun(Protocol):
    """What a tracer reads of a run as it starts (a `RunLoop`)."""

    conversation_id: Optional[str]

    @property
    def settings(self) -> ClientSettings: ...

    @property
    def structured(self) -> bool:
        """The run must end with an `output_type` value."""
        ...


class Tracer(Protocol):
    def start_run(self, loop: TracedRun, *, resumed: bool, resume: Optional[tuple[Any, Any]]) -> RunSpan: ...
    def job(self, name: str, attributes: dict[str, Any]) -> AbstractContextManager[None]: ...


_installed: Optional[Tracer] = None
_resume: contextvars.ContextVar[Optional[tuple[Any, Any]]] = contextvars.ContextVar("toolnexus_resume", default=None)


def install(tracer: Optional[Tracer]) -> None:
    """Make `tracer` observe every run from now on (None: stop tracing)."""
    global _installed
    _installed = tracer


def installed() -> Optional[Tracer]:
    return _installed


def run_span(loop: TracedRun, *, resumed: bool) -> Optional[RunSpan]:
    """The span of the run `loop` is about to execute, or None when no tracer is installed."""
    tracer = _installed
    if tracer is None:
        return None
    return tracer.start_run(loop, resumed=resumed, resume=_resume.get())


@contextmanager
def job_span(name: str, attributes: dict[str, Any]) -> Iterator[None]:
    """A span around one piece of a worker's work (`toolnexus.fleet`), current while it runs, so
    the runs it drives nest under it; nothing when no tracer is installed."""
    tracer = _installed
    if tracer is None:
        yield
        return
    with tracer.job(name, attributes):
        yield


@contextmanager
def resume_context(pending: Any, answer: Any) -> Iterator[None]:
    """Within this block, runs are a durable resume applying `answer` to `pending`."""
    if _installed is None:
        yield
        return
    token = _resume.set((pending, answer))
    try:
        yield
    finally:
        _resume.reset(token)


def resuming() -> Optional[tuple[Any, Any]]:
    return _resume.get()


class TracedRunner(ToolRunner):
    """A turn's `ToolRunner` that reports every tool call, and every re-run with an answer, to a span."""

    def __init__(self, span: RunSpan, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.span = span
        self.call_ids: dict[str, str] = {}  # request id -> the call that suspended with it

    async def run_one(self, call: ToolCall) -> CallOutcome:
        with self.span.tool(call.name, call.id, self.source_of(call.name)) as reporter:
            outcome = await super().run_one(call)
            reporter.outcome(outcome.result)
        if outcome.request is not None:
            self.call_ids[outcome.request.id] = call.id
        return outcome

    async def execute(self, name: str, args: dict[str, Any], ctx: Optional[ToolContext]) -> ToolResult:
        answer = ctx.answer if ctx is not None else None
        if answer is None:  # a first run: `run_one` reports it
            return await super().execute(name, args, ctx)
        with self.span.tool(name, self.call_ids.get(answer.id), self.source_of(name), answer=answer) as reporter:
            result = await super().execute(name, args, ctx)
            reporter.outcome(result)
        return result
