"""`OAuthClient`: the MCP authorization flow for one server, run as a suspension.

The MCP spec's flow, with its fallbacks: a server answers 401 (or 403 `insufficient_scope`); we
read its protected-resource metadata (RFC 9728: the `resource_metadata` of `WWW-Authenticate`,
then the path-based, then the root well-known URL), its authorization server's metadata (RFC 8414
and OpenID discovery, path-aware, then the 2025-03-26 root fallback), pick the scope
(`WWW-Authenticate`, else `scopes_supported`; on a step-up the union with what was asked and
granted before; `offline_access` when the server supports it), find a client (the configured one,
a stored registration bound to that issuer, a Client ID Metadata Document, or dynamic
registration), and make a PKCE (S256) authorization URL carrying the resource indicator.

Where an SDK flow would block in a redirect handler, this one stops: the sign-in in progress (its
PKCE verifier, state, client, token endpoint) goes to the `TokenVault`, and `pending` holds the
`Request(kind="auth", url=<authorization URL>)` for the person. `complete(answer)` — in this
process or any other sharing the store — checks the state (and the RFC 9207 `iss`), exchanges the
code, and keeps the tokens. From then on `bearer()` hands out the access token and refreshes it
`refresh_margin` seconds before it expires (by the injected clock), once for all processes:
whoever refreshes writes the store, the others read it. Client-credentials servers (machine to
machine) get tokens with no person involved, and again whenever they expire.

Every answer of an authorization server is read to at most 1 MiB (`MAX_BODY`); redirects are
followed only for metadata and only within its origin.

`BearerAuth` plugs this into the SDK's HTTP transports (an `httpx2.Auth`). A flow that needs a
person ends the request with the server's own 401/403, so the transport stays up and the request
fails; the caller then finds the `Request` in `pending` (or the failure in `problem`).

Reused from the `mcp` SDK (`mcp.client.auth`): the discovery URL builders and response readers,
the `WWW-Authenticate` parsers, scope selection and the step-up union, issuer checks, the
registration request/response and its usability check, Client ID Metadata Document helpers, PKCE
generation, the resource-indicator helpers, the metadata and token models, and the JWT assertion
signer for `private_key_jwt`. Written here: the suspension (state kept in the vault, completion
in another process), the clock, refresh across processes, and the error messages. One rule
differs from the SDK's: on the 2025-03-26 path (no protected-resource metadata) an authorization
server whose `issuer` is on the MCP server's own origin but under a path is accepted — that
revision of the spec put it there, and a same-origin issuer is no mix-up.
"""

from __future__ import annotations

import asyncio
import base64
import secrets
from typing import Any, Optional
from urllib.parse import parse_qs, quote, urlencode, urljoin, urlsplit

import httpx2
from mcp.client.auth.exceptions import OAuthFlowError, OAuthRegistrationError, OAuthTokenError
from mcp.client.auth.oauth2 import PKCEParameters, check_registration_usable
from mcp.client.auth.utils import (
    build_oauth_authorization_server_metadata_discovery_urls,
    build_protected_resource_metadata_discovery_urls,
    create_client_info_from_metadata_url,
    create_client_registration_request,
    create_oauth_metadata_request,
    credentials_match_issuer,
    extract_field_from_www_auth,
    extract_resource_metadata_from_www_auth,
    extract_scope_from_www_auth,
    get_client_metadata_scopes,
    handle_auth_metadata_response,
    handle_protected_resource_response,
    handle_registration_response,
    issuers_match,
    should_use_client_metadata_url,
    union_scopes,
    validate_metadata_issuer,
)
from mcp.shared.auth import (
    OAuthClientInformationFull,
    OAuthClientMetadata,
    OAuthMetadata,
    OAuthToken,
    ProtectedResourceMetadata,
)
from mcp.shared.auth_utils import check_resource_allowed, resource_url_from_server_url
from pydantic import AnyHttpUrl, AnyUrl, ConfigDict, TypeAdapter, ValidationError

from ..types import Answer, Request, new_request_id
from ._model import AUTH_KIND, AuthorizationDeclined, OAuthError, OAuthOptions, ServerAuth
from ._vault import NAMESPACE_FLOWS, NAMESPACE_TOKENS, TokenVault, record_key

_REDIRECTS = 5
MAX_BODY = 1024 * 1024  # an authorization server's answer (metadata, registration, tokens) is small
_ORIGIN = TypeAdapter(AnyHttpUrl, config=ConfigDict(url_preserve_empty_path=True))
_SDK_FAILURES = (OAuthFlowError, OAuthRegistrationError, OAuthTokenError, ValidationError, ValueError)


def _origin(url: str) -> str:
    parts = urlsplit(url)
    return f"{parts.scheme}://{parts.netloc}"


def _origin_issuer(url: str) -> str:
    """A server's origin rendered as `OAuthMetadata.issuer` renders URLs (for string comparison)."""
    return str(_ORIGIN.validate_python(_origin(url)))


def _version_at_least(version: Optional[str], floor: str) -> bool:
    return bool(version) and str(version) >= floor


def callback_params(answer: Answer) -> dict[str, Optional[str]]:
    """The redirect's parameters from an answer: `data={"url": <the URL the browser came back to>}`
    or `data={"code": ..., "state": ...}` (plus `iss`, `error`, `error_description`)."""
    data = answer.data or {}
    found: dict[str, Optional[str]] = {}
    url = data.get("url")
    if isinstance(url, str) and url:
        query = parse_qs(urlsplit(url).query)
        found = {k: v[0] for k, v in query.items() if v}
    for key in ("code", "state", "iss", "error", "error_description"):
        value = data.get(key)
        if isinstance(value, str) and value:
            found[key] = value
    return {k: found.get(k) for k in ("code", "state", "iss", "error", "error_description")}


def _error_of(response: httpx2.Response) -> str:
    """`HTTP <status>` plus the OAuth `error` code of the body, never the body itself."""
    shown = f"HTTP {response.status_code}"
    try:
        body = response.json()
    except ValueError:
        return shown
    if isinstance(body, dict) and isinstance(body.get("error"), str):
        shown += f" ({body['error'][:60]})"
    return shown


class OAuthClient:
    """OAuth for one MCP server URL and one account (see the module docstring)."""

    def __init__(self, *, server: str, url: str, settings: ServerAuth, options: OAuthOptions,
                 vault: TokenVault) -> None:
        self.server = server
        self.url = url
        self.settings = settings
        self.options = options
        self.vault = vault
        self.pending: Optional[Request] = None  # the sign-in a person must do, if any
        self.problem: Optional[str] = None  # why the last attempt to get a token failed
        self._key = record_key(options.account, resource_url_from_server_url(url))
        self._record: Optional[dict[str, Any]] = None
        self._loaded = False
        self._lock = asyncio.Lock()
        self._http: Optional[httpx2.AsyncClient] = None
        self._asked_scope: Optional[str] = None

    def __repr__(self) -> str:
        return f"OAuthClient({self.server!r}, {_origin(self.url)!r}, pending={self.pending is not None})"

    @property
    def redirect_uri(self) -> str:
        return self.settings.redirect_uri or self.options.redirect_uri

    @property
    def machine(self) -> bool:
        """Client credentials: tokens come without a person."""
        return self.settings.grant == "client_credentials"

    async def aclose(self) -> None:
        http, self._http = self._http, None
        if http is not None:
            await http.aclose()

    # -- tokens --------------------------------------------------------------------------------------

    def _fresh(self, record: Optional[dict[str, Any]]) -> bool:
        if not record or not record.get("access_token"):
            return False
        expires = record.get("expires_at")
        return expires is None or self.options.clock() < float(expires) - self.options.refresh_margin

    async def _reload(self) -> Optional[dict[str, Any]]:
        self._record = await self.vault.get(NAMESPACE_TOKENS, self._key)
        self._loaded = True
        return self._record

    async def _save(self, record: dict[str, Any]) -> dict[str, Any]:
        await self.vault.put(NAMESPACE_TOKENS, self._key, record)
        self._record = record
        self._loaded = True
        return record

    async def bearer(self) -> Optional[str]:
        """The access token to send now: refreshed first when it is (nearly) expired. None when
        there is none (the server's 401 then starts a sign-in)."""
        record = self._record if self._loaded else await self._reload()
        if self._fresh(record):
            assert record is not None
            return str(record["access_token"])
        if record is None:
            return None
        async with self._lock:
            record = await self._reload()  # another process may have refreshed it
            if not self._fresh(record) and record is not None:
                try:
                    record = await self._renew(record)
                except (OAuthError, httpx2.HTTPError, *_SDK_FAILURES) as exc:
                    self.problem = _describe(exc)
                    record = None
        return str(record["access_token"]) if self._fresh(record) and record is not None else None

    async def _renew(self, record: dict[str, Any]) -> Optional[dict[str, Any]]:
        """A new access token without a person: refresh, or client credentials again."""
        if record.get("refresh_token"):
            renewed = await self._refresh(record)
            if renewed is not None:
                return renewed
        if self.machine and record.get("token_endpoint"):
            return await self._client_credentials(str(record["token_endpoint"]), record.get("issuer"),
                                                  record.get("scope"), record.get("resource"))
        return None

    # -- a 401 / 403 ---------------------------------------------------------------------------------

    async def challenged(self, response: httpx2.Response, sent: Optional[str], protocol_version: Optional[str]) -> bool:
        """The server refused the request. True when a usable token was obtained without a person
        (retry the request); False otherwise: `pending` then holds the sign-in, or `problem` says
        why there is none."""
        step_up = (response.status_code == 403
                   and extract_field_from_www_auth(response, "error") == "insufficient_scope")
        if response.status_code != 401 and not step_up:
            return False
        async with self._lock:
            try:
                renewed = await self._challenged(response, sent, step_up, protocol_version)
            except (OAuthError, httpx2.HTTPError, *_SDK_FAILURES) as exc:
                self.problem = _describe(exc)
                return False
            if renewed:
                self.problem = None
            return renewed

    async def _challenged(self, response: httpx2.Response, sent: Optional[str], step_up: bool,
                          protocol_version: Optional[str]) -> bool:
        record = await self._reload()
        if not step_up and record is not None:
            if self._fresh(record) and record.get("access_token") != sent:
                return True  # another call or process got a new token meanwhile
            if record.get("refresh_token") and await self._refresh(record) is not None:
                return True
        prm, asm, issuer = await self._discover(response)
        grants = ["client_credentials"] if self.machine else ["authorization_code", "refresh_token"]
        scope = get_client_metadata_scopes(extract_scope_from_www_auth(response), prm, asm, grants)
        scope = union_scopes(self.settings.scope, scope)
        if step_up:
            asked = union_scopes(self._asked_scope, (record or {}).get("scope"))
            scope = union_scopes(asked, scope)
        resource = self._resource(prm) if prm is not None or _version_at_least(protocol_version, "2025-06-18") else None
        token_endpoint = str(asm.token_endpoint) if asm is not None else urljoin(_origin(self.url), "/token")
        if self.machine:
            if self.settings.issuer and not issuers_match(issuer, self.settings.issuer):
                raise OAuthError(f'the server "{self.server}" sends us to the authorization server {issuer}, '
                                 'not to the '
                                 f"configured issuer {self.settings.issuer}")
            await self._client_credentials(token_endpoint, issuer, scope, resource)
            return True
        if self.pending is not None and self._asked_scope == scope:
            return False  # a sign-in for this scope is already waiting for its person
        client = await self._client(asm, issuer, scope, record)
        self.pending = await self._begin(asm, client, scope, resource, token_endpoint, issuer)
        return False

    def _resource(self, prm: Optional[ProtectedResourceMetadata]) -> str:
        resource = resource_url_from_server_url(self.url)
        if prm is not None and prm.resource and check_resource_allowed(resource, str(prm.resource)):
            return str(prm.resource)
        return resource

    async def _discover(self, response: httpx2.Response) -> tuple[Optional[ProtectedResourceMetadata],
                                                                  Optional[OAuthMetadata], str]:
        """Protected-resource metadata, then authorization-server metadata, with the fallbacks."""
        prm: Optional[ProtectedResourceMetadata] = None
        failed: Optional[int] = None
        hinted = extract_resource_metadata_from_www_auth(response)
        for url in build_protected_resource_metadata_discovery_urls(hinted, self.url):
            answer = await self._get(url)
            if answer.status_code >= 500 or answer.status_code == 429:
                failed = answer.status_code
            prm = await handle_protected_resource_response(answer)
            if prm is not None:
                mine = resource_url_from_server_url(self.url)
                if not check_resource_allowed(mine, str(prm.resource)):
                    raise OAuthError(f"the protected resource metadata of {_origin(self.url)} names the resource "
                                     f"{prm.resource}, not {mine}: refusing to send it tokens")
                break
        if prm is None and failed is not None:
            raise OAuthError(f"the protected resource metadata of {_origin(self.url)} could not be read: HTTP {failed}")
        advertised = [str(a) for a in prm.authorization_servers] if prm is not None else []
        chosen = next((a for a in advertised if self.settings.issuer and issuers_match(a, self.settings.issuer)),
                      advertised[0] if advertised else None)
        issuer = chosen or _origin_issuer(self.url)
        asm: Optional[OAuthMetadata] = None
        for url in build_oauth_authorization_server_metadata_discovery_urls(chosen, self.url):
            ok, found = await handle_auth_metadata_response(await self._get(url))
            if not ok:
                break
            if found is not None:
                if chosen is None and (issuers_match(str(found.issuer), issuer)
                                       or _origin(str(found.issuer)) == _origin(self.url)):
                    # The 2025-03-26 path (no resource metadata): the server's own origin hosts its
                    # authorization server, possibly under a path (`…/oauth`). Same origin: accepted.
                    issuer = str(found.issuer)
                validate_metadata_issuer(found, issuer)
                asm = found
                break
        return prm, asm, issuer

    async def _client(self, asm: Optional[OAuthMetadata], issuer: str, scope: Optional[str],
                      record: Optional[dict[str, Any]]) -> OAuthClientInformationFull:
        """The configured client, a stored registration bound to this issuer, a metadata-document
        client, or a new dynamic registration (kept for next time)."""
        settings = self.settings
        redirect = [AnyUrl(self.redirect_uri)]
        if settings.client_id:
            fallback = "client_secret_basic" if settings.client_secret else "none"
            method = settings.token_endpoint_auth_method or fallback
            return OAuthClientInformationFull(client_id=settings.client_id, client_secret=settings.client_secret,
                                              redirect_uris=redirect, token_endpoint_auth_method=method)
        cimd = settings.client_metadata_url or self.options.client_metadata_url
        if record is not None and record.get("client"):
            stored = OAuthClientInformationFull.model_validate(record["client"])
            if credentials_match_issuer(stored, issuer, cimd):
                return stored
        if should_use_client_metadata_url(asm, cimd):
            assert cimd is not None
            client = create_client_info_from_metadata_url(cimd, redirect_uris=redirect)
            client.issuer = issuer
        else:
            metadata = OAuthClientMetadata(client_name=self.options.client_name, redirect_uris=redirect,
                                           grant_types=["authorization_code", "refresh_token"], response_types=["code"],
                                           scope=scope)
            request = create_client_registration_request(asm, metadata, _origin(self.url))
            client = await handle_registration_response(await self._send(request))
            check_registration_usable(client)
            if asm is not None and (asm.registration_endpoint is not None or _origin(issuer) == _origin(self.url)):
                client.issuer = issuer
        await self._save({**(record or {}), "client": client.model_dump(mode="json", exclude_none=True)})
        return client

    async def _begin(self, asm: Optional[OAuthMetadata], client: OAuthClientInformationFull, scope: Optional[str],
                     resource: Optional[str], token_endpoint: str, issuer: str) -> Request:
        """Keep the sign-in in the vault and say where the person must go."""
        endpoint = str(asm.authorization_endpoint) if asm is not None else urljoin(_origin(self.url), "/authorize")
        pkce = PKCEParameters.generate()
        state = secrets.token_urlsafe(32)
        params = {"response_type": "code", "client_id": client.client_id, "redirect_uri": self.redirect_uri,
                  "state": state, "code_challenge": pkce.code_challenge, "code_challenge_method": "S256"}
        if resource is not None:
            params["resource"] = resource
        if scope:
            params["scope"] = scope
            if "offline_access" in scope.split():
                params["prompt"] = "consent"
        flow = {"server": resource_url_from_server_url(self.url), "account": self.options.account,
                "verifier": pkce.code_verifier, "redirect_uri": self.redirect_uri, "scope": scope, "resource": resource,
                "token_endpoint": token_endpoint, "issuer": str(asm.issuer) if asm is not None else issuer,
                "iss_supported": bool(asm is not None and asm.authorization_response_iss_parameter_supported),
                "client": client.model_dump(mode="json", exclude_none=True), "created": self.options.clock()}
        await self.vault.put(NAMESPACE_FLOWS, record_key("flow", state), flow)
        self._asked_scope = scope
        host = urlsplit(self.url).netloc
        return Request(id=new_request_id("oau"), kind=AUTH_KIND,
                       prompt=f'Sign in to use the MCP server "{self.server}" ({host})',
                       url=f"{endpoint}?{urlencode(params)}",
                       data={"server": self.server, "resource": self.url, "state": state,
                             "redirect_uri": self.redirect_uri, "scope": scope})

    # -- finishing a sign-in -------------------------------------------------------------------------

    async def complete(self, answer: Answer) -> None:
        """Turn the person's answer (the redirect's code and state) into tokens. Idempotent: an
        answer already applied, with its tokens still there, is a no-op."""
        if not answer.ok:
            raise AuthorizationDeclined(f'the sign-in to "{self.server}" was declined')
        got = callback_params(answer)
        if got["error"]:
            detail = f": {got['error_description'][:200]}" if got["error_description"] else ""
            raise AuthorizationDeclined(f'the authorization server refused the sign-in to "{self.server}": '
                                        f"{got['error'][:60]}{detail}")
        code, state = got["code"], got["state"]
        if not code or not state:
            raise OAuthError('an answer to a sign-in carries the redirect the browser came back with: data={"url": '
                             '<that URL>} or {"code": ..., "state": ...}')
        async with self._lock:
            flow = await self.vault.get(NAMESPACE_FLOWS, record_key("flow", state))
            if flow is None:
                where = "" if self.vault.durable else (" (tokens are kept in this process only: give OAuthOptions a "
                                                       "store and key so another process can finish a sign-in)")
                raise OAuthError(f'no sign-in with this state is waiting for "{self.server}"{where}')
            mine = resource_url_from_server_url(self.url)
            if flow.get("server") != mine or flow.get("account") != self.options.account:
                raise OAuthError(f'this sign-in belongs to another server or account, not to "{self.server}"')
            if flow.get("done"):
                if self._fresh(await self._reload()):
                    self.pending = None
                    return
                raise OAuthError(f'this sign-in to "{self.server}" was used already: sign in again')
            self._check_issuer(got["iss"], flow)
            client = OAuthClientInformationFull.model_validate(flow["client"])
            data = {"grant_type": "authorization_code", "code": code, "redirect_uri": flow["redirect_uri"],
                    "client_id": client.client_id, "code_verifier": flow["verifier"]}
            if flow.get("resource"):
                data["resource"] = flow["resource"]
            token = await self._token_request(str(flow["token_endpoint"]), client, data, flow.get("issuer"),
                                              what="the code")
            if token.scope is None:
                token.scope = flow.get("scope")
            record = await self._reload() or {}
            await self._save(self._token_record(token, record, client, flow.get("issuer"),
                                                str(flow["token_endpoint"]), flow.get("resource")))
            await self.vault.put(NAMESPACE_FLOWS, record_key("flow", state), {**flow, "verifier": None, "done": True})
            self.pending = None
            self.problem = None

    @staticmethod
    def _check_issuer(iss: Optional[str], flow: dict[str, Any]) -> None:
        """RFC 9207: the `iss` of the redirect must name the server we sent the person to."""
        expected = flow.get("issuer")
        if iss is not None and expected is not None and iss != expected:
            raise OAuthError(f"the sign-in came back from {iss[:100]}, not from {expected}: refused")
        if iss is None and flow.get("iss_supported"):
            raise OAuthError(f"the sign-in came back without the iss its authorization server ({expected}) "
                             "promises: refused")

    def _token_record(self, token: OAuthToken, prior: dict[str, Any], client: OAuthClientInformationFull,
                      issuer: Optional[str], token_endpoint: str, resource: Optional[str]) -> dict[str, Any]:
        now = self.options.clock()
        return {**prior, "access_token": token.access_token, "token_type": token.token_type,
                "refresh_token": token.refresh_token or prior.get("refresh_token"),
                "scope": token.scope or prior.get("scope"),
                "expires_at": now + int(token.expires_in) if token.expires_in is not None else None,
                "obtained_at": now, "client": client.model_dump(mode="json", exclude_none=True), "issuer": issuer,
                "token_endpoint": token_endpoint, "resource": resource}

    async def _refresh(self, record: dict[str, Any]) -> Optional[dict[str, Any]]:
        """A refresh-token grant; None when the server refuses it (the refresh token is then forgotten)."""
        if not record.get("client") or not record.get("token_endpoint"):
            return None
        client = OAuthClientInformationFull.model_validate(record["client"])
        data = {"grant_type": "refresh_token", "refresh_token": str(record["refresh_token"]),
                "client_id": client.client_id}
        if record.get("resource"):
            data["resource"] = str(record["resource"])
        try:
            token = await self._token_request(str(record["token_endpoint"]), client, data, record.get("issuer"),
                                              what="the refresh token")
        except OAuthError as exc:
            self.problem = str(exc)
            await self._save({**record, "refresh_token": None})
            return None
        if token.scope is None:
            token.scope = record.get("scope")
        return await self._save(self._token_record(token, record, client, record.get("issuer"),
                                                   str(record["token_endpoint"]), record.get("resource")))

    async def _client_credentials(self, token_endpoint: str, issuer: Optional[str], scope: Optional[str],
                                  resource: Optional[str]) -> dict[str, Any]:
        settings = self.settings
        method = settings.token_endpoint_auth_method or "client_secret_basic"
        client = OAuthClientInformationFull(client_id=settings.client_id or "", client_secret=settings.client_secret,
                                            token_endpoint_auth_method=method, grant_types=["client_credentials"])
        data = {"grant_type": "client_credentials"}
        if scope:
            data["scope"] = scope
        if resource:
            data["resource"] = resource
        token = await self._token_request(token_endpoint, client, data, issuer, what="the client credentials")
        if token.scope is None:
            token.scope = scope
        return await self._save(self._token_record(token, self._record or {}, client, issuer, token_endpoint, resource))

    # -- HTTP ----------------------------------------------------------------------------------------

    def _client_http(self) -> httpx2.AsyncClient:
        if self._http is None:
            self._http = httpx2.AsyncClient(timeout=self.options.timeout, follow_redirects=False)
        return self._http

    async def _send(self, request: httpx2.Request) -> httpx2.Response:
        """One request to an authorization server, its body read to at most `MAX_BODY` bytes."""
        response = await self._client_http().send(request, stream=True)
        try:
            body = bytearray()
            async for chunk in response.aiter_bytes():
                body += chunk
                if len(body) > MAX_BODY:
                    raise OAuthError(f"{_origin(str(request.url))} sent more than {MAX_BODY} bytes in answer to "
                                     f"{request.method} {urlsplit(str(request.url)).path}: refused")
        finally:
            await response.aclose()
        return httpx2.Response(response.status_code, headers=response.headers, content=bytes(body), request=request)

    async def _get(self, url: str) -> httpx2.Response:
        """A metadata GET, following redirects that stay on its origin (others are "not here")."""
        request = create_oauth_metadata_request(url)
        for _ in range(_REDIRECTS):
            response = await self._send(request)
            location = response.headers.get("location")
            if response.status_code not in (301, 302, 303, 307, 308) or not location:
                return response
            target = urljoin(str(request.url), location)
            if _origin(target) != _origin(str(request.url)):
                return response
            request = create_oauth_metadata_request(target)
        return response

    async def _token_request(self, endpoint: str, client: OAuthClientInformationFull, data: dict[str, str],
                             issuer: Optional[str], *, what: str) -> OAuthToken:
        data, headers = await self._authenticate(client, dict(data), issuer)
        response = await self._send(self._client_http().build_request("POST", endpoint, data=data, headers=headers))
        if response.status_code not in (200, 201):
            raise OAuthError(f"the token endpoint {_origin(endpoint)} refused {what}: {_error_of(response)}")
        try:
            return OAuthToken.model_validate_json(response.content)
        except ValidationError:
            raise OAuthError(f"the token endpoint {_origin(endpoint)} sent a token response that is not one") from None

    async def _authenticate(self, client: OAuthClientInformationFull, data: dict[str, str],
                            issuer: Optional[str]) -> tuple[dict[str, str], dict[str, str]]:
        """Client authentication at the token endpoint, by the client's registered method."""
        headers = {"Content-Type": "application/x-www-form-urlencoded"}
        method = client.token_endpoint_auth_method
        if method == "client_secret_basic" and client.client_secret:
            pair = f"{quote(client.client_id, safe='')}:{quote(client.client_secret, safe='')}"
            headers["Authorization"] = "Basic " + base64.b64encode(pair.encode()).decode()
            data.pop("client_secret", None)
        elif method == "client_secret_post" and client.client_secret:
            data["client_id"] = client.client_id
            data["client_secret"] = client.client_secret
        elif method == "private_key_jwt":
            if not self.settings.private_key:
                raise OAuthError(f'"{self.server}" uses private_key_jwt: configure "oauth.privateKey" (a PEM key)')
            from mcp.client.auth.extensions.client_credentials import SignedJWTParameters

            signer = SignedJWTParameters(issuer=client.client_id, subject=client.client_id,
                                         signing_key=self.settings.private_key,
                                         signing_algorithm=self.settings.signing_algorithm)
            data["client_assertion"] = await signer.create_assertion_provider()(issuer or _origin_issuer(self.url))
            data["client_assertion_type"] = "urn:ietf:params:oauth:client-assertion-type:jwt-bearer"
        elif method not in (None, "none", "client_secret_basic", "client_secret_post"):
            raise OAuthError(f"the client of \"{self.server}\" is registered for the token endpoint method {method!r}, "
                             "which is not supported")
        return data, headers


def _describe(exc: BaseException) -> str:
    if isinstance(exc, OAuthError):
        return str(exc)
    if isinstance(exc, httpx2.HTTPError):
        where = ""
        try:
            where = f" {_origin(str(exc.request.url))}"
        except RuntimeError:
            pass
        return f"could not reach the authorization server{where}: {type(exc).__name__}"
    return f"{type(exc).__name__}: {str(exc)[:300]}"


class BearerAuth(httpx2.Auth):
    """An `httpx2.Auth` that sends `OAuthClient`'s token and reacts to 401 / 403 `insufficient_scope`."""

    def __init__(self, client: OAuthClient) -> None:
        self.client = client

    async def async_auth_flow(self, request: httpx2.Request) -> Any:
        token = await self.client.bearer()
        if token:
            request.headers["Authorization"] = f"Bearer {token}"
        response = yield request
        if response.status_code in (401, 403):
            version = request.headers.get("mcp-protocol-version")
            if await self.client.challenged(response, token, version):
                token = await self.client.bearer()
                if token:
                    request.headers["Authorization"] = f"Bearer {token}"
                    yield request
