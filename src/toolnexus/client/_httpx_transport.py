"""`HttpxTransport`: native async I/O over one pooled `httpx.AsyncClient` (HTTP/2, proxies).

One `Client` owns one `HttpxTransport`, which owns one `httpx.AsyncClient`: keep-alive connections
are reused across turns, retries and runs (at most one handshake per host while the pool is warm),
no thread is pinned per request, and cancelling the awaiting task closes the socket at once.
Close it with `await client.aclose()` (or `async with create_client(...)`).

The `httpx.AsyncClient` is bound to the event loop that first used it; used from another loop
(e.g. a second `asyncio.run`), the transport starts a fresh pool for that loop.

A 2xx body is read up to `max_response_bytes` (an int, a callable returning one — the owning
`Client` passes its attribute — or None for no cap; default `MAX_RESPONSE_BYTES`, 32 MiB), above
which the call fails with `ResponseTooLarge`. Redirects are not followed (an LLM endpoint that
redirects gets a `ProviderError` for the 3xx), so credentials never leave for another origin.

Errors: non-2xx ⇒ `ProviderError` (at most 64 KiB of the body read); httpx timeouts ⇒
`TimeoutError`, other httpx transport failures ⇒ `ConnectionError` (both `OSError`, so retried).

Not here: retries, deadline and cancel (_retry.py) — this is one attempt.
"""

from __future__ import annotations

import asyncio
from contextlib import contextmanager
from typing import Any, Callable, Iterator, Optional, Union

import httpx

from ..errors import NetworkError, NetworkTimeout
from ._errors import MAX_ERROR_READ_BYTES, ProviderError
from ._transport import MAX_RESPONSE_BYTES, AsyncTransport, decode_json_body, encode_payload, too_large


@contextmanager
def _as_os_errors() -> Iterator[None]:
    try:
        yield
    except httpx.TimeoutException as e:
        raise NetworkTimeout(f"{type(e).__name__}: {e}") from e
    except httpx.TransportError as e:
        raise NetworkError(f"{type(e).__name__}: {e}") from e


async def _read_capped(response: httpx.Response) -> str:
    data = b""
    async for chunk in response.aiter_bytes():
        data += chunk
        if len(data) >= MAX_ERROR_READ_BYTES:
            break
    return data[:MAX_ERROR_READ_BYTES].decode("utf-8", errors="replace")


class _HttpxStream:
    """A live streaming response: async chunks (`aiter_bytes`) and `aclose`."""

    def __init__(self, response: httpx.Response) -> None:
        self._response = response
        self._chunks = response.aiter_bytes()

    def __aiter__(self) -> "_HttpxStream":
        return self

    async def __anext__(self) -> bytes:
        with _as_os_errors():
            return await self._chunks.__anext__()

    async def aclose(self) -> None:
        await self._response.aclose()


class HttpxTransport(AsyncTransport):
    """Async transport over a pooled `httpx.AsyncClient` (see module docstring)."""

    def __init__(self, *, limits: Optional[httpx.Limits] = None, verify: Any = True,
                 max_response_bytes: Union[int, None, Callable[[], Optional[int]]] = MAX_RESPONSE_BYTES) -> None:
        self.max_response_bytes = max_response_bytes
        self._limits = limits or httpx.Limits(max_connections=100, max_keepalive_connections=20)
        self._verify = verify
        self._client: Optional[httpx.AsyncClient] = None
        self._loop: Optional[asyncio.AbstractEventLoop] = None
        self._encoded: tuple[Any, bytes] = (None, b"")

    def _pool(self) -> httpx.AsyncClient:
        loop = asyncio.get_running_loop()
        if self._client is None or self._loop is not loop or self._client.is_closed:
            self._client = httpx.AsyncClient(limits=self._limits, verify=self._verify)
            self._loop = loop
        return self._client

    def _body(self, payload: dict[str, Any]) -> bytes:
        """Serialised body, reused while the same payload object is retried."""
        if self._encoded[0] is not payload:
            self._encoded = (payload, encode_payload(payload))
        return self._encoded[1]

    async def _send(self, url: str, headers: dict[str, str], payload: dict[str, Any], timeout: float) -> httpx.Response:
        client = self._pool()
        request = client.build_request("POST", url, headers=headers, content=self._body(payload), timeout=timeout)
        with _as_os_errors():
            response = await client.send(request, stream=True)
        if response.status_code // 100 != 2:
            try:
                with _as_os_errors():
                    text = await _read_capped(response)
            finally:
                await response.aclose()
            raise ProviderError(response.status_code, text, response.headers.get("retry-after"))
        return response

    async def post(self, url: str, headers: dict[str, str], payload: dict[str, Any], timeout: float) -> Any:
        response = await self._send(url, headers, payload, timeout)
        cap = self.max_response_bytes() if callable(self.max_response_bytes) else self.max_response_bytes
        try:
            with _as_os_errors():
                if cap is None:
                    raw = await response.aread()
                else:
                    body = bytearray()
                    async for chunk in response.aiter_bytes():
                        body += chunk
                        if len(body) > cap:
                            raise too_large(url, cap)
                    raw = bytes(body)
        finally:
            await response.aclose()
        return decode_json_body(raw, url)

    async def open(self, url: str, headers: dict[str, str], payload: dict[str, Any], timeout: float) -> _HttpxStream:
        return _HttpxStream(await self._send(url, headers, payload, timeout))

    async def aclose(self) -> None:
        """Close the pooled connections (only if the owning loop is the current one)."""
        client, self._client = self._client, None
        if client is not None and not client.is_closed:
            try:
                running = asyncio.get_running_loop()
            except RuntimeError:
                running = None
            if running is self._loop:
                await client.aclose()
