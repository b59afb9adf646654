"""OpenAI chat completions (and OpenRouter / Gemini on that wire), replayed byte for byte.

Every reply is a fixture built from the provider's published reference (tests/fixtures/providers,
each file names its source), served over a real loopback HTTP server and read through the
client's DEFAULT transport; streams are cut at awkward byte boundaries. The rules checked: a run
never says `done` when the provider did not finish (refusal, length, content filter — streamed or
not, and a cut tool call is never run), errors inside a 200 stream raise `ProviderError` and are
retried like the same status, quota 429s fail at once, provider fields go back unchanged, usage
details reach results, metrics and spans, and translate tells every finish apart (a call cut at
the output limit is `length`, never `tool_calls`) and joins a versioned base URL as the SDKs do.
"""

from __future__ import annotations

import json
from typing import Any

import pytest
from opentelemetry.sdk.trace import TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter

from support.llm_server import LlmServer
from support.provider_replay import client_for, load, step
from toolnexus import define_tool, otel
from toolnexus.client import ProviderError
from toolnexus.client._wire.openai import OpenAIWire
from toolnexus.toolkit import Toolkit


@pytest.fixture(scope="module")
def _server():
    with LlmServer() as s:
        yield s


@pytest.fixture
def server(_server):
    _server.requests.clear()
    _server.script.clear()
    yield _server


ran: list[dict[str, Any]] = []


@define_tool
def get_weather(location: str) -> str:
    """The weather at a place."""
    ran.append({"tool": "get_weather", "location": location})
    return f"sunny in {location}"


@define_tool
def write_file(path: str, content: str) -> str:
    """Write a file."""
    ran.append({"tool": "write_file", "path": path})
    return "written"


@define_tool
def calculator(expression: str) -> str:
    """Evaluate an arithmetic expression."""
    return "4"


def kit() -> Toolkit:
    ran.clear()
    return Toolkit(None, None, [], [], [get_weather, write_file, calculator])


async def run(server: LlmServer, *steps: Any, stream: bool = False, toolkit: Any = None, **options: Any) -> Any:
    server.add(*steps)
    client = client_for(server, "openai", **options)
    try:
        if stream:
            events = [e async for e in client.stream("q", toolkit)]
            return events[-1]["result"], events
        return await client.run("q", toolkit), None
    finally:
        await client.aclose()


def texts(events: list[dict]) -> str:
    return "".join(e["delta"] for e in events if e["type"] == "text")


# -- 0.21 behaviour: plain stop / tool_calls replies ------------------------------------------------


async def test_a_plain_stop_reply_is_done_as_before(server):
    result, _ = await run(server, step("openai/text_stop.json"))
    assert (result.status, result.text, result.limit) == ("done", "Hello! How can I assist you today?", None)
    assert (result.finish_reason, result.provider_finish_reason) == ("stop", "stop")
    assert result.usage == {"prompt_tokens": 19, "completion_tokens": 10, "total_tokens": 29}  # zero details omitted
    assert server.requests[0].path == "/v1/chat/completions"


@pytest.mark.parametrize("stream", [False, True])
async def test_parallel_calls_run_then_the_answer(server, stream):
    calls = step("openai/stream_parallel_calls.sse") if stream else step("openai/parallel_calls.json")
    final = step("openai/stream_text.sse") if stream else step("openai/text_stop.json")
    result, _ = await run(server, calls, final, stream=stream, toolkit=kit())
    assert [r["location"] for r in ran] == ["Paris, France", "Bogotá, Colombia"]
    assert result.status == "done" and result.finish_reason == "stop"
    second = server.requests[1].json["messages"]
    assert [m["tool_call_id"] for m in second if m["role"] == "tool"] == ["call_DdmO9pD3xa9XTPNJ32zg2hcA",
                                                                          "call_ABCDEFGhijk0123456789xyz"] \
        if stream else ["call_12345xyz", "call_67890abc"]


async def test_a_crlf_stream_split_mid_character_reads_whole(server):
    result, events = await run(server, step("openai/stream_text.sse"), stream=True)
    assert result.text == texts(events) == "Grüße aus Köln — 東京 👋"
    assert result.status == "done" and result.finish_reason == "stop"


# -- refusal, length, content filter: never `done` ------------------------------------------------------


@pytest.mark.parametrize("stream", [False, True])
async def test_a_refusal_is_incomplete_with_its_text_kept(server, stream):
    name = "openai/stream_refusal.sse" if stream else "openai/refusal.json"
    result, events = await run(server, step(name), stream=stream)
    assert (result.status, result.limit, result.finish_reason) == ("incomplete", "refusal", "refusal")
    assert result.provider_finish_reason == "stop"
    said = "I'm sorry, I can't help with that." if stream else "I'm sorry, I cannot assist with that request."
    assert result.text == said
    assert result.messages[-1]["refusal"] == said  # in the transcript, as the provider sent it
    if stream:
        assert texts(events) == said


@pytest.mark.parametrize("stream", [False, True])
async def test_a_reply_cut_at_the_output_limit_is_incomplete(server, stream):
    name = "openai/stream_length.sse" if stream else "openai/length.json"
    result, _ = await run(server, step(name), stream=stream)
    assert (result.status, result.limit, result.finish_reason, result.provider_finish_reason) == (
        "incomplete", "maxOutputTokens", "length", "length")
    assert result.text.startswith("The three main causes") and result.text.endswith("the")


@pytest.mark.parametrize("stream", [False, True])
async def test_a_tool_call_cut_at_the_output_limit_is_never_run(server, stream):
    name = "openai/stream_length_in_call.sse" if stream else "openai/length_in_call.json"
    result, _ = await run(server, step(name), stream=stream, toolkit=kit())
    assert ran == []
    assert (result.status, result.limit, result.tool_call_count) == ("incomplete", "maxOutputTokens", 0)
    tail = result.messages[-1]
    assert tail["role"] == "tool" and tail["tool_call_id"] == "call_cut01"
    assert "was not run" in tail["content"] and "output limit" in tail["content"]
    assert len(server.requests) == 1


@pytest.mark.parametrize("stream", [False, True])
async def test_content_filter_is_incomplete(server, stream):
    name = "openai/stream_content_filter.sse" if stream else "openai/content_filter.json"
    result, events = await run(server, step(name), stream=stream)
    assert (result.status, result.limit, result.finish_reason, result.provider_finish_reason) == (
        "incomplete", "contentFilter", "content_filter", "content_filter")
    if stream:
        assert result.text == texts(events) == "Here is how "  # what arrived before the filter, kept


# -- usage -------------------------------------------------------------------------------------------------


async def test_cached_and_reasoning_tokens_are_exposed(server):
    events: list[dict] = []
    exporter = InMemorySpanExporter()
    provider = TracerProvider()
    provider.add_span_processor(SimpleSpanProcessor(exporter))
    otel.instrument(tracer_provider=provider)
    server.add(step("openai/cached_reasoning_usage.json"))
    client = client_for(server, "openai", on_metric=events.append)
    try:
        result = await client.run("q")
        rendered = client.metrics()
    finally:
        await client.aclose()
        otel.uninstrument()
        provider.shutdown()
    assert result.usage == {"prompt_tokens": 2006, "completion_tokens": 300, "total_tokens": 2306,
                            "cached_tokens": 1920, "reasoning_tokens": 256}
    llm = next(e for e in events if e["event"] == "llm")
    assert (llm["prompt_tokens"], llm["cached_tokens"], llm["reasoning_tokens"]) == (2006, 1920, 256)
    assert 'toolnexus_llm_tokens_total{type="prompt"} 2006' in rendered
    assert 'toolnexus_llm_tokens_total{type="cache_read"} 1920' in rendered
    assert 'toolnexus_llm_tokens_total{type="reasoning"} 256' in rendered
    spans = {s.name: s for s in exporter.get_finished_spans()}
    chat = spans["chat replay-model"].attributes
    assert (chat["gen_ai.usage.input_tokens"], chat["gen_ai.usage.output_tokens"],
            chat["gen_ai.usage.cache_read.input_tokens"], chat["gen_ai.usage.reasoning.output_tokens"]) == (
        2006, 300, 1920, 256)
    run_span = spans["invoke_agent"].attributes
    assert run_span["gen_ai.usage.reasoning.output_tokens"] == 256


# -- errors ------------------------------------------------------------------------------------------------


async def test_an_exhausted_quota_fails_at_once_saying_what_to_do(server):
    seen: list[dict] = []
    with pytest.raises(ProviderError) as info:
        await run(server, step("openai/quota_429.json"), step("openai/text_stop.json"),
                  on_error=lambda i: seen.append(dict(i)) or ("retry" if i["retryable"] else "fail"))
    e = info.value
    assert len(server.requests) == 1 and e.status == 429 and e.quota
    assert e.error_type == "insufficient_quota"
    assert "retrying will not help" in str(e) and "billing" in str(e)
    assert seen == [{"status": 429, "attempt": 0, "retryable": False, "error_type": "insufficient_quota"}]


async def test_a_transient_rate_limit_is_retried(server):
    result, _ = await run(server, step("openai/rate_limit_429.json"), step("openai/text_stop.json"))
    assert result.status == "done" and len(server.requests) == 2


async def test_an_error_chunk_before_any_text_is_retried_like_its_status(server):
    result, events = await run(server, step("openrouter/stream_error_first.sse"), step("openai/stream_text.sse"),
                               stream=True)
    assert len(server.requests) == 2  # 502 is retryable: the stream was opened again
    assert result.text == texts(events) == "Grüße aus Köln — 東京 👋"


async def test_an_error_chunk_after_text_raises_naming_the_provider_error(server):
    with pytest.raises(ProviderError) as info:
        await run(server, step("openrouter/stream_error_midway.sse"), step("openai/stream_text.sse"), stream=True)
    e = info.value
    assert (e.status, e.error_type, e.error_message, e.in_stream) == (
        500, "server_error", "Provider disconnected unexpectedly", True)
    assert "server_error: Provider disconnected unexpectedly" in str(e)
    assert len(server.requests) == 1  # text already reached the caller: not replayed


async def test_an_error_chunk_fails_at_once_when_its_status_is_not_retried(server):
    with pytest.raises(ProviderError) as info:
        await run(server, step("openrouter/stream_error_first.sse"), stream=True, retries=0)
    assert info.value.status == 502 and "Provider returned error" in str(info.value)


# -- what the provider sent goes back ----------------------------------------------------------------


async def test_openrouter_reasoning_details_go_back_merged(server):
    result, _ = await run(server, step("openrouter/stream_reasoning_details.sse"), step("openai/stream_text.sse"),
                          stream=True, toolkit=kit())
    sent = server.requests[1].json["messages"][1]
    assert sent["reasoning"] == "The user asks for 2+2."
    assert sent["reasoning_details"] == [{"type": "reasoning.text", "text": "The user asks for 2+2.",
                                          "format": "anthropic-claude-v1", "index": 0,
                                          "signature": "EqQBCkgIARABGAIiQL2"}]
    assert sent["tool_calls"][0]["id"] == "toolu_01Rp8Y7w"
    assert result.usage["reasoning_tokens"] == 41


@pytest.mark.parametrize("stream", [False, True])
async def test_gemini_thought_signatures_go_back_unchanged(server, stream):
    first = step("gemini/stream_thought_signature.sse") if stream else step("gemini/thought_signature.json")
    then = step("openai/stream_text.sse") if stream else step("gemini/text.json")
    result, _ = await run(server, first, then, stream=stream, toolkit=kit())
    assert result.status == "done"
    sent_call = server.requests[1].json["messages"][1]["tool_calls"][0]
    assert sent_call["extra_content"] == {"google": {"thought_signature": "CrICAdHtim827fQzN1rBrr7sVjgTCHAItb3G"}}
    assert sent_call["function"] == {"name": "get_weather", "arguments": '{"location":"Paris, France"}'}
    assert ran == [{"tool": "get_weather", "location": "Paris, France"}]


# -- translate -----------------------------------------------------------------------------------------


async def test_translate_joins_gemini_compat_base_as_the_sdk_does(server):
    server.add(step("gemini/text.json"))
    client = client_for(server, "openai", base_url=server.base_url + "/v1beta/openai/")
    try:
        result = await client.translate([{"role": "user", "content": "Weather in Paris?"}])
    finally:
        await client.aclose()
    assert server.requests[0].path == "/v1beta/openai/chat/completions"
    assert (result.text, result.finish_reason, result.provider_finish_reason) == ("Paris is sunny, 24 °C.", "stop",
                                                                                  "stop")


@pytest.mark.parametrize(("base", "url"), [
    ("https://api.openai.com/v1", "https://api.openai.com/v1/chat/completions"),
    ("https://api.openai.com", "https://api.openai.com/v1/chat/completions"),
    ("https://openrouter.ai/api/v1/", "https://openrouter.ai/api/v1/chat/completions"),
    ("https://generativelanguage.googleapis.com/v1beta/openai/",
     "https://generativelanguage.googleapis.com/v1beta/openai/chat/completions"),
    ("http://localhost:8080/proxy", "http://localhost:8080/proxy/v1/chat/completions"),
])
def test_translate_url_rule(base, url):
    assert OpenAIWire().translate_url(base) == url


@pytest.mark.parametrize(("name", "finish", "text"), [
    ("openai/refusal.json", "refusal", "I'm sorry, I cannot assist with that request."),
    ("openai/length.json", "length", None),
    ("openai/length_in_call.json", "length", ""),
    ("openai/content_filter.json", "content_filter", ""),
    ("openai/parallel_calls.json", "tool_calls", ""),
])
async def test_translate_distinguishes_every_finish(server, name, finish, text):
    server.add(step(name))
    client = client_for(server, "openai")
    try:
        result = await client.translate([{"role": "user", "content": "q"}])
    finally:
        await client.aclose()
    assert result.finish_reason == finish
    assert result.provider_finish_reason == load(name).json["choices"][0]["finish_reason"]
    if text is not None:
        assert result.text == text
    sent = load(name).json["choices"][0]["message"].get("tool_calls") or []
    assert result.tool_calls_json() == sent  # calls as the provider sent them; only `tool_calls` says run them


def test_every_fixture_says_where_its_shape_comes_from():
    from support.provider_replay import FIXTURES

    names = [str(p.relative_to(FIXTURES)) for p in FIXTURES.rglob("*") if p.suffix in (".json", ".sse")]
    assert len(names) > 30
    for name in names:
        fx = load(name)
        assert any("http" in s for s in fx.source), name
        if name.endswith(".json"):
            json.loads(fx.body)
