"""Signed answer links: approve or reject one request, as one person, once, before they expire.

`LinkSigner(secret, base_url)` mints `<base_url>/link/<request id>/<token>` for a decision
(`approve` or `reject`) bound to one request and one identity; the token is an HMAC-SHA256-signed
payload `{r: request id, d: decision, i: identity, e: expiry, n: nonce}` under a key derived from
`secret` (the same secret in the notifier that mints links and the inbox that honours them).

What a link does, and does not do:
- a GET shows a confirmation page and changes nothing (a chat's link previewer, a mail scanner
  or a prefetching browser fetching it approves nothing); the page's button POSTs, with a CSRF
  token, and that answers — without a login: the link is the credential;
- it is refused when its signature is wrong, when it is used on another request's path, after it
  expired, and the second time (its nonce is recorded in the store, compare-and-set: of two
  clicks exactly one counts, across processes);
- the answer records `by=<the link's identity>` and `via="link"`; the page says plainly what was
  done ("Approved: ... — the run continues").

`verify` only checks the token; using it (single use, the answer) is the inbox's.
"""

from __future__ import annotations

import os
import time
from dataclasses import dataclass
from typing import Optional
from urllib.parse import quote

from ..errors import ToolnexusValueError
from ._security import Signed, b64, derive

LINK_DECISIONS = ("approve", "reject")
LINKS_NAMESPACE = "toolnexus.inbox.links"  # not a module path: a store namespace (used links, one per nonce)


@dataclass(frozen=True)
class LinkClaim:
    """What a valid link says."""

    request_id: str
    decision: str
    identity: str
    expires: float
    nonce: str


def secret_bytes(secret: object, what: str) -> bytes:
    if isinstance(secret, str):
        secret = secret.encode()
    if not isinstance(secret, bytes) or len(secret) < 16:
        raise ToolnexusValueError(f"toolnexus.inbox: {what} must be at least 16 bytes (or characters) of secret")
    return secret


class LinkSigner:
    """Mints and checks signed answer links (see the module docstring)."""

    def __init__(self, secret: "bytes | str", base_url: Optional[str] = None, *, ttl: float = 24 * 3600) -> None:
        self._signed = Signed(derive(secret_bytes(secret, "the link secret"), "links"))
        if base_url is not None and (not isinstance(base_url, str) or not base_url.startswith(("http://", "https://"))):
            raise ToolnexusValueError(f"toolnexus.inbox: a link's base_url must be the inbox's http(s) address, got "
                                      f"{base_url!r}")
        if isinstance(ttl, bool) or not isinstance(ttl, (int, float)) or ttl <= 0:
            raise ToolnexusValueError(f"toolnexus.inbox: a link's ttl must be seconds > 0, got {ttl!r}")
        self.base_url = base_url.rstrip("/") if base_url else None  # None: checks links, mints no URL
        self.ttl = float(ttl)

    def __repr__(self) -> str:
        return f"LinkSigner({self.base_url!r}, ttl={self.ttl:g})"

    def token(self, request_id: str, decision: str, identity: str, *, now: Optional[float] = None,
              ttl: Optional[float] = None) -> str:
        if decision not in LINK_DECISIONS:
            raise ToolnexusValueError(f"toolnexus.inbox: a link decides approve or reject, got {decision!r}")
        if not identity:
            raise ToolnexusValueError("toolnexus.inbox: a link is bound to an identity (who answers through it)")
        now = time.time() if now is None else now
        return self._signed.dumps({"r": request_id, "d": decision, "i": identity,
                                   "e": round(now + (self.ttl if ttl is None else ttl), 3), "n": b64(os.urandom(12))})

    def url(self, request_id: str, decision: str, identity: str, *, now: Optional[float] = None,
            ttl: Optional[float] = None) -> str:
        """The link that answers `request_id` with `decision` as `identity`."""
        if self.base_url is None:
            raise ToolnexusValueError("toolnexus.inbox: this LinkSigner has no base_url (the inbox's address) to "
                                      "make links with")
        token = self.token(request_id, decision, identity, now=now, ttl=ttl)
        return f"{self.base_url}/link/{quote(request_id, safe='')}/{token}"

    def verify(self, token: str, request_id: str, *, now: Optional[float] = None) -> Optional[LinkClaim]:
        """The link's claim, or None when it is forged, expired or for another request."""
        payload = self._signed.loads(token, now=now)
        if payload is None or payload.get("r") != request_id or payload.get("d") not in LINK_DECISIONS:
            return None
        if not isinstance(payload.get("i"), str) or not isinstance(payload.get("n"), str):
            return None
        return LinkClaim(request_id, payload["d"], payload["i"], float(payload["e"]), payload["n"])

    def expired(self, token: str, *, now: Optional[float] = None) -> bool:
        """The token is genuine but past its expiry (to say so rather than "invalid")."""
        return self._signed.loads(token, now=0.0) is not None and self._signed.loads(token, now=now) is None
