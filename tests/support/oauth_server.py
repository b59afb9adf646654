"""An OAuth authorization server and an MCP server it protects, in one loopback app, for the tests.

`python -m support.oauth_server [--clock-file C] [--expires-in S]` serves, on 127.0.0.1 and a free
port (`READY <base URL>` on stdout once listening; `authority()` runs the same app in a thread):

- the MCP server at `/mcp` (streamable HTTP, the SDK's `MCPServer`): tools `whoami` and
  `echo(text)`, `write(text)` which needs the scope `docs:write` (else 403 `insufficient_scope`,
  a step-up); every other request needs a live bearer token (else 401 with `WWW-Authenticate:
  Bearer resource_metadata=…, scope="docs:read"`);
- its protected-resource metadata (RFC 9728) at `/.well-known/oauth-protected-resource/mcp`;
- the authorization server (issuer = the origin): metadata (RFC 8414), dynamic client
  registration (`/register`), `/authorize` (approves at once: redirects to the client's
  `redirect_uri` with `code` and `state` — the person has said yes), `/token` (authorization code
  with PKCE S256 checked, refresh tokens rotated on use; access tokens live `--expires-in`
  seconds by the server's clock; the client `machine` / `machine-secret` may use the
  client-credentials grant);
- `GET /_log`: what happened, as JSON lines (`register`, `authorize`, `token` with its grant,
  `mcp` with the token's serial, `refused`); `GET /_secrets`: every token and client secret it
  issued (so a test can look for them where they must not be); `POST /_revoke`: forget every
  access token.

The clock is `time.time()` plus the number of seconds in `--clock-file` (0 when empty or absent),
so a test moves this server's time and its client's together. Stdlib + starlette + the SDK.
"""

from __future__ import annotations

import argparse
import asyncio
import base64
import hashlib
import json
import secrets
import socket
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any, Optional
from urllib.parse import urlencode

import uvicorn
from mcp.server.mcpserver import MCPServer
from starlette.requests import Request
from starlette.responses import JSONResponse, RedirectResponse, Response

SCOPE = "docs:read"
WRITE = "docs:write"


class Clock:
    def __init__(self, path: Optional[str]) -> None:
        self.path = Path(path) if path else None

    def __call__(self) -> float:
        offset = 0.0
        if self.path is not None and self.path.exists():
            text = self.path.read_text().strip()
            offset = float(text) if text else 0.0
        return time.time() + offset


class Authority:
    """The authorization server's state and the protected MCP app in front of which it sits."""

    def __init__(self, base: str, clock: Clock, expires_in: int) -> None:
        self.base = base
        self.clock = clock
        self.expires_in = expires_in
        self.clients: dict[str, dict[str, Any]] = {"machine": {"secret": "machine-secret", "redirect_uris": []}}
        self.codes: dict[str, dict[str, Any]] = {}
        self.access: dict[str, dict[str, Any]] = {}
        self.refresh: dict[str, dict[str, Any]] = {}
        self.serial = 0
        self.log: list[dict[str, Any]] = []
        self.mcp = build_mcp().streamable_http_app()

    # -- the protected MCP server -------------------------------------------------------------------

    def _challenge(self, status: int, scope: str, error: str) -> Response:
        header = (f'Bearer error="{error}", scope="{scope}", '
                  f'resource_metadata="{self.base}/.well-known/oauth-protected-resource/mcp"')
        return JSONResponse({"error": error}, status_code=status, headers={"WWW-Authenticate": header})

    async def gate(self, scope: dict[str, Any], receive: Any, send: Any) -> None:
        request = Request(scope, receive)
        body = await request.body()
        auth = request.headers.get("authorization", "")
        token = self.access.get(auth[7:]) if auth.startswith("Bearer ") else None
        if token is None or token["exp"] <= self.clock():
            self.log.append({"event": "refused", "why": "no token" if token is None else "expired"})
            await self._challenge(401, SCOPE, "invalid_token")(scope, receive, send)
            return
        method, tool = None, None
        try:
            message = json.loads(body) if body else {}
            method = message.get("method")
            tool = (message.get("params") or {}).get("name") if method == "tools/call" else None
        except ValueError:
            pass
        if tool == "write" and WRITE not in token["scope"].split():
            self.log.append({"event": "refused", "why": "insufficient_scope"})
            await self._challenge(403, f"{SCOPE} {WRITE}", "insufficient_scope")(scope, receive, send)
            return
        self.log.append({"event": "mcp", "method": method, "serial": token["serial"]})
        sent = False

        async def replay() -> dict[str, Any]:
            nonlocal sent
            if not sent:
                sent = True
                return {"type": "http.request", "body": body, "more_body": False}
            return await receive()

        await self.mcp(scope, replay, send)

    # -- the authorization server -------------------------------------------------------------------

    def metadata(self) -> dict[str, Any]:
        return {"issuer": self.base, "authorization_endpoint": f"{self.base}/authorize",
                "token_endpoint": f"{self.base}/token", "registration_endpoint": f"{self.base}/register",
                "scopes_supported": [SCOPE, WRITE], "response_types_supported": ["code"],
                "grant_types_supported": ["authorization_code", "refresh_token"],
                "code_challenge_methods_supported": ["S256"],
                "token_endpoint_auth_methods_supported": ["client_secret_basic", "none"]}

    def prm(self) -> dict[str, Any]:
        return {"resource": f"{self.base}/mcp", "authorization_servers": [self.base], "scopes_supported": [SCOPE]}

    async def register(self, request: Request) -> Response:
        body = await request.json()
        client_id = f"client-{len(self.clients) + 1}"
        secret = secrets.token_urlsafe(16)
        self.clients[client_id] = {"secret": secret, "redirect_uris": body.get("redirect_uris") or []}
        self.log.append({"event": "register", "client_id": client_id, "client_name": body.get("client_name")})
        return JSONResponse({**body, "client_id": client_id, "client_secret": secret,
                             "token_endpoint_auth_method": "client_secret_basic"}, status_code=201)

    def authorize(self, request: Request) -> Response:
        q = request.query_params
        client = self.clients.get(q.get("client_id", ""))
        if client is None or q.get("redirect_uri") not in client["redirect_uris"]:
            return JSONResponse({"error": "invalid_client"}, status_code=400)
        if q.get("code_challenge_method") != "S256" or not q.get("code_challenge"):
            return JSONResponse({"error": "invalid_request", "error_description": "PKCE S256 required"},
                                status_code=400)
        code = secrets.token_urlsafe(16)
        self.codes[code] = {"client_id": q["client_id"], "challenge": q["code_challenge"],
                            "redirect_uri": q["redirect_uri"], "scope": q.get("scope") or SCOPE,
                            "resource": q.get("resource")}
        self.log.append({"event": "authorize", "scope": q.get("scope"), "resource": q.get("resource")})
        return RedirectResponse(f"{q['redirect_uri']}?{urlencode({'code': code, 'state': q.get('state', '')})}",
                                status_code=302)

    def _client(self, request: Request, form: Any) -> Optional[str]:
        auth = request.headers.get("authorization", "")
        if auth.startswith("Basic "):
            client_id, _, secret = base64.b64decode(auth[6:]).decode().partition(":")
            client = self.clients.get(client_id)
            return client_id if client is not None and secrets.compare_digest(client["secret"], secret) else None
        return None

    def _issue(self, client_id: str, scope: str) -> dict[str, Any]:
        self.serial += 1
        access, refresh = secrets.token_urlsafe(24), secrets.token_urlsafe(24)
        self.access[access] = {"client_id": client_id, "scope": scope, "exp": self.clock() + self.expires_in,
                               "serial": self.serial}
        self.refresh[refresh] = {"client_id": client_id, "scope": scope}
        return {"access_token": access, "token_type": "Bearer", "expires_in": self.expires_in,
                "refresh_token": refresh, "scope": scope}

    async def token(self, request: Request) -> Response:
        form = await request.form()
        client_id = self._client(request, form)
        grant = form.get("grant_type")
        if client_id is None:
            return JSONResponse({"error": "invalid_client"}, status_code=401)
        if grant == "authorization_code":
            code = self.codes.pop(str(form.get("code")), None)
            verifier = str(form.get("code_verifier") or "")
            digest = base64.urlsafe_b64encode(hashlib.sha256(verifier.encode()).digest()).decode().rstrip("=")
            if code is None or code["client_id"] != client_id or code["challenge"] != digest \
                    or code["redirect_uri"] != form.get("redirect_uri"):
                self.log.append({"event": "token", "grant": grant, "ok": False})
                return JSONResponse({"error": "invalid_grant"}, status_code=400)
            self.log.append({"event": "token", "grant": grant, "ok": True, "resource": form.get("resource")})
            return JSONResponse(self._issue(client_id, code["scope"]))
        if grant == "refresh_token":
            held = self.refresh.pop(str(form.get("refresh_token")), None)
            if held is None or held["client_id"] != client_id:
                self.log.append({"event": "token", "grant": grant, "ok": False})
                return JSONResponse({"error": "invalid_grant"}, status_code=400)
            self.log.append({"event": "token", "grant": grant, "ok": True})
            return JSONResponse(self._issue(client_id, held["scope"]))
        if grant == "client_credentials" and client_id == "machine":
            self.log.append({"event": "token", "grant": grant, "ok": True, "scope": form.get("scope")})
            issued = self._issue(client_id, str(form.get("scope") or SCOPE))
            self.refresh.pop(issued.pop("refresh_token"))
            return JSONResponse(issued)
        return JSONResponse({"error": "unsupported_grant_type"}, status_code=400)

    # -- routing ------------------------------------------------------------------------------------

    async def __call__(self, scope: dict[str, Any], receive: Any, send: Any) -> None:
        if scope["type"] != "http":
            await self.mcp(scope, receive, send)  # lifespan: the MCP app's session manager
            return
        path, method = scope["path"], scope["method"]
        request = Request(scope, receive)
        response: Optional[Response] = None
        if path == "/.well-known/oauth-authorization-server":
            response = JSONResponse(self.metadata())
        elif path == "/.well-known/oauth-protected-resource/mcp":
            response = JSONResponse(self.prm())
        elif path == "/register" and method == "POST":
            response = await self.register(request)
        elif path == "/authorize":
            response = self.authorize(request)
        elif path == "/token" and method == "POST":
            response = await self.token(request)
        elif path == "/_log":
            response = Response("".join(json.dumps(e) + "\n" for e in self.log), media_type="application/x-ndjson")
        elif path == "/_secrets":
            issued = [*self.access, *self.refresh, *(c["secret"] for c in self.clients.values())]
            response = JSONResponse(issued)
        elif path == "/_revoke" and method == "POST":
            self.access.clear()
            response = JSONResponse({"revoked": True})
        elif path.startswith("/mcp"):
            await self.gate(scope, receive, send)
            return
        else:
            response = JSONResponse({"error": "not_found"}, status_code=404)
        await response(scope, receive, send)


def build_mcp() -> MCPServer:
    server = MCPServer("docs")

    @server.tool(structured_output=False)
    def whoami() -> str:
        """Say who is signed in."""
        return "signed in"

    @server.tool(structured_output=False)
    def echo(text: str) -> str:
        """Echo a text back."""
        return text

    @server.tool(structured_output=False)
    def write(text: str) -> str:
        """Write a note (needs the docs:write scope)."""
        return f"wrote {text}"

    return server


@contextmanager
def authority(clock_file: Optional[str] = None, expires_in: int = 600) -> Iterator[Authority]:
    """The app in a thread of this process (uvicorn); yields it, its `base` set."""
    from .mcp_servers.http_servers import serve_app

    app = Authority("", Clock(clock_file), expires_in)
    with serve_app(app) as base:
        app.base = base
        yield app


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--clock-file")
    parser.add_argument("--expires-in", type=int, default=600)
    opts = parser.parse_args()
    sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    sock.bind(("127.0.0.1", 0))
    port = sock.getsockname()[1]
    app = Authority(f"http://127.0.0.1:{port}", Clock(opts.clock_file), opts.expires_in)
    config = uvicorn.Config(app, log_level="warning", lifespan="on")
    server = uvicorn.Server(config)

    async def serve() -> None:
        config.load()
        server.lifespan = config.lifespan_class(config)
        with server.capture_signals():  # SIGTERM: a clean shutdown
            await server.startup(sockets=[sock])  # listening (and the app's lifespan started) from here
            print(f"READY {app.base}", flush=True)
            await server.main_loop()
            await server.shutdown(sockets=[sock])

    asyncio.run(serve())


if __name__ == "__main__":
    main()
