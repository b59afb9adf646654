"""`LoopbackCallback`: answer sign-in requests on this machine (a CLI, a desktop app).

A `wait_for` for `Request(kind="auth")`: it listens on the loopback address of the redirect URI
(`OAuthOptions.redirect_uri`, default `http://127.0.0.1:33418/callback`), shows the person the
authorization URL (opens their browser unless told not to, and prints the URL to stderr either
way), and waits until the browser comes back with `?code=…&state=…` for that very request (other
hits get a 404 and are ignored). The answer is `Answer(ok=True, data={"url": <the redirect>})`; an
`?error=` redirect is a decline, and so is waiting longer than `timeout` seconds. One sign-in at
a time (the port is one). Requests of other kinds go to `fallback`, or are declined.

A server host does not need this: its own web endpoint receives the redirect, finds the waiting
request by `request.data["state"]`, and answers it with the URL it was called with.
"""

from __future__ import annotations

import asyncio
import inspect
import sys
import webbrowser
from typing import Any, Callable, Optional
from urllib.parse import parse_qs, urlsplit

from ..errors import ConfigError
from ..types import Answer, Request
from ._model import AUTH_KIND, DEFAULT_REDIRECT_URI

_PAGE = ("<!doctype html><meta charset=utf-8><title>{title}</title>"
         "<p style='font:16px sans-serif;margin:3em'>{text}</p>")
_MAX_REQUEST = 16 * 1024


class LoopbackCallback:
    """A `wait_for` that completes sign-ins through a browser and a loopback redirect."""

    def __init__(self, redirect_uri: str = DEFAULT_REDIRECT_URI, *, open_browser: bool = True, timeout: float = 300.0,
                 fallback: Optional[Callable[[Request], Any]] = None,
                 announce: Optional[Callable[[str], None]] = None) -> None:
        parts = urlsplit(redirect_uri)
        if parts.scheme != "http" or parts.hostname not in ("127.0.0.1", "localhost", "::1") or not parts.port:
            raise ConfigError("toolnexus: LoopbackCallback needs an http://127.0.0.1:<port>/<path> redirect URI, got "
                              f"{redirect_uri!r}")
        self.redirect_uri = redirect_uri
        self.host, self.port, self.path = parts.hostname, parts.port, parts.path or "/"
        self.open_browser = open_browser
        self.timeout = timeout
        self.fallback = fallback
        self.announce = announce or (lambda text: print(text, file=sys.stderr, flush=True))
        self._one = asyncio.Lock()

    async def __call__(self, request: Request) -> Optional[Answer]:
        if request.kind != AUTH_KIND or not request.url:
            if self.fallback is None:
                return None
            answer = self.fallback(request)
            return await answer if inspect.isawaitable(answer) else answer
        async with self._one:
            return await self._sign_in(request, request.url)

    async def _sign_in(self, request: Request, url: str) -> Answer:
        state = (request.data or {}).get("state")
        landed: asyncio.Future[str] = asyncio.get_running_loop().create_future()

        async def serve(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
            try:
                head = await asyncio.wait_for(reader.readuntil(b"\r\n\r\n"), 10)
            except (asyncio.IncompleteReadError, asyncio.LimitOverrunError, TimeoutError, ConnectionError):
                writer.close()
                return
            target = head.split(b"\r\n", 1)[0].split(b" ")
            path = target[1].decode("latin-1") if len(target) >= 2 else "/"
            parts = urlsplit(path)
            query = parse_qs(parts.query)
            ours = parts.path == self.path and (state is None or query.get("state", [None])[0] == state)
            if ours and ("code" in query or "error" in query):
                ok = "code" in query
                body = _PAGE.format(title="Signed in" if ok else "Sign-in refused",
                                    text="Signed in. You can close this tab." if ok else
                                    "The sign-in was refused. You can close this tab.")
                status = "200 OK"
                if not landed.done():
                    landed.set_result(f"http://{self.host}:{self.port}{path}")
            else:
                body, status = _PAGE.format(title="Not found", text="Nothing here."), "404 Not Found"
            data = body.encode()
            writer.write(f"HTTP/1.1 {status}\r\nContent-Type: text/html; charset=utf-8\r\nContent-Length: {len(data)}"
                         "\r\nConnection: close\r\n\r\n".encode() + data)
            try:
                await writer.drain()
            finally:
                writer.close()

        server = await asyncio.start_server(serve, self.host, self.port, limit=_MAX_REQUEST)
        try:
            self.announce(f"{request.prompt}\nOpen this address to sign in: {url}")
            if self.open_browser:
                await asyncio.to_thread(webbrowser.open, url)
            try:
                back = await asyncio.wait_for(landed, self.timeout)
            except TimeoutError:
                return Answer(id=request.id, ok=False, reason="expired")
        finally:
            server.close()
            await server.wait_closed()
        if "error" in parse_qs(urlsplit(back).query):
            return Answer(id=request.id, ok=False, reason="declined", data={"url": back})
        return Answer(id=request.id, ok=True, data={"url": back})
