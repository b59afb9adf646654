"""Listening: `host:port` parsing, binding, a uvicorn server on the caller's loop, `ServeHandle`.

The socket is bound before `start_listener` returns (a taken port raises `OSError` right there),
and uvicorn runs as a background task on the calling event loop — no thread. uvicorn is kept out
of the host process's business: no logging configuration, no signal handlers, no lifespan.
`ServeHandle.stop()` stops accepting, runs its `on_stop` hooks (awaiting those that return an
awaitable: e.g. draining A2A fulfilments), lets in-flight requests finish for up to
`GRACEFUL_SHUTDOWN` seconds (then cancels them), frees the socket and reaps the server task; it is
idempotent and safe to call concurrently. Connections are bounded by `ServeLimits`
(`toolnexus.serve._limits`): header and body read time, keep-alive, and how many are open at once.
"""

from __future__ import annotations

import asyncio
import contextlib
import inspect
import ipaddress
import socket
from collections.abc import Callable, Iterator, Sequence
from typing import Any, Optional

import uvicorn

from ..errors import ToolnexusRuntimeError
from ..mcp_serve._http import reap_task
from ..mcp_serve.errors import ServeConfigError, ServeTypeError
from ._limits import ServeLimits, guarded_protocol

GRACEFUL_SHUTDOWN = 2.0  # seconds
_WILDCARDS = ("0.0.0.0", "::", "")


def parse_addr(addr: str) -> tuple[str, int]:
    """`"host:port"` split at the last colon; no colon ⇒ port only; empty host ⇒ 127.0.0.1."""
    if not isinstance(addr, str):
        raise ServeTypeError(f'toolnexus: serve addr must be a string like "127.0.0.1:8080", got {type(addr).__name__}')
    host, sep, port_text = addr.rpartition(":")
    if not sep:
        host, port_text = "", addr
    host = host.strip()
    if host.startswith("[") and host.endswith("]"):
        host = host[1:-1]
    try:
        port = int(port_text)
    except ValueError:
        port = -1
    if not 0 <= port <= 65535:
        raise ServeConfigError(f'toolnexus: serve addr must be "host:port" with a port 0-65535, got {addr!r}')
    return host or "127.0.0.1", port


def _url_host(host: str) -> str:
    if host in _WILDCARDS:
        return "127.0.0.1"
    try:
        if ipaddress.ip_address(host).version == 6:
            return f"[{host}]"
    except ValueError:
        pass
    return host


async def _bind(host: str, port: int) -> socket.socket:
    infos = await asyncio.get_running_loop().getaddrinfo(
        host, port, type=socket.SOCK_STREAM, flags=socket.AI_PASSIVE
    )
    family, kind, proto, _, sockaddr = infos[0]
    sock = socket.socket(family, kind, proto)
    try:
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        sock.bind(sockaddr)
        sock.listen(512)
        sock.setblocking(False)
    except BaseException:
        sock.close()
        raise
    return sock


class _EmbeddedServer(uvicorn.Server):
    """uvicorn without signal capture, reporting the end of startup through a future."""

    def __init__(self, config: uvicorn.Config, started: "asyncio.Future[None]") -> None:
        super().__init__(config)
        self._started_future = started

    @contextlib.contextmanager
    def capture_signals(self) -> Iterator[None]:  # the host process owns its signals
        yield

    async def startup(self, sockets: Optional[list[socket.socket]] = None) -> None:
        try:
            await super().startup(sockets=sockets)
        except BaseException as exc:
            if not self._started_future.done():
                self._started_future.set_exception(exc)
            raise
        if not self._started_future.done():
            self._started_future.set_result(None)


class ServeHandle:
    """A running server: `url` (no trailing slash), `host`, `port`, `addr`; `stop()` / `close()`.

    `store` is the A2A task store (None without A2A); `profiles` says which of `a2a` / `mcp` are on.
    """

    def __init__(
        self,
        server: _EmbeddedServer,
        task: "asyncio.Task[None]",
        sock: socket.socket,
        host: str,
        on_stop: Sequence[Callable[[], Any]] = (),
    ) -> None:
        self._server = server
        self._task = task
        self._sock = sock
        self._on_stop = tuple(on_stop)
        self._stopping: Optional[asyncio.Future[None]] = None
        self.host = host
        self.port: int = sock.getsockname()[1]
        self.addr = f"{_url_host(host)}:{self.port}"
        self.url = f"http://{self.addr}"
        self.store: Any = None
        self.profiles: dict[str, bool] = {}

    @property
    def running(self) -> bool:
        return not self._task.done()

    async def stop(self) -> None:
        """Stop accepting, free the socket, reap the server task. Safe to call twice."""
        if self._stopping is None:
            self._stopping = asyncio.ensure_future(self._shutdown())
        await asyncio.shield(self._stopping)

    async def close(self) -> None:
        """Alias of `stop()`."""
        await self.stop()

    async def _shutdown(self) -> None:
        self._server.should_exit = True
        for hook in self._on_stop:  # e.g. tell in-flight tools to wrap up, drain A2A tasks
            outcome = hook()
            if inspect.isawaitable(outcome):
                await outcome
        await asyncio.wait({self._task}, timeout=GRACEFUL_SHUTDOWN + 1.0)
        if not self._task.done():  # uvicorn did not wind down in time: force it
            self._server.force_exit = True
        await reap_task(self._task)  # a server that failed earlier still counts as stopped
        self._sock.close()  # uvicorn closes it on a clean shutdown; not when forced

    async def __aenter__(self) -> "ServeHandle":
        return self

    async def __aexit__(self, *exc: Any) -> None:
        await self.stop()

    def __repr__(self) -> str:
        return f"ServeHandle(url={self.url!r}, running={self.running})"


async def start_listener(app: Any, addr: str, *, on_stop: Sequence[Callable[[], Any]] = (),
                         limits: Optional[ServeLimits] = None) -> ServeHandle:
    """Bind `addr` and serve the ASGI `app` on the running loop until `stop()`.

    `on_stop` hooks run first thing in `stop()` (awaited when they return an awaitable), before
    in-flight requests are waited for. `limits` bounds connections (defaults: `ServeLimits()`).
    """
    limits = limits if limits is not None else ServeLimits()
    if not isinstance(limits, ServeLimits):
        raise ServeTypeError(f"toolnexus: serve limits must be a ServeLimits, got {type(limits).__name__}")
    host, port = parse_addr(addr)
    sock = await _bind(host, port)
    config = uvicorn.Config(
        app,
        http=guarded_protocol(limits),
        log_config=None,
        access_log=False,
        lifespan="off",
        ws="none",
        server_header=False,
        timeout_keep_alive=limits.keep_alive,  # type: ignore[arg-type]  # annotated int; its timer takes float seconds
        timeout_graceful_shutdown=int(GRACEFUL_SHUTDOWN),
    )
    loop = asyncio.get_running_loop()
    started: asyncio.Future[None] = loop.create_future()
    server = _EmbeddedServer(config, started)
    task = loop.create_task(server.serve(sockets=[sock]), name=f"toolnexus-serve-{addr}")
    try:
        await asyncio.wait({started, task}, return_when=asyncio.FIRST_COMPLETED)
        if not started.done():  # the server task ended without finishing startup
            exc = task.exception() if not task.cancelled() else None
            raise ToolnexusRuntimeError(f"toolnexus: server on {addr} failed to start: {exc}") from exc
        started.result()
    except BaseException:
        server.should_exit = True
        await reap_task(task)
        sock.close()
        raise
    return ServeHandle(server, task, sock, host, on_stop)
