"""OAuth for remote MCP servers, in one process: step-up, refresh, the loopback helper, client
credentials, bad answers, keys and what never shows a secret.

A real loopback authorization server and the MCP server it protects (`support.oauth_server`, in a
thread); toolnexus connects to it over HTTP with the official SDK transports. The test plays the
person (`sign_in`: open the authorization URL, take the redirect).
"""

from __future__ import annotations

import argparse
import asyncio
import logging
from urllib.parse import parse_qs, urlsplit

import httpx
import pytest
from opentelemetry.sdk.trace import TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter

from support import oauth_agent_app
from support.oauth_server import authority
from toolnexus import Answer, ToolContext, create_toolkit, otel, pending_of
from toolnexus.mcp_auth import LoopbackCallback, OAuthOptions, ServerAuth, TokenVault, new_token_key
from toolnexus.mcp_source import McpOptions, load_mcp_with_context
from toolnexus.stores import open_store

pytestmark = pytest.mark.asyncio(loop_scope="module")


class Clock:
    def __init__(self) -> None:
        self.offset = 0.0

    def __call__(self) -> float:
        import time

        return time.time() + self.offset


@pytest.fixture(scope="module")
def server(tmp_path_factory):
    clock_file = tmp_path_factory.mktemp("oauth") / "clock"
    clock_file.write_text("0")
    with authority(str(clock_file)) as app:
        yield app, clock_file


def config(app, **entry) -> dict:
    return {"mcpServers": {"docs": {"url": f"{app.base}/mcp", "timeout": 20000, **entry}}}


async def sign_in(url: str) -> str:
    async with httpx.AsyncClient() as http:
        response = await http.get(url, follow_redirects=False)
    assert response.status_code == 302
    return response.headers["location"]


async def person(request):
    return Answer(id=request.id, ok=True, data={"url": await sign_in(request.url)})


def grants(app) -> list[str]:
    return [e["grant"] for e in app.log if e["event"] == "token"]


async def test_a_sign_in_asked_at_load_time_through_wait_for_connects_the_server(server):
    app, _ = server
    asked = []

    async def wait_for(request):
        asked.append(request)
        return await person(request)

    source = await load_mcp_with_context(config(app), wait_for=wait_for)
    try:
        assert source.status == {"docs": "connected"}
        assert [t.name for t in source.tools] == ["docs_whoami", "docs_echo", "docs_write"]
        assert [r.kind for r in asked] == ["auth"]
        result = await source.tools[1].execute({"text": "hi"})
        assert (result.output, result.is_error) == ("hi", False)
    finally:
        await source.close()


async def test_a_step_up_suspends_the_call_and_its_retry_signs_in_with_the_union_of_scopes(server):
    app, _ = server
    source = await load_mcp_with_context(config(app), wait_for=person)
    try:
        write = next(t for t in source.tools if t.name == "docs_write")
        first = await write.execute({"text": "note"})
        request = pending_of(first)
        assert request is not None and request.kind == "auth" and first.is_error
        assert parse_qs(urlsplit(request.url).query)["scope"] == ["docs:read docs:write"]
        retried = await write.execute({"text": "note"}, ToolContext(answer=await person(request)))
        assert (retried.output, retried.is_error) == ("wrote note", False)
    finally:
        await source.close()


async def test_a_revoked_token_is_refreshed_without_asking_anyone(server):
    app, _ = server
    source = await load_mcp_with_context(config(app), wait_for=person)
    try:
        before = len(grants(app))
        async with httpx.AsyncClient() as http:
            await http.post(f"{app.base}/_revoke")
        result = await source.tools[0].execute({})
        assert (result.output, result.is_error) == ("signed in", False)
        assert grants(app)[before:] == ["refresh_token"]
    finally:
        await source.close()


async def test_a_token_is_refreshed_before_it_expires_by_the_hosts_clock(server):
    app, _ = server
    clock = Clock()
    options = McpOptions(auth=OAuthOptions(clock=clock, refresh_margin=60))
    source = await load_mcp_with_context(config(app), wait_for=person, options=options)
    try:
        before = len(grants(app))
        clock.offset = 600 - 30  # 30 s before the 600 s token expires: inside the margin
        assert (await source.tools[0].execute({})).output == "signed in"
        assert grants(app)[before:] == ["refresh_token"]
    finally:
        await source.close()


async def test_the_loopback_helper_receives_the_redirect_and_answers(server, unused_tcp_port):
    app, _ = server
    redirect = f"http://127.0.0.1:{unused_tcp_port}/callback"
    shown: list[str] = []
    announced = asyncio.Event()

    def announce(text: str) -> None:
        shown.append(text)
        announced.set()

    helper = LoopbackCallback(redirect, open_browser=False, announce=announce, timeout=30)

    async def browser() -> None:  # follows the authorization URL, then the redirect, like a browser
        await announced.wait()
        url = shown[0].rsplit(" ", 1)[-1]
        async with httpx.AsyncClient() as http:
            landed = (await http.get(url, follow_redirects=False)).headers["location"]
            assert (await http.get(landed)).status_code == 200

    options = McpOptions(auth=OAuthOptions(redirect_uri=redirect))
    load = asyncio.ensure_future(load_mcp_with_context(config(app), wait_for=helper, options=options))
    await browser()
    source = await load
    try:
        assert source.status == {"docs": "connected"}
    finally:
        await source.close()


async def test_machine_to_machine_servers_use_client_credentials(server, monkeypatch):
    app, _ = server
    monkeypatch.setenv("TN_M2M_SECRET", "machine-secret")
    oauth = {"grant": "client_credentials", "clientId": "machine", "clientSecret": "${TN_M2M_SECRET}"}
    clock = Clock()
    source = await load_mcp_with_context(config(app, oauth=oauth), options=McpOptions(auth=OAuthOptions(clock=clock)))
    try:
        assert source.status == {"docs": "connected"}  # no person was asked: there is no wait_for
        before = len(grants(app))
        clock.offset = 3600
        assert (await source.tools[0].execute({})).output == "signed in"
        assert grants(app)[before:] == ["client_credentials"]
    finally:
        await source.close()


async def test_without_wait_for_the_server_offers_one_tool_that_asks_the_person(server):
    app, _ = server
    toolkit = await create_toolkit(config(app), builtins=False)
    try:
        assert toolkit.mcp_status() == {"docs": "failed"}
        assert "authorization required" in toolkit.mcp_reasons()["docs"]
        assert [t.name for t in toolkit.tools()] == ["docs_call"]
        first = await toolkit.execute("docs_call", {})
        request = pending_of(first)
        assert request is not None and request.kind == "auth"
        listed = await toolkit.execute("docs_call", {}, ToolContext(answer=await person(request)))
        assert not listed.is_error and '"name": "echo"' in listed.output
        ran = await toolkit.execute("docs_call", {"tool": "echo", "arguments": {"text": "yo"}})
        assert (ran.output, ran.is_error) == ("yo", False)
        assert toolkit.mcp_status() == {"docs": "connected"}
        await toolkit.refresh()  # the server's own tools join, the gateway stays for runs that know it
        assert [t.name for t in toolkit.tools()] == ["docs_call", "docs_whoami", "docs_echo", "docs_write"]
    finally:
        await toolkit.close()


async def test_bad_answers_are_refused_with_a_reason_and_a_used_answer_is_a_no_op(server):
    app, _ = server
    toolkit = await create_toolkit(config(app), builtins=False)
    try:
        request = pending_of(await toolkit.execute("docs_call", {}))
        landed = await sign_in(request.url)
        code = parse_qs(urlsplit(landed).query)["code"][0]
        bad = await toolkit.execute("docs_call", {}, ToolContext(answer=Answer(request.id, True, {"code": code,
                                                                                              "state": "forged"})))
        assert bad.is_error and "no sign-in with this state" in bad.output and code not in bad.output
        empty = await toolkit.execute("docs_call", {}, ToolContext(answer=Answer(request.id, True, {})))
        assert empty.is_error and "redirect" in empty.output
        refused = await toolkit.execute("docs_call", {}, ToolContext(answer=Answer(
            request.id, True, {"url": "http://127.0.0.1:9/callback?error=access_denied&state=x"})))
        assert refused.is_error and "refused the sign-in" in refused.output and "access_denied" in refused.output
        good = Answer(request.id, True, {"url": landed})
        assert not (await toolkit.execute("docs_call", {}, ToolContext(answer=good))).is_error
        assert not (await toolkit.execute("docs_call", {}, ToolContext(answer=good))).is_error  # a replay
    finally:
        await toolkit.close()


async def test_a_sign_in_started_here_can_be_finished_by_another_toolkit_sharing_the_store(server, tmp_path):
    app, _ = server
    key = new_token_key()
    async with open_store(f"sqlite:///{tmp_path / 'runs.db'}") as store:
        options = McpOptions(auth=OAuthOptions(store=store, key=key, account="ada"))
        first = await create_toolkit(config(app), builtins=False, mcp_options=options)
        request = pending_of(await first.execute("docs_call", {}))
        await first.close()
        second = await create_toolkit(config(app), builtins=False, mcp_options=options)
        try:
            done = await second.execute("docs_call", {"tool": "whoami"}, ToolContext(answer=await person(request)))
            assert (done.output, done.is_error) == ("signed in", False)
        finally:
            await second.close()
        third = await create_toolkit(config(app), builtins=False, mcp_options=options)
        try:
            assert third.mcp_status() == {"docs": "connected"}  # the tokens were kept
        finally:
            await third.close()
        other = McpOptions(auth=OAuthOptions(store=store, key=key, account="bob"))
        fourth = await create_toolkit(config(app), builtins=False, mcp_options=other)
        try:
            assert fourth.mcp_status() == {"docs": "failed"}  # another account signs in for itself
        finally:
            await fourth.close()


async def test_a_record_under_another_key_is_ignored_with_a_warning_not_a_crash(tmp_path, caplog):
    async with open_store(f"sqlite:///{tmp_path / 'runs.db'}") as store:
        await TokenVault(store, new_token_key()).put("ns", "k", {"access_token": "t"})
        with caplog.at_level(logging.WARNING, logger="toolnexus"):
            assert await TokenVault(store, new_token_key()).get("ns", "k") is None
        assert "does not decrypt" in caplog.text
        rotated = new_token_key()
        old = new_token_key()
        await TokenVault(store, old).put("ns", "k2", {"v": 1})
        assert await TokenVault(store, [rotated, old]).get("ns", "k2") == {"v": 1}


async def test_settings_that_hold_secrets_never_show_them():
    key = new_token_key()
    options = OAuthOptions(key=key)
    auth = ServerAuth(client_id="id", client_secret="s3cr3t-value", private_key="-----BEGIN KEY-----")
    assert key not in repr(options) and "s3cr3t-value" not in repr(auth) and "BEGIN KEY" not in repr(auth)
    with pytest.raises(ValueError, match="need a key"):
        TokenVault(object(), None)
    with pytest.raises(ValueError, match="32 bytes"):
        TokenVault(None, "short")


async def test_the_oauth_entry_of_a_server_is_checked():
    from toolnexus.mcp_source._config import server_spec

    assert server_spec("s", {"url": "http://x/mcp"}).oauth is not None  # on by default
    assert server_spec("s", {"url": "http://x/mcp", "oauth": False}).oauth is None
    assert server_spec("s", {"url": "http://x/mcp", "headers": {"Authorization": "Bearer t"}}).oauth is None
    with pytest.raises(ValueError, match='unknown key'):
        server_spec("s", {"url": "http://x/mcp", "oauth": {"clientID": "x"}})
    with pytest.raises(ValueError, match="needs \"clientId\""):
        server_spec("s", {"url": "http://x/mcp", "oauth": {"grant": "client_credentials"}})
    assert "s3cr3t" not in repr(server_spec("s", {"url": "http://x/mcp", "oauth": {"clientId": "a",
                                                                                     "clientSecret": "s3cr3t"}}))


async def test_an_authorization_server_answer_is_read_to_a_bound():
    from starlette.applications import Starlette
    from starlette.responses import JSONResponse, Response
    from starlette.routing import Route

    from support.mcp_servers.http_servers import serve_app

    async def mcp(request):
        metadata = f"{request.base_url}big"
        return JSONResponse({}, status_code=401, headers={"WWW-Authenticate": f'Bearer resource_metadata="{metadata}"'})

    async def big(request):
        return Response(b" " * (2 * 1024 * 1024), media_type="application/json")

    app = Starlette(routes=[Route("/mcp", mcp, methods=["POST", "GET"]), Route("/big", big)])
    with serve_app(app) as base:
        source = await load_mcp_with_context({"mcpServers": {"flood": {"url": f"{base}/mcp"}}})
    await source.close()
    assert source.status == {"flood": "failed"}
    assert "authorization failed" in source.reasons["flood"] and "more than 1048576 bytes" in source.reasons["flood"]


def issued(app) -> set[str]:
    """Every token and client secret the authorization server holds now (used refresh tokens and
    codes are gone from it, so the test collects as it goes)."""
    return {*app.access, *app.refresh, *(c["secret"] for c in app.clients.values())}


def leaks(text: str, secrets: set[str]) -> list[str]:
    return [f"{s[:4]}… in {text[:200]!r}" for s in secrets if s in text]


async def test_no_token_code_or_client_secret_reaches_a_log_record_or_a_span(server, tmp_path, monkeypatch, caplog):
    """The process test's flow in this process — a run parks on the sign-in, another toolkit
    resumes it with the redirect, a later run refreshes the expired token — with every logger at
    DEBUG (httpx and httpcore included) and every span recorded."""
    app, clock_file = server
    monkeypatch.setenv("OAUTH_TEST_KEY", new_token_key())
    exporter = InMemorySpanExporter()
    provider = TracerProvider()
    provider.add_span_processor(SimpleSpanProcessor(exporter))
    common = {"store": f"sqlite:///{tmp_path / 'runs.db'}", "mcp": f"{app.base}/mcp", "clock_file": str(clock_file)}

    async def step(command: str, **args: str) -> dict:
        return await oauth_agent_app.main(argparse.Namespace(command=command, **{"run_id": None, "id": None,
                                                                                  "url": None, **args}, **common))

    before = len(grants(app))
    secrets: set[str] = set()
    caplog.set_level(logging.DEBUG)  # the root logger: every library's records propagate to it
    otel.instrument(tracer_provider=provider)
    try:
        first = await step("start", run_id="r1")
        request = first["pending"]
        with caplog.at_level(logging.WARNING):  # the person's browser is this test: its records are not ours
            landed = await sign_in(request["url"])
        final = await step("answer", id=request["id"], url=landed)
        secrets |= issued(app)
        clock_file.write_text("3600")  # the access token has expired, on both sides
        again = await step("again", run_id="r2")
        secrets |= issued(app)
    finally:
        clock_file.write_text("0")
        otel.uninstrument()
        provider.shutdown()
    assert (first["status"], final["status"], again["status"]) == ("pending", "done", "done")
    assert grants(app)[before:] == ["authorization_code", "refresh_token"]
    secrets.add(parse_qs(urlsplit(landed).query)["code"][0])
    assert len(secrets) >= 6  # two access and two refresh tokens, the client's secret, the code

    records = caplog.records
    assert any(r.name.startswith("httpx") for r in records) and any(r.name.startswith("httpcore") for r in records)
    found = [leak for r in records for leak in leaks(f"{r.getMessage()} {r.args!r} {r.exc_text or ''}", secrets)]
    found += leaks(caplog.text, secrets)
    spans = exporter.get_finished_spans()
    assert any(s.attributes.get("toolnexus.run.resumed") for s in spans)  # the resume was traced
    for span in spans:
        texts = [span.name, span.status.description or "", *map(str, span.attributes.values())]
        texts += [f"{e.name} {dict(e.attributes or {})}" for e in span.events]
        found += [leak for text in texts for leak in leaks(text, secrets)]
    assert found == []
