"""`Client` / `create_client` / `create_in_process_client`: the public face of the LLM client.

A `Client` holds configuration and the seams (transport, hooks, store, metrics); every run builds a
`RunLoop` (loop.py) and either drains its events (`run`, `ask`) or yields them (`stream`). Two
parts do the work the loop, `toolnexus.translate` and durable resume share: `client.provider`
(provider.py: the wire, the key, sending with retries, hooks, the `llm` metric) and
`client.keeper` (keeper.py: locks, journals and saves of stored conversations, the answer ledger).

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
- `chain_responses` (opt-in, `style="responses"` only): each request sends `previous_response_id`
  and only the items after the last reply, the provider keeping the rest (wire/responses.py).
- `approvals` (optional, a `toolnexus.approvals.ApprovalScope`): the sticky approval decisions
  and the agent path of the runs this client makes (an agent runtime gives each turn's client
  its run's); without it, sticky decisions are kept per conversation id (keeper.py).
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
  key (`Provider.locate`). Ours (`ProviderError`, `NetworkError`...) say it in their message; an
  exception a custom transport raises keeps its type and text and gets `.endpoint` and a note.

Not here: the turn loop (loop.py), wire shapes (wire/), retries (retry.py), translate.
"""

from __future__ import annotations

import asyncio
import inspect
import itertools
import math
from contextlib import aclosing, nullcontext
from typing import Any, AsyncGenerator, Callable, Concatenate, Iterable, Optional, ParamSpec, Union

from ..approvals import ApprovalScope
from .keeper import Keeper
from .loop import RunLoop, drain
from .memory import Conversation, ConversationStore, InMemoryConversationStore
from .parts import normalize_prompt
from .provider import Provider, api_key_from_env
from .result import ClientStyle, ErrorClassifier, Hooks, OnMetric, RunResult, WaitFor
from .resume import ask_with_answer, run_with_answer
from .retry import Timer, check_timer
from .structured import DEFAULT_OUTPUT_RETRIES, with_output
from .tracing import resume_context
from .tool_calls import utc_now
from .transport import MAX_RESPONSE_BYTES, AsyncTransport, HttpTransport, InProcessTransport, as_async_transport
from ..errors import ToolnexusTypeError

__all__ = ["Client", "create_client", "create_in_process_client", "api_key_from_env", "NO_DEADLINE",
           "DEFAULT_CALL_TIMEOUT_MS"]

NO_DEADLINE = math.inf
"""`timeout_ms=NO_DEADLINE`: no run deadline and no per-call default deadline."""
DEFAULT_CALL_TIMEOUT_MS = 300_000
"""Without `timeout_ms`, the overall bound on one logical LLM call (all attempts, the whole read)."""
_instances = itertools.count(1)


class Client:
    """A tool-calling LLM client for OpenAI-, Anthropic- or Responses-style endpoints. See `create_client`."""

    def __init__(self, *, base_url: str, style: ClientStyle, model: str, api_key: Optional[str] = None,
                 headers: Optional[dict[str, str]] = None, system_prompt: Optional[str] = None,
                 max_turns: int = 10, hooks: Hooks = None, retries: int = 2, retry_base_ms: int = 500,
                 retryable_statuses: Optional[Iterable[int]] = None, timeout_ms: Optional[int] = None,
                 store: Optional[ConversationStore] = None, on_metric: Optional[OnMetric] = None,
                 wait_for: Optional[WaitFor] = None, request_params: Optional[dict[str, Any]] = None,
                 body_transform: Optional[Callable[[dict], Optional[dict]]] = None,
                 http_transport: Union[HttpTransport, AsyncTransport, None] = None, on_error: Optional[ErrorClassifier] = None,
                 on_unsupported_part: Optional[str] = None, max_part_bytes: Optional[int] = None,
                 max_retry_after_ms: Optional[int] = None, race_tools: bool = False,
                 resolve_concurrently: bool = False, timer: Optional[Timer] = None,
                 agent_name: Optional[str] = None, chain_responses: bool = False,
                 approvals: Optional[ApprovalScope] = None) -> None:
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
        self.chain_responses = chain_responses
        self.approvals = approvals
        self.call_timeout_ms: Optional[float] = DEFAULT_CALL_TIMEOUT_MS
        self.max_response_bytes: Optional[int] = MAX_RESPONSE_BYTES
        self._owns_transport = http_transport is None
        if http_transport is None:
            from .http11 import default_transport

            http_transport = default_transport(max_response_bytes=lambda: self.max_response_bytes)
        self.provider = Provider(self, as_async_transport(http_transport), http_transport, next(_instances))
        """Calls the model for the loop, `translate` and resume (provider.py)."""
        self.keeper = Keeper(self)
        """Locks, journals, saves and answers of stored conversations (keeper.py)."""
        self.clock: Callable[[], Any] = utc_now

    @property
    def _http_transport(self) -> Any:
        """The transport as supplied (or the default the client made), before the async seam."""
        return self.provider.supplied

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

    async def ask(self, prompt: Any, toolkit: Any = None, *, id: Optional[str] = None,  # noqa: A002
                  on_text: Optional[Callable[[str], Any]] = None, cancel: Optional[asyncio.Event] = None,
                  output_type: Any = None, output_retries: int = DEFAULT_OUTPUT_RETRIES) -> RunResult:
        """`run`, optionally streaming text to `on_text` and keeping the transcript under `id`."""
        toolkit = with_output(toolkit, output_type, output_retries)
        if on_text is not None:
            return await drain(self.stream(prompt, toolkit, id=id, cancel=cancel), on_text)
        if not id:
            return await self.run(prompt, toolkit, cancel=cancel)
        async with self.keeper.lock(id):
            history = await self.store.get(id) or []
            loop = RunLoop(self, toolkit, cancel, streaming=False, journal=self.keeper.journal(id),
                           approvals=self.keeper.scope(id))
            loop.conversation_id = id
            result = await drain(loop.start(normalize_prompt(prompt), history).events())
            await self.keeper.save(id, result)
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
        async with self.keeper.lock(id) if id else nullcontext():
            history = (await self.store.get(id) or []) if id else None
            loop = RunLoop(self, toolkit, cancel, streaming=True, journal=self.keeper.journal(id) if id else None,
                           approvals=self.keeper.scope(id))
            loop.conversation_id = id
            async with aclosing(loop.start(normalize_prompt(prompt), history).events()) as events:
                async for event in events:
                    if id and event["type"] == "done":
                        await self.keeper.save(id, event["result"])
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
        from .translation import translate_with_client

        return await translate_with_client(self, messages, tools=tools, toolkit=toolkit, tool_choice=tool_choice,
                                           system=system, max_tokens=max_tokens, cancel=cancel)

    def metrics(self) -> str:
        """Prometheus text of everything this client recorded."""
        return self.provider.metrics.render()

    @property
    def conversation_store(self) -> ConversationStore:
        return self.store

    async def aclose(self) -> None:
        """Release the default transport's pooled connections (a supplied transport is left alone)."""
        if self._owns_transport:
            await self.provider.transport.aclose()

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

