"""MCP source without servers: config parsing, server entries, filters, result/elicitation mapping."""

import logging
import os
import re

import mcp.types as mt
import pytest

import toolnexus
from toolnexus.mcp_source import (
    DEFAULT_TIMEOUT,
    MAX_LIST_PAGES,
    answer_to_elicit_result,
    apply_tools_filter,
    elicitation_to_request,
    expand_env_headers,
    is_enabled,
    is_remote,
    parse_mcp_config,
)
from toolnexus.mcp_source._config import server_spec
from toolnexus.mcp_source._connection import _as_failure, describe_error
from toolnexus.mcp_source._convert import build_input_schema, call_result_to_tool_result
from toolnexus.types import Answer


@pytest.mark.parametrize("config, warning", [
    ({"mcpServers": {}, "agnets": {}}, 'unknown top-level key "agnets" ignored (did you mean "agents"?)'),
    ({"mcpServer": {"files": {"command": ["srv"]}}},
     '"mcpServer" is the MCP serve profile, but "files" in it is an MCP server entry: did you mean "mcpServers"?'),
    ({"servers": {}, "inputs": []},
     'unknown top-level key "inputs" ignored (known: mcpServers, servers, mcp, builtins, agents, a2a, mcpServer, llm)'),
])
async def test_create_toolkit_warns_about_top_level_keys_it_does_not_read_and_still_builds(caplog, config, warning):
    """0.21 read such configs silently; the library keeps reading them but names the key (and the nearest of ours)."""
    caplog.set_level(logging.WARNING, "toolnexus")
    toolkit = await toolnexus.create_toolkit(config, builtins=False)
    await toolkit.close()
    assert f"[toolnexus] config: {warning}" in caplog.messages


def test_a_bare_server_map_still_reads_every_other_key_as_a_server_and_only_near_misses_are_reported():
    from toolnexus.mcp_source._config import config_key_problems

    bare = {"github": {"url": "https://x/mcp"}, "agnets": {"card": "https://y"}, "llm": {"command": ["srv"]}}
    assert parse_mcp_config(bare) == {"github": {"url": "https://x/mcp"}, "agnets": {"card": "https://y"},
                                      "llm": {"command": ["srv"]}}  # a server named "llm", as 0.21 read it
    assert [(p.key, p.typo) for p in config_key_problems(bare)] == [("agnets", True)]
    assert config_key_problems({"mcpServers": {}, "builtins": False, "llm": {"model": "m"}}) == []


def test_public_names_are_reexported_from_the_package_and_toolnexus():
    assert DEFAULT_TIMEOUT == 30.0 and MAX_LIST_PAGES == 1000
    for name in ("load_mcp", "load_mcp_with_context", "list_mcp_tools", "McpSource", "ToolInfo", "McpInventory"):
        assert getattr(toolnexus, name) is getattr(toolnexus.mcp_source, name)


def test_wrappers_first_present_wins_and_bare_maps_drop_reserved_keys():
    assert parse_mcp_config({"servers": {"a": {}}, "mcpServers": {"b": {}}}) == {"b": {}}
    assert parse_mcp_config({"mcp": {"c": {}}}) == {"c": {}}
    bare = {"x": {"command": ["y"]}, "builtins": False, "agents": {}, "a2a": {}, "mcpServer": {}}
    assert parse_mcp_config(bare) == {"x": {"command": ["y"]}}


def test_jsonc_config_file_with_comments_is_accepted(tmp_path):
    f = tmp_path / "mcp.jsonc"
    f.write_text(
        '{\n  // line comment\n  "mcpServers": { /* block */ "s": {"url": "http://h/x // not a comment"} }\n}\n'
    )
    assert parse_mcp_config(str(f)) == {"s": {"url": "http://h/x // not a comment"}}


def test_enabled_and_remote_rules():
    assert is_enabled({}) and not is_enabled({"disabled": True}) and not is_enabled({"enabled": False})
    assert is_enabled({"disabled": "yes"})  # only the boolean True disables
    assert is_remote({"url": "http://x"}) and is_remote({"type": "remote"})
    assert not is_remote({"type": "local", "url": "http://x"}) and not is_remote({"command": ["x"]})


def test_env_headers_expand_braced_names_only(monkeypatch):
    monkeypatch.setenv("TN_TOKEN", "s3cret")
    monkeypatch.delenv("TN_MISSING", raising=False)
    out = expand_env_headers({"A": "Bearer ${TN_TOKEN}", "B": "$TN_TOKEN", "C": "${TN_MISSING}"})
    assert out == {"A": "Bearer s3cret", "B": "$TN_TOKEN", "C": ""}
    assert expand_env_headers(None) is None


def test_claude_desktop_string_command_with_args_is_one_executable_plus_args():
    spec = server_spec("s", {"command": "npx", "args": ["-y", "pkg"]})
    assert (spec.command, spec.args) == ("npx", ["-y", "pkg"])
    spec = server_spec("s", {"command": ["node", "srv.js"], "args": ["--x"]})
    assert (spec.command, spec.args) == ("node", ["srv.js", "--x"])


@pytest.mark.parametrize(
    "cfg, message",
    [
        ("https://schema", "server config must be an object, got str"),
        ({"command": []}, '"command" is empty'),
        ({}, 'a local server needs a "command" (or a "url" for a remote one)'),
        ({"type": "remote"}, 'a remote server needs a "url" string'),
        ({"command": ["x"], "args": "-v"}, '"args" must be a list of strings, got a string'),
        ({"command": ["x"], "env": ["A=1"]}, '"environment"/"env" must be an object of strings, got a list'),
        (
            {"url": "http://h", "headers": {"A": 1}},
            '"headers" must be an object of strings, got an object holding a number',
        ),
        ({"command": ["x"], "tools": ["a"]}, '"tools" must be an object of tool name -> true/false, got a list'),
    ],
)
def test_bad_server_entries_raise_errors_naming_the_key(cfg, message):
    with pytest.raises(ValueError) as err:
        server_spec("s", cfg)
    assert str(err.value) == message


def test_timeouts_are_ms_with_defaults_and_a_separate_call_timeout():
    assert server_spec("s", {"command": ["x"]}).timeout == 30.0
    assert server_spec("s", {"command": ["x"], "timeout": None}).timeout == 30.0
    spec = server_spec("s", {"command": ["x"], "timeout": 1500})
    assert (spec.timeout, spec.call_timeout) == (1.5, 1.5)
    spec = server_spec("s", {"command": ["x"], "timeout": 1500, "callTimeout": 120000})
    assert (spec.timeout, spec.call_timeout) == (1.5, 120.0)


def test_child_env_is_full_by_default_and_narrowed_by_inherit_env(monkeypatch):
    monkeypatch.setenv("TN_SECRET", "hide")
    monkeypatch.setenv("TN_SHARED", "pass")
    full = server_spec("s", {"command": ["x"], "env": {"TN_EXTRA": 1}}).env
    assert full["TN_SECRET"] == "hide" and full["TN_EXTRA"] == "1"
    narrow = server_spec("s", {"command": ["x"], "inheritEnv": ["TN_SHARED"], "environment": {"E": "v"}}).env
    assert "TN_SECRET" not in narrow and narrow["TN_SHARED"] == "pass" and narrow["E"] == "v"
    assert narrow.get("PATH") == os.environ.get("PATH")
    # the first truthy of environment/env wins; no merge
    assert "B" not in server_spec("s", {"command": ["x"], "environment": {"A": "1"}, "env": {"B": "2"}}).env


def test_tools_filter_semantics_and_pinned_no_match_line(caplog):
    caplog.set_level(logging.WARNING, "toolnexus")
    defs = [{"name": "a"}, {"name": "b"}, mt.Tool(name="c", input_schema={"type": "object"})]
    assert apply_tools_filter("s", defs, None) == defs
    assert [d["name"] for d in apply_tools_filter("s", defs, {"a": True, "b": False})] == ["a"]
    kept = apply_tools_filter("s", defs, {"b": False, "zz": False})
    assert [d["name"] if isinstance(d, dict) else d.name for d in kept] == ["a", "c"]
    assert caplog.messages == ['[toolnexus] server "s" tools filter name "zz" matched no tool']


def test_input_schema_is_closed_and_keeps_server_keys():
    schema = build_input_schema({"inputSchema": {"type": "object", "required": ["x"], "properties": None}})
    assert schema == {"type": "object", "required": ["x"], "properties": {}, "additionalProperties": False}


def _result(**kw):
    return mt.CallToolResult(**kw)


def test_call_results_map_through_the_wire_form_of_2x_models():
    text = mt.TextContent(type="text", text="a")
    r = call_result_to_tool_result(_result(content=[text, mt.TextContent(type="text", text=" ")], is_error=True), "s")
    assert (r.output, r.is_error, r.metadata) == ("a", True, {"server": "s"})
    r = call_result_to_tool_result(_result(content=[text], structured_content={"k": "é"}), "s")
    assert r.output == '{"k": "\\u00e9"}' and not r.is_error
    img = mt.ImageContent(type="image", data="AAAAAA==", mime_type="image/png")
    r = call_result_to_tool_result(_result(content=[img]), "s")
    assert r.output == "image (image/png, 4 bytes)"
    assert r.parts == [{"type": "image", "mimeType": "image/png", "data": "AAAAAA=="}]
    res = mt.EmbeddedResource(type="resource", resource=mt.TextResourceContents(uri="file:///r", text="R"))
    r = call_result_to_tool_result(_result(content=[res, text]), "s")
    assert (r.output, r.parts) == ("a\nR", None)


def test_call_results_given_as_plain_wire_dicts_map_the_same():
    r = call_result_to_tool_result({"content": [{"type": "text", "text": "x"}], "isError": True}, "s")
    assert (r.output, r.is_error) == ("x", True)


def test_form_elicitation_becomes_an_input_request_with_an_elc_id():
    params = mt.ElicitRequestFormParams(message="Name?", requested_schema={"type": "object", "properties": {}})
    req = elicitation_to_request(params)
    assert re.fullmatch(r"elc-[0-9a-f]+-\d+", req.id)
    assert (req.kind, req.prompt, req.data) == ("input", "Name?", {"schema": {"type": "object", "properties": {}}})
    assert elicitation_to_request(params).id != req.id


def test_url_elicitation_becomes_an_authorization_request():
    params = mt.ElicitRequestURLParams(message="Log in", url="https://a/b", elicitation_id="e")
    req = elicitation_to_request(params)
    assert (req.kind, req.prompt, req.url, req.data) == ("authorization", "Log in", "https://a/b", None)


def test_answers_map_to_accept_decline_cancel():
    accepted = answer_to_elicit_result(Answer("i", True, {"n": 1}))
    assert (accepted.action, accepted.content) == ("accept", {"n": 1})
    assert answer_to_elicit_result(Answer("i", True)).content == {}
    assert answer_to_elicit_result(Answer("i", False, reason="declined")).action == "decline"
    assert answer_to_elicit_result(Answer("i", False, reason="expired")).action == "cancel"
    assert answer_to_elicit_result(None).action == "cancel"


def test_error_descriptions_dig_through_exception_groups():
    import asyncio

    err = ExceptionGroup("tg", [ExceptionGroup("inner", [ValueError("real cause")])])
    assert describe_error(err) == "real cause"
    assert describe_error(BaseExceptionGroup("tg", [asyncio.CancelledError(), KeyError("k")])) == "'k'"
    assert describe_error(TimeoutError()) == "timed out"
    assert describe_error(RuntimeError()) == "RuntimeError"


async def test_groups_mixing_cancellation_and_errors_are_failures_unless_our_task_is_cancelled():
    import asyncio

    group = BaseExceptionGroup("tg", [asyncio.CancelledError(), ValueError("real")])
    assert str(_as_failure(group)) == "real"
    assert _as_failure(asyncio.CancelledError()) is None
    started = asyncio.Event()

    async def view_while_cancelled():
        started.set()
        try:
            await asyncio.Event().wait()
        except asyncio.CancelledError:
            return _as_failure(group)

    task = asyncio.ensure_future(view_while_cancelled())
    await started.wait()
    task.cancel()
    assert await task is None
