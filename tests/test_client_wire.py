"""Both wire styles against a real loopback server: URLs, headers, bodies, replies, content parts."""

from __future__ import annotations

import base64
import json
import logging

import pytest

from support.llm_server import Json, LlmServer, Raw, anthropic_calls, anthropic_text, openai_calls, openai_text
from toolnexus.client import ContentPartError, ProviderResponseError, create_client
from toolnexus.content import UnsupportedPartError
from toolnexus.toolkit import Toolkit
from toolnexus.types import Tool, ToolResult

PNG = base64.b64encode(b"\x89PNG fake image bytes").decode()


@pytest.fixture
def server():
    with LlmServer() as s:
        yield s


def make_tool(name, result):
    async def execute(args=None, ctx=None):
        return result

    return Tool(name, f"{name} tool", {"type": "object", "properties": {}}, "native", execute)


def kit(*tools):
    return Toolkit(None, None, [], [], list(tools))


def llm(server, style, base_suffix="", **kw):
    kw.setdefault("api_key", "sk-test")
    return create_client(base_url=server.base_url + base_suffix, style=style, model="m", **kw)


@pytest.mark.parametrize("suffix,path", [("", "/chat/completions"), ("/v1", "/v1/chat/completions"),
                                         ("/api/", "/api/chat/completions")])
async def test_openai_url_never_adds_v1(server, suffix, path):
    server.add(Json(openai_text("hi")))
    async with llm(server, "openai", suffix) as c:
        await c.run("x")
    assert server.requests[0].path == path


@pytest.mark.parametrize("suffix,path", [("", "/v1/messages"), ("/v1", "/v1/messages"), ("/v1/", "/v1/messages"),
                                         ("/proxy", "/proxy/v1/messages")])
async def test_anthropic_url_adds_v1_unless_present(server, suffix, path):
    server.add(Json(anthropic_text("hi")))
    async with llm(server, "anthropic", suffix) as c:
        await c.run("x")
    assert server.requests[0].path == path


async def test_openai_headers_and_body_order(server):
    server.add(Json(openai_calls(("c1", "t", {}))), Json(openai_text("done")))
    async with llm(server, "openai", headers={"X-Extra": "1"}) as c:
        await c.run("x", kit(make_tool("t", ToolResult("out", False))))
    names = [k for k, _ in server.requests[0].header_items]
    ours = [n for n in names if n in ("Authorization", "Content-Type", "X-Extra")]
    assert ours == ["Authorization", "Content-Type", "X-Extra"]
    assert server.requests[0].headers["authorization"] == "Bearer sk-test"
    body = server.requests[0].json
    assert list(body) == ["model", "messages", "tools", "tool_choice"] and body["tool_choice"] == "auto"
    assert body["tools"] == [{"type": "function", "function": {"name": "t", "description": "t tool",
                                                               "parameters": {"type": "object", "properties": {}}}}]
    assert server.requests[1].json["messages"][-1] == {"role": "tool", "tool_call_id": "c1", "content": "out"}


async def test_anthropic_headers_body_and_tool_results(server):
    server.add(Json(anthropic_calls(("u1", "t", {"a": 1}), ("u2", "bad", {}))), Json(anthropic_text("done")))
    tk = kit(make_tool("t", ToolResult("out", False)), make_tool("bad", ToolResult("nope", True)))
    async with llm(server, "anthropic") as c:
        r = await c.run("x", tk)
    names = [k for k, _ in server.requests[0].header_items]
    assert [n for n in names if n in ("x-api-key", "anthropic-version", "Content-Type")] == [
        "x-api-key", "anthropic-version", "Content-Type"]
    assert server.requests[0].headers["anthropic-version"] == "2023-06-01"
    first = server.requests[0].json
    assert list(first) == ["model", "max_tokens", "system", "messages", "tools"]
    assert (first["max_tokens"], first["system"]) == (4096, "")
    assert first["tools"] == [
        {"name": "t", "description": "t tool", "input_schema": {"type": "object", "properties": {}}},
        {"name": "bad", "description": "bad tool", "input_schema": {"type": "object", "properties": {}}},
    ]
    assert server.requests[1].json["messages"][-1] == {"role": "user", "content": [
        {"type": "tool_result", "tool_use_id": "u1", "content": "out", "is_error": False},
        {"type": "tool_result", "tool_use_id": "u2", "content": "nope", "is_error": True}]}
    assert r.tool_calls[0]["args"] == {"a": 1}
    assert r.usage == {"prompt_tokens": 9, "completion_tokens": 3, "total_tokens": 12}
    assert all(m["role"] != "system" for m in r.messages)


async def test_anthropic_without_tools_omits_tools_key(server):
    server.add(Json(anthropic_text("hi")))
    async with llm(server, "anthropic") as c:
        await c.run("x", kit())
    assert list(server.requests[0].json) == ["model", "max_tokens", "system", "messages"]


async def test_openai_bad_argument_json_becomes_empty_args(server):
    server.add(Json(openai_calls(("c1", "t", "{not json"))), Json(openai_text("ok")))
    async with llm(server, "openai") as c:
        r = await c.run("x", kit(make_tool("t", ToolResult("out", False))))
    assert r.tool_calls[0]["args"] == {}


# -- malformed replies ---------------------------------------------------------------------------


@pytest.mark.parametrize("style,reply,message", [
    ("openai", {"id": "x", "object": "chat.completion"},
     "toolnexus: malformed openai response: missing `choices[0]` (got keys ['id', 'object'])"),
    ("openai", {"choices": [{"index": 0}]},
     "toolnexus: malformed openai response: `choices[0].message` is not an object (got keys ['index'])"),
    ("openai", {"choices": [{"message": {"role": "assistant", "tool_calls": [{"id": "c", "function": {}}]}}]},
     "toolnexus: malformed openai response: `message.tool_calls[0].function.name` is missing "
     "(got keys ['function', 'id'])"),
    ("openai", [1, 2], "toolnexus: malformed openai response: expected a JSON object (got list)"),
    ("anthropic", {"type": "message", "error": {"type": "overloaded"}},
     'toolnexus: malformed anthropic response: missing `content` list (got keys [\'error\', \'type\'], '
     'error {"type": "overloaded"})'),
    ("anthropic", {"content": [{"type": "tool_use", "id": "u"}]},
     "toolnexus: malformed anthropic response: `content[0]` tool_use block has no `name` (got keys ['id', 'type'])"),
])
async def test_malformed_reply_names_what_was_malformed(server, style, reply, message):
    server.add(Json(reply))
    events = []
    async with llm(server, style, on_metric=events.append) as c:
        with pytest.raises(ProviderResponseError) as e:
            await c.run("x")
    assert str(e.value) == message
    assert events[0]["event"] == "llm" and events[0]["status"] == "error" and events[0]["prompt_tokens"] == 0
    assert events[-1]["event"] == "run" and events[-1]["error"] == message
    assert len(server.requests) == 1  # never retried


async def test_non_json_body_is_a_clear_error(server):
    html = b"<html>gateway says hi</html>"
    server.add(Raw(b"HTTP/1.1 200 OK\r\nContent-Type: text/html\r\nContent-Length: %d\r\n\r\n" % len(html) + html))
    async with llm(server, "openai") as c:
        with pytest.raises(ProviderResponseError) as e:
            await c.run("x")
    assert str(e.value) == (f"toolnexus: malformed response from {server.base_url}/chat/completions: "
                            "body is not JSON: '<html>gateway says hi</html>'")


# -- content parts -------------------------------------------------------------------------------


async def test_user_parts_are_mapped_per_wire_and_stored_canonically(server):
    prompt = ["look at this", {"type": "image", "mimeType": "image/png", "data": PNG}]
    server.add(Json(openai_text("a cat")), Json(anthropic_text("a cat")))
    events = []
    async with llm(server, "openai", on_metric=events.append) as c:
        r = await c.run(prompt)
    assert server.requests[0].json["messages"][0]["content"] == [
        {"type": "text", "text": "look at this"},
        {"type": "image_url", "image_url": {"url": f"data:image/png;base64,{PNG}"}}]
    assert r.messages[0]["content"][1] == {"type": "image", "mimeType": "image/png", "data": PNG}
    assert events[0]["parts"] == [{"type": "image", "mimeType": "image/png", "bytes": len(base64.b64decode(PNG))}]
    async with llm(server, "anthropic") as c:
        await c.run(prompt)
    assert server.requests[1].json["messages"][0]["content"][1] == {
        "type": "image", "source": {"type": "base64", "media_type": "image/png", "data": PNG}}


@pytest.mark.parametrize("style,prompt,error,message", [
    ("openai", [{"type": "video", "mimeType": "video/mp4", "data": PNG}], ContentPartError,
     'unknown content part type "video"'),
    ("openai", ["ok", {"type": "image", "mimeType": "image/png", "data": "***"}], ContentPartError,
     "a image part's data is not valid padded base64"),
    ("openai", [{"type": "image", "data": PNG}], ContentPartError, "a image part needs a mimeType"),
    ("openai", [3], ContentPartError, "not a content part: int"),
    ("anthropic", [{"type": "audio", "mimeType": "audio/wav", "data": PNG}], UnsupportedPartError,
     'no "anthropic" block shape for a audio part (audio/wav)'),
])
async def test_invalid_user_parts_fail_before_any_http(server, style, prompt, error, message):
    async with llm(server, style) as c:
        with pytest.raises(error) as e:
            await c.run(prompt)
    assert str(e.value).startswith(message) and server.requests == []


async def test_oversize_user_part_raises(server):
    async with llm(server, "openai", max_part_bytes=4) as c:
        with pytest.raises(ContentPartError, match="over the maxPartBytes limit of 4"):
            await c.run([{"type": "image", "mimeType": "image/png", "data": PNG}])
    assert server.requests == []


async def test_part_policy_set_after_a_run_applies_to_the_next_run(server):
    server.add(Json(openai_text("seen")))
    image = [{"type": "image", "mimeType": "image/png", "data": PNG}]
    async with llm(server, "openai") as c:
        await c.run(image)
        c.max_part_bytes = 4  # construction keywords are plain attributes
        with pytest.raises(ContentPartError, match="over the maxPartBytes limit of 4"):
            await c.run(image)
    assert len(server.requests) == 1


async def test_openai_tool_parts_move_to_one_synthetic_user_message(server):
    shot = ToolResult("took a screenshot", False, parts=[{"type": "image", "mimeType": "image/png", "data": PNG}])
    server.add(Json(openai_calls(("c1", "snap", {}), ("c2", "plain", {}))), Json(openai_text("seen")))
    async with llm(server, "openai") as c:
        r = await c.run("x", kit(make_tool("snap", shot), make_tool("plain", ToolResult("p", False))))
    sent = server.requests[1].json["messages"]
    assert sent[-3:] == [
        {"role": "tool", "tool_call_id": "c1", "content": "took a screenshot"},
        {"role": "tool", "tool_call_id": "c2", "content": "p"},
        {"role": "user", "content": [{"type": "text", "text": "Output of tool snap (c1):"},
                                     {"type": "image_url", "image_url": {"url": f"data:image/png;base64,{PNG}"}}]}]
    stored = [m for m in r.messages if m["role"] == "tool"]
    assert stored[0]["parts"] == shot.parts and stored[0]["name"] == "snap" and "parts" not in stored[1]
    assert not any(m["role"] == "user" and isinstance(m["content"], list) for m in r.messages)


async def test_anthropic_tool_parts_go_inside_tool_result_content(server):
    shot = ToolResult("shot", False, parts=[{"type": "image", "mimeType": "image/png", "data": PNG}])
    server.add(Json(anthropic_calls(("u1", "snap", {}))), Json(anthropic_text("seen")))
    async with llm(server, "anthropic") as c:
        await c.run("x", kit(make_tool("snap", shot)))
    assert server.requests[1].json["messages"][-1]["content"] == [{
        "type": "tool_result", "tool_use_id": "u1", "is_error": False,
        "content": [{"type": "text", "text": "shot"},
                    {"type": "image", "source": {"type": "base64", "media_type": "image/png", "data": PNG}}]}]


async def test_unsupported_tool_part_degrades_to_placeholder_with_warning(server, caplog):
    clip = ToolResult("clip", False, parts=[{"type": "audio", "mimeType": "audio/ogg", "data": PNG}])
    server.add(Json(anthropic_calls(("u9", "rec", {}))), Json(anthropic_text("ok")))
    with caplog.at_level(logging.WARNING, logger="toolnexus"):
        async with llm(server, "anthropic") as c:
            await c.run("x", kit(make_tool("rec", clip)))
    placeholder = f"[unsupported audio part (audio/ogg, {len(base64.b64decode(PNG))} bytes)]"
    assert server.requests[1].json["messages"][-1]["content"][0]["content"] == [
        {"type": "text", "text": "clip"}, {"type": "text", "text": placeholder}]
    assert ('[toolnexus] no "anthropic" block shape for a audio part (audio/ogg) — sent as a text placeholder'
            in [r.getMessage() for r in caplog.records])


async def test_on_unsupported_part_text_degrades_user_parts_too(server):
    server.add(Json(anthropic_text("ok")))
    async with llm(server, "anthropic", on_unsupported_part="text") as c:
        await c.run([{"type": "audio", "mimeType": "audio/wav", "data": PNG}])
    assert json.dumps(server.requests[0].json["messages"][0]["content"]).count("[unsupported audio part") == 1
