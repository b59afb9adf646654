"""`Client` / `create_client` / `create_in_process_client`: the public face of the LLM client.

A `Client` holds its settings — one frozen `ClientSettings` (_settings.py), built once; each
keyword is also an attribute, and setting one replaces the settings with a copy — and two parts
that take them as values, shared by the loop, `toolnexus.translate` and durable resume:
`client.provider` (_provider.py: the wire, the key, sending with retries, hooks, the `llm`
metric, over the settings) and `client.keeper` (_keeper.py: the store; locks, journals and saves of
stored conversations, the answer ledger). Every run builds a `RunLoop` (_loop.py) over the
provider and either drains its events (`run`, `ask`) or yields them (`stream`). Neither part, nor
the loop, nor resume, holds the client.

Choices beyond the contract (all opt-in or invisible to the wire):
- default transport: `Http11Transport` (a lean pooled keep-alive HTTP/1.1 client; `HttpxTransport`
  when a proxy is configured, or pass `http_transport=HttpxTransport(...)` for HTTP/2);
  `await client.aclose()` / `async with` frees it.
- `max_retry_after_ms`: a longer `Retry-After` fails at once instead of sleeping (_retry.py).
- `race_tools`: deadline and cancel also interrupt tools and `wait_for` (default: LLM calls only).
- `resolve_concurrently`: a turn's `wait_for`s run concurrently, results still in call order.
- metric sinks are isolated: a raising `on_metric` (or registry) is reported once per client and
  exception type as a `[toolnexus] on_metric raised …` warning and never fails the run.
- the forbidden-`request_params` warning is issued once per key per client.
- `run_with_answer` / `ask_with_answer` (durable resume, _resume.py) keep a per-client answer
  ledger; `clock` (default aware-UTC now) is what `expiresAt` is checked against, in-process and
  on resume.
- `chain_responses` (opt-in, `style="responses"` only): each request sends `previous_response_id`
  and only the items after the last reply, the provider keeping the rest (wire/responses.py).
- `approvals` (optional, a `toolnexus.approvals.ApprovalScope`): the sticky approval decisions
  and the agent path of the runs this client makes (an agent runtime gives each turn's client
  its run's); without it, sticky decisions are kept per conversation id (_keeper.py).
- `agent_name` (optional): the agent this client runs for; it only names the run's trace span
  (`toolnexus.otel`). The agent runtime sets it on every turn's client.
- `timer` (opt-in): monotonic time for retries — `now()` and `async sleep(s)`, e.g. an agent
  runtime's `Clock` — used for the run deadline (`timeout_ms`) and every backoff / `Retry-After`
  sleep (_retry.py). Unrelated to `clock` above (wall-clock UTC for `expiresAt`); metric `ms`
  durations stay real time.

Safety defaults (all overridable):
- Default deadline. Without `timeout_ms`, every logical LLM call — opening, all attempts and
  backoff, and reading the whole reply or stream — must finish within `call_timeout_ms`
  (`DEFAULT_CALL_TIMEOUT_MS`, 300 000 ms = 5 minutes; each attempt's socket timeout stays at most
  120 s), else `RunTimeout`. So a hung provider and a server trickling one byte a second both end.
  Tools and `wait_for` are not inside this bound (they are not LLM calls). It is measured in real
  time even when a `timer` (e.g. an agent runtime's virtual clock) is injected. With `timeout_ms=N` the
  run-wide budget applies instead, exactly as before (it bounds every call too). "No deadline at
  all" is said explicitly: `timeout_ms=NO_DEADLINE` (`math.inf`); `call_timeout_ms=None` drops
  only the per-call default.
- `max_response_bytes` (`MAX_RESPONSE_BYTES`, 32 MiB): the most a 2xx reply may hold, whole body
  or whole stream; above it the call fails with `ResponseTooLarge` (not retried) instead of
  buffering without end. The default transports enforce it on whole bodies, the client on streams.
- Error bodies are scrubbed: a `ProviderError` never carries the API key or the value of a
  credential header, even when the upstream echoes the request back (_errors.py).
- Errors say where and what to check: the final error of a call (after the retries) names the
  endpoint, `(POST <scheme://host[:port]/path>)` with no credentials, and a 401/403/404 adds what
  to check — for a key, where it came from (`OPENAI_API_KEY`, the `api_key` option), never the
  key (`Provider.locate`). Ours (`ProviderError`, `NetworkError`...) say it in their message; an
  exception a custom transport raises keeps its type and text and gets `.endpoint` and a note.

Not here: the turn loop (_loop.py), wire shapes (wire/), retries (_retry.py), translate.
"""

from __future__ import annotations

import asyncio
import inspect
import itertools
from contextlib import aclosing, nullcontext
from datetime import datetime
from typing import (
    Any,
    AsyncGenerator,
    Callable,
    Concatenate,
    Generic,
    Iterable,
    Optional,
    ParamSpec,
    TypeVar,
    Union,
    cast,
    overload,
)

from ..approvals import ApprovalScope
from ..errors import ToolnexusTypeError
from ._keeper import Keeper
from ._loop import RunLoop, drain
from ._memory import Conversation, ConversationStore, InMemoryConversationStore
from ._parts import normalize_prompt
from ._provider import Provider, api_key_from_env as api_key_from_env
from ._result import ClientStyle, ErrorClassifier, Hooks, OnMetric, RunResult, WaitFor
from ._resume import ask_with_answer, run_with_answer
from ._retry import Timer, check_timer
from ._settings import (
    DEFAULT_CALL_TIMEOUT_MS as DEFAULT_CALL_TIMEOUT_MS,
    NO_DEADLINE as NO_DEADLINE,
    ClientSettings,
    utc_now,
)
from ._structured import DEFAULT_OUTPUT_RETRIES, with_output
from ._tracing import resume_context
from ._transport import MAX_RESPONSE_BYTES, AsyncTransport, HttpTransport, InProcessTransport, as_async_transport

_instances = itertools.count(1)
_T = TypeVar("_T")


def _normalized(changes: dict[str, Any]) -> dict[str, Any]:
    """Settings as the client keeps them: `headers` a dict (`{}` for None), `retryable_statuses` a
    frozenset or None, `timer` checked, `clock` the default when None."""
    if "headers" in changes and changes["headers"] is None:
        changes["headers"] = {}
    if "retryable_statuses" in changes and changes["retryable_statuses"] is not None:
        changes["retryable_statuses"] = frozenset(changes["retryable_statuses"])
    if "timer" in changes:
        changes["timer"] = check_timer(changes["timer"])
    if "clock" in changes and changes["clock"] is None:
        changes["clock"] = utc_now
    return changes


class _Setting(Generic[_T]):
    """A client attribute that reads the client's `ClientSettings`; setting it replaces them with a
    copy (so 0.21 code assigning `client.max_turns = 3` keeps working)."""

    def __set_name__(self, owner: type, name: str) -> None:
        self.name = name

    @overload
    def __get__(self, client: None, owner: type) -> "_Setting[_T]": ...

    @overload
    def __get__(self, client: "Client", owner: type) -> _T: ...

    def __get__(self, client: Optional["Client"], owner: type) -> Union["_Setting[_T]", _T]:
        if client is None:
            return self
        return cast(_T, client.settings.value(self.name))

    def __set__(self, client: "Client", value: _T) -> None:
        client.settings = client.settings.changed(**_normalized({self.name: value}))


class Client:
    """A tool-calling LLM client for OpenAI-, Anthropic- or Responses-style endpoints. See `create_client`.

    Its settings are one frozen `ClientSettings` (`client.settings`, _settings.py); every keyword
    is also an attribute of the same name, which reads them and, when set, replaces them with a
    copy. `store` and `approvals` are the client's `Keeper`'s (_keeper.py)."""

    base_url: _Setting[str] = _Setting()
    style: _Setting[ClientStyle] = _Setting()
    model: _Setting[str] = _Setting()
    api_key: _Setting[Optional[str]] = _Setting()
    headers: _Setting[dict[str, str]] = _Setting()
    system_prompt: _Setting[Optional[str]] = _Setting()
    request_params: _Setting[Optional[dict[str, Any]]] = _Setting()
    body_transform: _Setting[Optional[Callable[[dict[str, Any]], Optional[dict[str, Any]]]]] = _Setting()
    on_unsupported_part: _Setting[Optional[str]] = _Setting()
    max_part_bytes: _Setting[Optional[int]] = _Setting()
    chain_responses: _Setting[bool] = _Setting()
    retries: _Setting[int] = _Setting()
    retry_base_ms: _Setting[int] = _Setting()
    retryable_statuses: _Setting[Optional[frozenset[int]]] = _Setting()
    on_error: _Setting[Optional[ErrorClassifier]] = _Setting()
    max_retry_after_ms: _Setting[Optional[int]] = _Setting()
    max_turns: _Setting[int] = _Setting()
    timeout_ms: _Setting[Optional[float]] = _Setting()
    call_timeout_ms: _Setting[Optional[float]] = _Setting()
    max_response_bytes: _Setting[Optional[int]] = _Setting()
    wait_for: _Setting[Optional[WaitFor]] = _Setting()
    race_tools: _Setting[bool] = _Setting()
    resolve_concurrently: _Setting[bool] = _Setting()
    clock: _Setting[Callable[[], datetime]] = _Setting()
    agent_name: _Setting[Optional[str]] = _Setting()
    hooks: _Setting[Hooks] = _Setting()
    on_metric: _Setting[Optional[OnMetric]] = _Setting()
    timer: _Setting[Optional[Timer]] = _Setting()

    def __init__(self, *, base_url: str, style: ClientStyle, model: str, api_key: Optional[str] = None,
                 headers: Optional[dict[str, str]] = None, system_prompt: Optional[str] = None,
                 max_turns: int = 10, hooks: Hooks = None, retries: int = 2, retry_base_ms: int = 500,
                 retryable_statuses: Optional[Iterable[int]] = None, timeout_ms: Optional[int] = None,
                 store: Optional[ConversationStore] = None, on_metric: Optional[OnMetric] = None,
                 wait_for: Optional[WaitFor] = None, request_params: Optional[dict[str, Any]] = None,
                 body_transform: Optional[Callable[[dict[str, Any]], Optional[dict[str, Any]]]] = None,
                 http_transport: Union[HttpTransport, AsyncTransport, None] = None,
                 on_error: Optional[ErrorClassifier] = None, on_unsupported_part: Optional[str] = None,
                 max_part_bytes: Optional[int] = None, max_retry_after_ms: Optional[int] = None,
                 race_tools: bool = False, resolve_concurrently: bool = False, timer: Optional[Timer] = None,
                 agent_name: Optional[str] = None, chain_responses: bool = False,
                 approvals: Optional[ApprovalScope] = None,
                 call_timeout_ms: Optional[float] = DEFAULT_CALL_TIMEOUT_MS,
                 max_response_bytes: Optional[int] = MAX_RESPONSE_BYTES,
                 clock: Optional[Callable[[], datetime]] = None) -> None:
        settings = ClientSettings.of(**_normalized(dict(
            base_url=base_url, style=style, model=model, api_key=api_key, headers=dict(headers) if headers else {},
            system_prompt=system_prompt, request_params=request_params, body_transform=body_transform,
            on_unsupported_part=on_unsupported_part, max_part_bytes=max_part_bytes, chain_responses=chain_responses,
            retries=retries, retry_base_ms=retry_base_ms, retryable_statuses=retryable_statuses, on_error=on_error,
            max_retry_after_ms=max_retry_after_ms, max_turns=max_turns, timeout_ms=timeout_ms,
            call_timeout_ms=call_timeout_ms, max_response_bytes=max_response_bytes, wait_for=wait_for,
            race_tools=race_tools, resolve_concurrently=resolve_concurrently, clock=clock, agent_name=agent_name,
            hooks=hooks, on_metric=on_metric, timer=timer)))
        self._owns_transport = http_transport is None
        if http_transport is None:
            from ._http11 import default_transport

            http_transport = default_transport(max_response_bytes=lambda: self.settings.limits.max_response_bytes)
        self._provider = Provider(settings, as_async_transport(http_transport), http_transport, next(_instances))
        self.keeper = Keeper(store if store is not None else InMemoryConversationStore(), approvals)
        """Locks, journals, saves and answers of stored conversations (_keeper.py)."""

    @property
    def settings(self) -> ClientSettings:
        """Every setting of this client, frozen (_settings.py). Assigning a new value (e.g.
        `client.settings.changed(max_turns=3)`) is what setting one attribute does."""
        return self._provider.settings

    @settings.setter
    def settings(self, settings: ClientSettings) -> None:
        self._provider.settings = settings

    @property
    def provider(self) -> Provider:
        """Calls the model for the loop, `translate` and resume (_provider.py), over `settings`."""
        return self._provider

    @property
    def store(self) -> ConversationStore:
        return self.keeper.store

    @store.setter
    def store(self, store: ConversationStore) -> None:
        self.keeper.store = store

    @property
    def approvals(self) -> Optional[ApprovalScope]:
        return self.keeper.approvals

    @approvals.setter
    def approvals(self, approvals: Optional[ApprovalScope]) -> None:
        self.keeper.approvals = approvals

    @property
    def _http_transport(self) -> object:
        """The transport as supplied (or the default the client made), before the async seam."""
        return self._provider.supplied

    # -- public API -----------------------------------------------------------------------------

    def _loop(self, toolkit: Any, cancel: Optional[asyncio.Event], *, streaming: bool,
              id: Optional[str] = None) -> RunLoop:
        loop = RunLoop(self._provider, toolkit, cancel, streaming=streaming, approvals=self.keeper.scope(id),
                       journal=self.keeper.journal(id) if id else None)
        loop.conversation_id = id
        return loop

    async def run(self, prompt: Any, toolkit: Any = None, history: Optional[list[dict[str, Any]]] = None,
                  cancel: Optional[asyncio.Event] = None, *, output_type: Any = None,
                  output_retries: int = DEFAULT_OUTPUT_RETRIES) -> RunResult:
        """One run: loop until a final answer, a suspension halt or `max_turns`.

        With `output_type` (a pydantic model, dataclass, other pydantic-validatable type or JSON
        Schema dict) the run must end with a validated value, returned as `result.output`; after
        `output_retries` rejected attempts it raises `OutputValidationError` (see _structured.py)."""
        toolkit = with_output(toolkit, output_type, output_retries)
        loop = self._loop(toolkit, cancel, streaming=False)
        return await drain(loop.start(normalize_prompt(prompt), history).events())

    async def ask(self, prompt: Any, toolkit: Any = None, *, id: Optional[str] = None,
                  on_text: Optional[Callable[[str], Any]] = None, cancel: Optional[asyncio.Event] = None,
                  output_type: Any = None, output_retries: int = DEFAULT_OUTPUT_RETRIES) -> RunResult:
        """`run`, optionally streaming text to `on_text` and keeping the transcript under `id`."""
        toolkit = with_output(toolkit, output_type, output_retries)
        if on_text is not None:
            return await drain(self.stream(prompt, toolkit, id=id, cancel=cancel), on_text)
        if not id:
            return await self.run(prompt, toolkit, cancel=cancel)
        keeper = self.keeper
        async with keeper.lock(id):
            history = await keeper.store.get(id) or []
            loop = self._loop(toolkit, cancel, streaming=False, id=id)
            result = await drain(loop.start(normalize_prompt(prompt), history).events())
            await keeper.save(id, result)
        return result

    async def stream(self, prompt: Any, toolkit: Any = None, *, id: Optional[str] = None,
                     cancel: Optional[asyncio.Event] = None, output_type: Any = None,
                     output_retries: int = DEFAULT_OUTPUT_RETRIES) -> AsyncGenerator[dict[str, Any], None]:
        """The run as events: text, tool_call, pending, tool_result, usage, done (always last).

        Closing this generator early closes the run's own at once (its stream and the conversation
        lock are released before `aclose()` returns, not whenever it is collected). With
        `output_type`, the `done` result carries `output`.
        """
        toolkit = with_output(toolkit, output_type, output_retries)
        keeper = self.keeper
        async with keeper.lock(id) if id else nullcontext():
            history = (await keeper.store.get(id) or []) if id else None
            loop = self._loop(toolkit, cancel, streaming=True, id=id)
            async with aclosing(loop.start(normalize_prompt(prompt), history).events()) as events:
                async for event in events:
                    if id and event["type"] == "done":
                        await keeper.save(id, event["result"])
                    yield event

    async def run_with_answer(self, toolkit: Any, history: list[dict[str, Any]], pending: Any, answer: Any, *,
                              cancel: Optional[asyncio.Event] = None, output_type: Any = None,
                              output_retries: int = DEFAULT_OUTPUT_RETRIES) -> RunResult:
        """Resume a halted transcript with the host's `Answer` (see _resume.py)."""
        toolkit = with_output(toolkit, output_type, output_retries)
        with resume_context(pending, answer):
            return await run_with_answer(self._provider, self.keeper, toolkit, history, pending, answer, cancel=cancel)

    async def ask_with_answer(self, toolkit: Any, id: str, pending: Any, answer: Any, *,
                              cancel: Optional[asyncio.Event] = None, output_type: Any = None,
                              output_retries: int = DEFAULT_OUTPUT_RETRIES) -> RunResult:
        """`run_with_answer` on the conversation stored under `id`: load, resume, save (under its lock)."""
        toolkit = with_output(toolkit, output_type, output_retries)
        with resume_context(pending, answer):
            return await ask_with_answer(self._provider, self.keeper, toolkit, id, pending, answer, cancel=cancel)

    async def continue_run(self, toolkit: Any, id: str, calls: dict[str, dict[str, Any]], *,
                           cancel: Optional[asyncio.Event] = None, output_type: Any = None,
                           output_retries: int = DEFAULT_OUTPUT_RETRIES) -> RunResult:
        """Continue the run stored under `id` after a crash, from its run journal (see _recover.py)."""
        from ._recover import continue_run

        toolkit = with_output(toolkit, output_type, output_retries)
        return await continue_run(self._provider, self.keeper, toolkit, id, calls, cancel=cancel)

    def conversation(self, toolkit: Any = None, cancel: Optional[asyncio.Event] = None) -> Conversation:
        return Conversation(self, toolkit, cancel)

    async def translate(self, messages: list[Any], *, tools: Optional[list[Any]] = None, toolkit: Any = None,
                        tool_choice: Any = None, system: Optional[str] = None, max_tokens: int = 0,
                        cancel: Optional[asyncio.Event] = None) -> Any:
        """One provider call translating `messages` (see `toolnexus.translate`)."""
        from ._translation import translate_with

        return await translate_with(self._provider, messages, tools=tools, toolkit=toolkit, tool_choice=tool_choice,
                                    system=system, max_tokens=max_tokens, cancel=cancel)

    def metrics(self) -> str:
        """Prometheus text of everything this client recorded."""
        return self._provider.metrics.render()

    @property
    def conversation_store(self) -> ConversationStore:
        return self.keeper.store

    async def aclose(self) -> None:
        """Release the default transport's pooled connections (a supplied transport is left alone)."""
        if self._owns_transport:
            await self._provider.transport.aclose()

    async def __aenter__(self) -> "Client":
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.aclose()


_P = ParamSpec("_P")


def _signature_of(
    init: Callable[Concatenate[Any, _P], None],
) -> Callable[[Callable[..., Client]], Callable[_P, Client]]:
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


def create_in_process_client(*, model: str, generate: Callable[[dict[str, Any]], Any], **options: Any) -> Client:
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

