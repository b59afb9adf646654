"""The shapes of MCP OAuth: the host's options, one server's settings, and the errors.

`OAuthOptions` is what the host decides (where tokens live, with which key, for which account,
where the browser comes back to, which clock); `ServerAuth` is what one server entry of a config
says under `"oauth"` (a configured client, a scope, client credentials). Nothing here does I/O.
"""

from __future__ import annotations

import time
from dataclasses import dataclass, field
from typing import Any, Callable, Optional
from urllib.parse import parse_qs, urlsplit

from .._env import expand_headers
from .._redact import REDACTED
from ..errors import ConfigError, ToolnexusRuntimeError
from ..types import Answer, Request
from ._vault import KeyArg

AUTH_KIND = "auth"
DEFAULT_REDIRECT_URI = "http://127.0.0.1:33418/callback"
GRANTS = ("authorization_code", "client_credentials")
AUTH_METHODS = ("client_secret_basic", "client_secret_post", "none", "private_key_jwt")


class OAuthError(ToolnexusRuntimeError):
    """An OAuth step failed (discovery, registration, the token endpoint, a bad answer); the message
    says which, and never holds a token, a secret or a code."""


class AuthorizationDeclined(OAuthError):
    """The person (or the authorization server) refused the sign-in."""


class AuthorizationRequired(OAuthError):
    """A server needs a person to sign in: `request` is the `Request(kind="auth")` to show them."""

    def __init__(self, request: Request) -> None:
        super().__init__(f"authorization required: {request.prompt} ({request.url})")
        self.request = request


@dataclass
class OAuthOptions:
    """The host's OAuth settings for MCP servers.

    - `store`: a durable store (`toolnexus.stores.open_store(...)`) to keep tokens, client
      registrations and sign-ins in progress, encrypted; None keeps them in this process's
      memory (a sign-in then cannot be finished by another process).
    - `key`: the encryption key (32 bytes or their base64/hex text; a list rotates keys: the
      first encrypts). Required with a store. Keep it out of the store it protects.
    - `account`: whose tokens these are. A host acting for many users passes each user's id.
    - `redirect_uri`: where the authorization server sends the browser back (registered with
      the server). The default suits `LoopbackCallback`; a web host passes its own callback URL.
    - `client_name`, `client_metadata_url`: how we register (dynamic registration; or a Client ID
      Metadata Document URL, used when the authorization server supports it).
    - `clock`: wall-clock seconds, for token expiry (injectable for tests).
    - `refresh_margin`: refresh this many seconds before a token expires.
    - `timeout`: seconds for each request to an authorization server.
    """

    store: Any = None
    key: KeyArg = field(default=None, repr=False)
    account: str = "default"
    redirect_uri: str = DEFAULT_REDIRECT_URI
    client_name: str = "toolnexus"
    client_metadata_url: Optional[str] = None
    clock: Callable[[], float] = time.time
    refresh_margin: float = 60.0
    timeout: float = 30.0

    def __post_init__(self) -> None:
        if not isinstance(self.account, str) or not self.account:
            raise ConfigError("toolnexus: OAuthOptions account must be a non-empty string")
        if not isinstance(self.redirect_uri, str) or not self.redirect_uri.startswith(("http://", "https://")):
            raise ConfigError(f"toolnexus: OAuthOptions redirect_uri must be an http(s) URL, got {self.redirect_uri!r}")


@dataclass
class ServerAuth:
    """One server's `"oauth"` entry, validated. Secrets are masked in the repr."""

    grant: str = "authorization_code"
    client_id: Optional[str] = None
    client_secret: Optional[str] = None
    token_endpoint_auth_method: Optional[str] = None
    scope: Optional[str] = None
    issuer: Optional[str] = None
    private_key: Optional[str] = None
    signing_algorithm: str = "RS256"
    redirect_uri: Optional[str] = None
    client_metadata_url: Optional[str] = None

    def __repr__(self) -> str:
        shown = {k: (REDACTED if k in ("client_secret", "private_key") and v else v) for k, v in vars(self).items()
                 if v is not None}
        return f"ServerAuth({', '.join(f'{k}={v!r}' for k, v in shown.items())})"


_KEYS = {"grant": "grant", "clientId": "client_id", "clientSecret": "client_secret", "scope": "scope",
         "tokenEndpointAuthMethod": "token_endpoint_auth_method", "issuer": "issuer", "privateKey": "private_key",
         "signingAlgorithm": "signing_algorithm", "redirectUri": "redirect_uri",
         "clientMetadataUrl": "client_metadata_url"}


def server_auth(value: Any) -> Optional[ServerAuth]:
    """A server entry's `"oauth"` value: absent or `true` ⇒ defaults, `false` ⇒ None (no OAuth),
    an object ⇒ its keys (values may use `${ENV}`). Raises `ConfigError` naming the problem."""
    if value is None or value is True:
        return ServerAuth()
    if value is False:
        return None
    if not isinstance(value, dict):
        raise ConfigError(f'"oauth" must be true, false or an object, got {type(value).__name__}')
    unknown = sorted(set(value) - set(_KEYS))
    if unknown:
        raise ConfigError(f'"oauth" has unknown key(s) {", ".join(unknown)} (known: {", ".join(_KEYS)})')
    for key, item in value.items():
        if not isinstance(item, str):
            raise ConfigError(f'"oauth.{key}" must be a string, got {type(item).__name__}')
    expanded = expand_headers({k: v for k, v in value.items()})
    auth = ServerAuth(**{_KEYS[k]: v for k, v in expanded.items() if v != ""})
    if auth.grant not in GRANTS:
        raise ConfigError(f'"oauth.grant" must be one of {", ".join(GRANTS)}, got {auth.grant!r}')
    if auth.token_endpoint_auth_method is not None and auth.token_endpoint_auth_method not in AUTH_METHODS:
        raise ConfigError(f'"oauth.tokenEndpointAuthMethod" must be one of {", ".join(AUTH_METHODS)}, '
                          f"got {auth.token_endpoint_auth_method!r}")
    if auth.grant == "client_credentials" and not auth.client_id:
        raise ConfigError('"oauth.grant": "client_credentials" needs "clientId" (and "clientSecret" or "privateKey")')
    if auth.private_key and auth.token_endpoint_auth_method in (None, "private_key_jwt"):
        auth.token_endpoint_auth_method = "private_key_jwt"
    return auth


def callback_answer(request_id: str, callback_url: str) -> Answer:
    """The `Answer` to a `Request(kind="auth")` from the URL the browser was redirected to (a web
    host's callback handler calls this with its request URL): ok with `data={"url": ...}`, or a
    decline when the authorization server sent `?error=`."""
    if "error" in parse_qs(urlsplit(callback_url).query):
        return Answer(id=request_id, ok=False, reason="declined", data={"url": callback_url})
    return Answer(id=request_id, ok=True, data={"url": callback_url})
