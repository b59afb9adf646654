"""`http_tool` against a real loopback HTTP server: the pinned contract (core.md §6) and the
HTTP items of *Beyond the baseline* (core.md §8, #19-#31)."""

from __future__ import annotations

import asyncio
import json
import logging
import socket
import threading
from types import SimpleNamespace

import pytest

from support.http_fixtures import close_pool, server  # noqa: F401 - fixtures
from support.http_server import LoopbackServer, Reply
from toolnexus.http import (
    DEFAULT_MAX_BODY_BYTES,
    DEFAULT_TIMEOUT,
    aclose_shared_clients,
    http_tool,
    shared_client,
)
from toolnexus.types import ToolContext, ToolResult


def make(server: LoopbackServer, path: str = "/echo", **kw) -> object:
    kw.setdefault("name", "t")
    kw.setdefault("description", "d")
    kw.setdefault("method", "GET")
    return http_tool(url=server.url + path, **kw)


# ---------------------------------------------------------------- construction


def test_defaults_and_tool_shape():
    t = http_tool(name="ping", description="Ping it", method="GET", url="http://127.0.0.1:1/x")
    assert DEFAULT_TIMEOUT == 30.0
    assert DEFAULT_MAX_BODY_BYTES == 1024 * 1024
    assert (t.name, t.description, t.source) == ("ping", "Ping it", "http")
    assert t.input_schema == {"type": "object", "properties": {}, "additionalProperties": False}
    assert asyncio.iscoroutinefunction(t.execute)


def test_explicit_input_schema_is_kept_verbatim():
    schema = {"type": "object", "properties": {"x": {"type": "integer"}}}
    t = http_tool(name="a", description="", method="GET", url="http://h/{id}", input_schema=schema)
    assert t.input_schema is schema


def test_default_schema_lists_placeholders_and_query_names_as_required_strings():  # beyond #26
    t = http_tool(name="a", description="", method="POST", url="http://h/users/{user}/posts/{post}?x={user}",
                  query=["q", "post"])
    assert t.input_schema == {
        "type": "object",
        "properties": {"user": {"type": "string"}, "post": {"type": "string"}, "q": {"type": "string"}},
        "additionalProperties": False,
        "required": ["user", "post", "q"],
    }


@pytest.mark.parametrize(("option", "value", "message"), [
    ("body", "jsno", 'body must be one of "json", "form", "raw", got \'jsno\''),
    ("result_mode", "JSON", 'result_mode must be one of "text", "json", "status+text", got \'JSON\''),
    ("timeout", 0, "timeout must be a positive number of seconds or None, got 0"),
    ("max_body_bytes", -1, "max_body_bytes must be a positive int or None, got -1"),
])
def test_bad_options_raise_value_error_at_construction(option, value, message):  # beyond #23
    with pytest.raises(ValueError) as info:
        http_tool(name="bad", description="", method="GET", url="http://h/", **{option: value})
    assert str(info.value) == f'http_tool "bad": {message}'


# ---------------------------------------------------------------- request construction


async def test_placeholders_are_percent_encoded_and_removed_from_args(server):
    t = make(server, "/users/{id}/files/{name}")
    res = await t.execute({"id": "a/b c", "name": 7, "extra": "1"})
    assert res.is_error is False
    assert server.last.target == "/users/a%2Fb%20c/files/7?extra=1"


async def test_missing_placeholder_is_an_error_naming_it_and_sends_nothing(server):  # beyond #27
    t = make(server, "/users/{id}")
    for args in ({}, {"id": None}):
        res = await t.execute(args)
        assert res == ToolResult('missing argument "id" for the URL placeholder {id}', True, {"error": "argument"})
    assert server.received == []


async def test_get_sends_every_arg_as_query_in_order_with_plus_for_spaces(server):
    t = make(server, "/search?lang=en")
    await t.execute({"q": "hello world", "page": 2})
    assert server.last.method == "GET"
    assert server.last.target == "/search?lang=en&q=hello+world&page=2"
    assert server.last.body == b""


async def test_head_sends_args_as_query_like_get(server):  # beyond #25
    t = make(server, "/h", method="HEAD")
    res = await t.execute({"q": "x"})
    assert server.last.method == "HEAD"
    assert server.last.target == "/h?q=x"
    assert res == ToolResult("", False, {"status": 200})


async def test_method_is_upper_cased_and_named_query_args_leave_the_json_body(server):
    t = make(server, "/items", method="post", query=["dry_run"])
    await t.execute({"dry_run": "yes", "name": "n", "tags": ["a", "b"], "n": 1.5})
    req = server.last
    assert req.method == "POST"
    assert req.target == "/items?dry_run=yes"
    assert req.headers["Content-Type"] == "application/json"
    assert req.body == json.dumps({"name": "n", "tags": ["a", "b"], "n": 1.5}).encode()


async def test_post_without_remaining_args_sends_no_body(server):
    t = make(server, "/items/{id}", method="DELETE")
    await t.execute({"id": 5})
    assert server.last.body == b""
    assert server.last.headers["Content-Type"] is None


async def test_form_body_is_urlencoded_with_default_content_type(server):
    t = make(server, "/f", method="PUT", body="form")
    await t.execute({"a": "x y", "b": "&"})
    assert server.last.headers["Content-Type"] == "application/x-www-form-urlencoded"
    assert server.last.body == b"a=x+y&b=%26"


async def test_raw_body_sends_only_the_body_arg_as_utf8_text(server):  # beyond #22
    t = make(server, "/r", method="POST", body="raw")
    await t.execute({"body": "h\u00e9llo", "ignored": 1})
    assert server.last.body == "h\u00e9llo".encode()
    assert server.last.headers["Content-Type"] == "text/plain; charset=utf-8"


async def test_raw_body_without_body_arg_is_empty(server):
    t = make(server, "/r", method="POST", body="raw")
    await t.execute({"other": 1})
    assert server.last.body == b""


@pytest.mark.parametrize("key", ["Content-Type", "content-type", "CONTENT-TYPE"])
async def test_user_content_type_wins_under_any_capitalisation(server, key):  # beyond #21
    t = make(server, "/c", method="POST", headers={key: "application/vnd.x+json"})
    await t.execute({"a": 1})
    assert server.last.headers.get_all("Content-Type") == ["application/vnd.x+json"]


async def test_query_and_form_values_are_json_scalars_and_none_is_omitted(server):  # beyond #24
    t = make(server, "/q")
    await t.execute({"flag": True, "off": False, "none": None, "f": 3.0, "n": 2, "s": "True", "tags": ["a", 1]})
    assert server.last.query == [("flag", "true"), ("off", "false"), ("f", "3.0"), ("n", "2"), ("s", "True"),
                                 ("tags", "a"), ("tags", "1")]
    form = make(server, "/f", method="POST", body="form")
    await form.execute({"flag": True, "none": None, "obj": {"k": 1}})
    assert server.last.body == b"flag=true&obj=%7B%22k%22%3A1%7D"


async def test_env_headers_expand_at_call_time_and_are_never_logged(server, monkeypatch, caplog):
    caplog.set_level(logging.DEBUG)
    t = make(server, "/auth", headers={"Authorization": "Bearer ${TN_HTTP_TOKEN}", "X-Lit": "$TN_HTTP_TOKEN"})
    monkeypatch.setenv("TN_HTTP_TOKEN", "s3cret-one")
    await t.execute({})
    assert server.last.headers["Authorization"] == "Bearer s3cret-one"
    assert server.last.headers["X-Lit"] == "$TN_HTTP_TOKEN"
    monkeypatch.setenv("TN_HTTP_TOKEN", "s3cret-two")
    await t.execute({})
    assert server.last.headers["Authorization"] == "Bearer s3cret-two"
    assert "s3cret" not in caplog.text


async def test_unset_env_var_is_sent_empty_and_warned_once_by_name(server, monkeypatch, caplog):  # beyond #28
    monkeypatch.delenv("TN_HTTP_UNSET_VAR", raising=False)
    monkeypatch.setenv("TN_HTTP_OTHER", "visible-value")
    t = make(server, "/auth", name="api", headers={"X-Key": "k=${TN_HTTP_UNSET_VAR};o=${TN_HTTP_OTHER}"})
    with caplog.at_level(logging.WARNING, logger="toolnexus"):
        await t.execute({})
        await t.execute({})
    assert server.last.headers["X-Key"] == "k=;o=visible-value"
    messages = [r.getMessage() for r in caplog.records if r.name == "toolnexus"]
    assert messages == ['[toolnexus] HTTP tool "api": environment variable TN_HTTP_UNSET_VAR is not set'
                        ' \u2014 header "X-Key" sent with it empty']
    assert "visible-value" not in caplog.text


async def test_non_mapping_args_are_an_error_result(server):
    res = await make(server).execute("not a dict")  # type: ignore[arg-type]
    assert res == ToolResult("arguments must be a JSON object, got str", True, {"error": "argument"})
    assert server.received == []


async def test_non_ascii_header_value_is_an_error_result(server, monkeypatch):
    monkeypatch.setenv("TN_HTTP_UNICODE", "caf\u00e9")
    res = await make(server, headers={"X-Name": "${TN_HTTP_UNICODE}"}).execute({})
    assert res.is_error and res.metadata == {"error": "argument"}
    assert res.output.startswith("header values must be ASCII text")


# ---------------------------------------------------------------- result mapping


async def test_2xx_text_result_carries_status(server):
    server.route("/made", Reply(201, "created it"))
    res = await make(server, "/made", method="POST").execute({})
    assert res == ToolResult("created it", False, {"status": 201})


async def test_status_plus_text_mode_is_pinned(server):
    server.route("/s", Reply(202, "queued"))
    res = await make(server, "/s", result_mode="status+text").execute({})
    assert res == ToolResult("202\nqueued", False, {"status": 202})


async def test_json_mode_reserialises_with_default_spacing(server):
    server.route("/j", Reply(200, '{"a":1,"b":[1,2],"c":"\u00e9"}', "application/json"))
    res = await make(server, "/j", result_mode="json").execute({})
    assert res == ToolResult('{"a": 1, "b": [1, 2], "c": "\\u00e9"}', False, {"status": 200})


async def test_json_mode_quotes_a_non_json_body(server):  # beyond #30: pinned behaviour kept
    server.route("/j", Reply(200, "plain <b>text</b>"))
    res = await make(server, "/j", result_mode="json").execute({})
    assert res == ToolResult('"plain <b>text</b>"', False, {"status": 200})


@pytest.mark.parametrize("mode", ["text", "json", "status+text"])
async def test_non_2xx_is_an_error_with_pinned_text(server, mode):
    server.route("/missing", Reply(404, "no such thing"))
    res = await make(server, "/missing", result_mode=mode).execute({})
    assert res == ToolResult("HTTP 404: no such thing", True, {"status": 404})


async def test_empty_error_body_leaves_trailing_space(server):
    server.route("/boom", Reply(500, b""))
    res = await make(server, "/boom").execute({})
    assert res == ToolResult("HTTP 500: ", True, {"status": 500})


@pytest.mark.parametrize(("content_type", "raw", "text"), [
    ("text/plain; charset=iso-8859-1", "caf\u00e9".encode("latin-1"), "caf\u00e9"),
    ("text/plain; charset=Shift_JIS", "\u65e5\u672c".encode("shift_jis"), "\u65e5\u672c"),
    ("text/plain", "caf\u00e9".encode(), "caf\u00e9"),
    ("text/plain; charset=no-such-codec", "caf\u00e9".encode(), "caf\u00e9"),
    ("text/plain", b"bad \xff byte", "bad \ufffd byte"),
])
async def test_body_is_decoded_with_the_response_charset(server, content_type, raw, text):  # beyond #29
    server.route("/cs", Reply(200, raw, content_type))
    res = await make(server, "/cs").execute({})
    assert res.output == text


async def test_large_body_is_capped_with_marker_and_metadata(server):  # beyond #20
    server.route("/big", Reply(200, "a" * (DEFAULT_MAX_BODY_BYTES + 10)))
    res = await make(server, "/big").execute({})
    assert (
        res.output
        == "a" * DEFAULT_MAX_BODY_BYTES + f"\n[truncated: response body exceeds {DEFAULT_MAX_BODY_BYTES} bytes]"
    )
    assert res.metadata == {"status": 200, "truncated": True}


async def test_cap_is_configurable_applies_to_error_bodies_and_cuts_at_a_character(server):  # beyond #20
    server.route("/err", Reply(503, "\u00e9" * 10))  # 2 bytes each
    res = await make(server, "/err", max_body_bytes=5).execute({})
    assert res == ToolResult("HTTP 503: \u00e9\u00e9\n[truncated: response body exceeds 5 bytes]", True,
                             {"status": 503, "truncated": True})
    server.route("/fits", Reply(200, "12345"))
    assert (await make(server, "/fits", max_body_bytes=5).execute({})).metadata == {"status": 200}


async def test_no_cap_when_max_body_bytes_is_none(server):
    server.route("/big", Reply(200, "b" * (DEFAULT_MAX_BODY_BYTES + 1)))
    res = await make(server, "/big", max_body_bytes=None).execute({})
    assert len(res.output) == DEFAULT_MAX_BODY_BYTES + 1 and res.metadata == {"status": 200}


async def test_redirects_are_followed(server):
    server.route("/old", Reply(302, "", headers={"Location": "/new"}))
    server.route("/new", Reply(200, "moved here"))
    res = await make(server, "/old").execute({})
    assert res == ToolResult("moved here", False, {"status": 200})


async def test_cookies_are_not_carried_between_calls(server):
    server.route("/login", Reply(200, "hi", headers={"Set-Cookie": "sid=abc; Path=/"}))
    await make(server, "/login").execute({})
    await make(server, "/next").execute({})
    assert server.last.headers["Cookie"] is None


# ---------------------------------------------------------------- pooling, timeouts, cancellation


async def test_calls_reuse_one_pooled_keep_alive_connection(server):
    a, b = make(server, "/a"), make(server, "/b", name="other")
    await a.execute({})
    await b.execute({})
    await a.execute({})
    assert len({r.client_port for r in server.received}) == 1


async def test_shared_client_is_per_event_loop_and_reopens_after_close():
    mine = shared_client()
    assert shared_client() is mine
    others: list[object] = []
    thread = threading.Thread(target=lambda: others.append(asyncio.run(_client_in_new_loop())))
    thread.start()
    thread.join()
    assert others and others[0] is not mine
    await aclose_shared_clients()
    assert mine.is_closed
    assert shared_client() is not mine


async def _client_in_new_loop() -> object:
    client = shared_client()
    await aclose_shared_clients()
    return client


async def test_tool_timeout_ends_the_call_and_drops_the_connection(server):
    server.route("/slow", Reply(hang=True))
    res = await make(server, "/slow", timeout=0.2).execute({})
    assert res == ToolResult("request timed out after 0.2s", True, {"error": "timeout"})
    assert await asyncio.to_thread(server.disconnected.wait, 5)


async def test_ctx_timeout_beats_the_tool_timeout(server):
    server.route("/slow", Reply(hang=True))
    res = await make(server, "/slow", timeout=30).execute({}, ToolContext(timeout=0.25))
    assert res == ToolResult("request timed out after 0.25s", True, {"error": "timeout"})


async def test_timeout_is_an_overall_deadline_even_while_bytes_trickle_in(server):
    server.route("/trickle", Reply(trickle=True))
    res = await make(server, "/trickle", timeout=0.3).execute({})
    assert res == ToolResult("request timed out after 0.3s", True, {"error": "timeout"})


async def test_cancelling_the_task_aborts_the_request(server):  # beyond #19
    server.route("/slow", Reply(hang=True))
    task = asyncio.create_task(make(server, "/slow").execute({}))
    assert await asyncio.to_thread(server.arrived.wait, 5)
    task.cancel()
    with pytest.raises(asyncio.CancelledError):
        await task
    assert await asyncio.to_thread(server.disconnected.wait, 5)


async def test_ctx_signal_event_aborts_the_request(server):  # beyond #19
    server.route("/slow", Reply(hang=True))
    signal = asyncio.Event()
    task = asyncio.create_task(make(server, "/slow").execute({}, ToolContext(signal=signal)))
    assert await asyncio.to_thread(server.arrived.wait, 5)
    signal.set()
    assert await task == ToolResult("request cancelled", True, {"error": "cancelled"})
    assert await asyncio.to_thread(server.disconnected.wait, 5)


async def test_ctx_signal_with_an_aborted_flag_aborts_the_request_in_flight(server):
    server.route("/slow", Reply(hang=True))
    signal = SimpleNamespace(aborted=False)  # not an asyncio.Event: watched by polling
    task = asyncio.create_task(make(server, "/slow").execute({}, ToolContext(signal=signal)))
    assert await asyncio.to_thread(server.arrived.wait, 5)
    signal.aborted = True
    assert await asyncio.wait_for(task, 5) == ToolResult("request cancelled", True, {"error": "cancelled"})
    assert await asyncio.to_thread(server.disconnected.wait, 5)


async def test_already_fired_signal_sends_nothing(server):
    signal = asyncio.Event()
    signal.set()
    res = await make(server).execute({}, ToolContext(signal=signal))
    assert res == ToolResult("request cancelled", True, {"error": "cancelled"})
    assert server.received == []


async def test_unfired_signal_does_not_disturb_a_normal_call(server):
    res = await make(server).execute({}, ToolContext(signal=asyncio.Event()))
    assert res == ToolResult("ok", False, {"status": 200})


# ---------------------------------------------------------------- transport errors (beyond #31)


async def test_connection_refused_has_stable_text():
    with socket.socket() as sock:  # bound, not listening: connects are refused
        sock.bind(("127.0.0.1", 0))
        port = sock.getsockname()[1]
        t = http_tool(name="x", description="", method="GET", url=f"http://127.0.0.1:{port}/")
        res = await t.execute({})
    assert res == ToolResult(f"could not connect to 127.0.0.1:{port} (connection refused)", True, {"error": "connect"})


async def test_unknown_host_is_a_dns_error():
    t = http_tool(name="x", description="", method="GET", url="http://no-such-host.invalid/x")
    res = await t.execute({})
    assert res == ToolResult("could not resolve host no-such-host.invalid", True, {"error": "dns"})


async def test_connection_dropped_without_response_is_a_network_error(server):
    server.route("/drop", Reply(drop=True))
    res = await make(server, "/drop").execute({})
    assert res == ToolResult(
        f"connection to 127.0.0.1:{server.port} failed: the server closed the connection or sent an invalid response",
        True, {"error": "network"})


async def test_unsupported_scheme_is_a_url_error():
    t = http_tool(name="x", description="", method="GET", url="ftp://example.org/file")
    res = await t.execute({})
    assert res == ToolResult("unsupported URL ftp://example.org/file: only http and https work", True, {"error": "url"})


async def test_redirect_loop_is_reported(server):
    server.route("/loop", Reply(302, "", headers={"Location": "/loop"}))
    res = await make(server, "/loop").execute({})
    assert res == ToolResult("too many redirects", True, {"error": "redirect"})
