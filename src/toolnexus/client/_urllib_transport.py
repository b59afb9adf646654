"""`UrllibTransport`: the stdlib transport, kept for compatibility (a new connection per request).

Synchronous — the client runs it on its bounded transport pool. Bounded and careful with
credentials: a 2xx body is read only up to `max_response_bytes` (`ResponseTooLarge` above it),
and a redirect to another origin carries no header but the harmless ones (`Accept`,
`Content-Type`, `User-Agent`...), so the API key never travels to a host it was not meant for.
"""

from __future__ import annotations

import urllib.error
import urllib.parse
import urllib.request
from typing import Any, Optional

from ._errors import MAX_ERROR_READ_BYTES, ProviderError
from ._transport import MAX_RESPONSE_BYTES, SAFE_REDIRECT_HEADERS, decode_json_body, encode_payload, too_large


def _origin(url: str) -> tuple[str, str, Optional[int]]:
    parts = urllib.parse.urlsplit(url)
    default = {"http": 80, "https": 443}.get(parts.scheme.lower())
    return parts.scheme.lower(), (parts.hostname or "").lower(), parts.port or default


class _CredentialSafeRedirects(urllib.request.HTTPRedirectHandler):
    """urllib's redirects, minus every non-harmless header when the redirect leaves the origin."""

    def redirect_request(self, req: Any, fp: Any, code: int, msg: str, headers: Any, newurl: str) -> Any:
        new = super().redirect_request(req, fp, code, msg, headers, newurl)
        if new is not None and _origin(newurl) != _origin(req.full_url):
            for name in list(new.headers):
                if name.lower() not in SAFE_REDIRECT_HEADERS:
                    del new.headers[name]
            new.unredirected_hdrs.clear()
        return new


_OPENER = urllib.request.build_opener(_CredentialSafeRedirects)


class UrllibTransport:
    """Stdlib transport: a new connection per request. Kept for compatibility; sync, may block."""

    def __init__(self, *, max_response_bytes: Optional[int] = MAX_RESPONSE_BYTES) -> None:
        self.max_response_bytes = max_response_bytes

    def _request(self, url: str, headers: dict[str, str], payload: dict[str, Any], timeout: float) -> Any:
        req = urllib.request.Request(url, data=encode_payload(payload), headers=headers, method="POST")
        try:
            return _OPENER.open(req, timeout=timeout)
        except urllib.error.HTTPError as e:
            body = e.read(MAX_ERROR_READ_BYTES).decode("utf-8", errors="replace")
            e.close()
            raise ProviderError(e.code, body, e.headers.get("Retry-After")) from None

    def post(self, url: str, headers: dict[str, str], payload: dict[str, Any], timeout: float) -> dict[str, Any]:
        cap = self.max_response_bytes
        with self._request(url, headers, payload, timeout) as resp:
            raw = resp.read() if cap is None else resp.read(cap + 1)
            if cap is not None and len(raw) > cap:
                raise too_large(url, cap)
            data: dict[str, Any] = decode_json_body(raw, url)
            return data

    def open(self, url: str, headers: dict[str, str], payload: dict[str, Any], timeout: float) -> Any:
        return self._request(url, headers, payload, timeout)
