"""The transport seam: `HttpTransport`, the stdlib and in-process transports, and the async adapter.

A transport moves one request body to the LLM endpoint and hands back decoded JSON (`post`) or a
live byte stream (`open`); it raises `ProviderError` for a non-2xx reply and an `OSError` for a
network failure. The client never touches sockets itself.

`TransportCaller` is how the client calls ANY transport without blocking the event loop:
`async def post/open` are awaited directly; plain synchronous methods (the seed's
`ScriptedTransport`, `UrllibTransport`, a gated transport) run on a bounded thread pool owned by
this module — never the default executor, so a burst of calls cannot starve `asyncio.to_thread`
users. A synchronous stream is read chunk by chunk on that pool (pull-based: the reader only asks
for the next chunk when the consumer wants it, so a slow consumer slows the socket instead of
losing data).

Bounded and careful with credentials: the stdlib transport reads a 2xx body only up to
`max_response_bytes` (`MAX_RESPONSE_BYTES`, 32 MiB; `ResponseTooLarge` above it), and when it
follows a redirect to another origin it forwards no header but the harmless ones (`Accept`,
`Content-Type`, `User-Agent`...): the API key never travels to a host it was not meant for.

Not here: retries, deadlines and cancellation (`retry.py`); the default transport (`http11.py`),
`HttpxTransport` (`httpx_transport.py`) and `UrllibTransport` (`urllib_transport.py`, re-exported
here), each imported only when used — `urllib.request` alone costs ~15 ms of import time.
"""

from __future__ import annotations

import asyncio
import inspect
import json
from concurrent.futures import ThreadPoolExecutor
from typing import Any, AsyncIterator, Callable, Optional, Protocol, runtime_checkable

from .._redact import SAFE_HEADERS
from .body import encode_payload
from .errors import ProviderResponseError, ResponseTooLarge
from .wire.base import usage_of
from ..errors import ToolnexusTypeError, UnsupportedOperation

__all__ = ["HttpTransport", "UrllibTransport", "InProcessTransport", "TransportCaller", "ByteStream",
           "TRANSPORT_POOL_SIZE", "MAX_RESPONSE_BYTES", "SAFE_REDIRECT_HEADERS", "encode_payload",
           "decode_json_body", "too_large"]

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
    """One narrow seam: `post` returns decoded JSON, `open` a live response (`read1`/`read`, `close`)."""

    def post(self, url: str, headers: dict[str, str], payload: dict[str, Any], timeout: float) -> dict[str, Any]: ...

    def open(self, url: str, headers: dict[str, str], payload: dict[str, Any], timeout: float) -> Any: ...


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


def _field(data: dict, snake: str, camel: str) -> Any:
    return data.get(snake, data.get(camel))


def _wire_call(index: int, call: dict) -> dict[str, Any]:
    """One generated call as an OpenAI tool call (flat `{id,name,arguments|args}` or OpenAI-shaped)."""
    fn = call.get("function") if isinstance(call.get("function"), dict) else call
    arguments = fn.get("arguments") if fn.get("arguments") is not None else fn.get("args")
    return {"id": call.get("id") or f"call_{index}", "type": "function",
            "function": {"name": fn.get("name"),
                         "arguments": arguments if isinstance(arguments, str) else json.dumps(arguments or {})}}


class InProcessTransport:
    """A model that is a plain function: `generate(request) -> {content?, tool_calls?, usage?}`.

    The reply is wrapped as an OpenAI chat completion, so the normal openai wire parses it.
    """

    def __init__(self, generate: Callable[[dict], Any]) -> None:
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
            raise ToolnexusTypeError(f"toolnexus: in-process `generate` must return a dict or None, got {type(out).__name__}")
        calls = out.get("tool_calls") or out.get("toolCalls")
        if calls:
            message: dict[str, Any] = {"role": "assistant", "tool_calls": [_wire_call(i, c) for i, c in enumerate(calls)]}
        else:
            message = {"role": "assistant", "content": out.get("content") or ""}
        u = out.get("usage") if isinstance(out.get("usage"), dict) else {}
        usage = usage_of(_field(u, "prompt_tokens", "promptTokens"), _field(u, "completion_tokens", "completionTokens"),
                         _field(u, "total_tokens", "totalTokens"))
        return {"choices": [{"index": 0, "message": message, "finish_reason": "tool_calls" if calls else "stop"}],
                "usage": usage}

    def open(self, url: str, headers: dict[str, str], payload: dict[str, Any], timeout: float) -> Any:
        raise UnsupportedOperation(_NO_STREAM)


async def _in_pool(fn: Callable[..., Any], *args: Any) -> Any:
    return await asyncio.get_running_loop().run_in_executor(_POOL, fn, *args)


async def _call(fn: Callable[..., Any], *args: Any) -> Any:
    """Await an async method; run a sync one on the pool (awaiting anything awaitable it returns)."""
    if inspect.iscoroutinefunction(fn):
        return await fn(*args)
    out = await _in_pool(fn, *args)
    return await out if inspect.isawaitable(out) else out


class ByteStream:
    """An open streaming response as async chunks, whatever the transport returned."""

    def __init__(self, response: Any) -> None:
        self._response = response
        self._iter: Optional[AsyncIterator[bytes]] = None
        if hasattr(response, "__aiter__"):
            self._iter = response.__aiter__()
        reader = getattr(response, "read1", None) or getattr(response, "read", None)
        if self._iter is None and reader is None:
            raise ToolnexusTypeError(f"toolnexus: http_transport.open returned {type(response).__name__}, "
                            "which has neither read1/read nor async iteration")
        self._reader = reader

    async def read(self) -> bytes:
        """The next chunk; `b""` at EOF."""
        if self._iter is not None:
            try:
                return bytes(await self._iter.__anext__())
            except StopAsyncIteration:
                return b""
        return bytes(await _call(self._reader, _READ_SIZE) or b"")

    async def aclose(self) -> None:
        """Close the response; a sync `close()` may unblock a read waiting on another thread."""
        closer = getattr(self._response, "aclose", None)
        if closer is not None and inspect.iscoroutinefunction(closer):
            await closer()
            return
        close = getattr(self._response, "close", None)
        if close is not None:
            out = close()
            if inspect.isawaitable(out):
                await out


class TransportCaller:
    """Calls a transport's `post`/`open` from async code (see module docstring)."""

    def __init__(self, transport: Any) -> None:
        self.transport = transport

    async def post(self, url: str, headers: dict[str, str], payload: dict[str, Any], timeout: float) -> Any:
        return await _call(self.transport.post, url, headers, payload, timeout)

    async def open(self, url: str, headers: dict[str, str], payload: dict[str, Any], timeout: float) -> ByteStream:
        return ByteStream(await _call(self.transport.open, url, headers, payload, timeout))

    async def aclose(self) -> None:
        closer = getattr(self.transport, "aclose", None)
        if closer is not None:
            out = closer()
            if inspect.isawaitable(out):
                await out


def __getattr__(name: str) -> Any:
    if name == "UrllibTransport":  # loaded on first use, like the module docstring says
        from .urllib_transport import UrllibTransport

        return UrllibTransport
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
