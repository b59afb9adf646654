"""Safe by default: unsafe built-ins need a token, open binds warn, slow clients are dropped.

Real sockets against our real server on loopback. The slow clients are raw asyncio streams that
send part of a request and stop (or trickle); the server must close them within the small
`ServeLimits` set here while ordinary requests on other connections keep being answered.
"""

from __future__ import annotations

import asyncio
import logging

import httpx
import pytest

from support.serve_kit import card_of, generate
from test_mcp_serve_kit import Recorder, make_toolkit, mcp_session, post_rpc, served
from toolnexus import create_in_process_client
from toolnexus.builtin import create_builtin_tools
from toolnexus.errors import ToolnexusError
from toolnexus.serve import UNSAFE_BUILTINS, ServeLimits
from toolnexus.toolkit import Toolkit, create_toolkit

FAST = ServeLimits(header_timeout=0.3, body_timeout=0.3, keep_alive=5.0, drain_timeout=0)
DROP_BOUND = 10.0  # seconds: far above the configured limits, so only a server that never drops fails


async def _builtin_toolkit() -> Toolkit:
    return await create_toolkit(builtins={"base_dir": "."})


async def test_default_builtins_are_refused_over_mcp_and_a2a_without_a_token() -> None:
    toolkit = await _builtin_toolkit()
    with pytest.raises(ValueError) as mcp_err:
        await toolkit.serve("127.0.0.1:0", mcp={})
    with pytest.raises(ValueError) as a2a_err:
        await toolkit.serve("127.0.0.1:0", a2a={}, client=create_in_process_client(model="m", generate=generate))
    for err, where in ((mcp_err, "mcp"), (a2a_err, "a2a")):
        text = str(err.value)
        assert isinstance(err.value, ToolnexusError)
        assert (
            f"refusing to serve built-in tools bash, read, write, edit, grep, glob, webfetch, apply_patch over {where}"
            in text
        )
        assert f'{where}["auth_token"]' in text and "allow_unauthenticated_builtins" in text
    assert set(UNSAFE_BUILTINS) == {"bash", "write", "edit", "apply_patch", "read", "grep", "glob", "webfetch"}


async def test_with_a_token_builtins_are_served_only_to_callers_that_send_it() -> None:
    toolkit = await _builtin_toolkit()
    async with served(toolkit, mcp={"auth_token": "t0ken"}) as h, httpx.AsyncClient() as http:
        anonymous = await post_rpc(http, h.url + "/mcp", "tools/call", {"name": "bash", "arguments": {"command": "id"}})
        listed = await post_rpc(http, h.url + "/mcp", "tools/list", authorization="Bearer t0ken")
    assert anonymous.status_code == 401
    assert "bash" in {t["name"] for t in listed.json()["result"]["tools"]}


async def test_the_safe_builtins_or_an_allow_list_need_no_token() -> None:
    toolkit = await _builtin_toolkit()
    async with served(toolkit, mcp={"tools": ["question", "todowrite"]}) as h:
        async with mcp_session(h.url + "/mcp") as s:
            names = [t.name for t in (await s.list_tools()).tools]
    assert names == ["question", "todowrite"]


async def test_opting_in_serves_them_and_warns(caplog) -> None:
    toolkit = await _builtin_toolkit()
    with caplog.at_level(logging.WARNING, logger="toolnexus"):
        async with served(toolkit, mcp={"allow_unauthenticated_builtins": True}) as h:
            async with mcp_session(h.url + "/mcp") as s:
                names = {t.name for t in (await s.list_tools()).tools}
    assert "bash" in names
    warning = [r for r in caplog.records if "allow_unauthenticated_builtins" in r.getMessage()]
    assert warning and warning[0].levelno == logging.WARNING and "bash" in warning[0].getMessage()


async def test_a_builtin_registered_after_serve_is_not_served_without_a_token() -> None:
    toolkit = make_toolkit(Recorder())
    async with served(toolkit, mcp={}) as h:
        toolkit.register(*[t for t in create_builtin_tools() if t.name == "write"])
        async with mcp_session(h.url + "/mcp") as s:
            names = [t.name for t in (await s.list_tools()).tools]
    assert "write" not in names and "echo" in names


async def test_a_non_loopback_bind_without_a_token_warns_loudly(caplog) -> None:
    with caplog.at_level(logging.WARNING, logger="toolnexus"):
        async with served(make_toolkit(Recorder()), "0.0.0.0:0", mcp={}):
            pass
        async with served(make_toolkit(Recorder()), "127.0.0.1:0", mcp={}):
            pass
    loud = [r.getMessage() for r in caplog.records if "without an auth_token" in r.getMessage()]
    assert len(loud) == 1 and "0.0.0.0" in loud[0] and "WARNING" in loud[0]


async def _dropped(reader: asyncio.StreamReader) -> bytes:
    """Everything the server sends before closing; raises TimeoutError if it never closes."""
    return await asyncio.wait_for(reader.read(), DROP_BOUND)


async def _open(h) -> tuple[asyncio.StreamReader, asyncio.StreamWriter]:
    return await asyncio.open_connection("127.0.0.1", h.port)


async def test_slow_header_clients_are_dropped_while_normal_requests_are_served() -> None:
    async with served(make_toolkit(Recorder()), mcp={}, limits=FAST) as h:
        slow = [await _open(h) for _ in range(30)]
        for _, writer in slow:
            writer.write(b"POST /mcp HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Ty")  # never finishes the headers
            await writer.drain()
        async with httpx.AsyncClient() as http:
            answers = [(await post_rpc(http, h.url + "/mcp", "tools/list")).status_code for _ in range(5)]
        leftovers = await asyncio.gather(*(_dropped(r) for r, _ in slow))
        for _, writer in slow:
            writer.close()
        async with httpx.AsyncClient() as http:
            after = await post_rpc(http, h.url + "/mcp", "tools/list")
    assert answers == [200] * 5
    assert leftovers == [b""] * 30  # closed without a word: nothing was asked yet
    assert after.status_code == 200


async def test_a_trickling_header_is_dropped_even_though_bytes_keep_coming() -> None:
    async with served(make_toolkit(Recorder()), mcp={}, limits=FAST) as h:
        reader, writer = await _open(h)
        closed = asyncio.ensure_future(_dropped(reader))

        async def trickle() -> None:
            for byte in b"GET /mcp HTTP/1.1\r\nX-Pad: " + b"a" * 2000:
                if closed.done():
                    return
                writer.write(bytes([byte]))
                await asyncio.sleep(0.02)  # the client's pace, not a synchronisation

        pacing = asyncio.ensure_future(trickle())
        try:
            assert await closed == b""
        finally:
            pacing.cancel()
            writer.close()


async def test_slow_body_clients_are_dropped_on_mcp_and_a2a_routes() -> None:
    client = create_in_process_client(model="m", generate=generate)
    async with served(make_toolkit(Recorder()), mcp={}, a2a={}, client=client, limits=FAST) as h:
        slow = []
        for path in ("/mcp", "/"):
            reader, writer = await _open(h)
            writer.write(
                f"POST {path} HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Type: application/json\r\n"
                f'Accept: application/json, text/event-stream\r\nContent-Length: 5000\r\n\r\n{{"jsonrpc"'.encode()
            )
            await writer.drain()
            slow.append((reader, writer))
        async with httpx.AsyncClient() as http:
            card = await card_of(http, h.url)
        leftovers = await asyncio.gather(*(_dropped(r) for r, _ in slow))
        for _, writer in slow:
            writer.close()
    assert card["name"] == "toolnexus-agent"
    assert leftovers == [b"", b""]


async def test_connections_over_the_cap_get_503_at_once() -> None:
    limits = ServeLimits(header_timeout=30, max_connections=4, drain_timeout=0)
    async with served(make_toolkit(Recorder()), mcp={}, limits=limits) as h:
        idle = [await _open(h) for _ in range(4)]
        reader, writer = await _open(h)
        refused = await _dropped(reader)
        writer.close()
        for _, w in idle:
            w.close()
        status = 0
        loop = asyncio.get_running_loop()
        deadline = loop.time() + DROP_BOUND
        async with httpx.AsyncClient() as http:
            while status != 200 and loop.time() < deadline:  # the closed slots free up as the server sees EOF
                status = (await post_rpc(http, h.url + "/mcp", "tools/list")).status_code
    assert refused.startswith(b"HTTP/1.1 503 ") and refused.endswith(b"server busy\n")
    assert status == 200


def test_limits_are_checked() -> None:
    with pytest.raises(ValueError, match="header_timeout must be a positive number"):
        ServeLimits(header_timeout=0)
    with pytest.raises(ValueError, match="max_connections must be a positive integer"):
        ServeLimits(max_connections=0)
