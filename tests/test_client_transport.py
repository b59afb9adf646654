"""The transport seam (in-process, async, urllib streaming) and conversation stores."""

from __future__ import annotations

import asyncio
import threading

import pytest

from support.llm_server import LlmServer, Sse, anthropic_sse, openai_sse
from toolnexus.client import (
    Client,
    InMemoryConversationStore,
    InProcessTransport,
    UrllibTransport,
    create_client,
    create_in_process_client,
)
from toolnexus.toolkit import Toolkit
from toolnexus.types import Tool, ToolResult

# -- in-process ----------------------------------------------------------------------------------


def test_in_process_transport_wraps_a_reply_as_a_chat_completion():
    seen = []

    def generate(request):
        seen.append(request)
        return {"tool_calls": [{"name": "a", "arguments": '{"x":1}'}, {"id": "z", "name": "b", "args": {"y": 2}}],
                "usage": {"promptTokens": 4, "completionTokens": 1}}

    t = InProcessTransport(generate)
    out = t.post("u", {}, {"model": "m", "messages": [{"role": "user", "content": "q"}], "tools": None}, 1.0)
    assert out == {
        "choices": [
            {
                "index": 0,
                "finish_reason": "tool_calls",
                "message": {
                    "role": "assistant",
                    "tool_calls": [
                        {"id": "call_0", "type": "function", "function": {"name": "a", "arguments": '{"x":1}'}},
                        {"id": "z", "type": "function", "function": {"name": "b", "arguments": '{"y": 2}'}},
                    ],
                },
            }
        ],
        "usage": {"prompt_tokens": 4, "completion_tokens": 1, "total_tokens": 5},
    }
    assert seen[0]["model"] == "m" and seen[0]["body"]["messages"] == seen[0]["messages"]
    assert InProcessTransport(lambda r: None).post("u", {}, {}, 1.0) == {
        "choices": [{"index": 0, "message": {"role": "assistant", "content": ""}, "finish_reason": "stop"}],
        "usage": {"prompt_tokens": 0, "completion_tokens": 0, "total_tokens": 0}}


async def test_in_process_client_runs_tools_with_defaults():
    def generate(request):
        if request["messages"][-1]["role"] == "tool":
            return {"content": "sum is " + request["messages"][-1]["content"]}
        return {"tool_calls": [{"name": "add", "arguments": {"a": 2, "b": 3}}]}

    async def add(args=None, ctx=None):
        return ToolResult(str(args["a"] + args["b"]), False)

    c = create_in_process_client(model="local", generate=generate, system_prompt="S")
    assert (c.retries, c.base_url, c.style, c.api_key) == (0, "http://in-process.invalid/v1", "openai", "in-process")
    r = await c.run("add", Toolkit(None, None, [], [], [Tool("add", "", {"type": "object"}, "native", add)]))
    assert r.text == "sum is 5" and r.messages[0] == {"role": "system", "content": "S"}


def test_create_in_process_client_errors_are_pinned():
    with pytest.raises(TypeError) as e:
        create_in_process_client(model="m", generate="nope")
    assert str(e.value) == "toolnexus: create_in_process_client requires a callable `generate`"
    for reserved in ("base_url", "api_key", "style", "http_transport"):
        with pytest.raises(TypeError) as e:
            create_in_process_client(model="m", generate=lambda r: {}, **{reserved: "x"})
        assert str(e.value) == (f"toolnexus: create_in_process_client does not take `{reserved}` — an in-process "
                                "model has no wire to configure. Use create_client for a network-backed model.")
    with pytest.raises(TypeError) as e:
        create_in_process_client(model="m", generate=lambda r: {}, style="x", base_url="y")
    assert "`base_url`" in str(e.value)


async def test_async_generate_is_refused_with_pinned_message():
    async def generate(request):
        return {"content": "x"}

    with pytest.raises(TypeError) as e:
        await create_in_process_client(model="m", generate=generate).run("x")
    assert str(e.value) == ("toolnexus: create_in_process_client's `generate` must be synchronous — it runs on the "
                            "client's worker thread. Do async work before the call, or block inside it.")


# -- construction ----------------------------------------------------------------------------------


def test_client_attributes_mirror_keywords():
    c = Client(base_url="b", style="anthropic", model="m", retryable_statuses=[408, 408])
    assert (c.headers, c.retryable_statuses, c.max_turns, c.retries, c.retry_base_ms) == (
        {},
        frozenset({408}),
        10,
        2,
        500,
    )
    assert isinstance(c.store, InMemoryConversationStore) and c.conversation_store is c.store
    assert Client(base_url="b", style="nope", model="m").style == "nope"  # no validation at construction


async def test_unknown_style_fails_at_first_run_with_clear_error():
    c = create_client(base_url="b", style="gemini", model="m", api_key="k")
    with pytest.raises(ValueError, match="unknown client style 'gemini'"):
        await c.run("x")


# -- async and sync streaming transports ---------------------------------------------------------


async def test_async_transport_open_can_return_an_async_iterator():
    class AsyncStream:
        def __init__(self, chunks):
            self.chunks = list(chunks)
            self.closed = False

        def __aiter__(self):
            return self

        async def __anext__(self):
            if not self.chunks:
                raise StopAsyncIteration
            return self.chunks.pop(0).encode()

        async def aclose(self):
            self.closed = True

    opened = []

    class Transport:
        async def post(self, *a):
            raise AssertionError("not used")

        async def open(self, url, headers, payload, timeout):
            opened.append(AsyncStream(anthropic_sse("a", "sync")))
            return opened[-1]

    c = create_client(base_url="http://x", style="anthropic", model="m", api_key="k", http_transport=Transport())
    got = []
    r = await c.ask("x", on_text=got.append)
    assert got == ["a", "sync"] and r.text == "async" and opened[0].closed


async def test_urllib_transport_streams_through_a_worker_thread():
    with LlmServer() as server:
        server.add(Sse(openai_sse("from ", "urllib")))
        c = create_client(base_url=server.base_url, style="openai", model="m", api_key="k",
                          http_transport=UrllibTransport())
        events = [e async for e in c.stream("x")]
    assert [e["delta"] for e in events if e["type"] == "text"] == ["from ", "urllib"]
    assert events[-1]["result"].text == "from urllib"


async def test_default_transport_is_pooled_http11_and_aclose_releases_it(monkeypatch):
    from toolnexus.client import HttpxTransport
    from toolnexus.client._http11 import Http11Transport

    for var in ("HTTPS_PROXY", "https_proxy", "HTTP_PROXY", "http_proxy", "ALL_PROXY", "all_proxy"):
        monkeypatch.delenv(var, raising=False)
    with LlmServer() as server:
        server.add(Sse(openai_sse("x")), Sse(openai_sse("y")))
        async with create_client(base_url=server.base_url, style="openai", model="m", api_key="k") as c:
            assert isinstance(c._http_transport, Http11Transport)
            await c.ask("x", on_text=lambda d: None)
            await c.ask("y", on_text=lambda d: None)
            assert sum(len(v) for v in c._http_transport._idle.values()) == 1  # the connection went back
        assert c._http_transport._idle == {}
        assert {req.connection for req in server.requests} == {1}
    monkeypatch.setenv("HTTPS_PROXY", "http://proxy.invalid:3128")
    async with create_client(base_url="http://b", style="openai", model="m") as proxied:
        assert isinstance(proxied._http_transport, HttpxTransport)  # only httpx speaks to a proxy
    supplied = UrllibTransport()
    async with create_client(base_url="b", style="openai", model="m", http_transport=supplied) as other:
        assert other._http_transport is supplied


# -- stores ----------------------------------------------------------------------------------------


async def test_in_memory_store_deep_copies():
    store = InMemoryConversationStore()
    messages = [{"role": "user", "content": [{"type": "text", "text": "hi"}]}]
    await store.save("a", messages)
    messages[0]["content"][0]["text"] = "mutated"
    got = await store.get("a")
    got[0]["content"].append("leak")
    assert await store.get("a") == [{"role": "user", "content": [{"type": "text", "text": "hi"}]}]
    assert await store.get("missing") is None


async def test_in_memory_store_cap_and_ttl():
    now = [0.0]
    store = InMemoryConversationStore(max_conversations=2, ttl_seconds=10, clock=lambda: now[0])
    for key in ("a", "b", "c"):
        await store.save(key, [{"k": key}])
    assert await store.get("a") is None and await store.get("b") == [{"k": "b"}]
    now[0] = 9.9
    await store.save("c", [{"k": "c2"}])
    now[0] = 10.0
    assert await store.get("b") is None and await store.get("c") == [{"k": "c2"}]


async def test_store_without_lock_still_serialises_asks_per_id():
    class DictStore:
        def __init__(self):
            self.data = {}

        async def get(self, id):
            await asyncio.sleep(0)
            return self.data.get(id)

        async def save(self, id, messages):
            self.data[id] = list(messages)

    counter = iter(range(100))

    class Model:
        async def post(self, url, headers, payload, timeout):
            await asyncio.sleep(0)
            return {"choices": [{"message": {"role": "assistant", "content": f"r{next(counter)}"}}]}

    c = create_client(base_url="b", style="openai", model="m", api_key="k", http_transport=Model(), store=DictStore())
    await asyncio.gather(*[c.ask(str(i), id="one") for i in range(5)])
    assert len(c.store.data["one"]) == 10


async def test_sync_transport_calls_do_not_block_the_event_loop():
    release = threading.Event()
    ticks = []

    class Blocking:
        def post(self, url, headers, payload, timeout):
            release.wait(5)
            return {"choices": [{"message": {"role": "assistant", "content": "done"}}]}

    c = create_client(base_url="b", style="openai", model="m", api_key="k", http_transport=Blocking())
    task = asyncio.create_task(c.run("x"))
    for _ in range(3):
        await asyncio.sleep(0)
        ticks.append(task.done())
    release.set()
    assert (await task).text == "done" and ticks == [False, False, False]


def test_httpx_transport_reuses_body_bytes_for_the_same_payload_object():
    from toolnexus.client import HttpxTransport

    t = HttpxTransport()
    payload = {"model": "m", "messages": []}
    first = t._body(payload)
    assert t._body(payload) is first and first == b'{"model": "m", "messages": []}'
    assert t._body(dict(payload)) is not first


async def test_generate_returning_a_non_dict_is_a_clear_error():
    with pytest.raises(TypeError) as e:
        await create_in_process_client(model="m", generate=lambda r: "just text").run("x")
    assert str(e.value) == "toolnexus: in-process `generate` must return a dict or None, got str"
