"""The lean HTTP/1.1 transport against a scripted asyncio server on loopback.

Each test scripts what the server writes back per request (bytes, pauses on events, a closed
socket) and checks what the transport makes of it: framing, keep-alive reuse, the one retry on a
connection the server had closed, caps, timeouts, cancellation and refusals.
"""

from __future__ import annotations

import asyncio
import json
from contextlib import aclosing
from typing import Awaitable, Callable

import pytest

from toolnexus.client import ProviderError
from toolnexus.client._errors import ResponseTooLarge
from toolnexus.client._http11 import Http11Transport
from toolnexus.errors import NetworkError, NetworkTimeout, ToolnexusValueError

Reply = Callable[[asyncio.StreamReader, asyncio.StreamWriter], Awaitable[None]]


class ScriptedServer:
    """Reads one request at a time per connection; `replies` answer them in order (any connection)."""

    def __init__(self, replies: list[Reply]) -> None:
        self.replies = list(replies)
        self.requests: list[tuple[int, bytes, bytes]] = []  # (connection, head, body)
        self.connections = 0
        self.closed = asyncio.Event()
        self._server: asyncio.AbstractServer | None = None

    async def __aenter__(self) -> "ScriptedServer":
        self._server = await asyncio.start_server(self._serve, "127.0.0.1", 0)
        return self

    async def __aexit__(self, *exc: object) -> None:
        assert self._server is not None
        self._server.close()
        await self._server.wait_closed()

    @property
    def url(self) -> str:
        assert self._server is not None
        return f"http://127.0.0.1:{self._server.sockets[0].getsockname()[1]}/v1/chat"

    async def _serve(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        self.connections += 1
        number = self.connections
        try:
            while True:
                try:
                    head = await reader.readuntil(b"\r\n\r\n")
                except asyncio.IncompleteReadError:
                    return
                length = int(next(line.split(b":")[1] for line in head.split(b"\r\n")
                                  if line.lower().startswith(b"content-length")))
                body = await reader.readexactly(length)
                self.requests.append((number, head, body))
                await self.replies.pop(0)(reader, writer)
                if writer.is_closing():
                    return
        finally:
            writer.close()
            self.closed.set()


def sized(body: bytes, status: str = "200 OK", extra: str = "") -> Reply:
    async def reply(_: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        writer.write(f"HTTP/1.1 {status}\r\nContent-Length: {len(body)}\r\n{extra}\r\n".encode() + body)
        await writer.drain()
    return reply


def chunked(*pieces: bytes, gate: asyncio.Event | None = None) -> Reply:
    async def reply(_: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        writer.write(b"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\nContent-Type: text/event-stream\r\n\r\n")
        for piece in pieces:
            writer.write(b"%x\r\n%s\r\n" % (len(piece), piece))
            await writer.drain()
        if gate is not None:
            await gate.wait()
        writer.write(b"0\r\n\r\n")
        await writer.drain()
    return reply


def until_close(body: bytes) -> Reply:
    async def reply(_: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        writer.write(b"HTTP/1.1 200 OK\r\n\r\n" + body)
        await writer.drain()
        writer.close()
    return reply


def hang(gate: asyncio.Event) -> Reply:
    """Answer nothing until `gate` is set or the client hangs up (then close our end too)."""
    async def reply(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        hung_up = asyncio.ensure_future(reader.read())
        opened = asyncio.ensure_future(gate.wait())
        await asyncio.wait([hung_up, opened], return_when=asyncio.FIRST_COMPLETED)
        hung_up.cancel()
        opened.cancel()
        writer.close()
    return reply


def drop() -> Reply:
    async def reply(_: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        writer.close()
    return reply


def ok(value: object) -> Reply:
    return sized(json.dumps(value).encode())


def idle_count(transport: Http11Transport) -> int:
    return sum(len(conns) for conns in transport._idle.values())


async def test_a_sized_reply_is_json_and_the_connection_is_kept_for_the_next_request():
    async with ScriptedServer([ok({"n": 1}), ok({"n": 2})]) as server:
        async with aclosing(Http11Transport()) as t:
            assert await t.post(server.url, {"Authorization": "Bearer k"}, {"q": 1}, 5) == {"n": 1}
            assert await t.post(server.url, {}, {"q": 2}, 5) == {"n": 2}
            assert [r[0] for r in server.requests] == [1, 1]
            head, body = server.requests[0][1], server.requests[0][2]
            assert head.startswith(b"POST /v1/chat HTTP/1.1\r\n") and b"Authorization: Bearer k\r\n" in head
            assert b"Content-Type: application/json\r\n" in head and json.loads(body) == {"q": 1}
        assert idle_count(t) == 0


async def test_a_chunked_reply_and_one_read_to_the_end_of_the_connection():
    async with ScriptedServer([chunked(b'{"a":', b' [1, 2]}'), until_close(b'{"b": true}'), ok({})]) as server:
        async with aclosing(Http11Transport()) as t:
            assert await t.post(server.url, {}, {}, 5) == {"a": [1, 2]}
            assert await t.post(server.url, {}, {}, 5) == {"b": True}  # reused connection, then closed by server
            assert await t.post(server.url, {}, {}, 5) == {}  # a new connection
            assert [r[0] for r in server.requests] == [1, 1, 2]


async def test_connection_close_from_the_server_is_honoured():
    async with ScriptedServer([sized(b"{}", extra="Connection: close\r\n"), ok({})]) as server:
        async with aclosing(Http11Transport()) as t:
            await t.post(server.url, {}, {}, 5)
            assert idle_count(t) == 0
            await t.post(server.url, {}, {}, 5)
            assert [r[0] for r in server.requests] == [1, 2]


async def test_an_idle_connection_the_server_dropped_is_retried_once_on_a_fresh_one():
    async with ScriptedServer([ok({"n": 1}), drop(), ok({"n": 2})]) as server:
        async with aclosing(Http11Transport()) as t:
            await t.post(server.url, {}, {}, 5)
            assert await t.post(server.url, {}, {}, 5) == {"n": 2}
            assert [r[0] for r in server.requests] == [1, 1, 2]


async def test_a_fresh_connection_that_drops_is_a_network_error_not_retried():
    async with ScriptedServer([drop(), ok({})]) as server:
        async with aclosing(Http11Transport()) as t:
            with pytest.raises(NetworkError, match="^the connection closed after 0 bytes"):
                await t.post(server.url, {}, {}, 5)
            assert len(server.requests) == 1


async def test_an_error_status_is_a_provider_error_and_the_connection_survives_it():
    async with ScriptedServer([sized(b'{"error": "slow down"}', "429 Too Many Requests", "Retry-After: 3\r\n"),
                               ok({"fine": 1})]) as server:
        async with aclosing(Http11Transport()) as t:
            with pytest.raises(ProviderError) as caught:
                await t.post(server.url, {}, {}, 5)
            assert caught.value.status == 429 and "slow down" in str(caught.value)
            assert await t.post(server.url, {}, {}, 5) == {"fine": 1}
            assert [r[0] for r in server.requests] == [1, 1]


async def test_a_redirect_is_not_followed():
    async with ScriptedServer(
        [sized(b"", "307 Temporary Redirect", "Location: http://elsewhere.invalid/\r\n")]
    ) as server:
        async with aclosing(Http11Transport()) as t:
            with pytest.raises(ProviderError) as caught:
                await t.post(server.url, {"Authorization": "Bearer secret"}, {}, 5)
            assert caught.value.status == 307 and len(server.requests) == 1


async def test_a_body_over_the_cap_fails_and_the_connection_is_not_reused():
    async with ScriptedServer([ok({"x": "y" * 500}), ok({})]) as server:
        async with aclosing(Http11Transport(max_response_bytes=100)) as t:
            with pytest.raises(ResponseTooLarge, match="max_response_bytes"):
                await t.post(server.url, {}, {}, 5)
            assert idle_count(t) == 0


async def test_a_body_that_is_not_json_says_what_came_back():
    async with ScriptedServer([sized(b"<html>gateway</html>")]) as server:
        async with aclosing(Http11Transport()) as t:
            with pytest.raises(Exception, match="not JSON: '<html>gateway"):
                await t.post(server.url, {}, {}, 5)


async def test_a_reply_that_is_not_http_is_a_network_error():
    async def garbage(_: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        writer.write(b"SSH-2.0-OpenSSH\r\n\r\n")
        await writer.drain()
    async with ScriptedServer([garbage]) as server:
        async with aclosing(Http11Transport()) as t:
            with pytest.raises(NetworkError, match="not an HTTP/1.x response"):
                await t.post(server.url, {}, {}, 5)


async def test_a_silent_server_is_a_network_timeout_within_the_attempt_timeout():
    gate = asyncio.Event()
    async with ScriptedServer([hang(gate)]) as server:
        async with aclosing(Http11Transport()) as t:
            with pytest.raises(NetworkTimeout, match="within 0.05s"):
                await t.post(server.url, {}, {}, 0.05)
            await server.closed.wait()  # the transport closed the socket it gave up on
            assert not gate.is_set() and idle_count(t) == 0


async def test_a_stream_yields_chunks_as_they_arrive_and_its_connection_returns_to_the_pool():
    gate = asyncio.Event()
    async with ScriptedServer([chunked(b"data: one\n\n", b"data: two\n\n", gate=gate), ok({})]) as server:
        async with aclosing(Http11Transport()) as t:
            stream = await t.open(server.url, {}, {}, 5)
            assert await stream.__anext__() == b"data: one\n\n"
            assert await stream.__anext__() == b"data: two\n\n"
            gate.set()  # the terminator arrives while the reader closes: it waits for it briefly
            await stream.aclose()
            assert idle_count(t) == 1
            await t.post(server.url, {}, {}, 5)
            assert [r[0] for r in server.requests] == [1, 1]


async def test_a_stream_closed_before_its_end_closes_the_connection():
    gate = asyncio.Event()
    async with ScriptedServer([chunked(b"data: one\n\n", gate=gate)]) as server:
        async with aclosing(Http11Transport()) as t:
            stream = await t.open(server.url, {}, {}, 5)
            await stream.__anext__()
            await stream.aclose()  # the server never finishes: no reuse, no hang beyond the short grace
            assert idle_count(t) == 0
            gate.set()
            await server.closed.wait()


async def test_a_stalled_stream_is_a_network_timeout():
    gate = asyncio.Event()
    async with ScriptedServer([chunked(b"data: one\n\n", gate=gate)]) as server:
        async with aclosing(Http11Transport()) as t:
            stream = await t.open(server.url, {}, {}, 0.05)
            await stream.__anext__()
            with pytest.raises(NetworkTimeout, match="sent nothing for 0.05s"):
                await stream.__anext__()
            gate.set()
            await server.closed.wait()


async def test_a_cut_stream_is_a_network_error():
    async def cut(_: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        writer.write(b"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n5\r\nda")
        await writer.drain()
        writer.close()
    async with ScriptedServer([cut]) as server:
        async with aclosing(Http11Transport()) as t:
            stream = await t.open(server.url, {}, {}, 5)
            with pytest.raises(NetworkError, match="was cut"):
                await stream.__anext__()


async def test_cancelling_a_request_closes_its_socket_at_once():
    gate = asyncio.Event()
    async with ScriptedServer([hang(gate)]) as server:
        async with aclosing(Http11Transport()) as t:
            task = asyncio.ensure_future(t.post(server.url, {}, {}, 30))
            while not server.requests:
                await asyncio.sleep(0)
            task.cancel()
            with pytest.raises(asyncio.CancelledError):
                await task
            await server.closed.wait()  # the server sees the close while it still waits to answer
            assert not gate.is_set() and idle_count(t) == 0


async def test_header_values_with_line_breaks_are_refused_before_anything_is_sent():
    async with ScriptedServer([ok({})]) as server:
        async with aclosing(Http11Transport()) as t:
            with pytest.raises(ToolnexusValueError, match="line break"):
                await t.post(server.url, {"X-Note": "a\r\nX-Injected: 1"}, {}, 5)
            assert server.requests == [] and server.connections == 0


async def test_only_http_urls_with_a_host_are_accepted():
    t = Http11Transport()
    for url in ("ftp://host/x", "http:///nohost", "file:///etc/passwd"):
        with pytest.raises(ToolnexusValueError, match="an http"):
            await t.post(url, {}, {}, 5)


async def test_no_content_reply_has_no_body_to_wait_for():
    async def no_content(_: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        writer.write(b"HTTP/1.1 204 No Content\r\n\r\n")
        await writer.drain()
    async with ScriptedServer([no_content, ok({})]) as server:
        async with aclosing(Http11Transport()) as t:
            with pytest.raises(Exception, match="not JSON"):  # an empty 2xx body is not a model reply
                await t.post(server.url, {}, {}, 5)
            await t.post(server.url, {}, {}, 5)
            assert [r[0] for r in server.requests] == [1, 1]


async def test_the_idle_pool_is_bounded_per_host():
    gate = asyncio.Event()
    replies = [chunked(b"{}", gate=gate) for _ in range(3)]
    async with ScriptedServer(replies) as server:
        async with aclosing(Http11Transport(max_idle_per_host=2)) as t:
            streams = [await t.open(server.url, {}, {}, 5) for _ in range(3)]
            assert server.connections == 3
            gate.set()
            for stream in streams:
                async for _ in stream:
                    pass
            assert idle_count(t) == 2

def early_hints_then(final: Reply) -> Reply:
    """`103 Early Hints` (and a `100 Continue`) before the final response, as a CDN may send."""
    async def reply(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        writer.write(b"HTTP/1.1 100 Continue\r\n\r\n")
        writer.write(b"HTTP/1.1 103 Early Hints\r\nLink: </style.css>; rel=preload; as=style\r\n\r\n")
        await writer.drain()
        await final(reader, writer)
    return reply


async def test_informational_replies_are_skipped_and_the_final_one_is_read():
    async with ScriptedServer([early_hints_then(ok({"n": 1})), early_hints_then(sized(b'{"e": 1}', "503 Busy")),
                               ok({"n": 2})]) as server:
        async with aclosing(Http11Transport()) as t:
            assert await t.post(server.url, {}, {}, 5) == {"n": 1}
            with pytest.raises(ProviderError) as caught:  # the final status counts, not the 103
                await t.post(server.url, {}, {}, 5)
            assert caught.value.status == 503
            assert await t.post(server.url, {}, {}, 5) == {"n": 2}
            assert [r[0] for r in server.requests] == [1, 1, 1]  # one connection throughout


async def test_a_stream_after_early_hints_yields_the_final_responses_body():
    async with ScriptedServer([early_hints_then(chunked(b"data: one\n\n", b"data: two\n\n"))]) as server:
        async with aclosing(Http11Transport()) as t:
            stream = await t.open(server.url, {}, {}, 5)
            assert b"".join([piece async for piece in stream]) == b"data: one\n\ndata: two\n\n"
            assert idle_count(t) == 1

