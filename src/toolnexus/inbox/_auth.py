"""Who is looking at the inbox: a login is required, in one of three ways.

- `TokenAuth(token)`: a shared token; the login page asks for it and for the person's name (the
  name is what answers record as `by` — with one shared token it is taken on trust, so a team
  that relies on the two-person rule gives each person a token of their own:
  `TokenAuth({"alice": "...", "bob": "..."})`, and the token then says who is logging in). A login
  becomes a signed session cookie (`HttpOnly`, `SameSite=Strict`, `Secure` over https), valid for
  `session_ttl` seconds.
- `HeaderAuth("X-Forwarded-Email")`: an OIDC / OAuth proxy in front of the inbox (oauth2-proxy,
  a cloud load balancer's sign-in, ...) has authenticated the person and names them in a header.
  The header is trusted only when the connection comes from one of `trusted_proxies` (default:
  this machine), and only because the host configured it: without `HeaderAuth` the header means
  nothing. The proxy must set the header itself, overwriting any the browser sent.
- `CallbackAuth(fn)`: the host's own sign-in, for an inbox mounted in the host's app: `fn(scope)`
  (sync or async) returns the identity of the ASGI request, or None.

Every strategy answers one question, `await auth.identify(scope, session)` → identity or None;
the app turns None into the login page (token) or a 401 saying how to sign in.
"""

from __future__ import annotations

import hmac
import inspect
import ipaddress
from collections.abc import Iterable, Mapping
from typing import Any, Callable, Optional, Union

from ..errors import ToolnexusTypeError, ToolnexusValueError


class InboxAuth:
    """A login strategy (see the module docstring). `login_form`: the inbox shows its own login page."""

    login_form: bool = False
    #: what a 401 page tells a person who is not signed in
    how_to_sign_in: str = "Sign in first."

    async def identify(self, scope: dict[str, Any], session: Optional[str]) -> Optional[str]:
        """The identity of this request (`session`: the identity a valid session cookie names)."""
        raise NotImplementedError


class TokenAuth(InboxAuth):
    """A shared token (the login asks for a name too), or one token per identity."""

    login_form = True
    how_to_sign_in = "Log in with the inbox's access token."

    def __init__(self, tokens: Union[str, Mapping[str, str]], *, session_ttl: float = 12 * 3600) -> None:
        if isinstance(tokens, str):
            if len(tokens) < 8:
                raise ToolnexusValueError("toolnexus.inbox: the shared token must be at least 8 characters")
            self._shared: Optional[str] = tokens
            self._tokens: dict[str, str] = {}
        elif isinstance(tokens, Mapping):
            if not tokens:
                raise ToolnexusValueError("toolnexus.inbox: TokenAuth needs at least one identity and token")
            for who, token in tokens.items():
                if not isinstance(who, str) or not who or not isinstance(token, str) or len(token) < 8:
                    raise ToolnexusValueError("toolnexus.inbox: TokenAuth tokens map each identity to a token of at "
                                              f"least 8 characters (check the entry of {who!r})")
            self._shared, self._tokens = None, dict(tokens)
        else:
            raise ToolnexusTypeError("toolnexus.inbox: TokenAuth takes a token or {identity: token}, got "
                                     f"{type(tokens).__name__}")
        self.session_ttl = float(session_ttl)

    def __repr__(self) -> str:
        return f"TokenAuth({'shared' if self._shared else sorted(self._tokens)!r})"  # never a token

    @property
    def asks_name(self) -> bool:
        """The login asks who you are (a shared token does not say)."""
        return self._shared is not None

    def login(self, name: Optional[str], token: Optional[str]) -> Optional[str]:
        """The identity this login proves, or None."""
        given = (token or "").encode()
        if self._shared is not None:
            who = " ".join((name or "").split())[:80]
            return who if who and hmac.compare_digest(given, self._shared.encode()) else None
        found = None
        for who, expected in self._tokens.items():  # every entry compared: the time says nothing about which
            if hmac.compare_digest(given, expected.encode()):
                found = who
        return found

    async def identify(self, scope: dict[str, Any], session: Optional[str]) -> Optional[str]:
        return session


def _networks(values: Iterable[str]) -> list[Any]:
    nets = []
    for value in values:
        try:
            nets.append(ipaddress.ip_network(value, strict=False))
        except ValueError:
            raise ToolnexusValueError(f"toolnexus.inbox: trusted_proxies takes addresses or networks, got "
                                      f"{value!r}") from None
    return nets


class HeaderAuth(InboxAuth):
    """The identity an authenticating proxy puts in `header` (see the module docstring)."""

    how_to_sign_in = "Open the inbox through the company's sign-in proxy."

    def __init__(self, header: str = "X-Forwarded-Email", *,
                 trusted_proxies: Iterable[str] = ("127.0.0.1/32", "::1/128")) -> None:
        if not isinstance(header, str) or not header.strip():
            raise ToolnexusValueError("toolnexus.inbox: HeaderAuth needs the header's name")
        self.header = header.strip().lower().encode("latin-1")
        self._trusted = _networks(trusted_proxies)

    def __repr__(self) -> str:
        return f"HeaderAuth({self.header.decode()!r})"

    def _from_proxy(self, scope: dict[str, Any]) -> bool:
        client = scope.get("client")
        if not client:
            return False
        try:
            address = ipaddress.ip_address(client[0])
        except ValueError:
            return False
        return any(address in net for net in self._trusted)

    async def identify(self, scope: dict[str, Any], session: Optional[str]) -> Optional[str]:
        if not self._from_proxy(scope):
            return None
        for key, value in scope.get("headers") or []:
            if key == self.header:
                who = value.decode("utf-8", "replace").strip()
                return who[:200] or None
        return None


class CallbackAuth(InboxAuth):
    """The host's sign-in: `fn(scope)` → identity or None (sync or async)."""

    how_to_sign_in = "Sign in to the application first."

    def __init__(self, fn: Callable[[dict[str, Any]], Any]) -> None:
        if not callable(fn):
            raise ToolnexusTypeError(f"toolnexus.inbox: CallbackAuth takes a callable, got {type(fn).__name__}")
        self._fn = fn

    async def identify(self, scope: dict[str, Any], session: Optional[str]) -> Optional[str]:
        found = self._fn(scope)
        if inspect.isawaitable(found):
            found = await found
        return str(found) if found else None
