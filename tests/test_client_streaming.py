"""Streaming: SSE parsing, event order per style, backpressure, stream deadline/cancel, stores."""

from __future__ import annotations

import asyncio
import json
import threading
import time
from contextlib import asynccontextmanager

import pytest

from support.llm_server import Json, LlmServer, Sse, anthropic_sse, openai_sse, sse_lines
from toolnexus.client import (
    InMemoryConversationStore,
    ProviderResponseError,
    RunCancelled,
    RunTimeout,
    create_client,
    create_in_process_client,
)
from toolnexus.client._sse import SseEvent, SseParser, json_payloads
from toolnexus.toolkit import Toolkit
from toolnexus.types import Answer, Tool, ToolResult, pending


@pytest.fixture
def server():
    with LlmServer() as s:
        yield s


def make_tool(name, fn):
    async def execute(args=None, ctx=None):
        return await fn(args or {}, ctx)

    return Tool(name, "", {"type": "object", "properties": {}}, "native", execute)


async def adder(args, ctx):
    return ToolResult(str(args["a"] + args["b"]), False)


async def gate(args, ctx):
    if ctx is not None and ctx.answer is not None:
        return ToolResult("opened", False)
    return pending(kind="approval", prompt="Open the gate?", id="req-gate")


def kit(*tools):
    return Toolkit(None, None, [], [], list(tools))


def llm(server, style, **kw):
    kw.setdefault("api_key", "k")
    return create_client(base_url=server.base_url, style=style, model="m", **kw)


async def collect(agen):
    return [e async for e in agen]


def kinds(events):
    return [e["type"] for e in events]


# -- SSE parser ----------------------------------------------------------------------------------


def test_sse_parser_dispatches_on_blank_lines_with_multiline_data_and_event_names():
    p = SseParser()
    events = p.feed(b"event: message_start\r\ndata: {\"a\":\r\ndata:  1}\r\n\r\n: comment\n\ndata: x")
    assert [(e.event, e.data) for e in events] == [("message_start", '{"a":\n 1}')]
    assert list(json_payloads(events[0])) == [{"a": 1}]
    tail = p.close()
    assert [(e.event, e.data) for e in tail] == [(None, "x")]


def test_sse_lenient_when_data_lines_lack_blank_separators():
    event = SseEvent(None, ['{"n": 1}', '{"n": 2}', "[DONE]"])
    assert list(json_payloads(event)) == [{"n": 1}, {"n": 2}, "[DONE]"]
    assert list(json_payloads(SseEvent(None, ["not json"]))) == []


def test_sse_parser_handles_bytes_split_anywhere():
    raw = "".join(sse_lines({"t": "héllo"}, {"t": 2})).encode()
    p = SseParser()
    events = [e for i in range(len(raw)) for e in p.feed(raw[i:i + 1])] + p.close()
    assert [json.loads(e.data) for e in events] == [{"t": "héllo"}, {"t": 2}]


# -- event order per style -----------------------------------------------------------------------


async def test_openai_stream_assembles_tool_call_deltas_and_orders_events(server):
    server.add(
        Sse(openai_sse("Let me ", "add.", calls=(("c1", "add", {"a": 1, "b": 2}), ("c2", "add", {"a": 3, "b": 4})))),
        Sse(openai_sse("3 and 7", usage={"prompt_tokens": 9, "completion_tokens": 4, "total_tokens": 13})),
    )
    after = []
    async with llm(server, "openai", hooks={"after_llm": after.append}) as c:
        events = await collect(c.stream("add", kit(make_tool("add", adder))))
    assert kinds(events) == ["text", "text", "tool_call", "tool_call", "tool_result", "tool_result", "text", "usage",
                             "done"]
    assert events[2] == {"type": "tool_call", "id": "c1", "name": "add", "args": {"a": 1, "b": 2}}
    assert events[5] == {"type": "tool_result", "id": "c2", "name": "add", "output": "7", "is_error": False}
    result = events[-1]["result"]
    assert result.messages[1] == {"role": "assistant", "content": "Let me add.", "tool_calls": [
        {"id": "c1", "type": "function", "function": {"name": "add", "arguments": '{"a": 1, "b": 2}'}},
        {"id": "c2", "type": "function", "function": {"name": "add", "arguments": '{"a": 3, "b": 4}'}}]}
    assert result.usage == {"prompt_tokens": 14, "completion_tokens": 6, "total_tokens": 20}
    assert events[-2] == {"type": "usage", "usage": result.usage}
    assert after[0]["response"] == {"streamed": True, "usage": {"prompt_tokens": 5, "completion_tokens": 2,
                                                                "total_tokens": 7}}
    body = server.requests[0].json
    assert list(body) == ["model", "messages", "stream", "stream_options", "tools", "tool_choice"]
    assert body["stream_options"] == {"include_usage": True}


async def test_anthropic_stream_keeps_thinking_blocks_verbatim_and_uses_final_usage(server):
    thinking = ({"type": "thinking", "thinking": "", "signature": ""},
                [{"type": "thinking_delta", "thinking": "hmm, "}, {"type": "thinking_delta", "thinking": "add"},
                 {"type": "signature_delta", "signature": "sig=="}])
    server.add(Sse(anthropic_sse("On it.", calls=(("u1", "add", {"a": 2, "b": 2}),), input_tokens=10,
                                 output_tokens=7, extra_blocks=(thinking,))),
               Sse(anthropic_sse("4", input_tokens=20, output_tokens=3)))
    async with llm(server, "anthropic") as c:
        events = await collect(c.stream("add", kit(make_tool("add", adder))))
    assert kinds(events) == ["text", "tool_call", "tool_result", "text", "usage", "done"]
    result = events[-1]["result"]
    assert result.messages[1]["content"] == [
        {"type": "thinking", "thinking": "hmm, add", "signature": "sig=="},
        {"type": "text", "text": "On it."},
        {"type": "tool_use", "id": "u1", "name": "add", "input": {"a": 2, "b": 2}}]
    assert server.requests[1].json["messages"][1] == result.messages[1]  # sent back unchanged
    assert result.usage == {"prompt_tokens": 30, "completion_tokens": 10, "total_tokens": 40}
    assert list(server.requests[0].json) == ["model", "max_tokens", "system", "messages", "stream", "tools"]


@pytest.mark.parametrize("style", ["openai", "anthropic"])
async def test_durable_halt_stream_events_differ_per_style_and_are_saved(server, style):
    make = openai_sse if style == "openai" else anthropic_sse
    server.add(Sse(make(calls=(("c1", "gate", {}),))))
    async with llm(server, style) as c:
        events = await collect(c.stream("go", kit(make_tool("gate", gate)), id="conv"))
        stored = await c.store.get("conv")
    expected = (
        ["tool_call", "pending", "done"] if style == "openai" else ["tool_call", "pending", "tool_result", "done"]
    )
    assert kinds(events) == expected
    result = events[-1]["result"]
    assert events[1]["request"] is result.pending and result.status == "pending"
    assert stored == result.messages


async def test_pending_event_precedes_wait_for(server):
    order = []

    async def wait_for(request):
        order.append("wait_for")
        return Answer(id=request.id, ok=True)

    server.add(Sse(openai_sse(calls=(("c1", "gate", {}),))), Sse(openai_sse("through")))
    async with llm(server, "openai", wait_for=wait_for) as c:
        async for event in c.stream("go", kit(make_tool("gate", gate))):
            order.append(event["type"])
    assert order == ["tool_call", "pending", "wait_for", "tool_result", "text", "usage", "done"]


# -- backpressure --------------------------------------------------------------------------------


async def test_slow_on_text_loses_nothing(server):
    pieces = [f"<{i}>" for i in range(3000)]
    raw = "".join(openai_sse(*pieces))
    server.add(Sse([raw[i:i + 700] for i in range(0, len(raw), 700)]))  # chunks cut mid-event
    got = []

    async def slow(delta):
        got.append(delta)
        if len(got) % 200 == 0:
            await asyncio.sleep(0.005)  # a slow consumer, not synchronisation

    async with llm(server, "openai") as c:
        r = await c.ask("count", on_text=slow)
    assert got == pieces and r.text == "".join(pieces)


async def test_reader_waits_for_the_consumer(server):
    gate_open = threading.Event()
    server.add(Sse(openai_sse("first", "second"), gate=gate_open, open_chunks=1))
    async with llm(server, "openai") as c:
        stream = c.stream("x")
        first = await stream.__anext__()
        assert first == {"type": "text", "delta": "first"}
        gate_open.set()
        rest = await collect(stream)
    assert kinds(rest) == ["text", "usage", "done"]


# -- deadline, cancel, malformed -----------------------------------------------------------------


async def test_cancel_closes_a_live_stream(server):
    gate_open = threading.Event()
    server.add(Sse(openai_sse("first", "never"), gate=gate_open, open_chunks=1))
    cancel = asyncio.Event()
    try:
        async with llm(server, "openai") as c:
            stream = c.stream("x", cancel=cancel)
            assert (await stream.__anext__())["delta"] == "first"
            set_at = time.monotonic()
            asyncio.get_running_loop().call_soon(cancel.set)
            with pytest.raises(RunCancelled):
                await stream.__anext__()
            assert time.monotonic() - set_at < 2  # the gated stream alone never ends
    finally:
        gate_open.set()


async def test_deadline_ends_a_stalled_stream(server):
    gate_open = threading.Event()
    server.add(Sse(openai_sse("first", "never"), gate=gate_open, open_chunks=1))
    try:
        async with llm(server, "openai", timeout_ms=300) as c:
            started = time.monotonic()
            with pytest.raises(RunTimeout):
                await collect(c.stream("x"))
            assert time.monotonic() - started < 5  # the stalled stream alone never ends
    finally:
        gate_open.set()


async def test_stream_that_is_not_sse_is_a_clear_error(server):
    server.add(Json({"choices": []}))
    async with llm(server, "openai") as c:
        with pytest.raises(ProviderResponseError) as e:
            await collect(c.stream("x"))
    assert str(e.value) == (
        "toolnexus: malformed openai stream: no SSE `data:` events (body began '{\"choices\": []}') "
        f"(POST {server.base_url}/chat/completions)"
    )


async def test_stream_open_is_retried_on_429(server):
    server.add(Json({}, status=429, headers={"Retry-After": "0"}), Sse(openai_sse("ok")))
    events = []
    async with llm(server, "openai", on_metric=events.append) as c:
        r = await c.ask("x", on_text=lambda d: None)
    assert r.text == "ok" and events[0]["attempts"] == 2


async def test_ask_on_text_with_id_saves_transcript(server):
    server.add(Sse(anthropic_sse("hi ", "there")))
    got = []
    async with llm(server, "anthropic") as c:
        r = await c.ask("x", id="conv", on_text=got.append)
        assert await c.store.get("conv") == r.messages
    assert got == ["hi ", "there"] and r.text == "hi there"


async def test_a_raising_on_text_releases_the_conversation_before_ask_raises(server):
    server.add(Sse(openai_sse("first", "second")))
    held = []

    class Store(InMemoryConversationStore):
        def lock(self, id):
            @asynccontextmanager
            async def hold():
                held.append("enter")
                try:
                    yield
                finally:
                    held.append("exit")

            return hold()

    def boom(delta):
        raise RuntimeError("ui gone")

    async with llm(server, "openai", store=Store()) as c:
        with pytest.raises(RuntimeError, match="ui gone"):
            await c.ask("x", id="conv", on_text=boom)
        assert held == ["enter", "exit"]  # released at once, not whenever the stream is collected
        assert await c.store.get("conv") is None  # a failed turn saves nothing


async def test_in_process_client_refuses_streaming_with_pinned_message():
    c = create_in_process_client(model="m", generate=lambda req: {"content": "x"})
    with pytest.raises(NotImplementedError) as e:
        await collect(c.stream("x"))
    assert str(e.value) == ("toolnexus: create_in_process_client does not support streaming — `generate` returns a "
                            "complete answer. Use the non-streaming run, or supply an http_transport that streams.")
