"""MCP source against real remote MCP servers on 127.0.0.1: streamable HTTP and SSE-only."""

import os
import socket

import pytest
import pytest_asyncio

from support.mcp_servers.helpers import captured_warnings
from support.mcp_servers.http_servers import serve_sse_only, serve_streamable
from toolnexus.mcp_source import list_mcp_tools, load_mcp

pytestmark = pytest.mark.asyncio(loop_scope="module")


@pytest.fixture(scope="module")
def streamable_url():
    with serve_streamable() as url:
        yield url


@pytest.fixture(scope="module")
def sse_url():
    with serve_sse_only() as url:
        yield url


@pytest.fixture(scope="module")
def refused_url():
    with socket.socket() as sock:  # a port that was free a moment ago and is not listening now
        sock.bind(("127.0.0.1", 0))
        port = sock.getsockname()[1]
    return f"http://127.0.0.1:{port}/mcp"


@pytest_asyncio.fixture(loop_scope="module", scope="module")
async def remote(streamable_url, sse_url, refused_url):
    os.environ["TN_REMOTE_TOKEN"] = "tok"
    config = {
        "mcpServers": {
            "http": {"url": streamable_url, "headers": {"X-Tn": "Bearer ${TN_REMOTE_TOKEN}"}},
            "legacy": {"type": "remote", "url": sse_url},
            "refused": {"url": refused_url},
        }
    }
    try:
        with captured_warnings() as lines:
            source = await load_mcp(config)
    finally:
        del os.environ["TN_REMOTE_TOKEN"]
    yield source, lines
    await source.close()


def tool(source, name):
    return next(t for t in source.tools if t.name == name)


async def test_streamable_and_sse_only_servers_connect_and_refused_names_its_cause(remote, refused_url):
    source, lines = remote
    assert source.status == {"http": "connected", "legacy": "connected", "refused": "failed"}
    assert lines == [f'[toolnexus] MCP server "refused" failed: could not connect to {refused_url}: connection refused']


async def test_streamable_http_calls_carry_env_expanded_headers(remote):
    source = remote[0]
    assert (await tool(source, "http_echo").execute({"text": "over http"})).output == "over http"
    assert (await tool(source, "http_header").execute({"name": "x-tn"})).output == "Bearer tok"


async def test_sse_fallback_connection_lists_and_calls(remote):
    source = remote[0]
    assert len([t for t in source.tools if t.name.startswith("legacy_")]) == len(
        [t for t in source.tools if t.name.startswith("http_")]
    )
    r = await tool(source, "legacy_structured").execute({})
    assert (r.output, r.metadata) == ('{"result": "hi"}', {"server": "legacy"})


async def test_servers_connect_concurrently_and_keep_config_order():
    # The server answers no `initialize` until both are in flight: sequential connects would
    # leave the first one alone until the server gives up on it (503 ⇒ "failed").
    with serve_streamable(initialize_rendezvous=2) as url:
        source = await load_mcp({"b": {"url": url}, "a": {"url": url}})
        try:
            assert list(source.status.items()) == [("b", "connected"), ("a", "connected")]
            names = [t.name for t in source.tools]
            assert names.index("b_echo") < names.index("a_echo")
        finally:
            await source.close()


async def test_inventory_lists_original_names_unfiltered_for_connected_servers_only(streamable_url, refused_url):
    inv = await list_mcp_tools(
        {"srv": {"url": streamable_url, "tools": {"echo": True}}, "off": {"url": streamable_url, "enabled": False},
         "refused": {"url": refused_url}}
    )
    assert inv.status == {"srv": "connected", "off": "disabled", "refused": "failed"}
    assert list(inv.tools) == ["srv"]
    names = [i.name for i in inv.tools["srv"]]
    assert names[0] == "echo" and "dotted.name" in names and "grow" in names
    echo = inv.tools["srv"][0]
    assert echo.description == "Echo the text back" and echo.input_schema["additionalProperties"] is False


async def test_a_vanished_remote_keeps_its_tools_on_refresh_and_reports_the_failed_reconnect(caplog):
    with serve_streamable() as url:
        source = await load_mcp({"gone": {"url": url}})
        assert (await tool(source, "gone_echo").execute({"text": "up"})).output == "up"
    try:  # the server is gone now
        names = [t.name for t in source.tools]
        assert [t.name for t in await source.refresh()] == names
        assert '[toolnexus] MCP server "gone" refresh failed: ' in caplog.text
        r = await tool(source, "gone_echo").execute({"text": "x"})
        assert r.is_error and r.metadata == {"server": "gone"}
        assert r.output == f"connection lost; reconnect failed: could not connect to {url}: connection refused"
    finally:
        await source.close()


SLOW_IMPORT = r'''
import asyncio, importlib.abc, json, sys, time

class SlowSdk(importlib.abc.MetaPathFinder):
    """The SDK-backed module takes 1.5 s to import (as on a slow, busy machine)."""
    def find_spec(self, name, path, target=None):
        if name == "toolnexus.mcp_source._remote":
            time.sleep(1.5)
        return None

sys.meta_path.insert(0, SlowSdk())
from toolnexus.mcp_source import load_mcp

async def main():
    ticks = 0
    async def ticker():
        nonlocal ticks
        while True:
            await asyncio.sleep(0.05)
            ticks += 1
    task = asyncio.create_task(ticker())
    source = await load_mcp({"mcpServers": {"srv": {"url": sys.argv[1], "timeout": 1000}}})
    task.cancel()
    tools = [t.name for t in source.tools]
    print(json.dumps({"status": source.status, "reasons": source.reasons, "tools": tools, "ticks": ticks}))
    await source.close()

asyncio.run(main())
'''


async def test_a_slow_sdk_import_neither_counts_against_the_timeout_nor_stalls_the_loop(streamable_url):
    import asyncio
    import json
    import sys

    proc = await asyncio.create_subprocess_exec(sys.executable, "-c", SLOW_IMPORT, streamable_url,
                                                stdout=asyncio.subprocess.PIPE, stderr=asyncio.subprocess.PIPE)
    stdout, stderr = await asyncio.wait_for(proc.communicate(), 60)
    assert proc.returncode == 0, stderr.decode()
    out = json.loads(stdout.decode().strip().splitlines()[-1])
    assert out["status"] == {"srv": "connected"}, out  # a 1 s timeout, a 1.5 s import: still connected
    assert out["tools"]
    assert out["ticks"] >= 20  # the loop kept ticking (every 50 ms) through the 1.5 s import


async def test_a_redirect_to_another_origin_never_carries_the_servers_headers():
    """A remote MCP URL that redirects elsewhere: the configured headers (an API key) must not
    reach the other origin; the server is reported as failed, not silently followed."""
    import threading
    from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

    seen: list[dict[str, str]] = []

    class Elsewhere(BaseHTTPRequestHandler):
        def do_POST(self):
            seen.append(dict(self.headers))
            self.send_response(500)
            self.send_header("Content-Length", "0")
            self.end_headers()

        do_GET = do_POST

        def log_message(self, *args):
            pass

    elsewhere = ThreadingHTTPServer(("127.0.0.1", 0), Elsewhere)

    redirected: list[str] = []

    class Redirecting(BaseHTTPRequestHandler):
        def do_POST(self):
            redirected.append(self.command)
            self.send_response(307)
            self.send_header("Location", f"http://localhost:{elsewhere.server_port}/mcp")
            self.send_header("Content-Length", "0")
            self.end_headers()

        do_GET = do_POST

        def log_message(self, *args):
            pass

    first = ThreadingHTTPServer(("127.0.0.1", 0), Redirecting)
    threads = [threading.Thread(target=s.serve_forever, daemon=True) for s in (first, elsewhere)]
    for t in threads:
        t.start()
    try:
        config = {"mcpServers": {"srv": {"url": f"http://127.0.0.1:{first.server_port}/mcp", "timeout": 5000,
                                         "headers": {"X-Api-Key": "sk-very-secret", "Authorization": "Bearer tok"}}}}
        with captured_warnings():
            source = await load_mcp(config)
        try:
            assert source.status == {"srv": "failed"}
        finally:
            await source.close()
    finally:
        for s in (first, elsewhere):
            s.shutdown()
            s.server_close()
    assert "POST" in redirected and "GET" in redirected  # both transports were tried and redirected
    leaked = [h for h in seen if any("secret" in v or "tok" in v for v in h.values())]
    assert leaked == []
