"""One HTTP exchange for HTTP-backed tools: send a request, map the outcome to a `ToolResult`.

`http_tool` and the OpenAPI importer build requests differently but share everything after that:
the pooled `httpx.AsyncClient`, `${ENV}` header expansion with its unset-variable warning (the
rule itself is `toolnexus._env`), how argument values are written into query strings and form
bodies, the response-size cap, charset decoding, the result modes and the stable transport-error
texts. This module holds exactly that shared part; it knows nothing about placeholders, schemas
or OpenAPI. The pooled client (`shared_client`) also carries the A2A tools' requests.

Transport errors (pinned by this package, `metadata["error"]` in brackets):

    request timed out after {seconds}s                   [timeout]
    could not resolve host {host}                        [dns]
    could not connect to {host}:{port} ({reason})        [connect]  e.g. "(connection refused)"
    connection to {host}:{port} failed: {reason}         [network]  dropped / malformed response
    unsupported URL {url}: only http and https work      [url]
    too many redirects                                   [redirect]
    request cancelled                                    [cancelled]  ctx.signal fired

A response body longer than the cap is cut at a character boundary and followed by
`\\n[truncated: response body exceeds {cap} bytes]`, with `metadata["truncated"] = True`.

Credentials: the shared client follows redirects, but a redirect that leaves the origin (scheme,
host, port; an http → https upgrade of the same host counts as the same origin) forwards only
harmless headers (`toolnexus._redact.SAFE_HEADERS`: `Accept`, `Content-Type`, `User-Agent`...), so
an `X-Api-Key` or `Authorization` never reaches a host it was not configured for
(`drop_credentials_across_origins`, a request hook that also guards the MCP remote client). And
a tool's output never shows the values of its configured credential headers (any header whose
name looks like one, and every header whose value came from `${ENV}`), even when the upstream
echoes the request back in its reply: `OutgoingRequest.secrets` are masked as `«redacted»`.
"""

from __future__ import annotations

import asyncio
import codecs
import errno
import json
import os
import socket
import threading
import weakref
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from http.cookiejar import CookieJar, DefaultCookiePolicy
from typing import Any, Optional
from urllib.parse import urlencode

import httpx

from . import _diag
from ._abort import Aborted, unless_aborted
from ._env import ENV_REF, expand_headers
from ._redact import SAFE_HEADERS, credential_values, scrub
from .errors import ToolnexusValueError
from .types import ToolContext, ToolResult

DEFAULT_TIMEOUT = 30.0
DEFAULT_MAX_BODY_BYTES = 1 << 20
RESULT_MODES = ("text", "json", "status+text")

# ---------------------------------------------------------------------------- pooled client

_clients: "weakref.WeakKeyDictionary[asyncio.AbstractEventLoop, httpx.AsyncClient]" = weakref.WeakKeyDictionary()
_clients_lock = threading.Lock()


_ORIGIN_KEY = "toolnexus.origin"


def _origin_of(url: Any) -> tuple[str, str, Optional[int]]:
    scheme = str(url.scheme).lower()
    return scheme, str(url.host).lower(), url.port or {"http": 80, "https": 443}.get(scheme)


async def drop_credentials_across_origins(request: Any) -> None:
    """httpx request hook: on a redirect hop that left the first hop's origin, keep only
    `SAFE_HEADERS`. (httpx carries a request's `extensions` over to its redirects, which is how
    the first hop's origin is remembered.)"""
    here = _origin_of(request.url)
    first = request.extensions.get(_ORIGIN_KEY)
    if first is None:
        request.extensions[_ORIGIN_KEY] = here
        return
    upgrade = first[0] == "http" and here[0] == "https" and first[1] == here[1]
    if here != first and not upgrade:
        for name in [k for k in request.headers.keys() if k.lower() not in SAFE_HEADERS]:
            del request.headers[name]


def _new_client() -> httpx.AsyncClient:
    # Follow redirects and honour proxy env vars like the stdlib did; never keep cookies, so one
    # tool's Set-Cookie cannot leak into another tool's requests through the shared pool.
    no_cookies = CookieJar(policy=DefaultCookiePolicy(allowed_domains=[]))
    return httpx.AsyncClient(follow_redirects=True, timeout=None, cookies=no_cookies,
                             event_hooks={"request": [drop_credentials_across_origins]})


def shared_client() -> httpx.AsyncClient:
    """The keep-alive pooled client of the running event loop, created on first use.

    One per loop because an `httpx.AsyncClient` is bound to the loop that opened its connections.
    """
    loop = asyncio.get_running_loop()
    with _clients_lock:
        client = _clients.get(loop)
        if client is None or client.is_closed:
            client = _new_client()
            _clients[loop] = client
        return client


async def aclose_shared_clients() -> None:
    """Close the running loop's shared client (idempotent); the next request opens a fresh one.

    Clients of other loops can only be closed from their own loop.
    """
    with _clients_lock:
        client = _clients.pop(asyncio.get_running_loop(), None)
    if client is not None:
        await client.aclose()


# ---------------------------------------------------------------------------- request pieces


@dataclass
class OutgoingRequest:
    """A fully built request, ready for `send`."""

    method: str
    url: str
    headers: dict[str, str]
    content: Optional[bytes] = None
    secrets: list[str] = field(default_factory=list)  # values the tool's output must never show


def expand_env_headers(headers: Optional[Mapping[str, str]], label: str) -> dict[str, str]:
    """Header values with `${VAR}` expanded at call time (`toolnexus._env`).

    An unset variable becomes `""` and is reported once per variable name; values never are.
    """

    def unset(name: str, header: str) -> None:
        _diag.warn_once(
            f"http-env:{name}",
            f'[toolnexus] HTTP tool "{label}": environment variable {name} is not set'
            f' \u2014 header "{header}" sent with it empty',
        )

    return expand_headers(headers, unset)


def header_secrets(configured: Optional[Mapping[str, Any]], expanded: Mapping[str, str]) -> list[str]:
    """The header values a tool must never echo: credential-named ones, and any from `${ENV}`."""
    from_env = {str(k) for k, v in (configured or {}).items() if ENV_REF.search(str(v))}
    return credential_values(expanded) + credential_values(
        {k: v for k, v in expanded.items() if k in from_env}, all_values=True)


def set_default_content_type(headers: dict[str, str], content_type: Optional[str]) -> None:
    """Add `Content-Type` unless the caller set one under any capitalisation."""
    if content_type and not any(k.lower() == "content-type" for k in headers):
        headers["Content-Type"] = content_type


def render_scalar(value: Any) -> str:
    """A value as text for a URL or form field: strings verbatim, everything else as JSON."""
    if isinstance(value, str):
        return value
    return json.dumps(value, separators=(",", ":"), ensure_ascii=False)


def query_pairs(items: Iterable[tuple[str, Any]]) -> list[tuple[str, str]]:
    """Name/value pairs for `urlencode`: `None` omitted, lists repeat the name once per element."""
    pairs: list[tuple[str, str]] = []
    for name, value in items:
        values = value if isinstance(value, (list, tuple)) else [value]
        pairs.extend((name, render_scalar(v)) for v in values if v is not None)
    return pairs


def append_query(url: str, pairs: list[tuple[str, str]]) -> str:
    """`url` plus the encoded pairs, joined with `&` when the URL already has a query."""
    if not pairs:
        return url
    return url + ("&" if "?" in url else "?") + urlencode(pairs)


def encode_body(mode: str, payload: Any, headers: dict[str, str]) -> bytes:
    """Encode a request body as `json`, `form` (payload must be a mapping) or `raw` (text).

    Sets the matching default `Content-Type`; raises `TypeError`/`ValueError` for payloads that
    cannot be encoded.
    """
    if mode == "json":
        set_default_content_type(headers, "application/json")
        return json.dumps(payload).encode("utf-8")
    if mode == "form":
        if not isinstance(payload, Mapping):
            raise ToolnexusValueError(f"a form body needs an object, got {type(payload).__name__}")
        set_default_content_type(headers, "application/x-www-form-urlencoded")
        return urlencode(query_pairs(payload.items())).encode("ascii")
    set_default_content_type(headers, "text/plain; charset=utf-8")
    return str(payload).encode("utf-8")


def argument_error(text: str) -> ToolResult:
    """An error result for bad model arguments; no request was sent."""
    return ToolResult(output=text, is_error=True, metadata={"error": "argument"})


def check_limits(label: str, timeout: Optional[float], max_body_bytes: Optional[int]) -> None:
    """Reject a non-positive timeout or body cap when the tool is built, not on the first call."""
    if timeout is not None and not (isinstance(timeout, (int, float)) and timeout > 0):
        raise ToolnexusValueError(f'{label}: timeout must be a positive number of seconds or None, got {timeout!r}')
    if max_body_bytes is not None and not (
        isinstance(max_body_bytes, int) and not isinstance(max_body_bytes, bool) and max_body_bytes > 0
    ):
        raise ToolnexusValueError(f"{label}: max_body_bytes must be a positive int or None, got {max_body_bytes!r}")


# ---------------------------------------------------------------------------- the exchange


@dataclass
class _Response:
    status: int
    body: bytes
    truncated: bool
    charset: Optional[str]


async def _perform(req: OutgoingRequest, timeout: float, cap: Optional[int]) -> _Response:
    # httpx's timeout is per socket operation; asyncio.timeout adds the overall deadline so a
    # server trickling bytes cannot hold the call forever.
    async with asyncio.timeout(timeout):
        client = shared_client()
        async with client.stream(
            req.method, req.url, headers=req.headers, content=req.content, timeout=timeout
        ) as resp:
            chunks: list[bytes] = []
            size = 0
            truncated = False
            async for chunk in resp.aiter_bytes():
                chunks.append(chunk)
                size += len(chunk)
                if cap is not None and size > cap:
                    truncated = True
                    break
            body = b"".join(chunks)
            if truncated:
                body = body[:cap]
            return _Response(resp.status_code, body, truncated, resp.charset_encoding)


def _decode(body: bytes, charset: Optional[str], truncated: bool) -> str:
    try:
        decoder = codecs.getincrementaldecoder(charset or "utf-8")(errors="replace")
    except LookupError:
        decoder = codecs.getincrementaldecoder("utf-8")(errors="replace")
    # final=False drops a multi-byte character the cap cut in half instead of mangling it.
    return decoder.decode(body, final=not truncated)


def _format(resp: _Response, result_mode: str, cap: Optional[int], secrets: list[str]) -> ToolResult:
    text = scrub(_decode(resp.body, resp.charset, resp.truncated), secrets)
    metadata: dict[str, Any] = {"status": resp.status}
    if not 200 <= resp.status < 300:
        output, is_error = f"HTTP {resp.status}: {text}", True
    elif result_mode == "status+text":
        output, is_error = f"{resp.status}\n{text}", False
    elif result_mode == "json":
        try:
            output = json.dumps(json.loads(text))
        except (ValueError, RecursionError):
            output = json.dumps(text)
        is_error = False
    else:
        output, is_error = text, False
    if resp.truncated:
        output += f"\n[truncated: response body exceeds {cap} bytes]"
        metadata["truncated"] = True
    return ToolResult(output=output, is_error=is_error, metadata=metadata)


def _root_causes(exc: BaseException) -> Iterable[BaseException]:
    seen: set[int] = set()
    current: Optional[BaseException] = exc
    while current is not None and id(current) not in seen:
        seen.add(id(current))
        yield current
        current = current.__cause__ or current.__context__


def _transport_error(exc: Exception, url: str, timeout: float) -> ToolResult:
    def fail(text: str, kind: str) -> ToolResult:
        return ToolResult(output=text, is_error=True, metadata={"error": kind})

    if isinstance(exc, (TimeoutError, httpx.TimeoutException)):
        return fail(f"request timed out after {timeout:g}s", "timeout")
    if isinstance(exc, (httpx.UnsupportedProtocol, httpx.InvalidURL)):
        return fail(f"unsupported URL {url}: only http and https work", "url")
    if isinstance(exc, httpx.TooManyRedirects):
        return fail("too many redirects", "redirect")
    try:
        parsed = httpx.URL(url)
        host, port = parsed.host, parsed.port or (443 if parsed.scheme == "https" else 80)
    except httpx.InvalidURL:
        return fail(f"unsupported URL {url}: only http and https work", "url")
    causes = list(_root_causes(exc))
    if any(isinstance(c, socket.gaierror) for c in causes):
        return fail(f"could not resolve host {host}", "dns")
    if isinstance(exc, httpx.ConnectError):
        os_error = next((c for c in causes if isinstance(c, OSError) and c.errno), None)
        if os_error is None:
            reason = "connection failed"
        elif os_error.errno == errno.ECONNREFUSED:
            reason = "connection refused"
        else:
            reason = os.strerror(os_error.errno or 0).lower()
        return fail(f"could not connect to {host}:{port} ({reason})", "connect")
    if isinstance(exc, httpx.RemoteProtocolError):
        reason = "the server closed the connection or sent an invalid response"
    elif isinstance(exc, httpx.DecodingError):
        reason = "the response body could not be decoded"
    else:
        reason = "the connection broke during the exchange"
    return fail(f"connection to {host}:{port} failed: {reason}", "network")


def _cancelled() -> ToolResult:
    return ToolResult(output="request cancelled", is_error=True, metadata={"error": "cancelled"})


async def _exchange(req: OutgoingRequest, timeout: float, cap: Optional[int], result_mode: str) -> ToolResult:
    try:
        resp = await _perform(req, timeout, cap)
    except (httpx.HTTPError, httpx.InvalidURL, TimeoutError) as exc:
        return _transport_error(exc, req.url, timeout)
    except UnicodeEncodeError:
        return argument_error("header values must be ASCII text; percent-encode or drop non-ASCII characters")
    return _format(resp, result_mode, cap, req.secrets)


async def send(
    req: OutgoingRequest,
    *,
    ctx: Optional[ToolContext] = None,
    timeout: Optional[float] = None,
    max_body_bytes: Optional[int],
    result_mode: str,
) -> ToolResult:
    """Perform `req` and map the outcome; never raises except `CancelledError`.

    The deadline is `ctx.timeout`, else the tool's `timeout`, else `DEFAULT_TIMEOUT`. Cancelling
    the calling task aborts the request (the connection is dropped), and so does `ctx.signal`
    firing (`toolnexus._abort`); a signal that fired before the call sends nothing.
    """
    if ctx is not None and ctx.timeout is not None:
        timeout = ctx.timeout
    elif timeout is None:
        timeout = DEFAULT_TIMEOUT
    signal = ctx.signal if ctx is not None else None
    try:
        return await unless_aborted(_exchange(req, timeout, max_body_bytes, result_mode), signal)
    except Aborted:
        return _cancelled()
