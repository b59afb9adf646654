"""`Http11Transport`: the default transport — a lean HTTP/1.1 keep-alive client on asyncio streams.

Why our own: one request to a model endpoint is a POST of a JSON body and a JSON (or SSE) reply,
and the default transport sits under every turn. `httpx.AsyncClient` costs several times what the
exchange itself does on a fast link, and framing the exchange with h11 (the parser under httpx,
which does no I/O) under this same pool was measured too and kept slower than this module's own
framing by more than the margin we allow; the figures are in docs/performance.md
(`benchmarks/transport.py` measures all three). What it does:

- a pool of idle keep-alive connections per (scheme, host, port), bounded (`max_idle_per_host`),
  each dropped after `idle_timeout` seconds or when the server closed it; the pool belongs to the
  event loop that made it (another loop starts a fresh pool);
- TLS with the default certificate store (certifi's when it is installed, as httpx does);
- bodies framed by `Content-Length` or chunked transfer encoding (or, for a server that sends
  neither, by the end of the connection, which is then not reused); informational replies
  (`100 Continue`, `103 Early Hints`, any 1xx) skipped, the final response read;
- a 2xx body read up to `max_response_bytes` (default 32 MiB; `ResponseTooLarge` above), response
  headers up to 64 KiB; a non-2xx reply raises `ProviderError` with at most 64 KiB of its body;
- no redirects followed (a 3xx is a `ProviderError`), so a key never travels to another origin;
- header values with CR or LF refused (no header injection);
- the whole exchange bounded by the attempt's `timeout` (`NetworkTimeout`), and a stream's every
  silence between chunks by the same figure (as a read timeout would); cancellation closes
  the socket at once; a network failure is a `NetworkError` (both `OSError`s, so the client's
  retry policy applies). A reused connection that the server had closed is retried once on a new
  connection when no byte of a response arrived.

What it does not do — and where `HttpxTransport` (`http_transport=HttpxTransport(...)`) is the
answer: HTTP/2, proxies (with `HTTP(S)_PROXY` / `ALL_PROXY` set, the client's default transport is
`HttpxTransport`, which honours them), client certificates, compression.
"""

from __future__ import annotations

import asyncio
import os
import ssl
import time
from dataclasses import dataclass, field
from typing import Any, Callable, Optional, Union
from urllib.parse import urlsplit

from ..errors import NetworkError, NetworkTimeout, ToolnexusValueError
from ._errors import MAX_ERROR_READ_BYTES, ProviderError, ResponseTooLarge
from ._transport import MAX_RESPONSE_BYTES, AsyncTransport, decode_json_body, encode_payload, too_large

MAX_HEADER_BYTES = 64 * 1024
DRAIN_GRACE = 0.025  # seconds a stream's reader waits, at close, for the rest of the body
_READ = 65536
_PROXY_VARS = ("HTTPS_PROXY", "https_proxy", "HTTP_PROXY", "http_proxy", "ALL_PROXY", "all_proxy")


def proxy_configured() -> bool:
    """True when the environment asks for a proxy (the lean transport does not speak to one)."""
    return any(os.environ.get(name) for name in _PROXY_VARS)


def default_transport(**options: Any) -> Any:
    """The transport a client or runtime makes for itself: `Http11Transport`, or `HttpxTransport`
    when the environment asks for a proxy (which only httpx speaks to)."""
    if proxy_configured():
        from ._httpx_transport import HttpxTransport

        return HttpxTransport(**options)
    return Http11Transport(**options)


def _network_error(message: str) -> Exception:
    return NetworkError(message)


def _network_timeout(message: str) -> Exception:
    return NetworkTimeout(message)


@dataclass
class _Conn:
    reader: asyncio.StreamReader
    writer: asyncio.StreamWriter
    key: tuple[str, str, int]
    reused: bool = False
    idle_since: float = field(default_factory=time.monotonic)

    def alive(self) -> bool:
        return not (self.reader.at_eof() or self.writer.is_closing())

    def close(self) -> None:
        try:
            self.writer.close()
        except Exception:
            pass


class _Response:
    """Status, headers, and a body read as it arrives (by length, chunks, or to the end)."""

    def __init__(self, conn: _Conn, status: int, headers: dict[str, str]) -> None:
        self.conn = conn
        self.status = status
        self.headers = headers
        self.done = False
        self._chunked = "chunked" in headers.get("transfer-encoding", "").lower()
        length = headers.get("content-length")
        self._left: Optional[int] = int(length) if length is not None and not self._chunked else None
        if status in (204, 304):  # no body, whatever the headers say
            self._chunked, self._left = False, 0
        self.reusable = (self._chunked or self._left is not None) and "close" not in headers.get(
            "connection", ""
        ).lower()
        if self._left == 0:
            self.done = True

    async def chunk(self) -> bytes:
        """The next piece of the body; b"" at its end."""
        if self.done:
            return b""
        reader = self.conn.reader
        if self._chunked:
            line = await reader.readuntil(b"\r\n")
            size = int(line.split(b";", 1)[0].strip() or b"0", 16)
            if size == 0:
                while (await reader.readuntil(b"\r\n")) != b"\r\n":  # trailers
                    pass
                self.done = True
                return b""
            data = await reader.readexactly(size)
            await reader.readexactly(2)
            return data
        if self._left is not None:
            data = await reader.read(min(self._left, _READ))
            if not data:
                raise asyncio.IncompleteReadError(b"", self._left)
            self._left -= len(data)
            if self._left == 0:
                self.done = True
            return data
        data = await reader.read(_READ)
        if not data:
            self.done = True
        return data

    async def read(self, cap: Optional[int], url: str) -> bytes:
        body = bytearray()
        while True:
            data = await self.chunk()
            if not data:
                return bytes(body)
            body += data
            if cap is not None and len(body) > cap:
                raise too_large(url, cap)


class _Stream:
    """A live streaming response: async chunks and `aclose` (the connection goes back to the pool
    only when the body was read to its end)."""

    def __init__(self, transport: "Http11Transport", response: _Response, timeout: float, url: str) -> None:
        self._transport = transport
        self._response = response
        self._closed = False
        self._timeout = timeout if timeout and timeout > 0 else None
        self._url = url
        self._reading = False

    def __aiter__(self) -> "_Stream":
        return self

    async def __anext__(self) -> bytes:
        self._reading = True
        try:
            return await self._next()
        finally:
            self._reading = False

    async def _next(self) -> bytes:
        try:
            async with asyncio.timeout(self._timeout):  # like a read timeout: the stream's silence
                data = await self._response.chunk()
        except TimeoutError as exc:
            self._response.conn.close()
            await self.aclose()
            raise _network_timeout(f"the stream sent nothing for {self._timeout:g}s") from exc
        except (asyncio.IncompleteReadError, asyncio.LimitOverrunError, OSError, ValueError) as exc:
            self._response.conn.close()
            await self.aclose()
            raise _network_error(f"the stream was cut: {_why(exc)}") from exc
        except BaseException:
            self._response.conn.close()
            await self.aclose()
            raise
        if not data:
            await self.aclose()
            raise StopAsyncIteration
        return data

    async def aclose(self) -> None:
        """Give the connection back when the body is (or soon is) read to its end, else close it.

        A reader usually stops at the stream's last event, a moment before the body's end (the
        chunked terminator); waiting `DRAIN_GRACE` seconds for at most 64 KiB more keeps the
        connection. Under cancellation, or with a read still in flight, the socket closes at once."""
        if self._closed:
            return
        self._closed = True
        response = self._response
        task = asyncio.current_task()
        if not response.done and not self._reading and not (task is not None and task.cancelling()):
            try:
                async with asyncio.timeout(DRAIN_GRACE):
                    await _read_some(response, MAX_ERROR_READ_BYTES)
            except (TimeoutError, asyncio.IncompleteReadError, asyncio.LimitOverrunError, OSError, ValueError):
                response.conn.close()
        self._transport._release(response)


class Http11Transport(AsyncTransport):
    """Async HTTP/1.1 transport over pooled keep-alive asyncio connections (see module docstring)."""

    def __init__(self, *, max_response_bytes: Union[int, None, Callable[[], Optional[int]]] = MAX_RESPONSE_BYTES,
                 max_idle_per_host: int = 8, idle_timeout: float = 60.0,
                 ssl_context: Optional[ssl.SSLContext] = None) -> None:
        self.max_response_bytes = max_response_bytes
        self.max_idle_per_host = max_idle_per_host
        self.idle_timeout = idle_timeout
        self._ssl = ssl_context
        self._idle: dict[tuple[str, str, int], list[_Conn]] = {}
        self._loop: Optional[asyncio.AbstractEventLoop] = None
        self._encoded: tuple[Any, bytes] = (None, b"")

    # -- connections -----------------------------------------------------------------------------

    def _context(self) -> ssl.SSLContext:
        if self._ssl is None:
            try:
                import certifi

                self._ssl = ssl.create_default_context(cafile=certifi.where())
            except ImportError:  # pragma: no cover - certifi comes with httpx
                self._ssl = ssl.create_default_context()
        return self._ssl

    def _pool_for_loop(self) -> None:
        loop = asyncio.get_running_loop()
        if self._loop is not loop:
            self._idle = {}  # connections of another (finished) loop cannot be used or closed here
            self._loop = loop

    async def _connect(self, key: tuple[str, str, int]) -> _Conn:
        self._pool_for_loop()
        now = time.monotonic()
        idle = self._idle.get(key, [])
        while idle:
            conn = idle.pop()
            if conn.alive() and now - conn.idle_since < self.idle_timeout:
                conn.reused = True
                return conn
            conn.close()
        scheme, host, port = key
        reader, writer = await asyncio.open_connection(
            host, port, ssl=self._context() if scheme == "https" else None,
            server_hostname=host if scheme == "https" else None, limit=MAX_HEADER_BYTES)
        return _Conn(reader, writer, key)

    def _release(self, response: _Response) -> None:
        conn = response.conn
        if not (response.done and response.reusable and conn.alive()) or self._loop is not _running_loop():
            conn.close()
            return
        idle = self._idle.setdefault(conn.key, [])
        if len(idle) >= self.max_idle_per_host:
            conn.close()
            return
        conn.idle_since = time.monotonic()
        idle.append(conn)

    # -- one exchange ------------------------------------------------------------------------------

    def _body(self, payload: dict[str, Any]) -> bytes:
        """Serialised body, reused while the same payload object is retried."""
        if self._encoded[0] is not payload:
            self._encoded = (payload, encode_payload(payload))
        return self._encoded[1]

    @staticmethod
    def _head(method: str, target: str, host: str, headers: dict[str, str], length: int) -> bytes:
        lines = [f"{method} {target} HTTP/1.1", f"Host: {host}"]
        seen = {"host", "content-length", "connection"}
        for name, value in headers.items():
            text = str(value)
            if "\r" in text or "\n" in text or "\r" in name or "\n" in name or ":" in name:
                raise ToolnexusValueError(f"toolnexus: header {name!r} has a line break or colon in it; refused")
            if name.lower() not in seen:
                lines.append(f"{name}: {text}")
        if not any(k.lower() == "content-type" for k in headers):
            lines.append("Content-Type: application/json")
        if not any(k.lower() == "user-agent" for k in headers):
            lines.append("User-Agent: toolnexus")
        lines += [f"Content-Length: {length}", "Connection: keep-alive", "", ""]
        return "\r\n".join(lines).encode("latin-1")

    @staticmethod
    async def _read_head(conn: _Conn) -> _Response:
        """The final response's status and headers; informational replies (any 1xx but `101
        Switching Protocols`, which we never ask for) are skipped, each within the head cap."""
        while True:
            raw = await conn.reader.readuntil(b"\r\n\r\n")
            lines = raw.decode("latin-1").split("\r\n")
            parts = lines[0].split(" ", 2)
            if len(parts) < 2 or not parts[0].startswith("HTTP/1."):
                raise _network_error(f"not an HTTP/1.x response: {lines[0][:80]!r}")
            status = int(parts[1])
            headers: dict[str, str] = {}
            for line in lines[1:]:
                if not line:
                    continue
                name, _, value = line.partition(":")
                key = name.strip().lower()
                headers[key] = f"{headers[key]}, {value.strip()}" if key in headers else value.strip()
            if 100 <= status < 200 and status != 101:  # informational (100 Continue, 103 Early Hints): not the reply
                continue
            return _Response(conn, status, headers)

    async def _exchange(self, url: str, headers: dict[str, str], body: bytes) -> _Response:
        parts = urlsplit(url)
        scheme = parts.scheme.lower()
        if scheme not in ("http", "https") or not parts.hostname:
            raise ToolnexusValueError(f"toolnexus: cannot POST to {url!r}: an http(s) URL with a host is needed")
        port = parts.port or (443 if scheme == "https" else 80)
        key = (scheme, parts.hostname, port)
        host = parts.hostname if parts.port is None else f"{parts.hostname}:{parts.port}"
        target = (parts.path or "/") + (f"?{parts.query}" if parts.query else "")
        head = self._head("POST", target, host, headers, len(body))
        for attempt in (1, 2):
            conn = await self._connect(key)
            try:
                conn.writer.write(head + body)
                await conn.writer.drain()
                return await self._read_head(conn)
            except (asyncio.IncompleteReadError, ConnectionError, OSError) as exc:
                conn.close()
                nothing_arrived = (not isinstance(exc, (asyncio.IncompleteReadError, NetworkError))
                                   or isinstance(exc, asyncio.IncompleteReadError) and not exc.partial)
                if attempt == 1 and conn.reused and nothing_arrived:
                    continue  # the server had closed this idle connection: one fresh try
                raise
            except BaseException:
                conn.close()
                raise
        raise AssertionError("unreachable")

    async def _send(self, url: str, headers: dict[str, str], payload: dict[str, Any], timeout: float) -> _Response:
        try:
            async with asyncio.timeout(timeout if timeout and timeout > 0 else None):
                response = await self._exchange(url, headers, self._body(payload))
                if response.status // 100 == 2:
                    return response
                try:
                    text = (await _read_some(response, MAX_ERROR_READ_BYTES)).decode("utf-8", errors="replace")
                except BaseException:
                    response.conn.close()
                    raise
                self._release(response)  # kept only when the whole (small) error body was read
        except TimeoutError as exc:
            raise _network_timeout(f"no complete reply within {timeout:g}s") from exc
        except ToolnexusValueError:
            raise
        except (asyncio.IncompleteReadError, asyncio.LimitOverrunError, ValueError, OSError) as exc:
            if isinstance(exc, (NetworkError, NetworkTimeout)):
                raise
            raise _network_error(_why(exc)) from exc
        raise ProviderError(response.status, text, response.headers.get("retry-after"))

    async def post(self, url: str, headers: dict[str, str], payload: dict[str, Any], timeout: float) -> Any:
        response = await self._send(url, headers, payload, timeout)
        cap = self.max_response_bytes() if callable(self.max_response_bytes) else self.max_response_bytes
        try:
            async with asyncio.timeout(timeout if timeout and timeout > 0 else None):
                raw = await response.read(cap, url)
        except TimeoutError as exc:
            response.conn.close()
            raise _network_timeout(f"the reply did not finish within {timeout:g}s") from exc
        except ResponseTooLarge:
            response.conn.close()
            raise
        except (asyncio.IncompleteReadError, ValueError, OSError) as exc:
            response.conn.close()
            raise _network_error(f"the reply was cut: {_why(exc)}") from exc
        except BaseException:
            response.conn.close()
            raise
        self._release(response)
        return decode_json_body(raw, url)

    async def open(self, url: str, headers: dict[str, str], payload: dict[str, Any], timeout: float) -> _Stream:
        return _Stream(self, await self._send(url, headers, payload, timeout), timeout, url)

    async def aclose(self) -> None:
        """Close the idle connections (of the current loop)."""
        idle, self._idle = self._idle, {}
        if self._loop is _running_loop():
            for conns in idle.values():
                for conn in conns:
                    conn.close()


async def _read_some(response: _Response, limit: int) -> bytes:
    body = bytearray()
    while len(body) < limit:
        data = await response.chunk()
        if not data:
            break
        body += data
    return bytes(body[:limit])


def _why(exc: BaseException) -> str:
    """A network failure in a few words ("connection refused"); the client adds the endpoint."""
    if isinstance(exc, asyncio.IncompleteReadError):
        return f"the connection closed after {len(exc.partial)} bytes of an incomplete message"
    if isinstance(exc, OSError) and exc.errno:
        return os.strerror(exc.errno).lower()
    return f"{type(exc).__name__}: {exc}" if str(exc) else type(exc).__name__


def _running_loop() -> Optional[asyncio.AbstractEventLoop]:
    try:
        return asyncio.get_running_loop()
    except RuntimeError:
        return None
