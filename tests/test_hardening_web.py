"""Issue #11, the HTTP rows: SSRF through `webfetch`, credentials on cross-origin redirects, keys
echoed into tool errors, and reprs that showed secrets. Real loopback servers only (no internet):
loopback is exactly what `webfetch` must refuse by default and reach with the allow-list.
"""

from __future__ import annotations

import os

import pytest

from support.http_fixtures import close_pool  # noqa: F401 - autouse fixture
from support.http_server import LoopbackServer, Reply
from toolnexus.builtin import create_builtin_tools
from toolnexus.builtin._netguard import address_problem, parse_allow
from toolnexus.errors import ConfigError
from toolnexus.http import http_tool
from toolnexus.mcp_source._config import server_spec

SECRET = "s3cr3t-value-0123456789"


@pytest.fixture
def a():
    with LoopbackServer() as srv:
        yield srv


@pytest.fixture
def b():
    with LoopbackServer() as srv:
        yield srv


def webfetch(cfg=None):
    return create_builtin_tools(cfg)[6]


# ------------------------------------------------------------------------ webfetch SSRF (row 8)


async def test_webfetch_refuses_loopback_in_every_spelling_by_default(a):
    """Row `webfetch to loopback or private addresses (also ... as 2130706433)`."""
    a.route("/p", Reply(body="internal"))
    port = a.port
    for url in (f"{a.url}/p", f"http://localhost:{port}/p", f"http://2130706433:{port}/p",
                f"http://0x7f000001:{port}/p", f"http://127.1:{port}/p", f"http://[::ffff:127.0.0.1]:{port}/p"):
        result = await webfetch().execute({"url": url})
        assert result.is_error and "refused to fetch" in result.output and "loopback" in result.output, url
        assert "webfetch_allow" in result.output
    assert a.received == []  # nothing ever reached the server


async def test_webfetch_reaches_an_allowed_host_and_only_that(a):
    a.route("/p", Reply(body="internal page"))
    allowed = await webfetch({"webfetch_allow": ["127.0.0.1"]}).execute({"url": f"{a.url}/p"})
    assert not allowed.is_error and allowed.output == "internal page"
    by_network = await webfetch({"webfetch_allow": ["127.0.0.0/8"]}).execute({"url": f"http://localhost:{a.port}/p"})
    assert not by_network.is_error
    by_name = await webfetch({"webfetchAllow": ["localhost"]}).execute({"url": f"http://localhost:{a.port}/p"})
    assert not by_name.is_error
    assert a.received[0].headers["Host"] == f"127.0.0.1:{a.port}"
    assert a.received[1].headers["Host"] == f"localhost:{a.port}"  # the name is kept, the address pinned


async def test_webfetch_checks_every_redirect_hop(a):
    """Row: `(also by redirect ...)`: an allowed host redirecting to a non-allowed one is refused."""
    a.route("/jump", Reply(status=302, headers={"Location": f"http://127.0.0.2:{a.port}/inner"}))
    a.route("/local", Reply(status=302, headers={"Location": "/p"}))
    a.route("/p", Reply(body="fine"))
    tool = webfetch({"webfetch_allow": ["127.0.0.1"]})
    refused = await tool.execute({"url": f"{a.url}/jump"})
    assert refused.is_error and "127.0.0.2" in refused.output and "loopback" in refused.output
    followed = await tool.execute({"url": f"{a.url}/local"})
    assert not followed.is_error and followed.output == "fine"


async def test_webfetch_refuses_private_link_local_and_metadata_addresses_before_connecting():
    for url in ("http://169.254.169.254/latest/meta-data/", "http://10.0.0.1/", "http://192.168.1.1/",
                "http://[fe80::1]/", "http://[fd00::1]/", "http://0.0.0.0/", "http://100.64.0.1/"):
        result = await webfetch().execute({"url": url})
        assert result.is_error and "refused to fetch" in result.output, url


def test_address_classification_unwraps_embedded_ipv4():
    import ipaddress

    assert address_problem(ipaddress.ip_address("8.8.8.8")) is None
    assert "loopback" in address_problem(ipaddress.ip_address("::ffff:127.0.0.1"))
    assert "private" in address_problem(ipaddress.ip_address("64:ff9b::a00:1"))  # NAT64 of 10.0.0.1
    assert "private" in address_problem(ipaddress.ip_address("2002:c0a8:0101::1"))  # 6to4 of 192.168.1.1


def test_a_bad_allow_list_is_a_config_error():
    with pytest.raises(ConfigError):
        parse_allow("127.0.0.1")
    with pytest.raises(ConfigError):
        parse_allow(["ok.example", 5])
    with pytest.raises(ConfigError):
        create_builtin_tools({"webfetch_allow": ["not a host/x"]})


# ---------------------------------------------------- http_tool credentials on redirects (row 9)


async def test_http_tool_drops_a_secret_header_on_a_redirect_to_another_origin(a, b, monkeypatch):
    """Row `http_tool secret header + 302 to another origin`."""
    monkeypatch.setenv("TEST_API_KEY", SECRET)
    a.route("/start", Reply(status=302, headers={"Location": f"{b.url}/landing"}))
    b.route("/landing", Reply(body="landed"))
    tool = http_tool(name="t", description="", method="GET", url=f"{a.url}/start",
                     headers={"X-Api-Key": "${TEST_API_KEY}", "Authorization": "Bearer tok-123456789",
                              "Accept": "text/plain"})
    result = await tool.execute({})
    assert result.output == "landed"
    assert a.received[0].headers["X-Api-Key"] == SECRET  # the configured origin gets it
    landed = b.received[0].headers
    assert landed["X-Api-Key"] is None and landed["Authorization"] is None
    assert landed["Accept"] == "text/plain"  # harmless headers still travel


async def test_http_tool_keeps_credentials_on_a_same_origin_redirect(a, monkeypatch):
    monkeypatch.setenv("TEST_API_KEY", SECRET)
    a.route("/start", Reply(status=302, headers={"Location": "/next"}))
    a.route("/next", Reply(body="next"))
    tool = http_tool(name="t", description="", method="GET", url=f"{a.url}/start",
                     headers={"X-Api-Key": "${TEST_API_KEY}"})
    assert (await tool.execute({})).output == "next"
    assert [r.headers["X-Api-Key"] for r in a.received] == [SECRET, SECRET]


async def test_a_cross_origin_hop_then_back_stays_stripped(a, b, monkeypatch):
    monkeypatch.setenv("TEST_API_KEY", SECRET)
    a.route("/start", Reply(status=302, headers={"Location": f"{b.url}/bounce"}))
    b.route("/bounce", Reply(status=302, headers={"Location": f"{a.url}/end"}))
    a.route("/end", Reply(body="end"))
    tool = http_tool(name="t", description="", method="GET", url=f"{a.url}/start",
                     headers={"X-Api-Key": "${TEST_API_KEY}"})
    assert (await tool.execute({})).output == "end"
    assert a.received[-1].headers["X-Api-Key"] is None


# ---------------------------------------------------------- keys echoed into tool output (row 10)


async def test_an_upstream_echoing_the_key_never_shows_it_to_the_model(a, monkeypatch):
    """Row `upstream error echoing request headers`: the model-visible tool error."""
    monkeypatch.setenv("TEST_API_KEY", SECRET)
    a.route("/fail", lambda req: Reply(status=401, body=f"bad key {req.headers['X-Api-Key']} / {req.headers['X-Org']}"))
    a.route("/ok", lambda req: Reply(body=f"you sent {req.headers['X-Api-Key']}"))
    headers = {"X-Api-Key": "${TEST_API_KEY}", "X-Org": "${TEST_API_KEY}-org"}
    failing = http_tool(name="t", description="", method="GET", url=f"{a.url}/fail", headers=headers)
    result = await failing.execute({})
    assert result.is_error and result.output.startswith("HTTP 401: bad key «redacted»")
    assert SECRET not in result.output
    ok = http_tool(name="u", description="", method="GET", url=f"{a.url}/ok", headers=headers)
    assert SECRET not in (await ok.execute({})).output


# ----------------------------------------------------------------------------- reprs (row 11)


def test_server_spec_repr_hides_header_values_env_and_credential_flags(monkeypatch):
    """Row `repr(runtime), repr(ServerSpec) show the api key / expanded header values`."""
    monkeypatch.setenv("MCP_TOKEN", SECRET)
    remote = server_spec("r", {"url": f"https://user:{SECRET}@mcp.example/x?api_key={SECRET}&v=1",
                               "headers": {"Authorization": "Bearer ${MCP_TOKEN}"}})
    assert remote.headers == {"Authorization": f"Bearer {SECRET}"}  # still sent
    local = server_spec("l", {"command": ["srv", "--api-key", SECRET, f"--token={SECRET}", "--verbose"],
                              "env": {"MCP_TOKEN": SECRET}})
    for spec in (remote, local):
        shown = repr(spec)
        assert SECRET not in shown and "«redacted»" in shown
    assert "--verbose" in repr(local) and "variables>" in repr(local)
    assert os.environ["MCP_TOKEN"] not in str(local)


def test_agent_runtime_repr_hides_the_api_key():
    from toolnexus.agents._runtime import AgentRuntime

    rt = AgentRuntime(registry={}, llm={"base_url": "http://127.0.0.1:9", "api_key": SECRET, "model": "m"})
    assert SECRET not in repr(rt) and "«redacted»" in repr(rt) and "http://127.0.0.1:9" in repr(rt)
