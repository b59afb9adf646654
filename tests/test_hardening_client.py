"""Issue #11, the LLM client rows, against a real loopback server (a scripted model).

Rows covered (each test names its row):
- invalid or truncated tool-call arguments became `{}` and the tool ran with its defaults;
- an SSE stream that ends before `[DONE]` / a finish reason was reported `done` with partial text;
- a 300 MB 2xx LLM body was buffered whole (unbounded);
- an upstream error echoing request headers put the key in `ProviderError.body`;
- a client with no `timeout_ms`: a hung provider held a run 360 s, a 1-byte/s trickle never ended.
"""

from __future__ import annotations

import asyncio
import json

import pytest

from support.llm_server import (
    Hang,
    Json,
    LlmServer,
    Sse,
    Trickle,
    anthropic_sse,
    openai_calls,
    openai_sse,
    openai_text,
    sse_lines,
    toolkit_of,
)
from toolnexus.client import (
    DEFAULT_CALL_TIMEOUT_MS,
    NO_DEADLINE,
    ProviderError,
    ResponseTooLarge,
    RunTimeout,
    UrllibTransport,
    create_client,
)
from toolnexus.errors import InputTooLarge, StreamTruncated, ToolnexusError
from toolnexus.types import Tool, ToolResult

KEY = "sk-test-0123456789abcdefghij"


@pytest.fixture
def server():
    with LlmServer() as s:
        yield s


def llm(server, style="openai", **kw):
    kw.setdefault("api_key", KEY)
    kw.setdefault("retry_base_ms", 1)
    return create_client(base_url=server.base_url, style=style, model="m", **kw)


class Recorder:
    """A tool that records every execution (so a test can prove it never ran)."""

    def __init__(self, name="delete_files"):
        self.runs: list = []

        async def execute(args=None, ctx=None):
            self.runs.append(args)
            return ToolResult(f"deleted {args.get('path', 'EVERYTHING')}", False)

        self.tool = Tool(name, "", {"type": "object", "properties": {"path": {"type": "string"}}}, "native", execute)

    def kit(self):
        return toolkit_of(self.tool)


# ---------------------------------------------------------------------- row 1: broken arguments


BROKEN = ['{"path": "/tmp/x"', '{"path": }', "[1, 2]", '"just a string"', "{'path': 1}"]


@pytest.mark.parametrize("raw", BROKEN)
async def test_broken_arguments_are_refused_with_the_tool_name_and_the_json_problem_non_streaming(server, raw):
    """Row 1, openai, whole reply: the tool never runs; the model gets the reason."""
    tool = Recorder()
    server.add(Json(openai_calls(("c1", "delete_files", raw))), Json(openai_text("ok")))
    async with llm(server) as c:
        r = await c.run("go", tool.kit())
    assert tool.runs == []
    entry = r.tool_calls[0]
    assert entry["is_error"] is True
    assert 'tool "delete_files" was not run' in entry["output"]
    assert ("not valid JSON" in entry["output"]) or ("not a JSON object" in entry["output"])
    sent = server.requests[1].json["messages"][-1]
    assert sent["role"] == "tool" and sent["content"] == entry["output"]


async def test_truncated_arguments_say_the_json_ends_early(server):
    tool = Recorder()
    server.add(Json(openai_calls(("c1", "delete_files", '{"path": "/tmp/x'))), Json(openai_text("ok")))
    async with llm(server) as c:
        r = await c.run("go", tool.kit())
    assert tool.runs == [] and "ends early (truncated?)" in r.tool_calls[0]["output"]


async def test_broken_arguments_are_refused_when_streaming_openai(server):
    """Row 1, openai, streamed: the tool_call event carries `{}`, the tool never runs."""
    tool = Recorder()
    server.add(Sse(openai_sse(calls=(("c1", "delete_files", '{"path": "/x"'),))), Sse(openai_sse("ok")))
    async with llm(server) as c:
        events = [e async for e in c.stream("go", tool.kit())]
    assert tool.runs == []
    result = next(e for e in events if e["type"] == "tool_result")
    assert result["is_error"] and 'tool "delete_files" was not run' in result["output"]
    assert events[-1]["type"] == "done" and events[-1]["result"].text == "ok"


def _anthropic_broken_stream(partial: str) -> list[str]:
    events = [
        {"type": "message_start", "message": {"usage": {"input_tokens": 1}}},
        {
            "type": "content_block_start",
            "index": 0,
            "content_block": {"type": "tool_use", "id": "t1", "name": "delete_files", "input": {}},
        },
        {"type": "content_block_delta", "index": 0, "delta": {"type": "input_json_delta", "partial_json": partial}},
        {"type": "content_block_stop", "index": 0},
        {"type": "message_delta", "delta": {"stop_reason": "tool_use"}, "usage": {"output_tokens": 1}},
        {"type": "message_stop"},
    ]
    return sse_lines(*events, event_names=[e["type"] for e in events])


async def test_broken_arguments_are_refused_when_streaming_anthropic(server):
    """Row 1, anthropic, streamed: a partial_json that never closes is refused."""
    tool = Recorder()
    server.add(Sse(_anthropic_broken_stream('{"path": "/x')), Sse(anthropic_sse("ok")))
    async with llm(server, style="anthropic") as c:
        events = [e async for e in c.stream("go", tool.kit())]
    assert tool.runs == []
    result = next(e for e in events if e["type"] == "tool_result")
    assert result["is_error"] and "ends early" in result["output"]
    body = server.requests[1].json
    block = body["messages"][-1]["content"][0]
    assert block["type"] == "tool_result" and block["is_error"] is True


async def test_anthropic_tool_use_input_that_is_not_an_object_is_refused(server):
    """Row 1, anthropic, whole reply."""
    tool = Recorder()
    reply = {"content": [{"type": "tool_use", "id": "t1", "name": "delete_files", "input": "rm -rf /"}],
             "stop_reason": "tool_use", "usage": {}}
    server.add(Json(reply), Json({"content": [{"type": "text", "text": "ok"}], "usage": {}}))
    async with llm(server, style="anthropic") as c:
        r = await c.run("go", tool.kit())
    assert tool.runs == [] and "not a JSON object" in r.tool_calls[0]["output"]


async def test_good_arguments_still_run_and_empty_arguments_mean_no_arguments(server):
    tool = Recorder()
    server.add(Json(openai_calls(("c1", "delete_files", '{"path": "a"}'), ("c2", "delete_files", ""))),
               Json(openai_text("ok")))
    async with llm(server) as c:
        await c.run("go", tool.kit())
    assert tool.runs == [{"path": "a"}, {}]


# ---------------------------------------------------------------------- row 2: truncated streams


def _cut_openai(*texts):
    return [line for line in openai_sse(*texts) if "[DONE]" not in line and '"usage"' not in line]


async def test_a_stream_cut_before_done_is_an_error_never_a_partial_done(server):
    """Row 2: the server sends text and then closes — no [DONE], no finish reason."""
    for _ in range(3):
        server.add(Sse(_cut_openai("half an ans")))
    async with llm(server, retries=2) as c:
        seen = []
        with pytest.raises(StreamTruncated, match="without \\[DONE\\] or a finish_reason"):
            async for e in c.stream("go"):
                seen.append(e)
    assert [e["type"] for e in seen] == ["text"]  # the partial text arrived, but no done
    assert len(server.requests) == 1  # text had reached the caller: not replayed


async def test_a_truncated_stream_is_retried_when_nothing_reached_the_caller(server):
    """Row 2, retried where safe: the cut stream carried no text yet, so it is opened again."""
    empty_cut = sse_lines({"choices": [{"index": 0, "delta": {"role": "assistant"}}]})
    server.add(Sse(empty_cut), Sse(openai_sse("whole answer")))
    events = []
    async with llm(server, on_metric=events.append) as c:
        r = await c.ask("go", on_text=lambda d: None)
    assert r.text == "whole answer" and len(server.requests) == 2
    assert next(e for e in events if e["event"] == "llm")["attempts"] == 2


async def test_an_anthropic_stream_without_message_stop_or_stop_reason_is_truncated(server):
    lines = [line for line in anthropic_sse("partial") if "message_delta" not in line and "message_stop" not in line]
    server.add(Sse(lines))
    async with llm(server, style="anthropic", retries=0) as c:
        with pytest.raises(StreamTruncated, match="message_stop or a stop_reason"):
            await c.ask("go", on_text=lambda d: None)


async def test_a_finish_reason_without_done_is_a_complete_stream(server):
    chunks = sse_lines({"choices": [{"index": 0, "delta": {"content": "fine"}}]},
                       {"choices": [{"index": 0, "delta": {}, "finish_reason": "stop"}]})
    server.add(Sse(chunks))
    async with llm(server) as c:
        r = await c.ask("go", on_text=lambda d: None)
    assert r.text == "fine"


async def test_an_sse_line_without_end_is_refused_not_buffered(server):
    """Buffers fed by a peer are capped: one SSE line may not exceed the event cap."""
    from toolnexus.client import _sse as sse

    parser = sse.SseParser(max_event_bytes=1024)
    with pytest.raises(InputTooLarge):
        for _ in range(10):
            parser.feed(b"data: " + b"x" * 200)
    assert isinstance(InputTooLarge("x"), ToolnexusError)


# --------------------------------------------------------------------- row 3: 2xx body too large


async def test_a_huge_2xx_body_is_refused_at_the_cap_not_read_whole(server):
    """Row `a 300 MB 2xx LLM body`: the cap (overridable) stops the read."""
    big = b'{"choices": [{"message": {"content": "' + b"x" * 300_000 + b'"}}]}'
    server.add(Json(big), Json(big))
    async with llm(server) as c:
        c.max_response_bytes = 100_000
        with pytest.raises(ResponseTooLarge, match="max_response_bytes \\(100000 bytes\\)"):
            await c.run("go")
        c.max_response_bytes = None  # opting out reads it
        r = await c.run("go")
    assert len(r.text) == 300_000


async def test_a_huge_stream_is_refused_at_the_cap(server):
    server.add(Sse(openai_sse(*["y" * 10_000] * 30)))
    async with llm(server) as c:
        c.max_response_bytes = 50_000
        with pytest.raises(ResponseTooLarge):
            await c.ask("go", on_text=lambda d: None)


async def test_the_stdlib_transport_caps_a_2xx_body_too(server):
    server.add(Json(b"[" + b"1," * 100_000 + b"1]"))
    async with llm(server, http_transport=UrllibTransport(max_response_bytes=10_000)) as c:
        with pytest.raises(ResponseTooLarge):
            await c.run("go")


# ------------------------------------------------------------------ row 4: echoed credentials


async def test_an_error_body_echoing_the_request_headers_never_holds_the_key(server):
    """Row `upstream error echoing request headers`."""
    echo = {"error": "bad request", "received": {"authorization": f"Bearer {KEY}", "x-custom-token": "tok-abcdefghijkl",
                                                  "note": f"key was {KEY}"}}
    server.add(Json(echo, status=400))
    async with llm(server, headers={"X-Custom-Token": "tok-abcdefghijkl"}) as c:
        with pytest.raises(ProviderError) as info:
            await c.run("go")
    assert KEY not in info.value.body and KEY not in str(info.value)
    assert "tok-abcdefghijkl" not in info.value.body
    assert "«redacted»" in info.value.body and "bad request" in info.value.body


async def test_an_error_body_echoing_an_anthropic_key_is_scrubbed(server):
    server.add(Json({"echo": {"x-api-key": KEY}}, status=422))
    async with llm(server, style="anthropic") as c:
        with pytest.raises(ProviderError) as info:
            await c.run("go")
    assert KEY not in info.value.body and KEY not in str(info.value)


# ------------------------------------------------------------ row 5: the default overall deadline


def test_the_default_call_deadline_is_documented_and_on():
    import toolnexus.client._client as module

    c = create_client(base_url="http://127.0.0.1:9", style="openai", model="m", api_key="k")
    assert c.timeout_ms is None and c.call_timeout_ms == DEFAULT_CALL_TIMEOUT_MS == 300_000
    assert "DEFAULT_CALL_TIMEOUT_MS" in module.__doc__ and "NO_DEADLINE" in module.__doc__


async def test_a_hung_provider_ends_without_timeout_ms(server):
    """Row `client with no timeout_ms`: a hung provider ends at the call deadline (shrunk here)."""
    server.add(Hang(), Hang(), Hang())
    async with llm(server) as c:
        c.call_timeout_ms = 300
        with pytest.raises(RunTimeout, match="300ms"):
            await c.run("go")
    assert await asyncio.to_thread(server.disconnected.wait, 5)


async def test_a_one_byte_per_interval_trickle_ends_without_timeout_ms(server):
    """Row `client with no timeout_ms`: a trickle that never stops is bounded by the call deadline."""
    server.add(Trickle(interval=0.02))
    async with llm(server) as c:
        c.call_timeout_ms = 300
        with pytest.raises(RunTimeout):
            await c.run("go")


async def test_a_trickling_stream_ends_without_timeout_ms(server):
    gate_chunks = [f"data: {json.dumps({'choices': [{'index': 0, 'delta': {'content': 'a'}}]})}\n\n"] * 400
    server.add(Sse(gate_chunks, delay=0.01))
    async with llm(server) as c:
        c.call_timeout_ms = 300
        with pytest.raises(RunTimeout):
            await c.ask("go", on_text=lambda d: None)


class Timeouts:
    """A transport recording the per-attempt timeout it is given."""

    def __init__(self):
        self.timeouts = []

    def post(self, url, headers, payload, timeout):
        self.timeouts.append(timeout)
        return openai_text("ok")

    def open(self, url, headers, payload, timeout):
        raise NotImplementedError


async def test_no_deadline_is_said_explicitly_and_keeps_the_old_per_read_timeout():
    t = Timeouts()
    c = create_client(base_url="http://x.invalid", style="openai", model="m", api_key="k", http_transport=t,
                      timeout_ms=NO_DEADLINE)
    await c.run("go")
    t2 = Timeouts()
    d = create_client(base_url="http://x.invalid", style="openai", model="m", api_key="k", http_transport=t2)
    d.call_timeout_ms = 50_000
    await d.run("go")
    assert t.timeouts == [120.0]
    assert 49 < t2.timeouts[0] <= 50


async def test_the_stdlib_transport_never_carries_the_key_to_another_origin():
    """Credentials on cross-origin redirects, the LLM path: the key stays with its origin."""
    with LlmServer() as first, LlmServer() as second:
        first.add(Json({}, status=302, headers={"Location": f"{second.base_url}/v1/chat/completions"}))
        second.add(Json(openai_text("elsewhere")))
        async with llm(first, http_transport=UrllibTransport(), headers={"X-Org-Token": "org-secret-123"}) as c:
            r = await c.run("go")
    assert r.text == "elsewhere"
    assert first.requests[0].headers["authorization"] == f"Bearer {KEY}"
    landed = second.requests[0].headers
    assert "authorization" not in landed and "x-org-token" not in landed
