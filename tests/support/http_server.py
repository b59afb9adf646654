"""A real HTTP/1.1 server on 127.0.0.1 (free port) running in a thread, for tests of HTTP clients.

Routes map a path to a `Reply` (or a function of the `Received` request returning one); unknown
paths answer `200 ok`. Every request is recorded in `server.received`. Replies can also hang until
the client goes away (`hang=True`), trickle bytes (`trickle=True`) or drop the connection
(`drop=True`), so clients' timeout and cancellation paths can be observed from the server side:
`server.arrived` is set when a hanging request arrives, `server.disconnected` when its client
closed the connection. It keeps connections alive (HTTP/1.1), so connection reuse is visible
through `Received.client_port`.
"""

from __future__ import annotations

import select
import socket
import threading
from dataclasses import dataclass, field
from email.message import Message
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Callable, Union
from urllib.parse import parse_qsl, urlsplit

__all__ = ["Received", "Reply", "LoopbackServer"]


@dataclass
class Received:
    method: str
    target: str  # the raw request target, query included
    headers: Message
    body: bytes
    client_port: int

    @property
    def path(self) -> str:
        return urlsplit(self.target).path

    @property
    def query(self) -> list[tuple[str, str]]:
        return parse_qsl(urlsplit(self.target).query, keep_blank_values=True)


@dataclass
class Reply:
    status: int = 200
    body: Union[bytes, str] = b"ok"
    content_type: str = "text/plain; charset=utf-8"
    headers: dict[str, str] = field(default_factory=dict)
    hang: bool = False  # never answer; wait for the client to disconnect
    trickle: bool = False  # send headers, then one byte at a time until the client leaves
    drop: bool = False  # close the connection without any response


Route = Union[Reply, Callable[[Received], Reply]]


class _Handler(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"
    server: "_Server"

    def log_message(self, format: str, *args: object) -> None:
        pass

    def __getattr__(self, name: str) -> Callable[[], None]:
        if name.startswith("do_"):
            return self._handle
        raise AttributeError(name)

    def _handle(self) -> None:
        length = int(self.headers.get("Content-Length") or 0)
        body = self.rfile.read(length) if length else b""
        req = Received(self.command, self.path, self.headers, body, self.client_address[1])
        owner = self.server.owner
        with owner.lock:
            owner.received.append(req)
            route = owner.routes.get(req.path, Reply())
        reply = route(req) if callable(route) else route
        if reply.drop:
            self.close_connection = True
            self.connection.shutdown(socket.SHUT_RDWR)
            return
        if reply.hang:
            owner.arrived.set()
            self._wait_for_client_to_leave()
            return
        data = reply.body.encode("utf-8") if isinstance(reply.body, str) else reply.body
        self.send_response(reply.status)
        self.send_header("Content-Type", reply.content_type)
        for key, value in reply.headers.items():
            self.send_header(key, value)
        self.send_header("Content-Length", str(10**9 if reply.trickle else len(data)))
        self.end_headers()
        if reply.trickle:
            self._trickle()
        elif self.command != "HEAD":
            self.wfile.write(data)

    def _client_left(self, wait: float) -> bool:
        readable, _, _ = select.select([self.connection], [], [], wait)
        if not readable:
            return False
        try:
            return self.connection.recv(1, socket.MSG_PEEK) == b""
        except OSError:
            return True

    def _wait_for_client_to_leave(self) -> None:
        owner = self.server.owner
        while not owner.stopping.is_set():
            if self._client_left(0.02):
                owner.disconnected.set()
                break
        self.close_connection = True

    def _trickle(self) -> None:
        owner = self.server.owner
        while not owner.stopping.is_set():
            try:
                self.wfile.write(b"x")
                self.wfile.flush()
            except OSError:
                owner.disconnected.set()
                break
            if self._client_left(0.02):
                owner.disconnected.set()
                break
        self.close_connection = True


class _Server(ThreadingHTTPServer):
    daemon_threads = True
    owner: "LoopbackServer"


class LoopbackServer:
    """Start with `with LoopbackServer() as server:` (or `start()`/`stop()`)."""

    def __init__(self) -> None:
        self.routes: dict[str, Route] = {}
        self.received: list[Received] = []
        self.lock = threading.Lock()
        self.arrived = threading.Event()
        self.disconnected = threading.Event()
        self.stopping = threading.Event()
        self._httpd = _Server(("127.0.0.1", 0), _Handler)
        self._httpd.owner = self
        self._thread = threading.Thread(
            target=self._httpd.serve_forever, kwargs={"poll_interval": 0.02}, name="loopback-http", daemon=True
        )

    @property
    def port(self) -> int:
        return self._httpd.server_address[1]

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    def route(self, path: str, reply: Route) -> None:
        with self.lock:
            self.routes[path] = reply

    @property
    def last(self) -> Received:
        with self.lock:
            return self.received[-1]

    def start(self) -> "LoopbackServer":
        self._thread.start()
        return self

    def stop(self) -> None:
        self.stopping.set()
        self._httpd.shutdown()
        self._httpd.server_close()
        self._thread.join(timeout=5)

    def __enter__(self) -> "LoopbackServer":
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()
