"""`build_mcp_server`, `serve_mcp_http_request`, `exposed_mcp_tools` and the content mapping.

No sockets here: requests go through `serve_mcp_http_request` (the same exchange `/mcp` uses)
or the official client's in-process transport.
"""

from __future__ import annotations

import json
from typing import Any

import pytest
from mcp.client.client import Client
from mcp.server.lowlevel import Server

import toolnexus
from test_mcp_serve_kit import ECHO_SCHEMA, Recorder, make_toolkit
from toolnexus import Tool, ToolResult
from toolnexus.mcp_serve import (
    DEFAULT_NAME,
    DEFAULT_VERSION,
    build_mcp_server,
    exposed_mcp_tools,
    serve_mcp_http_request,
)
from toolnexus.mcp_serve._content import part_to_content

ACCEPT_BOTH = [(b"accept", b"application/json, text/event-stream"), (b"content-type", b"application/json")]
INIT = {"protocolVersion": "2025-11-25", "capabilities": {}, "clientInfo": {"name": "t", "version": "1"}}


def _tool(name: str, schema: Any = None) -> Tool:
    async def run(args: dict, ctx=None) -> ToolResult:
        return ToolResult(name, False)

    return Tool(name, f"{name} tool", schema if schema is not None else {"type": "object"}, "native", run)


async def _rpc(server: Server, method: str, params: Any = None, headers=ACCEPT_BOTH) -> tuple[int, dict, Any]:
    body = json.dumps({"jsonrpc": "2.0", "id": 7, "method": method, **({"params": params} if params else {})})
    status, head, raw = await serve_mcp_http_request(server, "POST", "/mcp", headers, body.encode())
    return status, {k.decode(): v.decode() for k, v in head}, json.loads(raw) if raw else None


def test_public_names_are_importable_from_toolnexus() -> None:
    assert toolnexus.build_mcp_server is build_mcp_server
    assert toolnexus.exposed_mcp_tools is exposed_mcp_tools
    assert (DEFAULT_NAME, DEFAULT_VERSION) == ("toolnexus", "0.1.0")


def test_exposed_mcp_tools_filters_by_profile_in_toolkit_order() -> None:
    tools = [_tool("a"), _tool("b"), _tool("c")]
    names = lambda cfg: [t.name for t in exposed_mcp_tools(tools, cfg)]  # noqa: E731
    assert names(None) == names({}) == names({"tools": None}) == ["a", "b", "c"]
    assert names({"tools": ["c", "a", "ghost"]}) == ["a", "c"]
    assert names({"tools": []}) == []


def test_build_mcp_server_returns_an_mcp_2x_lowlevel_server_with_defaults() -> None:
    server = build_mcp_server([_tool("a")])
    assert isinstance(server, Server)
    assert (server.name, server.version) == ("toolnexus", "0.1.0")
    blank = build_mcp_server([], {"name": "", "version": ""})
    assert (blank.name, blank.version) == ("", "")


@pytest.mark.parametrize(
    "cfg, message",
    [
        ("yes", "must be a dict"),
        ({"tools": "echo"}, '"tools" must be a list of strings'),
        ({"name": 3}, '"name" must be a string'),
        ({"max_body_bytes": 0}, '"max_body_bytes" must be a positive integer'),
    ],
)
def test_a_malformed_profile_is_rejected_with_the_key_named(cfg: Any, message: str) -> None:
    with pytest.raises((TypeError, ValueError), match=message):
        build_mcp_server([], cfg)


async def test_initialize_answers_server_info_and_tools_capability() -> None:
    server = build_mcp_server([_tool("a")], {"name": "n1", "version": "v1"})
    status, head, reply = await _rpc(server, "initialize", INIT)
    assert (status, head["content-type"]) == (200, "application/json")
    assert reply["result"]["serverInfo"] == {"name": "n1", "version": "v1"}
    assert "tools" in reply["result"]["capabilities"]
    assert "mcp-session-id" not in head


async def test_tools_list_needs_no_initialize_and_keeps_schemas_verbatim() -> None:
    schema = {**ECHO_SCHEMA, "$defs": {"x": {"type": "integer"}}}
    status, _, reply = await _rpc(build_mcp_server([_tool("Name.With-Odd_chars", schema)]), "tools/list")
    assert status == 200
    assert reply["result"]["tools"] == [
        {"name": "Name.With-Odd_chars", "description": "Name.With-Odd_chars tool", "inputSchema": schema}
    ]


async def test_a_list_passed_to_build_mcp_server_is_read_live() -> None:
    tools = [_tool("a")]
    server = build_mcp_server(tools)
    tools.append(_tool("b"))
    _, _, reply = await _rpc(server, "tools/list")
    assert [t["name"] for t in reply["result"]["tools"]] == ["a", "b"]


async def test_a_schema_without_type_is_listed_as_object_and_a_non_object_one_is_left_out(caplog) -> None:
    untyped = _tool("untyped_tool", {"properties": {"q": {"type": "string"}}})
    server = build_mcp_server([untyped, _tool("stringy_tool", {"type": "string"})])
    _, _, reply = await _rpc(server, "tools/list")
    assert reply["result"]["tools"][0]["inputSchema"] == {"type": "object", "properties": {"q": {"type": "string"}}}
    assert [t["name"] for t in reply["result"]["tools"]] == ["untyped_tool"]
    warning = 'tool "stringy_tool" has an input schema whose type is not "object"'
    assert any(warning in r.getMessage() for r in caplog.records)


def test_tool_names_over_64_characters_are_warned_about(caplog) -> None:
    long_name = "n" * 65
    build_mcp_server([_tool(long_name), _tool("m" * 64)])
    warned = [r.getMessage() for r in caplog.records if "longer than 64" in r.getMessage()]
    assert warned == [
        f'[toolnexus] MCP serve: tool name "{long_name}" is longer than 64 characters — LLM providers may reject it'
    ]


async def test_get_and_delete_are_405_and_a_narrow_accept_is_406() -> None:
    server = build_mcp_server([_tool("a")])
    for method in ("GET", "DELETE", "PUT"):
        accept_sse = [(b"accept", b"text/event-stream")]
        status, head, raw = await serve_mcp_http_request(server, method, "/mcp", accept_sse, b"")
        assert (status, dict(head)[b"allow"], raw) == (405, b"POST", b"method not allowed")
    status, _, reply = await _rpc(server, "tools/list", headers=[(b"accept", b"application/json")])
    assert status == 406 and "text/event-stream" in reply["error"]["message"]


async def test_tools_call_through_serve_mcp_http_request_calls_the_tool_with_arguments() -> None:
    rec = Recorder()
    server = build_mcp_server(make_toolkit(rec).tools)
    status, _, reply = await _rpc(server, "tools/call", {"name": "echo", "arguments": {"x": "in-memory"}})
    assert status == 200
    assert reply["result"] == {"content": [{"type": "text", "text": "echo:in-memory"}], "isError": False}


async def test_unknown_tool_over_http_is_error_minus_32602() -> None:
    _, _, reply = await _rpc(build_mcp_server([_tool("a")]), "tools/call", {"name": "zzz", "arguments": {}})
    assert reply["error"]["code"] == -32602 and reply["error"]["message"] == "Unknown tool: zzz"


async def test_in_process_official_client_lists_and_calls() -> None:
    async with Client(build_mcp_server(make_toolkit(Recorder()).tools, {"tools": ["echo"]}), mode="legacy") as client:
        assert [t.name for t in (await client.list_tools()).tools] == ["echo"]
        assert (await client.call_tool("echo", {"x": "1"})).content[0].text == "echo:1"


@pytest.mark.parametrize(
    "part, expected",
    [
        ({"type": "text", "text": "t"}, {"type": "text", "text": "t"}),
        (
            {"type": "image", "mimeType": "image/gif", "data": "R0lG"},
            {"type": "image", "data": "R0lG", "mimeType": "image/gif"},
        ),
        ({"type": "audio", "url": "https://x.test/a.mp3"}, None),
        (
            {"type": "file", "data": "AA==", "url": "https://x.test/f.bin"},
            {
                "type": "resource",
                "resource": {"uri": "https://x.test/f.bin", "mimeType": "application/octet-stream", "blob": "AA=="},
            },
        ),
        (
            {"type": "file", "url": "https://x.test/f.txt", "name": "f.txt"},
            {
                "type": "resource_link",
                "name": "f.txt",
                "uri": "https://x.test/f.txt",
                "mimeType": "application/octet-stream",
            },
        ),
        ({"type": "file"}, None),
        ({"type": "video", "data": "AA=="}, None),
        ("not a dict", None),
    ],
)
def test_part_to_content_mapping(part: Any, expected: Any) -> None:
    block = part_to_content(part)
    assert (block.model_dump(by_alias=True, exclude_none=True) if block is not None else None) == expected
