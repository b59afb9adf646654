"""The served endpoint's guards and listening rules: body cap, Host/Origin, bearer auth, addr."""

from __future__ import annotations

import socket

import httpx
import httpx2
import pytest

from test_mcp_serve_kit import Recorder, make_toolkit, mcp_session, post_rpc, served
from toolnexus.serve import parse_addr, serve_toolkit
from toolnexus.serve.guard import HostGuard

LIST = b'{"jsonrpc":"2.0","id":1,"method":"tools/list"}'
HEADERS = {"accept": "application/json, text/event-stream", "content-type": "application/json"}


async def test_a_body_over_the_cap_is_413_whether_declared_or_streamed() -> None:
    async def chunks():
        for _ in range(4):
            yield b" " * 100

    async with served(make_toolkit(Recorder()), mcp={"max_body_bytes": 300}) as h, httpx.AsyncClient() as http:
        url = h.url + "/mcp"
        declared = await http.post(url, content=b" " * 301 + LIST, headers=HEADERS)
        streamed = await http.post(url, content=chunks(), headers=HEADERS)
        fits = await http.post(url, content=LIST, headers=HEADERS)
    assert (declared.status_code, declared.text) == (413, "request body too large")
    assert "content-length" not in streamed.request.headers
    assert (streamed.status_code, streamed.text) == (413, "request body too large")
    assert fits.status_code == 200


async def test_foreign_host_names_are_refused_421_but_ip_literals_localhost_and_listed_names_pass() -> None:
    profile = {"allowed_hosts": ["tools.internal"]}
    async with served(make_toolkit(Recorder()), mcp=profile) as h, httpx.AsyncClient() as http:
        url, port = h.url + "/mcp", h.port
        rebound = await post_rpc(http, url, "tools/list", host=f"evil.example:{port}")
        codes = [
            (await post_rpc(http, url, "tools/list", host=host)).status_code
            for host in (
                f"127.0.0.1:{port}", f"localhost:{port}", f"[::1]:{port}", f"tools.internal:{port}", "10.1.2.3"
            )
        ]
    assert (rebound.status_code, rebound.text) == (421, "invalid Host header")
    assert codes == [200] * 5


async def test_cross_origin_browser_requests_are_refused_403() -> None:
    async with served(make_toolkit(Recorder()), mcp={}) as h, httpx.AsyncClient() as http:
        url = h.url + "/mcp"
        evil = await post_rpc(http, url, "tools/list", origin="http://evil.example")
        null = await post_rpc(http, url, "tools/list", origin="null")
        local_ui = await post_rpc(http, url, "tools/list", origin="http://localhost:6274")
    assert (evil.status_code, evil.text) == (403, "invalid Origin header")
    assert null.status_code == 403
    assert local_ui.status_code == 200


def test_host_guard_rules() -> None:
    guard = HostGuard(allowed_origins=["https://app.example"])

    def refusal(**headers: str):
        return guard.refusal({"headers": [(k.encode(), v.encode()) for k, v in headers.items()]})

    assert refusal() is None  # no Host: not a browser
    assert refusal(host="attacker.test") == (421, "invalid Host header")
    assert refusal(host="192.168.1.5:8080", origin="http://192.168.1.5:3000") is None  # same host
    assert refusal(host="127.0.0.1:1", origin="https://app.example/") is None  # listed
    assert refusal(host="127.0.0.1:1", origin="http://10.0.0.9") == (403, "invalid Origin header")
    assert HostGuard(allowed_hosts=["*"]).refusal({"headers": [(b"host", b"anything.test")]}) is None


async def test_auth_token_requires_the_bearer_token() -> None:
    async with served(make_toolkit(Recorder()), mcp={"auth_token": "s3cret"}) as h, httpx.AsyncClient() as http:
        url = h.url + "/mcp"
        missing = await post_rpc(http, url, "tools/list")
        wrong = await post_rpc(http, url, "tools/list", authorization="Bearer nope")
        async with httpx2.AsyncClient(headers={"Authorization": "Bearer s3cret"}) as authed:
            async with mcp_session(url, http_client=authed) as s:
                names = [t.name for t in (await s.list_tools()).tools]
    assert (missing.status_code, missing.headers["www-authenticate"]) == (401, "Bearer")
    assert wrong.status_code == 401
    assert names[0] == "echo"


@pytest.mark.parametrize(
    "addr, expected",
    [("127.0.0.1:8080", ("127.0.0.1", 8080)), ("9000", ("127.0.0.1", 9000)), (":0", ("127.0.0.1", 0)),
     ("[::1]:81", ("::1", 81)), ("0.0.0.0:5", ("0.0.0.0", 5))],
)
def test_parse_addr_splits_at_the_last_colon(addr: str, expected: tuple) -> None:
    assert parse_addr(addr) == expected


@pytest.mark.parametrize("addr", ["host:http", "127.0.0.1:70000", "127.0.0.1:"])
def test_parse_addr_rejects_bad_ports_clearly(addr: str) -> None:
    with pytest.raises(ValueError, match='must be "host:port"'):
        parse_addr(addr)


async def test_port_zero_is_ephemeral_and_a_wildcard_bind_is_shown_as_loopback() -> None:
    async with served(make_toolkit(Recorder()), "0.0.0.0:0", mcp={}) as h:
        assert h.port > 0
        assert h.url == f"http://127.0.0.1:{h.port}" and h.addr == f"127.0.0.1:{h.port}"
        async with mcp_session(h.url + "/mcp") as s:
            assert (await s.call_tool("echo", {"x": "w"})).content[0].text == "echo:w"


async def test_a_taken_port_raises_oserror_from_serve() -> None:
    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen()
        with pytest.raises(OSError):
            await make_toolkit(Recorder()).serve(f"127.0.0.1:{taken.getsockname()[1]}", mcp={})


async def test_a2a_and_mcp_are_served_on_one_app() -> None:
    async with served(make_toolkit(Recorder()), mcp={}, a2a={"name": "agent"}, client=object()) as h:
        async with mcp_session(h.url + "/mcp") as s:
            assert (await s.call_tool("echo", {"x": "a"})).content[0].text == "echo:a"
        async with httpx.AsyncClient() as http:
            card = (await http.get(h.url + "/.well-known/agent-card.json")).json()
    assert card["name"] == "agent"


async def test_a_tool_provider_failure_at_request_time_is_500_mcp_error() -> None:
    class FlakyToolkit:
        mcp_server_config = {}
        a2a_config = None
        broken = False

        def tools(self):
            if self.broken:
                raise RuntimeError("source went away")
            return []

    toolkit = FlakyToolkit()
    handle = await serve_toolkit(toolkit, "127.0.0.1:0")
    try:
        toolkit.broken = True
        async with httpx.AsyncClient() as http:
            resp = await post_rpc(http, handle.url + "/mcp", "tools/list")
    finally:
        await handle.stop()
    assert (resp.status_code, resp.text) == (500, "mcp error")


async def test_a_malformed_inline_profile_fails_serve_before_binding() -> None:
    with pytest.raises(TypeError, match='mcp "tools" must be a list of strings'):
        await make_toolkit(Recorder()).serve("127.0.0.1:0", mcp={"tools": "echo"})
