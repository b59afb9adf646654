"""Guards every served route applies before doing work: Host/Origin, bearer token, body cap.

DNS rebinding: a web page on `evil.example` whose name is re-pointed at 127.0.0.1 can make the
browser talk to a loopback server, but the browser still sends `Host: evil.example` (and
`Origin: http://evil.example`). So:
- `Host` must be an IP literal, `localhost`, or a name in `allowed_hosts` (`"*"` = any name).
  A rebinding attack always needs a DNS name, so IP literals are safe to accept on any bind and
  keep `http://<lan-ip>:<port>/mcp` working. A server reached by another name lists it.
  A missing `Host` (HTTP/1.0 tools) is not a browser and is let through. Failure ⇒ 421.
- `Origin`, when present (browsers), must be a loopback origin, name the same host as `Host`, or
  be listed in `allowed_origins` (`"*"` = any). `Origin: null` is refused. Failure ⇒ 403.
Bearer auth (`auth_token`): `Authorization: Bearer <token>`, compared in constant time ⇒ else 401.
Body cap: a declared `Content-Length` over the cap is refused before reading; a body that grows
past it while streaming is refused too (413). Not here: TLS, rate limiting.
"""

from __future__ import annotations

import hmac
import ipaddress
from collections.abc import Awaitable, Callable, Iterable, MutableMapping
from typing import Any, Optional
from urllib.parse import urlsplit

from ..errors import ToolnexusError

__all__ = ["BodyTooLarge", "ClientGone", "HostGuard", "bearer_ok", "header", "read_body"]

Message = MutableMapping[str, Any]  # an ASGI message


class BodyTooLarge(ToolnexusError):
    """The request body is over the cap."""


class ClientGone(ToolnexusError):
    """The client disconnected before the body was complete."""


def header(scope: dict[str, Any], name: bytes) -> Optional[str]:
    """The first value of header `name` (lower-case bytes) in an ASGI scope, or None."""
    for key, value in scope.get("headers") or []:
        if key == name:
            return value.decode("latin-1")
    return None


def _hostname(host_header: str) -> str:
    """`host[:port]` / `[v6]:port` → the bare, lower-case host name."""
    host = host_header.strip().lower()
    if host.startswith("["):
        return host[1 : host.find("]")] if "]" in host else host[1:]
    if host.count(":") == 1:
        host = host.rsplit(":", 1)[0]
    return host


def _is_ip(name: str) -> bool:
    try:
        ipaddress.ip_address(name)
    except ValueError:
        return False
    return True


def _is_loopback(name: str) -> bool:
    if name == "localhost":
        return True
    try:
        return ipaddress.ip_address(name).is_loopback
    except ValueError:
        return False


class HostGuard:
    """The DNS-rebinding check (see the module docstring)."""

    def __init__(self, allowed_hosts: Optional[Iterable[str]] = None, allowed_origins: Optional[Iterable[str]] = None):
        self._hosts = {h.strip().lower() for h in allowed_hosts or []}
        self._origins = {o.strip().lower().rstrip("/") for o in allowed_origins or []}

    def _host_ok(self, raw: str) -> bool:
        name = _hostname(raw)
        return (
            "*" in self._hosts or raw.strip().lower() in self._hosts or name in self._hosts
            or name == "localhost" or _is_ip(name)
        )

    def _origin_ok(self, origin: str, host: Optional[str]) -> bool:
        origin = origin.strip().lower().rstrip("/")
        if "*" in self._origins or origin in self._origins:
            return True
        parts = urlsplit(origin)
        if parts.scheme not in ("http", "https") or not parts.hostname:
            return False
        return _is_loopback(parts.hostname) or (host is not None and parts.hostname == _hostname(host))

    def refusal(self, scope: dict[str, Any]) -> Optional[tuple[int, str]]:
        """None when the request may proceed, else (status, body text)."""
        host = header(scope, b"host")
        if host is not None and not self._host_ok(host):
            return 421, "invalid Host header"
        origin = header(scope, b"origin")
        if origin is not None and not self._origin_ok(origin, host):
            return 403, "invalid Origin header"
        return None


def bearer_ok(scope: dict[str, Any], token: str) -> bool:
    """`Authorization: Bearer <token>` present and equal (constant time)."""
    value = header(scope, b"authorization") or ""
    scheme, _, given = value.partition(" ")
    return scheme.lower() == "bearer" and hmac.compare_digest(given.strip().encode(), token.encode())


async def read_body(scope: dict[str, Any], receive: Callable[[], Awaitable[Message]], limit: int) -> bytes:
    """The whole request body, at most `limit` bytes (raises `BodyTooLarge` / `ClientGone`)."""
    declared = header(scope, b"content-length")
    if declared is not None and declared.strip().isdigit() and int(declared) > limit:
        raise BodyTooLarge()
    chunks: list[bytes] = []
    size = 0
    while True:
        message = await receive()
        if message.get("type") == "http.disconnect":
            raise ClientGone()
        chunk = message.get("body", b"")
        size += len(chunk)
        if size > limit:
            raise BodyTooLarge()
        chunks.append(chunk)
        if not message.get("more_body", False):
            return b"".join(chunks)
