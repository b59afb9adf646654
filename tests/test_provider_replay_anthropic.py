"""Anthropic Messages, replayed byte for byte (fixtures from the published reference, each naming
its source) over a loopback server through the DEFAULT transport, streams cut at awkward bytes.

Checked on both paths, streamed and not: a reply cut at `max_tokens` (inside a `tool_use` too) or
refused is `incomplete` and its calls never run; `pause_turn` is sent back and continued within
the run; an `event: error` after the 200 raises `ProviderError` and is retried as its status;
server tool use, web search results, citations, thinking, redacted thinking and signatures go back
unchanged, streamed or not; `prompt_tokens` counts cache reads and writes; a spend-limit 429 fails at once;
`max_tokens` stays 4096 unless `request_params` (client or agent `llm`) raises it; translate
carries thinking blocks and tells pause, refusal and a reply cut inside a `tool_use` (`length`)
from stop and from a call to run.
"""

from __future__ import annotations

from typing import Any

import pytest
from opentelemetry.sdk.trace import TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter

from support.llm_server import LlmServer
from support.provider_replay import client_for, load, step
from toolnexus import define_tool, otel
from toolnexus.agents import agent
from toolnexus.client import ProviderError
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


ran: list[str] = []


@define_tool
def get_weather(location: str) -> str:
    """The weather at a place."""
    ran.append(location)
    return f"sunny in {location}"


@define_tool
def write_file(path: str, content: str) -> str:
    """Write a file."""
    ran.append(path)
    return "written"


def kit() -> Toolkit:
    ran.clear()
    return Toolkit(None, None, [], [], [get_weather, write_file])


async def run(server: LlmServer, *steps: Any, stream: bool = False, toolkit: Any = None, history: Any = None,
              **options: Any) -> Any:
    server.add(*steps)
    client = client_for(server, "anthropic", **options)
    try:
        if stream:
            events = [e async for e in client.stream("q", toolkit)]
            return events[-1]["result"], events
        return await client.run("q", toolkit, history=history), None
    finally:
        await client.aclose()


def texts(events: list[dict]) -> str:
    return "".join(e["delta"] for e in events if e["type"] == "text")


async def test_a_plain_reply_is_done_and_the_pinned_body_is_kept(server):
    result, _ = await run(server, step("anthropic/text.json"))
    assert (result.status, result.text, result.finish_reason, result.provider_finish_reason) == (
        "done", "Hi! My name is Claude.", "stop", "end_turn")
    assert result.usage == {"prompt_tokens": 2095, "completion_tokens": 503, "total_tokens": 2598}
    body = server.requests[0].json
    assert list(body)[:4] == ["model", "max_tokens", "system", "messages"] and body["max_tokens"] == 4096


async def test_prompt_tokens_count_cache_reads_and_writes(server):
    result, _ = await run(server, step("anthropic/cached_usage.json"))
    assert result.usage == {"prompt_tokens": 1114, "completion_tokens": 42, "total_tokens": 1156,
                            "cached_tokens": 1111}


async def test_parallel_tool_use_runs_every_call(server):
    result, _ = await run(server, step("anthropic/parallel_tool_use.json"), step("anthropic/text.json"),
                          toolkit=kit())
    assert ran == ["San Francisco, CA", "New York, NY"] and result.status == "done"


@pytest.mark.parametrize("stream", [False, True])
async def test_thinking_and_redacted_thinking_go_back_with_the_tool_result(server, stream):
    first = step("anthropic/stream_redacted_thinking.sse") if stream else step("anthropic/thinking_tool_use.json")
    then = step("anthropic/stream_web_search.sse") if stream else step("anthropic/text.json")
    await run(server, first, then, stream=stream, toolkit=kit())
    assert ran == ["Paris, France"]
    sent = server.requests[1].json["messages"][1]
    # thinking with its signature and the redacted block's data, exactly as sent (streamed: as assembled)
    assert sent == {"role": "assistant", "content": [
        *load("anthropic/thinking_tool_use.json").json["content"][:2],
        {"type": "tool_use", "id": "toolu_01R3dact3d" if stream else "toolu_01Th1nk9x", "name": "get_weather",
         "input": {"location": "Paris, France"}}]}


@pytest.mark.parametrize("stream", [False, True])
async def test_a_reply_cut_inside_a_tool_use_is_never_run(server, stream):
    name = "anthropic/stream_max_tokens_in_tool_use.sse" if stream else "anthropic/max_tokens_in_tool_use.json"
    result, _ = await run(server, step(name), stream=stream, toolkit=kit())
    assert ran == []
    assert (result.status, result.limit, result.finish_reason, result.provider_finish_reason) == (
        "incomplete", "maxOutputTokens", "length", "max_tokens")
    assert result.text == "I'll write the report now."
    blocks = result.messages[-2]["content"]
    assert blocks[-1]["type"] == "tool_use" and blocks[-1]["id"] == "toolu_01Cut9pQ2x"  # kept as sent
    results = result.messages[-1]["content"]
    assert results[0]["tool_use_id"] == "toolu_01Cut9pQ2x" and results[0]["is_error"] is True
    assert "was not run" in results[0]["content"] and "(max_tokens)" in results[0]["content"]


@pytest.mark.parametrize("stream", [False, True])
async def test_a_refusal_is_incomplete_and_visible(server, stream):
    name = "anthropic/stream_refusal.sse" if stream else "anthropic/refusal.json"
    result, events = await run(server, step(name), stream=stream)
    assert (result.status, result.limit, result.finish_reason, result.provider_finish_reason) == (
        "incomplete", "refusal", "refusal", "refusal")
    assert result.text == "I can't help with that." if stream else result.text == "I can't help with that request."
    assert result.messages[-1]["content"][0]["text"] == result.text
    if stream:
        assert texts(events) == result.text


@pytest.mark.parametrize("stream", [False, True])
async def test_pause_turn_is_sent_back_and_continued_in_the_same_run(server, stream):
    first = step("anthropic/stream_pause_turn.sse") if stream else step("anthropic/pause_turn.json")
    then = step("anthropic/stream_web_search.sse") if stream else step("anthropic/pause_turn_continued.json")
    result, _ = await run(server, first, then, stream=stream)
    assert len(server.requests) == 2 and result.turns == 2
    assert result.status == "done" and result.finish_reason == "stop"
    resent = server.requests[1].json["messages"]
    assert resent[-1]["role"] == "assistant"  # the paused turn goes back as it is, for the model to continue
    assert resent[-1]["content"][-1] == {"type": "server_tool_use", "id": "srvtoolu_01WYG3ziw53XMcoyKL4XcZmE",
                                         "name": "web_search", "input": {"query": "Python 3.14 release date"}}
    if not stream:
        assert result.text == "I'll search for the latest release.Python 3.14.0 was released on 7 October 2025."


async def test_pause_turn_is_bounded_by_max_turns(server):
    result, _ = await run(server, step("anthropic/pause_turn.json"), step("anthropic/pause_turn.json"), max_turns=2)
    assert (result.status, result.limit, result.finish_reason, result.turns) == ("incomplete", "maxTurns", "pause", 2)


async def test_streamed_server_tool_use_citations_and_signatures_are_kept(server):
    result, events = await run(server, step("anthropic/stream_web_search.sse"), stream=True)
    assert result.text == texts(events) == "In München ist es heute sonnig bei 24 °C ☀️"
    thinking, search, found, _, cited = result.messages[-1]["content"]
    assert thinking == {"type": "thinking", "thinking": "Need the current release; search the web.",
                        "signature": "EqQBCgIYAhIM1gbcDa9GJwZA2b3hGgxBdjrk"}
    assert search["type"] == "server_tool_use" and search["input"] == {"query": "Wetter München heute"}
    assert found["type"] == "web_search_tool_result" and found["content"][0]["encrypted_content"]
    assert cited["citations"] == [{"type": "web_search_result_location", "cited_text": "Heute sonnig, 24 °C",
                                   "url": "https://www.wetter.com/deutschland/muenchen/DE0006515.html",
                                   "title": "Wetter München heute",
                                   "encrypted_index": "Eo8BCioIAhgBIiQyYjQ0OWJmZi1lNm"}]
    assert result.usage == {"prompt_tokens": 1114, "completion_tokens": 97, "total_tokens": 1211,
                            "cached_tokens": 10, "cache_creation_tokens": 1090}
    # and they go back unchanged on the next request
    await run(server, step("anthropic/text.json"), history=result.messages)
    assert server.requests[1].json["messages"][1] == result.messages[1]


async def test_an_overloaded_error_event_before_text_is_retried_as_529(server):
    result, events = await run(server, step("anthropic/stream_overloaded.sse"), step("anthropic/stream_refusal.sse"),
                               stream=True)
    assert len(server.requests) == 2 and texts(events) == result.text


async def test_an_overloaded_error_event_raises_naming_type_and_message(server):
    with pytest.raises(ProviderError) as info:
        await run(server, step("anthropic/stream_overloaded.sse"), stream=True, retries=0)
    e = info.value
    assert (e.status, e.error_type, e.error_message, e.in_stream) == (529, "overloaded_error", "Overloaded", True)
    assert str(e).startswith("LLM 529: overloaded_error: Overloaded (inside the anthropic stream)")


async def test_an_error_event_after_text_is_not_replayed(server):
    with pytest.raises(ProviderError, match="overloaded_error"):
        await run(server, step("anthropic/stream_overloaded_after_text.sse"), step("anthropic/stream_refusal.sse"),
                  stream=True)
    assert len(server.requests) == 1


async def test_a_plain_529_is_retried_the_same_way(server):
    result, _ = await run(server, step("anthropic/overloaded_529.json"), step("anthropic/text.json"))
    assert result.status == "done" and len(server.requests) == 2


async def test_a_spend_limit_429_fails_at_once_saying_what_to_do(server):
    with pytest.raises(ProviderError) as info:
        await run(server, step("anthropic/spend_limit_429.json"), step("anthropic/text.json"))
    assert len(server.requests) == 1 and info.value.quota and info.value.error_type == "rate_limit_error"
    assert "retrying will not help" in str(info.value)


# -- max_tokens: pinned 4096, raised from a client or an agent's llm settings -----------------------------


async def test_request_params_raise_max_tokens_for_a_client(server):
    await run(server, step("anthropic/text.json"), request_params={"max_tokens": 16000})
    assert server.requests[0].json["max_tokens"] == 16000


async def test_llm_request_params_raise_max_tokens_for_an_agent_and_its_result_says_how_it_ended(server):
    server.add(step("anthropic/refusal.json"), step("anthropic/text.json"))
    llm = {"base_url": server.base_url + "/v1", "style": "anthropic", "model": "claude-sonnet-4-5",
           "api_key": "sk-test-key", "request_params": {"max_tokens": 16000}}
    helper = agent("helper", does="answers")
    refused = await helper.run("q", llm=llm)
    assert server.requests[0].json["max_tokens"] == 16000
    assert (refused.status, refused.limit, refused.finish_reason, refused.provider_finish_reason) == (
        "incomplete", "refusal", "refusal", "refusal")
    assert refused.text == "hit refusal without a final answer (I can't help with that request.)"
    done = await helper.run("q", llm=llm)
    assert (done.status, done.finish_reason) == ("done", "stop")
    assert done.to_record()["finish_reason"] == "stop"


# -- translate -------------------------------------------------------------------------------------------


async def test_translate_carries_thinking_blocks_into_the_follow_up(server):
    server.add(step("anthropic/thinking_tool_use.json"), step("anthropic/text.json"))
    client = client_for(server, "anthropic")
    try:
        first = await client.translate([{"role": "user", "content": "Weather in Paris?"}])
        assert first.finish_reason == "tool_calls" and [b["type"] for b in first.thinking_blocks] == [
            "thinking", "redacted_thinking"]
        follow = [{"role": "user", "content": "Weather in Paris?"}, first.assistant_message(),
                  {"role": "tool", "tool_call_id": first.tool_calls[0].id, "content": "sunny"}]
        await client.translate(follow)
    finally:
        await client.aclose()
    assert server.requests[1].json["messages"][1]["content"] == load("anthropic/thinking_tool_use.json").json["content"]


@pytest.mark.parametrize(("name", "finish", "native"), [
    ("anthropic/pause_turn.json", "pause", "pause_turn"), ("anthropic/refusal.json", "refusal", "refusal"),
    ("anthropic/max_tokens_in_tool_use.json", "length", "max_tokens"), ("anthropic/text.json", "stop", "end_turn"),
    ("anthropic/thinking_tool_use.json", "tool_calls", "tool_use"),
])
async def test_translate_tells_every_finish_apart(server, name, finish, native):
    server.add(step(name))
    client = client_for(server, "anthropic")
    try:
        result = await client.translate([{"role": "user", "content": "q"}])
    finally:
        await client.aclose()
    assert (result.finish_reason, result.provider_finish_reason) == (finish, native)
    # calls as the provider sent them, a cut one included; only `tool_calls` says they may be run
    sent = [b["id"] for b in load(name).json["content"] if b["type"] == "tool_use"]
    assert [c.id for c in result.tool_calls] == sent


# -- usage on metrics and spans -------------------------------------------------------------------------


async def test_usage_details_reach_metrics_and_spans(server):
    exporter = InMemorySpanExporter()
    provider = TracerProvider()
    provider.add_span_processor(SimpleSpanProcessor(exporter))
    otel.instrument(tracer_provider=provider)
    server.add(step("anthropic/stream_web_search.sse"))
    client = client_for(server, "anthropic")
    try:
        [e async for e in client.stream("q")]
        rendered = client.metrics()
    finally:
        await client.aclose()
        otel.uninstrument()
        provider.shutdown()
    assert 'toolnexus_llm_tokens_total{type="prompt"} 1114' in rendered
    assert 'toolnexus_llm_tokens_total{type="cache_read"} 10' in rendered
    assert 'toolnexus_llm_tokens_total{type="cache_creation"} 1090' in rendered
    spans = {s.name: s for s in exporter.get_finished_spans()}
    chat = spans["chat replay-model"].attributes
    assert (chat["gen_ai.usage.input_tokens"], chat["gen_ai.usage.cache_read.input_tokens"],
            chat["gen_ai.usage.cache_creation.input_tokens"]) == (1114, 10, 1090)
    assert chat["gen_ai.response.finish_reasons"] == ("end_turn",)
    run_span = spans["invoke_agent"].attributes
    assert run_span["toolnexus.run.finish_reason"] == "stop" and run_span["gen_ai.usage.cache_read.input_tokens"] == 10
