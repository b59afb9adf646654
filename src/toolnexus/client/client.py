"""`Client` / `create_client` / `create_in_process_client`: the public face of the LLM client.

A `Client` holds configuration and the seams (transport, hooks, store, metrics); every run builds a
`RunLoop` (loop.py) and either drains its events (`run`, `ask`) or yields them (`stream`). The
private members below (`_dialect`, `_resolve_api_key`, `_abort`, `_shape_body`, `_send` / `_open`,
`_llm_call`, `_call_hook`, `_emit`) are the interface the loop and `toolnexus.translate` share.

Choices beyond the contract (all opt-in or invisible to the wire):
- default transport: `Http11Transport` (a lean pooled keep-alive HTTP/1.1 client; `HttpxTransport`
  when a proxy is configured, or pass `http_transport=HttpxTransport(...)` for HTTP/2);
  `await client.aclose()` / `async with` frees it.
- `max_retry_after_ms`: a longer `Retry-After` fails at once instead of sleeping (retry.py).
- `race_tools`: deadline and cancel also interrupt tools and `wait_for` (default: LLM calls only).
- `resolve_concurrently`: a turn's `wait_for`s run concurrently, results still in call order.
- metric sinks are isolated: a raising `on_metric` (or registry) is reported once per client and
  exception type as a `[toolnexus] on_metric raised …` warning and never fails the run.
- the forbidden-`request_params` warning is issued once per key per client.
- `run_with_answer` / `ask_with_answer` (durable resume, resume.py) keep a per-client answer
  ledger; `client.clock` (a settable attribute, default aware-UTC now) is what `expiresAt` is
  checked against, in-process and on resume.
- `agent_name` (optional): the agent this client runs for; it only names the run's trace span
  (`toolnexus.otel`). The agent runtime sets it on every turn's client.
- `timer` (opt-in): monotonic time for retries — `now()` and `async sleep(s)`, e.g. an agent
  runtime's `Clock` — used for the run deadline (`timeout_ms`) and every backoff / `Retry-After`
  sleep (retry.py). Unrelated to `clock` above (wall-clock UTC for `expiresAt`); metric `ms`
  durations stay real time.

Safety defaults (all overridable):
- Default deadline. Without `timeout_ms`, every logical LLM call — opening, all attempts and
  backoff, and reading the whole reply or stream — must finish within `call_timeout_ms`
  (`DEFAULT_CALL_TIMEOUT_MS`, 300 000 ms = 5 minutes; each attempt's socket timeout stays at most
  120 s), else `RunTimeout`. So a hung provider and a server trickling one byte a second both end.
  Tools and `wait_for` are not inside this bound (they are not LLM calls). It is measured in real
  time even when a `timer` (e.g. an agent runtime's virtual clock) is injected. With `timeout_ms=N` the
  run-wide budget applies instead, exactly as before (it bounds every call too). "No deadline at
  all" is said explicitly: `timeout_ms=NO_DEADLINE` (`math.inf`); `client.call_timeout_ms = None`
  drops only the per-call default.
- `max_response_bytes` (`MAX_RESPONSE_BYTES`, 32 MiB): the most a 2xx reply may hold, whole body
  or whole stream; above it the call fails with `ResponseTooLarge` (not retried) instead of
  buffering without end. The default transports enforce it on whole bodies, the client on streams.
- Error bodies are scrubbed: a `ProviderError` never carries the API key or the value of a
  credential header, even when the upstream echoes the request back (errors.py).
- Errors say where and what to check: the final error of a call (after the retries) names the
  endpoint, `(POST <scheme://host[:port]/path>)` with no credentials, and a 401/403/404 adds what
  to check — for a key, where it came from (`OPENAI_API_KEY`, the `api_key` option), never the
  key (`_locate`). Ours (`ProviderError`, `NetworkError`...) say it in their message; an
  exception a custom transport raises keeps its type and text and gets `.endpoint` and a note.

Not here: the turn loop (loop.py), wire shapes (wire/), retries (retry.py), translate.
"""

from __future__ import annotations

import asyncio
import inspect
import itertools
import math
import os
import time
from collections.abc import Mapping
from contextlib import aclosing, nullcontext, suppress
from dataclasses import asdict
from typing import Any, AsyncGenerator, Awaitable, Callable, Concatenate, Iterable, Optional, ParamSpec

from .._diag import warn_once
from ..durable import is_run_store
from .._redact import credential_values
from .loop import RunLoop, drain
from .memory import Conversation, ConversationStore, IdLocks, InMemoryConversationStore
from .errors import (PLACEHOLDER_KEYS, ProviderError, ProviderResponseError, RunCancelled, RunTimeout, endpoint_of,
                     provider_hint)
from .metrics import MetricsRegistry
from .parts import PartPolicy, normalize_prompt
from .result import ClientStyle, ErrorClassifier, Hooks, OnMetric, RunResult, WaitFor
from .resume import AnswerLedger, ask_with_answer, run_with_answer
from .retry import Abort, RetryPolicy, Timer, call_with_retries, check_timer, monotonic_now
from .structured import DEFAULT_OUTPUT_RETRIES, with_output
from .tracing import resume_context
from .tool_calls import utc_now
from .transport import MAX_RESPONSE_BYTES, ByteStream, HttpTransport, InProcessTransport, TransportCaller
from .wire import WireDialect, dialect_for
from ..errors import ToolnexusError, ToolnexusRuntimeError, ToolnexusTypeError

__all__ = ["Client", "create_client", "create_in_process_client", "api_key_from_env", "NO_DEADLINE",
           "DEFAULT_CALL_TIMEOUT_MS"]

NO_DEADLINE = math.inf
"""`timeout_ms=NO_DEADLINE`: no run deadline and no per-call default deadline."""
DEFAULT_CALL_TIMEOUT_MS = 300_000
"""Without `timeout_ms`, the overall bound on one logical LLM call (all attempts, the whole read)."""
_ATTEMPT_CAP = 120.0  # seconds: one attempt's socket timeout under the default call deadline

_FORBIDDEN_PARAMS = ("messages", "tools", "stream")
_instances = itertools.count(1)


def api_key_from_env(style_key: str = "") -> Optional[str]:
    """The API key the environment holds, in the client's order: `OPENROUTER_API_KEY`, the style's
    own variable (`OPENAI_API_KEY` / `ANTHROPIC_API_KEY`), then the other two; None if none is set."""
    for name in ("OPENROUTER_API_KEY", style_key, "OPENAI_API_KEY", "ANTHROPIC_API_KEY"):
        value = os.environ.get(name) if name else None
        if value:
            return value
    return None


class _LlmCall:
    """Times one logical LLM call and emits its `llm` metric on exit (ok or error).

    The caller sets `attempts` (from the send) and `usage` (once the reply is read); `parts` is the
    `{type, mimeType, bytes}` summary of the media the request carries (listed only when non-empty).
    """

    def __init__(self, client: "Client", model: str, parts: list[dict[str, Any]]) -> None:
        self.client, self.model, self.parts = client, model, parts
        self.attempts = 0
        self.usage: Optional[dict[str, int]] = None
        self.span: Any = None  # the call's trace span (tracing.py), when a tracer observes the run
        self.response: Any = None  # the decoded reply, for the span (non-streaming calls)

    async def __aenter__(self) -> "_LlmCall":
        self.started = time.monotonic()
        return self

    async def __aexit__(self, exc_type: Any, exc: Any, tb: Any) -> None:
        if exc_type is not None and not issubclass(exc_type, Exception):
            if self.span is not None:  # cancelled: the span still ends
                self.span.end(None, exc, None)
            return
        ok = exc_type is None and self.usage is not None
        usage = self.usage or {}
        event: dict[str, Any] = {"event": "llm", "model": self.model, "status": "ok" if ok else "error",
                                 "ms": (time.monotonic() - self.started) * 1000,
                                 "prompt_tokens": usage.get("prompt_tokens", 0) if ok else 0,
                                 "completion_tokens": usage.get("completion_tokens", 0) if ok else 0,
                                 "attempts": self.attempts}
        if self.parts:
            event["parts"] = self.parts
        if self.span is not None:
            self.span.end(usage if ok else None, exc, self.response)
        self.client._emit(event)


class Client:
    """A tool-calling LLM client for OpenAI- or Anthropic-style endpoints. See `create_client`."""

    def __init__(self, *, base_url: str, style: ClientStyle, model: str, api_key: Optional[str] = None,
                 headers: Optional[dict[str, str]] = None, system_prompt: Optional[str] = None,
                 max_turns: int = 10, hooks: Hooks = None, retries: int = 2, retry_base_ms: int = 500,
                 retryable_statuses: Optional[Iterable[int]] = None, timeout_ms: Optional[int] = None,
                 store: Optional[ConversationStore] = None, on_metric: Optional[OnMetric] = None,
                 wait_for: Optional[WaitFor] = None, request_params: Optional[dict[str, Any]] = None,
                 body_transform: Optional[Callable[[dict], Optional[dict]]] = None,
                 http_transport: Optional[HttpTransport] = None, on_error: Optional[ErrorClassifier] = None,
                 on_unsupported_part: Optional[str] = None, max_part_bytes: Optional[int] = None,
                 max_retry_after_ms: Optional[int] = None, race_tools: bool = False,
                 resolve_concurrently: bool = False, timer: Optional[Timer] = None,
                 agent_name: Optional[str] = None) -> None:
        self.base_url = base_url
        self.style = style
        self.model = model
        self.api_key = api_key
        self.headers = dict(headers) if headers else {}
        self.system_prompt = system_prompt
        self.max_turns = max_turns
        self.hooks = hooks
        self.retries = retries
        self.retry_base_ms = retry_base_ms
        self.retryable_statuses = frozenset(retryable_statuses) if retryable_statuses is not None else None
        self.timeout_ms = timeout_ms
        self.store = store if store is not None else InMemoryConversationStore()
        self.on_metric = on_metric
        self.wait_for = wait_for
        self.request_params = request_params
        self.body_transform = body_transform
        self.on_error = on_error
        self.on_unsupported_part = on_unsupported_part
        self.max_part_bytes = max_part_bytes
        self.max_retry_after_ms = max_retry_after_ms
        self.race_tools = race_tools
        self.resolve_concurrently = resolve_concurrently
        self.timer = check_timer(timer)
        self.agent_name = agent_name
        self.call_timeout_ms: Optional[float] = DEFAULT_CALL_TIMEOUT_MS
        self.max_response_bytes: Optional[int] = MAX_RESPONSE_BYTES
        self._owns_transport = http_transport is None
        if http_transport is None:
            from .http11 import default_transport

            http_transport = default_transport(max_response_bytes=lambda: self.max_response_bytes)
        self._http_transport = http_transport
        self._caller = TransportCaller(http_transport)
        self._metrics = MetricsRegistry()
        self._id_locks = IdLocks()
        self._answers = AnswerLedger()
        self._claimer: Any = None
        self.clock: Callable[[], Any] = utc_now
        self._instance = next(_instances)

    # -- private interface shared by the loop and toolnexus.translate ----------------------------

    @property
    def _dialect(self) -> WireDialect:
        """The wire for `style` (built per use, so it always reflects the current attributes)."""
        return dialect_for(self.style, PartPolicy(self.on_unsupported_part, self.max_part_bytes, self._instance))

    def _resolve_api_key(self, dialect: WireDialect) -> str:
        if self.api_key:
            return self.api_key
        found = api_key_from_env(dialect.env_key)
        if found:
            return found
        raise ToolnexusRuntimeError("No API key: set api_key or OPENROUTER_API_KEY / OPENAI_API_KEY / ANTHROPIC_API_KEY")

    def _abort(self, cancel: Optional[asyncio.Event]) -> Abort:
        """The abort conditions of one run / translate: `cancel` and a deadline starting now."""
        if self.timeout_ms is None or math.isinf(self.timeout_ms):
            return Abort(cancel, None, self.timeout_ms, self.timer)
        return Abort(cancel, monotonic_now(self.timer) + self.timeout_ms / 1000, self.timeout_ms, self.timer)

    def _call_abort(self, abort: Abort) -> Abort:
        """`abort` for one logical LLM call: the run's own, or the default call deadline from now."""
        call_ms = self.call_timeout_ms
        if abort.deadline is not None or self.timeout_ms is not None or call_ms is None or math.isinf(call_ms):
            return abort
        return Abort(abort.cancel, time.monotonic() + call_ms / 1000, call_ms, self.timer, _ATTEMPT_CAP, real_time=True)

    def _secrets(self, headers: dict[str, str]) -> list[str]:
        """What an error body must never show: the API key and credential-like header values."""
        found = [self.api_key] if isinstance(self.api_key, str) and self.api_key else []
        return found + credential_values(headers)

    def _shape_body(self, body: dict) -> dict:
        for key, value in (self.request_params or {}).items():
            if key in _FORBIDDEN_PARAMS:
                warn_once(f"request_params:{self._instance}:{key}",
                          f'[toolnexus] request_params key "{key}" is not allowed — ignored (use body_transform)')
                continue
            body[key] = value
        if self.body_transform is not None:
            out = self.body_transform(body)
            if out is not None:
                body = out
        return body

    def _retry_policy(self) -> RetryPolicy:
        return RetryPolicy(self.retries, self.retry_base_ms, self.retryable_statuses, self.on_error,
                           self.max_retry_after_ms)

    async def _send(self, url: str, headers: dict[str, str], body: dict, abort: Abort) -> tuple[Any, int]:
        """One logical call with retries; returns `(decoded JSON, attempts)`."""
        return await self._with_retries(self._caller.post, url, headers, body, abort)

    async def _open(self, url: str, headers: dict[str, str], body: dict, abort: Abort) -> tuple[ByteStream, int]:
        """Open one streamed call, retrying the opening only; returns `(live stream, attempts)`."""
        return await self._with_retries(self._caller.open, url, headers, body, abort)

    async def _with_retries(self, op: Callable[..., Awaitable[Any]], url: str, headers: dict[str, str], body: dict,
                            abort: Abort) -> tuple[Any, int]:
        payload = dict(body)  # one object per logical call: transports may cache its bytes across retries
        secrets = self._secrets(headers)

        async def attempt(timeout: float) -> Any:
            try:
                return await op(url, headers, payload, timeout)
            except ProviderError as e:  # an upstream may echo the request (and its key) back
                raise e.scrub(secrets)

        try:
            return await call_with_retries(attempt, self._retry_policy(), self._call_abort(abort))
        except (ProviderError, ProviderResponseError, OSError) as e:
            self._locate(e, url, headers, payload)
            raise

    def _key_source(self) -> tuple[str, Optional[str]]:
        """Where this call's key came from, as a phrase — a variable's or an option's name, never
        the key — and, when none was configured (a placeholder was sent), the variable to set."""
        for name in self.headers:
            if str(name).lower() in ("authorization", "x-api-key"):
                return f"the {name} header passed in headers", None
        style_key = self._dialect.env_key
        sent = self.api_key or api_key_from_env(style_key)
        for name in ("OPENROUTER_API_KEY", style_key, "OPENAI_API_KEY", "ANTHROPIC_API_KEY"):
            if name and sent and os.environ.get(name) == sent:
                return f"the API key from {name}", None
        if sent in PLACEHOLDER_KEYS:
            return "the placeholder key", style_key or "OPENAI_API_KEY"
        return "the API key passed as api_key", None

    def _locate(self, error: BaseException, url: str, headers: dict[str, str], body: dict) -> None:
        """Tell a failed call's final error where it was going (and, for 401/403/404, what to
        check), in place: once per error, for every transport. In-process models have no endpoint."""
        if getattr(error, "endpoint", None) or isinstance(error, (RunTimeout, RunCancelled)) \
                or isinstance(self._http_transport, InProcessTransport):
            return
        endpoint = endpoint_of(url, self._secrets(headers))
        if isinstance(error, ProviderError):
            base = self.base_url.rstrip("/")
            suffix = url[len(base):] if url.startswith(base) else ""
            source, unset = self._key_source()
            error.locate(endpoint, provider_hint(error.status, key_source=source, unset_key=unset,
                                                 model=str(body.get("model", self.model)), path_suffix=suffix))
            return
        with suppress(AttributeError, TypeError):
            error.endpoint = endpoint  # type: ignore[attr-defined]
        message = error.args[0] if len(error.args) == 1 and isinstance(error.args[0], str) else None
        if isinstance(error, ToolnexusError) and message is not None:
            # ours (every built-in transport): the message itself names the endpoint
            error.args = (message.replace(url, endpoint) if url in message else f"{message} (POST {endpoint})",)
        else:  # a custom transport's own exception keeps its type and text
            error.add_note(f"endpoint: POST {endpoint}")

    def _llm_call(self, model: str, parts: list[dict[str, Any]]) -> _LlmCall:
        return _LlmCall(self, model, parts)

    def _has_hook(self, name: str) -> bool:
        hooks = self.hooks
        if hooks is None:
            return False
        return callable(hooks.get(name) if isinstance(hooks, Mapping) else getattr(hooks, name, None))

    async def _call_hook(self, name: str, event: dict) -> Any:
        hooks = self.hooks
        if hooks is None:
            return None
        fn = hooks.get(name) if isinstance(hooks, Mapping) else getattr(hooks, name, None)
        if not callable(fn):
            return None
        out = fn(event)
        if inspect.isawaitable(out):
            out = await out
        return out if hasattr(out, "get") else None

    def _emit(self, event: dict) -> None:
        for sink_name, sink in (("metrics registry", self._metrics.record), ("on_metric", self.on_metric)):
            if sink is None:
                continue
            try:
                sink(event)
            except Exception as e:  # noqa: BLE001 - a metrics sink must never fail a run
                warn_once(f"sink:{self._instance}:{sink_name}:{type(e).__name__}",
                          f"[toolnexus] {sink_name} raised {type(e).__name__}: {e} — event dropped for this sink")

    # -- public API -----------------------------------------------------------------------------

    def _loop(self, prompt: Any, toolkit: Any, history: Optional[list[dict]], cancel: Any, *,
              streaming: bool) -> RunLoop:
        return RunLoop(self, toolkit, cancel, streaming=streaming).start(normalize_prompt(prompt), history)

    async def run(self, prompt: Any, toolkit: Any = None, history: Optional[list[dict]] = None,
                  cancel: Optional[asyncio.Event] = None, *, output_type: Any = None,
                  output_retries: int = DEFAULT_OUTPUT_RETRIES) -> RunResult:
        """One run: loop until a final answer, a suspension halt or `max_turns`.

        With `output_type` (a pydantic model, dataclass, other pydantic-validatable type or JSON
        Schema dict) the run must end with a validated value, returned as `result.output`; after
        `output_retries` rejected attempts it raises `OutputValidationError` (see structured.py)."""
        toolkit = with_output(toolkit, output_type, output_retries)
        return await drain(self._loop(prompt, toolkit, history, cancel, streaming=False).events())

    def _conversation_lock(self, id: str) -> Any:  # noqa: A002
        lock = getattr(self.store, "lock", None)
        return lock(id) if callable(lock) else self._id_locks.hold(id)

    def _journal(self, id: str) -> Any:  # noqa: A002
        """The store's run journal for conversation `id`, when it keeps one (the agent runtime's)."""
        journal = getattr(self.store, "journal", None)
        return journal(id) if callable(journal) else None

    @property
    def _holder(self) -> Any:
        """Who this client is in a durable store's answer ledger (one identity per client)."""
        if self._claimer is None:
            from ..durable import Holder

            self._claimer = Holder.here()
        return self._claimer

    async def _save(self, id: str, result: RunResult) -> None:  # noqa: A002
        """Save a run's transcript; with a durable store a halt also opens its request in the ledger."""
        if result.pending is not None and is_run_store(self.store):
            await self.store.save_halt(id, result.messages, asdict(result.pending))
        else:
            await self.store.save(id, result.messages)

    async def ask(self, prompt: Any, toolkit: Any = None, *, id: Optional[str] = None,  # noqa: A002
                  on_text: Optional[Callable[[str], Any]] = None, cancel: Optional[asyncio.Event] = None,
                  output_type: Any = None, output_retries: int = DEFAULT_OUTPUT_RETRIES) -> RunResult:
        """`run`, optionally streaming text to `on_text` and keeping the transcript under `id`."""
        toolkit = with_output(toolkit, output_type, output_retries)
        if on_text is not None:
            return await drain(self.stream(prompt, toolkit, id=id, cancel=cancel), on_text)
        if not id:
            return await self.run(prompt, toolkit, cancel=cancel)
        async with self._conversation_lock(id):
            history = await self.store.get(id) or []
            loop = RunLoop(self, toolkit, cancel, streaming=False, journal=self._journal(id))
            loop.conversation_id = id
            result = await drain(loop.start(normalize_prompt(prompt), history).events())
            await self._save(id, result)
        return result

    async def stream(self, prompt: Any, toolkit: Any = None, *, id: Optional[str] = None,  # noqa: A002
                     cancel: Optional[asyncio.Event] = None, output_type: Any = None,
                     output_retries: int = DEFAULT_OUTPUT_RETRIES) -> AsyncGenerator[dict[str, Any], None]:
        """The run as events: text, tool_call, pending, tool_result, usage, done (always last).

        Closing this generator early closes the run's own at once (its stream and the conversation
        lock are released before `aclose()` returns, not whenever it is collected). With
        `output_type`, the `done` result carries `output`.
        """
        toolkit = with_output(toolkit, output_type, output_retries)
        async with self._conversation_lock(id) if id else nullcontext():
            history = (await self.store.get(id) or []) if id else None
            loop = RunLoop(self, toolkit, cancel, streaming=True, journal=self._journal(id) if id else None)
            loop.conversation_id = id
            async with aclosing(loop.start(normalize_prompt(prompt), history).events()) as events:
                async for event in events:
                    if id and event["type"] == "done":
                        await self._save(id, event["result"])
                    yield event

    async def run_with_answer(self, toolkit: Any, history: list[dict[str, Any]], pending: Any, answer: Any, *,
                              cancel: Optional[asyncio.Event] = None, output_type: Any = None,
                              output_retries: int = DEFAULT_OUTPUT_RETRIES) -> RunResult:
        """Resume a halted transcript with the host's `Answer` (see resume.py)."""
        toolkit = with_output(toolkit, output_type, output_retries)
        with resume_context(pending, answer):
            return await run_with_answer(self, toolkit, history, pending, answer, cancel=cancel)

    async def ask_with_answer(self, toolkit: Any, id: str, pending: Any, answer: Any, *,  # noqa: A002
                              cancel: Optional[asyncio.Event] = None, output_type: Any = None,
                              output_retries: int = DEFAULT_OUTPUT_RETRIES) -> RunResult:
        """`run_with_answer` on the conversation stored under `id`: load, resume, save (under its lock)."""
        toolkit = with_output(toolkit, output_type, output_retries)
        with resume_context(pending, answer):
            return await ask_with_answer(self, toolkit, id, pending, answer, cancel=cancel)

    async def continue_run(self, toolkit: Any, id: str, calls: dict[str, dict[str, Any]], *,  # noqa: A002
                           cancel: Optional[asyncio.Event] = None, output_type: Any = None,
                           output_retries: int = DEFAULT_OUTPUT_RETRIES) -> RunResult:
        """Continue the run stored under `id` after a crash, from its run journal (see recover.py)."""
        from .recover import continue_run

        toolkit = with_output(toolkit, output_type, output_retries)
        return await continue_run(self, toolkit, id, calls, cancel=cancel)

    def conversation(self, toolkit: Any = None, cancel: Optional[asyncio.Event] = None) -> Conversation:
        return Conversation(self, toolkit, cancel)

    async def translate(self, messages: list, *, tools: Optional[list] = None, toolkit: Any = None,
                        tool_choice: Any = None, system: Optional[str] = None, max_tokens: int = 0,
                        cancel: Optional[asyncio.Event] = None) -> Any:
        """One provider call translating `messages` (see `toolnexus.translate`)."""
        from ..translate import translate_with_client

        return await translate_with_client(self, messages, tools=tools, toolkit=toolkit, tool_choice=tool_choice,
                                           system=system, max_tokens=max_tokens, cancel=cancel)

    def metrics(self) -> str:
        """Prometheus text of everything this client recorded."""
        return self._metrics.render()

    @property
    def conversation_store(self) -> ConversationStore:
        return self.store

    async def aclose(self) -> None:
        """Release the default transport's pooled connections (a supplied transport is left alone)."""
        if self._owns_transport:
            await self._caller.aclose()

    async def __aenter__(self) -> "Client":
        return self

    async def __aexit__(self, *exc: Any) -> None:
        await self.aclose()


_P = ParamSpec("_P")


def _signature_of(init: Callable[Concatenate[Any, _P], None]) -> Callable[[Callable[..., Client]], Callable[_P, Client]]:
    """Give the decorated factory `Client.__init__`'s keyword signature, for type checkers and `help()`."""

    def apply(factory: Callable[..., Client]) -> Callable[_P, Client]:
        params = list(inspect.signature(init).parameters.values())[1:]
        factory.__signature__ = inspect.Signature(params, return_annotation=Client)  # type: ignore[attr-defined]
        return factory

    return apply


@_signature_of(Client.__init__)
def create_client(**options: Any) -> Client:
    """A `Client`; keyword-only options as documented on `Client.__init__`."""
    return Client(**options)


_IN_PROCESS_RESERVED = ("base_url", "api_key", "style", "http_transport")


def create_in_process_client(*, model: str, generate: Callable[[dict], Any], **options: Any) -> Client:
    """A client whose model is the plain function `generate` (no network, `retries=0` by default)."""
    if not callable(generate):
        raise ToolnexusTypeError("toolnexus: create_in_process_client requires a callable `generate`")
    for reserved in _IN_PROCESS_RESERVED:
        if reserved in options:
            raise ToolnexusTypeError(f"toolnexus: create_in_process_client does not take `{reserved}` — an in-process "
                            "model has no wire to configure. Use create_client for a network-backed model.")
    options.setdefault("retries", 0)
    return create_client(base_url="http://in-process.invalid/v1", style="openai", api_key="in-process",
                         model=model, http_transport=InProcessTransport(generate), **options)

