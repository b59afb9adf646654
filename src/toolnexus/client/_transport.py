"""The transport seam: what a transport is, and the one adapter that makes any transport async.

A transport moves one request body to the LLM endpoint and hands back decoded JSON (`post`) or a
live byte stream (`open`); it raises `ProviderError` for a non-2xx reply and an `OSError` for a
network failure. The client never touches sockets itself.

Inside, there is one seam and it is async: `AsyncTransport` (`async post`, `async open` → an async
stream of chunks, `async aclose`). Our own transports (`Http11Transport`, the default;
`HttpxTransport`) are `AsyncTransport`s. Whatever else a user passes — the public `HttpTransport`
shape with plain `post`/`open` (the seed's scripted transport, `UrllibTransport`,
`InProcessTransport`), an object with `async def post`, or a mix — is wrapped once, where it enters
(`as_async_transport`, called by the client and the agent runtime), by `TransportAdapter`: it
looks at each method once and from then on awaits the async ones and runs the plain ones on a
bounded thread pool owned by this module — never the default executor, so a burst of calls cannot
starve `asyncio.to_thread` users. A plain stream is read chunk by chunk on that pool (`ByteStream`;
pull-based: the reader only asks for the next chunk when the consumer wants it, so a slow consumer
slows the socket instead of losing data).

Bounded and careful with credentials: the stdlib transport reads a 2xx body only up to
`max_response_bytes` (`MAX_RESPONSE_BYTES`, 32 MiB; `ResponseTooLarge` above it), and when it
follows a redirect to another origin it forwards no header but the harmless ones (`Accept`,
`Content-Type`, `User-Agent`...): the API key never travels to a host it was not meant for.

Not here: retries, deadlines and cancellation (`_retry.py`); the default transport (`_http11.py`),
`HttpxTransport` (`_httpx_transport.py`) and `UrllibTransport` (`_urllib_transport.py`), each
imported only when used (`toolnexus.client` loads them on first access): their imports cost
more than the rest of the client (figures: docs/performance.md).
"""

from __future__ import annotations

import asyncio
import inspect
import json
from collections.abc import AsyncIterable
from concurrent.futures import ThreadPoolExecutor
from typing import Any, AsyncIterator, Awaitable, Callable, Optional, Protocol, runtime_checkable

from .._redact import SAFE_HEADERS
from .._shapes import as_dict
from ..errors import ToolnexusTypeError, UnsupportedOperation
from ._body import encode_payload as encode_payload
from ._errors import ProviderResponseError, ResponseTooLarge
from ._wire.base import usage_of

MAX_RESPONSE_BYTES = 32 * 1024 * 1024
SAFE_REDIRECT_HEADERS = SAFE_HEADERS

TRANSPORT_POOL_SIZE = 32
_POOL = ThreadPoolExecutor(max_workers=TRANSPORT_POOL_SIZE, thread_name_prefix="toolnexus-transport")
_READ_SIZE = 65536

_NOT_ASYNC = ("toolnexus: create_in_process_client's `generate` must be synchronous — it runs on the client's "
              "worker thread. Do async work before the call, or block inside it.")
_NO_STREAM = ("toolnexus: create_in_process_client does not support streaming — `generate` returns a complete "
              "answer. Use the non-streaming run, or supply an http_transport that streams.")


@runtime_checkable
class HttpTransport(Protocol):
    """What a user may pass as `http_transport`: `post` returns decoded JSON, `open` a live response
    (`read1`/`read` and `close`, or async iteration). Either method may also be `async def`."""

    def post(self, url: str, headers: dict[str, str], payload: dict[str, Any], timeout: float) -> dict[str, Any]: ...

    def open(self, url: str, headers: dict[str, str], payload: dict[str, Any], timeout: float) -> Any: ...


@runtime_checkable
class _Posts(Protocol):
    def post(self, url: str, headers: dict[str, str], payload: dict[str, Any], timeout: float) -> Any: ...


@runtime_checkable
class _Opens(Protocol):
    def open(self, url: str, headers: dict[str, str], payload: dict[str, Any], timeout: float) -> Any: ...


@runtime_checkable
class _Closes(Protocol):
    def close(self) -> Any: ...


@runtime_checkable
class _AsyncCloses(Protocol):
    def aclose(self) -> Any: ...


@runtime_checkable
class _Reads1(Protocol):
    def read1(self, size: int) -> Any: ...


@runtime_checkable
class _Reads(Protocol):
    def read(self, size: int) -> Any: ...


class AsyncTransport:
    """The one seam inside: every transport the client calls is one of these.

    `post` returns the decoded JSON body; `open` a live stream (async iteration over byte chunks,
    and `aclose`); `aclose` releases pooled connections. Subclass it for a transport that is
    natively async; anything else goes through `TransportAdapter`.
    """

    async def post(self, url: str, headers: dict[str, str], payload: dict[str, Any], timeout: float) -> Any:
        raise NotImplementedError

    async def open(self, url: str, headers: dict[str, str], payload: dict[str, Any], timeout: float) -> Any:
        raise NotImplementedError

    async def aclose(self) -> None:
        return None


def decode_json_body(raw: bytes, url: str) -> Any:
    """A 2xx body as JSON, or a `ProviderResponseError` that shows what came back."""
    try:
        return json.loads(raw)
    except (ValueError, RecursionError):
        shown = raw[:200].decode("utf-8", errors="replace")
        raise ProviderResponseError(f"toolnexus: malformed response from {url}: body is not JSON: {shown!r}") from None


def too_large(url: str, cap: int) -> ResponseTooLarge:
    return ResponseTooLarge(f"toolnexus: the reply from {url} is larger than max_response_bytes ({cap} bytes); "
                            "raise Client.max_response_bytes if that is expected")


def _field(data: dict[str, Any], snake: str, camel: str) -> Any:
    return data.get(snake, data.get(camel))


def _wire_call(index: int, call: dict[str, Any]) -> dict[str, Any]:
    """One generated call as an OpenAI tool call (flat `{id,name,arguments|args}` or OpenAI-shaped)."""
    function = call.get("function")
    fn: dict[str, Any] = function if isinstance(function, dict) else call
    arguments = fn.get("arguments") if fn.get("arguments") is not None else fn.get("args")
    return {"id": call.get("id") or f"call_{index}", "type": "function",
            "function": {"name": fn.get("name"),
                         "arguments": arguments if isinstance(arguments, str) else json.dumps(arguments or {})}}


class InProcessTransport:
    """A model that is a plain function: `generate(request) -> {content?, tool_calls?, usage?}`.

    The reply is wrapped as an OpenAI chat completion, so the normal openai wire parses it.
    """

    def __init__(self, generate: Callable[[dict[str, Any]], Any]) -> None:
        self.generate = generate

    def post(self, url: str, headers: dict[str, str], payload: dict[str, Any], timeout: float) -> dict[str, Any]:
        out = self.generate({"messages": payload.get("messages") or [], "tools": payload.get("tools"),
                             "model": payload.get("model"), "body": payload})
        if inspect.isawaitable(out):
            if inspect.iscoroutine(out):
                out.close()
            raise ToolnexusTypeError(_NOT_ASYNC)
        out = {} if out is None else out
        if not isinstance(out, dict):
            raise ToolnexusTypeError(
                f"toolnexus: in-process `generate` must return a dict or None, got {type(out).__name__}"
            )
        calls = out.get("tool_calls") or out.get("toolCalls")
        if calls:
            message: dict[str, Any] = {
                "role": "assistant",
                "tool_calls": [_wire_call(i, c) for i, c in enumerate(calls)],
            }
        else:
            message = {"role": "assistant", "content": out.get("content") or ""}
        u = as_dict(out.get("usage"))
        usage = usage_of(_field(u, "prompt_tokens", "promptTokens"), _field(u, "completion_tokens", "completionTokens"),
                         _field(u, "total_tokens", "totalTokens"))
        return {"choices": [{"index": 0, "message": message, "finish_reason": "tool_calls" if calls else "stop"}],
                "usage": usage}

    def open(self, url: str, headers: dict[str, str], payload: dict[str, Any], timeout: float) -> Any:
        raise UnsupportedOperation(_NO_STREAM)


async def _in_pool(fn: Callable[..., Any], *args: Any) -> Any:
    return await asyncio.get_running_loop().run_in_executor(_POOL, fn, *args)


async def _settled(out: Any) -> Any:
    """A plain method's result, or what the awaitable it handed back resolves to."""
    return await out if inspect.isawaitable(out) else out


class ByteStream:
    """An open streaming response as async chunks, whatever the transport returned: async
    iteration is used as it is; a plain `read1`/`read` runs on the transport pool (an
    `async def read` is awaited). Decided once, when the stream is opened."""

    def __init__(self, response: Any) -> None:
        self._iter: Optional[AsyncIterator[bytes]] = None
        self._reader: Optional[Callable[[int], Any]] = None
        self._read_async = False
        if isinstance(response, AsyncIterable):  # a ByteStream too
            self._iter = response.__aiter__()
        else:
            self._reader = (response.read1 if isinstance(response, _Reads1)
                            else response.read if isinstance(response, _Reads) else None)
            if self._reader is None:
                raise ToolnexusTypeError(f"toolnexus: http_transport.open returned {type(response).__name__}, "
                                         "which has neither read1/read nor async iteration")
            self._read_async = inspect.iscoroutinefunction(self._reader)
        self._aclose: Optional[Callable[[], Awaitable[Any]]] = None
        self._close: Optional[Callable[[], Any]] = None
        if isinstance(response, _AsyncCloses) and inspect.iscoroutinefunction(response.aclose):
            self._aclose = response.aclose
        elif isinstance(response, _Closes):
            self._close = response.close

    def __aiter__(self) -> "ByteStream":
        return self

    async def __anext__(self) -> bytes:
        chunk = await self.read()
        if not chunk:
            raise StopAsyncIteration
        return chunk

    async def read(self) -> bytes:
        """The next chunk; `b""` at EOF."""
        if self._iter is not None:
            try:
                return bytes(await self._iter.__anext__())
            except StopAsyncIteration:
                return b""
        assert self._reader is not None
        if self._read_async:
            return bytes(await self._reader(_READ_SIZE) or b"")
        return bytes(await _settled(await _in_pool(self._reader, _READ_SIZE)) or b"")

    async def aclose(self) -> None:
        """Close the response; a plain `close()` may unblock a read waiting on another thread."""
        if self._aclose is not None:
            await self._aclose()
        elif self._close is not None:
            await _settled(self._close())


class TransportAdapter(AsyncTransport):
    """Any other transport as an `AsyncTransport`: each method looked at once, here.

    Plain methods run on the transport pool; `async def` ones are awaited. `plain_post` tells the
    agent runtime's turn gate that a `post` occupies a thread that cancellation cannot stop; it
    then uses `submit_post`, whose future completes only when that thread has returned.
    """

    def __init__(self, inner: Any) -> None:
        if not isinstance(inner, _Posts) or not callable(inner.post):
            raise ToolnexusTypeError(f"toolnexus: http_transport {type(inner).__name__} has no post(url, headers, "
                                     "payload, timeout) method")
        self.inner: Any = inner  # as the user passed it (the agent runtime's gate reads it)
        self.plain_post = not inspect.iscoroutinefunction(inner.post)
        self._opens = isinstance(inner, _Opens)
        self._open_async = isinstance(inner, _Opens) and inspect.iscoroutinefunction(inner.open)
        self._closes = isinstance(inner, _AsyncCloses) and callable(inner.aclose)

    def submit_post(
        self, url: str, headers: dict[str, str], payload: dict[str, Any], timeout: float
    ) -> "asyncio.Future[Any]":
        """Start a plain `post` on the pool; the future completes when the call is really over."""
        job = asyncio.wrap_future(_POOL.submit(self.inner.post, url, headers, payload, timeout))

        async def finish() -> Any:
            return await _settled(await job)

        return asyncio.ensure_future(finish())

    async def post(self, url: str, headers: dict[str, str], payload: dict[str, Any], timeout: float) -> Any:
        if self.plain_post:
            return await _settled(await _in_pool(self.inner.post, url, headers, payload, timeout))
        return await self.inner.post(url, headers, payload, timeout)

    async def open(self, url: str, headers: dict[str, str], payload: dict[str, Any], timeout: float) -> ByteStream:
        if not self._opens:
            raise UnsupportedOperation(f"toolnexus: http_transport {type(self.inner).__name__} cannot stream (no open)")
        if self._open_async:
            return ByteStream(await self.inner.open(url, headers, payload, timeout))
        return ByteStream(await _settled(await _in_pool(self.inner.open, url, headers, payload, timeout)))

    async def aclose(self) -> None:
        if self._closes:
            await _settled(self.inner.aclose())


def as_async_transport(transport: Any) -> AsyncTransport:
    """`transport` behind the one async seam: itself if it is an `AsyncTransport`, else adapted."""
    if isinstance(transport, AsyncTransport):
        return transport
    return TransportAdapter(transport)
