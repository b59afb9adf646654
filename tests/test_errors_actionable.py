"""Errors a user can act on: the exact texts a user sees when a tool raises, an LLM call fails, or
an MCP server entry / program is not what it should be.

Real parts throughout: a loopback LLM server, real MCP server subprocesses (and real programs
that are not MCP servers), the real `mcp` SDK.
"""

from __future__ import annotations

import logging
import socket
import sys
import traceback
from pathlib import Path

import pytest

from support.http_server import LoopbackServer, Reply
from support.llm_server import Json, LlmServer, Sse, sse_lines
from support.mcp_servers.helpers import DEMO, captured_warnings, demo_cmd
from toolnexus import create_toolkit, define_tool, list_mcp_tools
from toolnexus.client import ProviderError, ProviderResponseError, create_client, create_in_process_client
from toolnexus.client._errors import endpoint_of
from toolnexus.errors import NetworkError, StreamTruncated
from toolnexus.mcp_source._config import server_spec
from toolnexus.toolkit import Toolkit
from toolnexus.types import Tool, ToolResult

KEY_VARS = ("OPENROUTER_API_KEY", "OPENAI_API_KEY", "ANTHROPIC_API_KEY")


@pytest.fixture
def no_keys(monkeypatch):
    for name in KEY_VARS:
        monkeypatch.delenv(name, raising=False)
    return monkeypatch


@pytest.fixture
def server():
    with LlmServer() as s:
        yield s


def debug_records(caplog):
    return [r for r in caplog.records if r.name == "toolnexus" and r.levelno == logging.DEBUG]


# -- a tool that raises -----------------------------------------------------------------------------


def lookup(key: str) -> str:
    """Look a key up."""
    return {"known": "value"}[key]


async def test_a_native_tool_that_raises_keeps_its_text_logs_the_traceback_and_names_the_type(caplog):
    caplog.set_level(logging.DEBUG, logger="toolnexus")
    toolkit = Toolkit(None, None, [], [], [define_tool(lookup)])
    result = await toolkit.execute("lookup", {"key": "missing"})
    assert result == ToolResult("'missing'", True, {"error_type": "KeyError"})  # str(exc), as pinned
    [record] = debug_records(caplog)
    assert record.getMessage() == "[toolnexus] tool \"lookup\" raised KeyError: 'missing'"
    assert record.exc_info[0] is KeyError
    shown = "".join(traceback.format_exception(*record.exc_info))
    assert 'return {"known": "value"}[key]' in shown and "in lookup" in shown


async def test_a_tool_that_raises_through_the_toolkit_boundary_names_the_type_too(caplog):
    caplog.set_level(logging.DEBUG, logger="toolnexus")

    async def execute(args=None, ctx=None):
        raise ValueError("no such row")

    toolkit = Toolkit(None, None, [], [], [Tool("rows", "", {}, "custom", execute)])
    result = await toolkit.execute("rows", {})
    assert result == ToolResult("tool rows failed: ValueError: no such row", True, {"error_type": "ValueError"})
    [record] = debug_records(caplog)
    assert record.getMessage() == '[toolnexus] tool "rows" raised ValueError: no such row'
    assert record.exc_info[0] is ValueError


async def test_the_model_sees_only_the_pinned_text_and_the_run_result_carries_the_type():
    seen: list[list[dict]] = []

    def generate(request):
        seen.append(request["messages"])
        if len(seen) == 1:
            return {"tool_calls": [{"id": "c1", "name": "lookup", "arguments": {"key": "missing"}}]}
        return {"content": "sorry"}

    client = create_in_process_client(model="m", generate=generate)
    result = await client.run("look it up", Toolkit(None, None, [], [], [define_tool(lookup)]))
    tool_message = next(m for m in seen[1] if m["role"] == "tool")
    assert tool_message["content"] == "'missing'"
    call = result.tool_calls[0]
    assert (call["output"], call["is_error"], call["metadata"]) == ("'missing'", True, {"error_type": "KeyError"})


async def test_a_tool_that_returns_normally_is_not_logged(caplog):
    caplog.set_level(logging.DEBUG, logger="toolnexus")
    result = await Toolkit(None, None, [], [], [define_tool(lookup)]).execute("lookup", {"key": "known"})
    assert result == ToolResult("value", False) and debug_records(caplog) == []


# -- LLM calls: the endpoint and what to check ---------------------------------------------------------


def refusing(server, status, body=None):
    server.add(Json(body if body is not None else {"error": {"message": "nope"}}, status=status))


async def run_error(**options):
    options.setdefault("retries", 0)
    async with create_client(**options) as client:
        with pytest.raises(Exception) as info:
            await client.run("hi")
    return info.value


async def test_a_401_names_the_endpoint_and_the_variable_the_key_came_from_never_the_key(server, no_keys):
    no_keys.setenv("OPENAI_API_KEY", "sk-proj-abcdefghijklmnop")
    refusing(server, 401, {"error": "bad key sk-proj-abcdefghijklmnop"})
    error = await run_error(base_url=server.base_url + "/v1", style="openai", model="gpt-4o-mini")
    assert isinstance(error, ProviderError) and error.status == 401
    assert str(error) == (f"LLM 401 (POST {server.base_url}/v1/chat/completions) — check the API key from "
                          "OPENAI_API_KEY: the endpoint did not accept it")
    assert error.endpoint == f"{server.base_url}/v1/chat/completions" and "abcdefghijklmnop" not in repr(error.args)


async def test_a_401_with_an_explicit_key_or_a_header_says_so(server, no_keys):
    refusing(server, 401)
    error = await run_error(base_url=server.base_url, style="anthropic", model="claude-x", api_key="my-key-1234")
    assert str(error) == (f"LLM 401 (POST {server.base_url}/v1/messages) — check the API key passed as api_key: "
                          "the endpoint did not accept it")
    refusing(server, 401)
    error = await run_error(base_url=server.base_url, style="openai", model="m", api_key="k1234",
                            headers={"Authorization": "Bearer other-token-123"})
    assert str(error) == (f"LLM 401 (POST {server.base_url}/chat/completions) — check the Authorization header "
                          "passed in headers: the endpoint did not accept it")


async def test_an_agent_without_any_key_is_told_which_variable_to_export(server, no_keys):
    from toolnexus.agents import agent

    refusing(server, 401)
    result = await agent("helper", does="helps").run("hi", llm={"base_url": server.base_url + "/v1", "style": "openai",
                                                              "model": "gpt-4o-mini"})
    try:
        assert result.status == "error"
        assert result.text == (
            f"LLM 401 (POST {server.base_url}/v1/chat/completions) — no API key was set, so a placeholder was "
            "sent: export OPENAI_API_KEY (or OPENROUTER_API_KEY / ANTHROPIC_API_KEY), or pass one (api_key=, or "
            'llm["api_key"] for an agent)')
    finally:
        await result.runtime.close(result.runtime.root)


async def test_a_403_points_at_the_keys_permissions_and_the_model(server, no_keys):
    no_keys.setenv("OPENROUTER_API_KEY", "or-key-123456789")
    refusing(server, 403)
    error = await run_error(base_url=server.base_url, style="openai", model="gpt-5-secret-preview")
    assert str(error) == (f"LLM 403 (POST {server.base_url}/chat/completions) — the endpoint refused this request "
                          "with the API key from OPENROUTER_API_KEY: check the key's permissions and its access "
                          'to model "gpt-5-secret-preview"')


async def test_a_404_points_at_base_url_and_the_model_name(server):
    refusing(server, 404, {"error": "model not found"})
    error = await run_error(base_url=server.base_url + "/api", style="openai", model="gpt-4o-mni", api_key="k")
    assert str(error) == (f'LLM 404: {{"error": "model not found"}} (POST {server.base_url}/api/chat/completions) '
                          '— check base_url (requests go to base_url + "/chat/completions") and the model name '
                          '"gpt-4o-mni"')
    assert error.hint.startswith("check base_url") and error.body == '{"error": "model not found"}'


async def test_other_statuses_name_the_endpoint_only_after_the_retries(server):
    server.add(Json({"error": "down"}, status=503), Json({"error": "still down"}, status=503))
    seen = []
    error = await run_error(base_url=server.base_url, style="openai", model="m", api_key="k", retries=1,
                            retry_base_ms=1, on_error=lambda info: seen.append(info) or "retry")
    assert str(error) == f'LLM 503: {{"error": "still down"}} (POST {server.base_url}/chat/completions)'
    assert error.hint is None and len(seen) == 2


async def test_a_refused_connection_names_the_endpoint_without_its_credentials(no_keys):
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]  # closed again before use: connection refused
    error = await run_error(base_url=f"http://bob:hunter2@127.0.0.1:{port}/v1", style="openai", model="m",
                            api_key="k")
    assert isinstance(error, OSError) and isinstance(error, NetworkError)
    assert str(error).endswith(f"(POST http://127.0.0.1:{port}/v1/chat/completions)")
    assert "hunter2" not in str(error) and "bob" not in str(error)


async def test_a_2xx_that_is_not_json_names_the_endpoint(server):
    server.add(Json(b"<html>login</html>", status=200))
    error = await run_error(base_url=server.base_url, style="openai", model="m", api_key="k")
    assert isinstance(error, ProviderResponseError)
    assert str(error) == (f"toolnexus: malformed response from {server.base_url}/chat/completions: body is not JSON: "
                          "'<html>login</html>'")


async def test_a_stream_cut_short_names_the_endpoint(server):
    server.add(Sse(sse_lines({"choices": [{"index": 0, "delta": {"content": "hel"}}]})))
    async with create_client(base_url=server.base_url, style="openai", model="m", api_key="k", retries=0) as client:
        with pytest.raises(StreamTruncated) as info:
            async for _ in client.stream("hi"):
                pass
    assert str(info.value).endswith(f"the reply is incomplete (POST {server.base_url}/chat/completions)")


class _Transport:
    """A custom transport (the seam), raising what it is given."""

    def __init__(self, error: BaseException) -> None:
        self.error = error

    async def post(self, url, headers, payload, timeout):
        raise self.error

    async def open(self, url, headers, payload, timeout):
        raise self.error


async def test_errors_from_a_custom_transport_are_located_the_same_way():
    error = await run_error(base_url="https://llm.example.com/v1", style="openai", model="m", api_key="k",
                            http_transport=_Transport(ProviderError(404, "")))
    assert str(error) == ('LLM 404 (POST https://llm.example.com/v1/chat/completions) — check base_url (requests go '
                          'to base_url + "/chat/completions") and the model name "m"')
    # an exception of the transport's own keeps its type and text; the endpoint rides along
    error = await run_error(base_url="https://llm.example.com/v1", style="openai", model="m", api_key="k",
                            http_transport=_Transport(ConnectionRefusedError(111, "Connection refused")))
    assert type(error) is ConnectionRefusedError and str(error) == "[Errno 111] Connection refused"
    assert error.endpoint == "https://llm.example.com/v1/chat/completions"
    assert error.__notes__ == ["endpoint: POST https://llm.example.com/v1/chat/completions"]


def test_endpoints_are_shown_without_userinfo_or_secret_query_values():
    assert endpoint_of("https://u:p@h.example:8443/v1/chat/completions") == "https://h.example:8443/v1/chat/completions"
    assert (endpoint_of("https://h/v1/models/x:generate?key=AIzaSECRET&api-version=2024-06-01&alt=sse")
            == "https://h/v1/models/x:generate?key=«redacted»&api-version=2024-06-01&alt=sse")
    assert endpoint_of("https://h/tok-SECRET123/chat", ["tok-SECRET123"]) == "https://h/«redacted»/chat"
    assert endpoint_of("http://[::1]:8080/v1") == "http://[::1]:8080/v1"


def test_a_provider_error_built_by_hand_keeps_the_pinned_text():
    error = ProviderError(401, "whatever")
    assert (str(error), error.endpoint, error.hint) == ("LLM 401", None, None)


# -- MCP: each failed server's reason ------------------------------------------------------------------


NOT_JSON_RPC = ("not an MCP server: its first line on stdout is not JSON-RPC: {line!r} (an MCP server writes only "
                'JSON-RPC messages there and logs to stderr; "strictStdout": false skips such lines)')
EXITED = "exited with code {code} before answering initialize: is the command an MCP server? (its stderr may say more)"
SLEEPS = "import time; time.sleep(120)"


async def test_mcp_reasons_say_why_each_failed_server_failed_in_config_order(tmp_path):
    config = {"mcpServers": {
        "demo": {"command": demo_cmd()},
        "banner": {"command": [sys.executable, "-c", f"print('Listening on :8080', flush=True); {SLEEPS}"],
                   "timeout": 120000},
        "quits": {"command": [sys.executable, "-c", "import sys; sys.exit(3)"], "timeout": 120000},
        "silent": {"command": ["true"], "timeout": 120000},
        "off": {"command": ["x"], "enabled": False},
        "typo": {"command": ["no-such-mcp-server-xyz"]},
        "where": {"command": demo_cmd(), "cwd": str(tmp_path / "missing")},
        "wrong": {"command": demo_cmd(), "timeout": "30s"},
    }}
    with captured_warnings() as lines:
        toolkit = await create_toolkit(config, builtins=False)
    try:
        assert toolkit.mcp_status() == {"demo": "connected", "banner": "failed", "quits": "failed", "silent": "failed",
                                        "off": "disabled", "typo": "failed", "where": "failed", "wrong": "failed"}
        reasons = {
            "banner": NOT_JSON_RPC.format(line="Listening on :8080"),
            "quits": EXITED.format(code=3),
            "silent": EXITED.format(code=0),
            "typo": 'cannot start "no-such-mcp-server-xyz": no such executable on PATH '
                    '(check "command", or install it)',
            "where": f"cannot start the server: \"cwd\" '{tmp_path / 'missing'}' is not a directory",
            "wrong": '"timeout" must be a number of milliseconds, got a string',
        }
        assert toolkit.mcp_reasons() == reasons
        assert list(toolkit.mcp_reasons()) == list(reasons)  # config order
        assert lines == [f'[toolnexus] MCP server "{name}" failed: {why}' for name, why in reasons.items()]
        assert [t.name for t in toolkit.tools()][:1] == ["demo_echo"]
    finally:
        await toolkit.close()


async def test_without_mcp_or_failures_there_are_no_reasons():
    toolkit = await create_toolkit(builtins=False)
    assert toolkit.mcp_reasons() == {} and toolkit.mcp_status() == {}
    toolkit = await create_toolkit({"mcpServers": {"demo": {"command": demo_cmd()}}}, builtins=False)
    try:
        assert toolkit.mcp_reasons() == {} and toolkit.mcp_status() == {"demo": "connected"}
    finally:
        await toolkit.close()


async def test_the_inventory_carries_the_reasons_too():
    inventory = await list_mcp_tools({"mcpServers": {"junk": {"command": ["echo", "hello"]}}})
    assert inventory.status == {"junk": "failed"}
    assert inventory.reasons == {"junk": NOT_JSON_RPC.format(line="hello")}


@pytest.mark.parametrize("status, reason", [
    (401, 'HTTP 401 from {url}?token=«redacted»: the server wants credentials: check "headers" (e.g. '
          '"Authorization": "Bearer ${{TOKEN}}")'),
    (403, 'HTTP 403 from {url}?token=«redacted»: the server refused these credentials: check "headers" and what '
          "the token may access"),
    (404, 'HTTP 404 from {url}?token=«redacted»: no MCP endpoint there: check "url" (it often ends in /mcp, or /sse '
          "for the legacy transport)"),
    (500, "HTTP 500 from {url}?token=«redacted»"),
])
async def test_a_remote_that_answers_with_an_http_error_is_named_by_its_status(status, reason):
    with LoopbackServer() as web:
        web.route("/mcp", Reply(status=status, body='{"error": "no"}', content_type="application/json"))
        url = f"{web.url}/mcp"
        toolkit = await create_toolkit({"mcpServers": {"remote": {"url": f"{url}?token=s3cr3t-value",
                                                                  "headers": {"Authorization": "Bearer abc"}}}},
                                       builtins=False)
        try:
            assert toolkit.mcp_reasons() == {"remote": reason.format(url=url)}
        finally:
            await toolkit.close()


# A banner, then a server that answers at once (stdlib only: it starts in milliseconds, so the
# grace for a banner is never what the test measures).
SCRIPTED = str(Path(DEMO).with_name("scripted.py"))
BANNER = ["sh", "-c", 'echo "demo server starting up"; exec "$0" "$@"', sys.executable, SCRIPTED, "/dev/null"]


async def test_a_server_that_prints_a_banner_and_then_answers_connects_with_a_warning(caplog):
    """Compatible with servers 0.21 accepted: a banner followed by JSON-RPC within the grace is a
    server that logs to the wrong stream, not a program that is no MCP server at all."""
    caplog.set_level(logging.WARNING, logger="toolnexus")
    strict = await create_toolkit({"mcpServers": {"chatty": {"command": BANNER}}}, builtins=False)
    lenient = await create_toolkit({"mcpServers": {"chatty": {"command": BANNER, "strictStdout": False}}},
                                   builtins=False)
    try:
        assert strict.mcp_status() == {"chatty": "connected"} and strict.mcp_reasons() == {}
        assert (await strict.execute("chatty_echo", {"text": "hi"})).output == "hi"
        assert caplog.messages == ['[toolnexus] MCP server "chatty" wrote a line that is not JSON-RPC to stdout '
                                   "before its first message: 'demo server starting up' (skipped; an MCP server "
                                   "should log to stderr)"]
        assert lenient.mcp_status() == {"chatty": "connected"}
        assert (await lenient.execute("chatty_echo", {"text": "hi"})).output == "hi"
    finally:
        await strict.close()
        await lenient.close()


# -- MCP server entries: keys, types, units ------------------------------------------------------------


def test_unknown_keys_warn_once_naming_the_key_and_the_server(caplog):
    caplog.set_level(logging.WARNING, logger="toolnexus")
    for _ in range(2):
        spec = server_spec("files-a", {"command": ["srv"], "timout": 60000, "envFile": ".env"})
    assert spec.timeout == 30.0  # the typo is not read
    assert caplog.messages == [
        '[toolnexus] MCP server "files-a": unknown key "timout" ignored (did you mean "timeout"?)',
        '[toolnexus] MCP server "files-a": unknown key "envFile" ignored',
    ]


def test_keys_of_the_other_kind_of_server_are_named_as_ignored(caplog):
    caplog.set_level(logging.WARNING, logger="toolnexus")
    server_spec("remote-b", {"url": "https://mcp.example.com/x", "cwd": "/srv"})
    server_spec("local-b", {"command": ["srv"], "headers": {"A": "b"}})
    assert caplog.messages == [
        '[toolnexus] MCP server "remote-b": "cwd" applies to local servers only — ignored (this one is remote: it '
        'has a "url")',
        '[toolnexus] MCP server "local-b": "headers" applies to remote servers only — ignored (this one is local: '
        'it has no "url")',
    ]


@pytest.mark.parametrize("cfg, message", [
    ({"command": ["x"], "timeout": "30s"}, '"timeout" must be a number of milliseconds, got a string'),
    ({"command": ["x"], "callTimeout": [1]}, '"callTimeout" must be a number of milliseconds, got a list'),
    ({"command": ["x"], "enabled": "no"}, '"enabled" must be true or false, got a string'),
    ({"command": ["x"], "disabled": 1}, '"disabled" must be true or false, got a number'),
    ({"command": ["x"], "strictStdout": "off"}, '"strictStdout" must be true or false, got a string'),
    ({"command": ["x"], "tools": {"search": "yes"}}, '"tools" must be an object of tool name -> true/false, got an '
                                                     "object holding a string"),
    ({"command": ["x"], "env": {"A": None}}, '"environment"/"env" must be an object of strings, got null for "A"'),
    ({"command": ["x"], "inheritEnv": "PATH"}, '"inheritEnv" must be true, false or a list of variable names, got a '
                                               "string"),
    ({"command": ["x"], "cwd": 7}, '"cwd" must be a string, got a number'),
    ({"command": {"exe": "x"}}, '"command" must be a list [exe, *args] or an executable name, got an object'),
    ({"command": ["x", None]}, '"command" must be a list of strings, got a list holding null'),
    ({"type": 1, "command": ["x"]}, '"type" must be "local" or "remote", got a number'),
    ({"url": "localhost:8080/mcp"}, '"url" must be an http:// or https:// URL, got "localhost:8080/mcp"'),
    ({"url": 5}, '"url" must be a string (an http:// or https:// URL), got a number'),
    ({"url": "https://h/mcp", "headers": ["A: b"]}, '"headers" must be an object of strings, got a list'),
])
def test_wrong_types_fail_naming_the_key_and_the_expected_type(cfg, message):
    with pytest.raises(ValueError) as info:
        server_spec("s", cfg)
    assert str(info.value) == message


async def test_a_wrong_type_fails_that_server_alone_with_the_server_named():
    config = {"mcpServers": {"good": {"command": demo_cmd()}, "bad-c": {"command": demo_cmd(), "tools": "echo"}}}
    with captured_warnings() as lines:
        toolkit = await create_toolkit(config, builtins=False)
    try:
        assert toolkit.mcp_status() == {"good": "connected", "bad-c": "failed"}
        assert lines == ['[toolnexus] MCP server "bad-c" failed: "tools" must be an object of tool name -> '
                         "true/false, got a string"]
    finally:
        await toolkit.close()


def test_durations_are_milliseconds_with_warnings_for_values_that_cannot_be_meant(caplog):
    caplog.set_level(logging.WARNING, logger="toolnexus")
    assert server_spec("d1", {"command": ["x"]}).timeout == 30.0  # default: 30 000 ms
    spec = server_spec("d2", {"command": ["x"], "timeout": 30, "callTimeout": 0})
    assert (spec.timeout, spec.call_timeout) == (0.03, 0.03)  # callTimeout falls back to timeout
    assert server_spec("d3", {"command": ["x"], "timeout": 45000, "callTimeout": 120000}).call_timeout == 120.0
    assert caplog.messages == [
        '[toolnexus] MCP server "d2": "timeout" is in milliseconds: 30 is 0.03 s — did you mean 30000?',
        '[toolnexus] MCP server "d2": "callTimeout" must be more than 0 milliseconds, got 0 — using 30 ms',
    ]


def test_a_misspelt_server_map_key_is_named():
    with pytest.raises(ValueError) as info:
        server_spec("mcp_servers", {"github": {"url": "https://mcp.example.com/github"}})
    assert str(info.value) == ('"mcp_servers" was read as one server: write the server map under "mcpServers" '
                               '(or "servers", "mcp"; the case matters)')


def test_env_values_may_be_numbers_or_booleans_written_as_json_text():
    env = server_spec("s", {"command": ["x"], "env": {"PORT": 8080, "DEBUG": True}}).env
    assert (env["PORT"], env["DEBUG"]) == ("8080", "true")
