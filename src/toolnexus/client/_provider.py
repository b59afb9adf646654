"""`Provider`: calling the model, for every path that calls it — the run loop, `translate`, and
durable resume.

One per `Client` (`client.provider`). It holds the client's frozen `ClientSettings`
(_settings.py) — a change of a setting replaces them with a copy here, and each call reads them as
they are then, as 0.21 read the client's attributes — and what a call needs beyond them: the
transport behind the async seam, the metrics registry, and the client's identity for once-only
warnings. It never holds the client. What it does for a call:

- the wire (`dialect`), the API key (`api_key`: explicit, then the environment, then — for a loopback
  base URL only — the placeholder a local server ignores), the run's abort
  conditions (`abort`, `call_abort`: a deadline and a cancel event);
- the body's last shaping (`shape_body`: `request_params`, then `body_transform`);
- sending with retries (`send`, `open` for a stream), scrubbing secrets from provider errors, and
  telling a call's final error where it was going (`locate`: the endpoint, and for 401/403/404
  what to check — for a key, where it came from, never the key);
- hooks (`call_hook`, `has_hook`) and the `llm` metric of each logical call (`llm_call`, `emit`).

Not here: the turn loop (_loop.py), the wire shapes (wire/), the retry policy itself (_retry.py).
"""

from __future__ import annotations

import asyncio
import inspect
import math
import os
import time
from contextlib import suppress
from typing import Any, Awaitable, Callable, Optional, TypeVar

from .._diag import warn_once
from .._hooks import hook_of
from .._loopback import LOOPBACK_PLACEHOLDER_KEY, is_loopback_url
from .._redact import credential_values
from ..errors import ToolnexusError, ToolnexusRuntimeError
from ._errors import (
    PLACEHOLDER_KEYS,
    ProviderError,
    ProviderResponseError,
    RunCancelled,
    RunTimeout,
    endpoint_of,
    provider_hint,
)
from ._metrics import MetricsRegistry
from ._parts import PartPolicy
from ._result import USAGE_DETAILS, HookReply
from ._retry import Abort, call_with_retries, monotonic_now
from ._settings import ClientSettings
from ._transport import AsyncTransport, ByteStream, InProcessTransport, TransportAdapter
from ._wire import WireDialect, WireOptions, dialect_for

FORBIDDEN_PARAMS = ("messages", "tools", "stream")
_R = TypeVar("_R")
ATTEMPT_CAP = 120.0  # seconds: one attempt's socket timeout under the default call deadline


def api_key_from_env(style_key: str = "") -> Optional[str]:
    """The API key the environment holds, in the client's order: `OPENROUTER_API_KEY`, the style's
    own variable (`OPENAI_API_KEY` / `ANTHROPIC_API_KEY`), then the other two; None if none is set."""
    for name in ("OPENROUTER_API_KEY", style_key, "OPENAI_API_KEY", "ANTHROPIC_API_KEY"):
        value = os.environ.get(name) if name else None
        if value:
            return value
    return None


class LlmCall:
    """Times one logical LLM call and emits its `llm` metric on exit (ok or error).

    `Provider.send`/`open` count `attempts` as each starts; the caller sets `usage` (once the reply
    is read); `parts` is the `{type, mimeType, bytes}` summary of the media the request carries
    (listed only when non-empty). The usage details the provider reported (`cached_tokens`,
    `cache_creation_tokens`, `reasoning_tokens`) ride on the event when non-zero.
    """

    def __init__(self, provider: "Provider", model: str, parts: list[dict[str, Any]]) -> None:
        self.provider, self.model, self.parts = provider, model, parts
        self.attempts = 0
        self.usage: Optional[dict[str, int]] = None
        self.span: Any = None  # the call's trace span (_tracing.py), when a tracer observes the run
        self.response: Any = None  # the decoded reply, for the span (non-streaming calls)
        self.finish: Optional[str] = None  # the provider's finish value, for the span

    async def __aenter__(self) -> "LlmCall":
        self.started = time.monotonic()
        return self

    async def __aexit__(self, exc_type: Any, exc: Any, tb: Any) -> None:
        if exc_type is not None and not issubclass(exc_type, Exception):
            if self.span is not None:  # cancelled: the span still ends
                self.span.end(None, exc, None, None)
            return
        ok = exc_type is None and self.usage is not None
        usage = self.usage or {}
        event: dict[str, Any] = {"event": "llm", "model": self.model, "status": "ok" if ok else "error",
                                 "ms": (time.monotonic() - self.started) * 1000,
                                 "prompt_tokens": usage.get("prompt_tokens", 0) if ok else 0,
                                 "completion_tokens": usage.get("completion_tokens", 0) if ok else 0,
                                 "attempts": self.attempts}
        if ok and len(usage) > 3:  # the provider reported usage details (cache, reasoning)
            for key in USAGE_DETAILS:
                if usage.get(key):
                    event[key] = usage[key]
        if self.parts:
            event["parts"] = self.parts
        if self.span is not None:
            self.span.end(usage if ok else None, exc, self.response, self.finish)
        self.provider.emit(event)


class Provider:
    """The model-calling side of one `Client`, over one `ClientSettings` (see module docstring)."""

    def __init__(self, settings: ClientSettings, transport: AsyncTransport, supplied: object, instance: int) -> None:
        self.settings = settings
        """The client's settings; replaced (never edited) when one changes."""
        self.transport = transport
        self.supplied = supplied  # the transport as the user passed it (or the default we made)
        self.metrics = MetricsRegistry()
        self.instance = instance
        self.in_process = isinstance(transport.inner if isinstance(transport, TransportAdapter) else transport,
                                     InProcessTransport)

    # -- per run ----------------------------------------------------------------------------------

    @property
    def dialect(self) -> WireDialect:
        """The wire for the `style` (built per use: a `request_params` dict edited in place counts)."""
        e = self.settings.endpoint
        store = e.request_params.get("store") if isinstance(e.request_params, dict) else None
        return dialect_for(e.style, PartPolicy(e.on_unsupported_part, e.max_part_bytes, self.instance),
                           WireOptions(store if isinstance(store, bool) else None, bool(e.chain_responses)))

    def api_key(self, dialect: WireDialect) -> str:
        e = self.settings.endpoint
        if e.api_key:
            return e.api_key
        found = api_key_from_env(dialect.env_key)
        if found:
            return found
        if is_loopback_url(e.base_url):  # a local server takes no key: the agent runtime's placeholder
            return LOOPBACK_PLACEHOLDER_KEY
        raise ToolnexusRuntimeError(
            "No API key: set api_key or OPENROUTER_API_KEY / OPENAI_API_KEY / ANTHROPIC_API_KEY"
        )

    def abort(self, cancel: Optional[asyncio.Event]) -> Abort:
        """The abort conditions of one run / translate: `cancel` and a deadline starting now."""
        timeout_ms, timer = self.settings.limits.timeout_ms, self.settings.timer
        if timeout_ms is None or math.isinf(timeout_ms):
            return Abort(cancel, None, timeout_ms, timer)
        return Abort(cancel, monotonic_now(timer) + timeout_ms / 1000, timeout_ms, timer)

    def call_abort(self, abort: Abort) -> Abort:
        """`abort` for one logical LLM call: the run's own, or the default call deadline from now."""
        limits = self.settings.limits
        call_ms = limits.call_timeout_ms
        if abort.deadline is not None or limits.timeout_ms is not None or call_ms is None or math.isinf(call_ms):
            return abort
        return Abort(abort.cancel, time.monotonic() + call_ms / 1000, call_ms, self.settings.timer, ATTEMPT_CAP,
                     real_time=True)

    # -- one call ---------------------------------------------------------------------------------

    def _secrets(self, headers: dict[str, str]) -> list[str]:
        """What an error body must never show: the API key and credential-like header values."""
        key = self.settings.endpoint.api_key
        found = [key] if isinstance(key, str) and key else []
        return found + credential_values(headers)

    def shape_body(self, body: dict[str, Any]) -> dict[str, Any]:
        e = self.settings.endpoint
        for key, value in (e.request_params or {}).items():
            if key in FORBIDDEN_PARAMS:
                warn_once(f"request_params:{self.instance}:{key}",
                          f'[toolnexus] request_params key "{key}" is not allowed — ignored (use body_transform)')
                continue
            body[key] = value
        if e.body_transform is not None:
            out = e.body_transform(body)
            if out is not None:
                body = out
        return body

    async def send(self, url: str, headers: dict[str, str], body: dict[str, Any], abort: Abort, *,
                   call: Optional[LlmCall] = None, check: Optional[Callable[[Any], None]] = None) -> Any:
        """One logical call with retries; the decoded JSON. `call` counts each attempt as it
        starts, so its metric says how many were made even when the last one fails. `check`
        (the dialect's `check_reply`) raises `ProviderError` for an error sent inside a 2xx body,
        inside the attempt, so it is retried like the same status on a plain reply."""
        if check is None:
            return await self._with_retries(self.transport.post, url, headers, body, abort, call)
        post = self.transport.post

        async def checked(u: str, h: dict[str, str], p: dict[str, Any], t: float) -> Any:
            data = await post(u, h, p, t)
            check(data)
            return data

        return await self._with_retries(checked, url, headers, body, abort, call)

    async def open(self, url: str, headers: dict[str, str], body: dict[str, Any], abort: Abort, *,
                   call: Optional[LlmCall] = None) -> ByteStream:
        """Open one streamed call, retrying the opening only (each opening counted on `call`)."""
        async def opened(u: str, h: dict[str, str], p: dict[str, Any], t: float) -> ByteStream:
            return ByteStream(await self.transport.open(u, h, p, t))

        return await self._with_retries(opened, url, headers, body, abort, call)

    async def _with_retries(self, op: Callable[[str, dict[str, str], dict[str, Any], float], Awaitable[_R]], url: str,
                            headers: dict[str, str], body: dict[str, Any], abort: Abort,
                            call: Optional[LlmCall]) -> _R:
        payload = dict(body)  # one object per logical call: transports may cache its bytes across retries
        secrets = self._secrets(headers)

        async def attempt(timeout: float) -> _R:
            if call is not None:
                call.attempts += 1
            try:
                return await op(url, headers, payload, timeout)
            except ProviderError as e:  # an upstream may echo the request (and its key) back
                e.scrub(secrets)  # in place: the same error, its cause kept
                raise

        try:
            result, _ = await call_with_retries(attempt, self.settings.retry, self.call_abort(abort))
            return result
        except (ProviderError, ProviderResponseError, OSError) as e:
            self.locate(e, url, headers, payload)
            raise

    def _key_source(self) -> tuple[str, Optional[str]]:
        """Where this call's key came from, as a phrase — a variable's or an option's name, never
        the key — and, when none was configured (a placeholder was sent), the variable to set."""
        e = self.settings.endpoint
        for name in e.headers:
            if str(name).lower() in ("authorization", "x-api-key"):
                return f"the {name} header passed in headers", None
        style_key = self.dialect.env_key
        sent = e.api_key or api_key_from_env(style_key)
        for name in ("OPENROUTER_API_KEY", style_key, "OPENAI_API_KEY", "ANTHROPIC_API_KEY"):
            if name and sent and os.environ.get(name) == sent:
                return f"the API key from {name}", None
        if sent in PLACEHOLDER_KEYS:
            return "the placeholder key", style_key or "OPENAI_API_KEY"
        return "the API key passed as api_key", None

    def locate(self, error: BaseException, url: str, headers: dict[str, str], body: dict[str, Any]) -> None:
        """Tell a failed call's final error where it was going (and, for 401/403/404, what to
        check), in place: once per error, for every transport. In-process models have no endpoint."""
        if getattr(error, "endpoint", None) or isinstance(error, (RunTimeout, RunCancelled)) or self.in_process:
            return
        endpoint = endpoint_of(url, self._secrets(headers))
        if isinstance(error, ProviderError):
            base = self.settings.endpoint.base_url.rstrip("/")
            suffix = url[len(base):] if url.startswith(base) else ""
            source, unset = self._key_source()
            error.locate(endpoint, provider_hint(error.status, key_source=source, unset_key=unset,
                                                 model=str(body.get("model", self.settings.endpoint.model)),
                                                 path_suffix=suffix))
            return
        with suppress(AttributeError, TypeError):
            error.endpoint = endpoint  # type: ignore[attr-defined]
        message = error.args[0] if len(error.args) == 1 and isinstance(error.args[0], str) else None
        if isinstance(error, ToolnexusError) and message is not None:
            # ours (every built-in transport): the message itself names the endpoint
            error.args = (message.replace(url, endpoint) if url in message else f"{message} (POST {endpoint})",)
        else:  # a custom transport's own exception keeps its type and text
            error.add_note(f"endpoint: POST {endpoint}")

    # -- hooks and metrics ------------------------------------------------------------------------

    def llm_call(self, model: str, parts: list[dict[str, Any]]) -> LlmCall:
        return LlmCall(self, model, parts)

    def has_hook(self, name: str) -> bool:
        return hook_of(self.settings.hooks, name) is not None

    async def call_hook(self, name: str, event: dict[str, Any]) -> Optional[HookReply]:
        """Call hook `name` (sync or async) with `event`; its reply when it has `.get`, else None."""
        fn = hook_of(self.settings.hooks, name)
        if fn is None:
            return None
        out = fn(event)
        if inspect.isawaitable(out):
            out = await out
        return out if isinstance(out, HookReply) else None

    def emit(self, event: dict[str, Any]) -> None:
        for sink_name, sink in (("metrics registry", self.metrics.record), ("on_metric", self.settings.on_metric)):
            if sink is None:
                continue
            try:
                sink(event)
            except Exception as e:
                warn_once(f"sink:{self.instance}:{sink_name}:{type(e).__name__}",
                          f"[toolnexus] {sink_name} raised {type(e).__name__}: {e} — event dropped for this sink")
