"""What keeps the inbox safe by default: keys, signed values, CSRF, security headers, rate limits.

- Keys: one secret (the host's, or random per process) gives each use its own key (`derive`), so
  a session cookie can never pass for a link, nor a link for a CSRF token.
- `Signed`: a JSON payload with an HMAC-SHA256 tag, URL-safe (`<payload>.<tag>`); verified in
  constant time; the payload carries its own expiry (`e`, epoch seconds).
- CSRF: a random cookie (`HttpOnly`, `SameSite=Strict`) and, in every form, the HMAC of that
  cookie under the CSRF key (a signed double submit): a page of another site can neither read
  the cookie nor compute the field. The Origin check of `toolnexus.serve`'s `HostGuard` runs
  before it.
- Headers on every response: a CSP with no inline script or style (the page's script and style
  are static files), `frame-ancestors 'none'` and `X-Frame-Options: DENY`, `nosniff`,
  `Referrer-Policy: same-origin` (a link's token never leaks to another site; `no-referrer` would make browsers send
  `Origin: null` with our own forms), `no-store`.
- `RateLimit`: a token bucket per client address (bounded: the least recently seen are
  forgotten past `max_clients`), for the link and login endpoints.

Nothing here logs anything; no secret is ever put in an error message.
"""

from __future__ import annotations

import base64
import hashlib
import hmac
import json
import os
import time
from collections import OrderedDict
from typing import Any, Optional

SECURITY_HEADERS: list[tuple[bytes, bytes]] = [
    (b"content-security-policy", b"default-src 'none'; script-src 'self'; style-src 'self'; img-src 'self' data:; "
                                 b"connect-src 'self'; form-action 'self'; frame-ancestors 'none'; base-uri 'none'"),
    (b"x-frame-options", b"DENY"),
    (b"x-content-type-options", b"nosniff"),
    (b"referrer-policy", b"same-origin"),
    (b"cross-origin-opener-policy", b"same-origin"),
    (b"permissions-policy", b"camera=(), microphone=(), geolocation=()"),
]


def b64(raw: bytes) -> str:
    return base64.urlsafe_b64encode(raw).decode().rstrip("=")


def unb64(text: str) -> bytes:
    return base64.urlsafe_b64decode(text + "=" * (-len(text) % 4))


def derive(secret: bytes, purpose: str) -> bytes:
    """The key of one use of `secret` (sessions, CSRF, links, ...)."""
    return hmac.new(secret, b"toolnexus-inbox:" + purpose.encode(), hashlib.sha256).digest()


class Signed:
    """`<payload>.<tag>` values under one key (see the module docstring)."""

    def __init__(self, key: bytes) -> None:
        self._key = key

    def _tag(self, body: str) -> str:
        return b64(hmac.new(self._key, body.encode(), hashlib.sha256).digest())

    def dumps(self, payload: dict[str, Any]) -> str:
        body = b64(json.dumps(payload, separators=(",", ":"), sort_keys=True).encode())
        return f"{body}.{self._tag(body)}"

    def loads(self, token: str, *, now: Optional[float] = None) -> Optional[dict[str, Any]]:
        """The payload, or None when the tag is wrong, the value malformed, or it expired (`e`)."""
        body, sep, tag = (token or "").partition(".")
        if not sep or len(token) > 4096 or not hmac.compare_digest(self._tag(body).encode(), tag.encode()):
            return None
        try:
            payload = json.loads(unb64(body))
        except (ValueError, TypeError):
            return None
        if not isinstance(payload, dict):
            return None
        expires = payload.get("e")
        if isinstance(expires, (int, float)) and expires <= (time.time() if now is None else now):
            return None
        return payload


def new_csrf_cookie() -> str:
    return b64(os.urandom(24))


def csrf_field(key: bytes, cookie: str) -> str:
    return b64(hmac.new(key, cookie.encode(), hashlib.sha256).digest())


def csrf_ok(key: bytes, cookie: Optional[str], field: Optional[str]) -> bool:
    if not cookie or not field:
        return False
    return hmac.compare_digest(csrf_field(key, cookie).encode(), field.encode())


class RateLimit:
    """`allow(client)`: a token bucket of `burst` tries refilled at `per_minute` a minute."""

    def __init__(self, per_minute: float = 10.0, burst: int = 10, max_clients: int = 4096,
                 clock: Any = time.monotonic) -> None:
        self.rate = per_minute / 60.0
        self.burst = float(burst)
        self.max_clients = max_clients
        self._clock = clock
        self._buckets: "OrderedDict[str, tuple[float, float]]" = OrderedDict()

    def allow(self, client: str) -> tuple[bool, float]:
        """(allowed, seconds until the next try would be allowed)."""
        now = self._clock()
        tokens, seen = self._buckets.pop(client, (self.burst, now))
        tokens = min(self.burst, tokens + (now - seen) * self.rate)
        allowed = tokens >= 1.0
        if allowed:
            tokens -= 1.0
        self._buckets[client] = (tokens, now)
        while len(self._buckets) > self.max_clients:
            self._buckets.popitem(last=False)
        wait = 0.0 if allowed else (1.0 - tokens) / self.rate if self.rate > 0 else 3600.0
        return allowed, wait
