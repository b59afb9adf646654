"""The OpenAI Responses API wire (`style="responses"`), replayed byte for byte from fixtures built
from the published reference (each naming its source), over a loopback server through the
DEFAULT transport, streams cut at awkward bytes.

Checked: function tools and parallel calls, streaming events, reasoning items kept and sent back
(with `encrypted_content`; server ids dropped under `store: false`), usage details, incomplete and
refused or filtered replies never `done` (a call cut by the output limit never run), streamed or
not, errors (`error` event, `response.failed`) raised and retried by status, a quota 429 failing
at once, `previous_response_id` chaining, translate — and the agent runtime suspending and
resuming on this wire, in memory and through a durable SQLite store.
"""

from __future__ import annotations

import contextlib
import json
from typing import Any

import pytest

from support.llm_server import LlmServer
from support.provider_replay import client_for, load, step
from toolnexus import Answer, ToolResult, define_tool, pending
from toolnexus.agents import agent, resume
from toolnexus.client import ProviderError
from toolnexus.stores import open_store
from toolnexus.toolkit import Toolkit

REASONING_ID = "rs_68af4030592c81938ec0a5fbab4a3e9f05438e46b5f69a3b"


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


def kit(*more: Any) -> Toolkit:
    ran.clear()
    return Toolkit(None, None, [], [], [get_weather, *more])


async def run(server: LlmServer, *steps: Any, stream: bool = False, toolkit: Any = None, **options: Any) -> Any:
    server.add(*steps)
    client = client_for(server, "responses", **options)
    try:
        if stream:
            events = [e async for e in client.stream("q", toolkit)]
            return events[-1]["result"], events
        return await client.run("q", toolkit), None
    finally:
        await client.aclose()


def texts(events: list[dict]) -> str:
    return "".join(e["delta"] for e in events if e["type"] == "text")


async def test_a_plain_reply(server):
    result, _ = await run(server, step("responses/text.json"), system_prompt="Be brief.")
    assert (result.status, result.finish_reason, result.provider_finish_reason) == ("done", "stop", "completed")
    assert result.text.startswith("In a peaceful grove")
    assert result.usage == {"prompt_tokens": 36, "completion_tokens": 87, "total_tokens": 123}
    request = server.requests[0]
    assert request.path == "/v1/responses"
    assert request.json == {"model": "replay-model", "instructions": "Be brief.",
                            "input": [{"role": "user", "content": "q"}]}


@pytest.mark.parametrize("stream", [False, True])
async def test_parallel_calls_and_reasoning_items_go_back(server, stream):
    calls = step("responses/stream_parallel_calls.sse") if stream else step("responses/parallel_calls.json")
    final = step("responses/stream_text.sse") if stream else step("responses/final_after_calls.json")
    result, events = await run(server, calls, final, stream=stream, toolkit=kit())
    assert ran == ["Paris, France", "Bogotá, Colombia"] and result.status == "done"
    first = server.requests[0].json
    assert first["tools"] == [{"type": "function", "name": "get_weather", "description": "The weather at a place.",
                               "parameters": first["tools"][0]["parameters"], "strict": False}]
    assert first["tool_choice"] == "auto"
    sent = server.requests[1].json["input"]
    output = load("responses/parallel_calls.json").json["output"]
    assert sent[0] == {"role": "user", "content": "q"}
    assert sent[1] == output[0] and sent[1]["id"] == REASONING_ID and sent[1]["encrypted_content"]
    assert [i["call_id"] for i in sent[2:4]] == [output[1]["call_id"], output[2]["call_id"]]
    assert sent[4:] == [{"type": "function_call_output", "call_id": "call_tE1G2ZfcJ2ZFRGyhRKVRCZ6K",
                         "output": "sunny in Paris, France"},
                        {"type": "function_call_output", "call_id": "call_7yMdi6yzNmJ5hX2BZpm7uW6Q",
                         "output": "sunny in Bogotá, Colombia"}]
    if stream:
        assert result.text == texts(events) == "Grüße aus Köln — 東京 👋"
    details = {k: v for k, v in result.usage.items() if k in ("cached_tokens", "reasoning_tokens")}
    assert details == ({"cached_tokens": 128, "reasoning_tokens": 192} if stream else
                       {"cached_tokens": 640, "reasoning_tokens": 192})


@pytest.mark.parametrize("stream", [False, True])
async def test_an_incomplete_response_is_incomplete(server, stream):
    name = "responses/stream_incomplete.sse" if stream else "responses/incomplete_max_output.json"
    result, events = await run(server, step(name), stream=stream)
    assert (result.status, result.limit, result.finish_reason, result.provider_finish_reason) == (
        "incomplete", "maxOutputTokens", "length", "max_output_tokens")
    assert result.text == "The three main causes were the fiscal crisis, the"
    if stream:
        assert texts(events) == result.text


@pytest.mark.parametrize("stream", [False, True])
async def test_a_call_cut_by_the_output_limit_is_never_run(server, stream):
    name = "responses/stream_incomplete_in_call.sse" if stream else "responses/incomplete_in_call.json"
    result, _ = await run(server, step(name), stream=stream, toolkit=kit(write_file))
    assert ran == [] and (result.status, result.limit, result.tool_call_count) == ("incomplete", "maxOutputTokens", 0)
    assert (result.finish_reason, result.provider_finish_reason) == ("length", "max_output_tokens")
    cut, note = result.messages[-2]["content"][0], result.messages[-1]
    assert cut["type"] == "function_call" and cut["status"] == "incomplete"  # kept as sent
    assert note["tool_call_id"] == cut["call_id"] == ("call_cutResp01" if stream else "call_cutResp02")
    assert "was not run" in note["content"] and "output limit" in note["content"]
    assert len(server.requests) == 1


@pytest.mark.parametrize("stream", [False, True])
async def test_content_filter_is_incomplete(server, stream):
    name = "responses/stream_content_filter.sse" if stream else "responses/content_filter.json"
    result, events = await run(server, step(name), stream=stream)
    assert (result.status, result.limit, result.finish_reason, result.provider_finish_reason) == (
        "incomplete", "contentFilter", "content_filter", "content_filter")
    if stream:
        assert result.text == texts(events) == "Here is how "  # what arrived before the filter, kept


@pytest.mark.parametrize("stream", [False, True])
async def test_a_refusal_is_incomplete_and_visible(server, stream):
    name = "responses/stream_refusal.sse" if stream else "responses/refusal.json"
    result, events = await run(server, step(name), stream=stream)
    assert (result.status, result.limit, result.finish_reason) == ("incomplete", "refusal", "refusal")
    assert result.text == "I'm sorry, I cannot assist with that request."
    assert result.messages[-1]["content"][0]["content"][0]["type"] == "refusal"
    if stream:
        assert texts(events) == result.text


async def test_a_failed_response_is_a_provider_error_retried_by_status(server):
    result, _ = await run(server, step("responses/failed.json"), step("responses/text.json"))
    assert result.status == "done" and len(server.requests) == 2
    server.requests.clear()
    with pytest.raises(ProviderError) as info:
        await run(server, step("responses/failed.json"), retries=0)
    assert (info.value.status, info.value.error_type) == (500, "server_error")
    assert "The model failed to generate a response." in str(info.value)


async def test_an_exhausted_quota_fails_at_once_saying_what_to_do(server):
    seen: list[dict] = []
    with pytest.raises(ProviderError) as info:
        await run(server, step("responses/quota_429.json"), step("responses/text.json"),
                  on_error=lambda i: seen.append(dict(i)) or ("retry" if i["retryable"] else "fail"))
    e = info.value
    assert len(server.requests) == 1 and (e.status, e.error_type, e.quota) == (429, "insufficient_quota", True)
    assert "retrying will not help" in str(e) and "billing" in str(e)
    assert seen == [{"status": 429, "attempt": 0, "retryable": False, "error_type": "insufficient_quota"}]


@pytest.mark.parametrize("name", ["responses/stream_error.sse", "responses/stream_failed.sse"])
async def test_stream_errors_are_retried_like_their_status(server, name):
    result, _ = await run(server, step(name), step("responses/stream_text.sse"), stream=True)
    assert result.status == "done" and len(server.requests) == 2


async def test_a_stream_error_event_names_code_and_message(server):
    with pytest.raises(ProviderError) as info:
        await run(server, step("responses/stream_error.sse"), stream=True, retries=0)
    e = info.value
    assert (e.status, e.error_type, e.in_stream) == (429, "rate_limit_exceeded", True)
    assert "rate_limit_exceeded: Rate limit reached" in str(e) and "inside the responses stream" in str(e)


async def test_store_false_replays_items_without_server_ids(server):
    params = {"store": False, "include": ["reasoning.encrypted_content"]}
    await run(server, step("responses/parallel_calls.json"), step("responses/final_after_calls.json"),
              toolkit=kit(), request_params=params)
    first = server.requests[0].json
    assert first["store"] is False and first["include"] == ["reasoning.encrypted_content"]
    sent = server.requests[1].json["input"]
    assert sent[1]["id"] == REASONING_ID and sent[1]["encrypted_content"]  # carried by its content
    assert all("id" not in item for item in sent[2:4]) and sent[2]["call_id"] == "call_tE1G2ZfcJ2ZFRGyhRKVRCZ6K"


async def test_chained_requests_send_only_what_the_server_lacks(server):
    await run(server, step("responses/parallel_calls.json"), step("responses/final_after_calls.json"),
              toolkit=kit(), chain_responses=True)
    second = server.requests[1].json
    assert second["previous_response_id"] == load("responses/parallel_calls.json").json["id"]
    assert [i["type"] for i in second["input"]] == ["function_call_output", "function_call_output"]


async def test_translate_on_the_responses_wire(server):
    server.add(step("responses/parallel_calls.json"))
    client = client_for(server, "responses")
    try:
        result = await client.translate([{"role": "system", "content": "Be brief."},
                                         {"role": "user", "content": "Weather?"}],
                                        tools=[{"type": "function", "function": {"name": "get_weather",
                                                                                 "parameters": {"type": "object"}}}],
                                        tool_choice={"type": "function", "function": {"name": "get_weather"}},
                                        max_tokens=300)
    finally:
        await client.aclose()
    body = server.requests[0].json
    assert body["input"] == [{"role": "system", "content": "Be brief."}, {"role": "user", "content": "Weather?"}]
    assert body["tool_choice"] == {"type": "function", "name": "get_weather"} and body["max_output_tokens"] == 300
    assert body["tools"][0]["name"] == "get_weather" and "instructions" not in body
    assert result.finish_reason == "tool_calls" and [c.name for c in result.tool_calls] == ["get_weather"] * 2
    assert result.thinking_blocks[0]["id"] == REASONING_ID
    assert result.assistant_message()["thinking_blocks"] == result.thinking_blocks


async def test_translate_says_a_call_cut_by_the_output_limit_is_length(server):
    server.add(step("responses/incomplete_in_call.json"))
    client = client_for(server, "responses")
    try:
        result = await client.translate([{"role": "user", "content": "Write the report."}])
    finally:
        await client.aclose()
    assert (result.finish_reason, result.provider_finish_reason) == ("length", "max_output_tokens")
    assert [(c.id, c.arguments) for c in result.tool_calls] == [
        ("call_cutResp02", '{"path":"/tmp/report.txt","content":"Quarterly summ')]  # as sent, not to be run


# -- the agent runtime on this wire ------------------------------------------------------------------


def gated(log: list[Any]) -> Any:
    async def gate(args: Any = None, ctx: Any = None) -> Any:
        answer = getattr(ctx, "answer", None)
        log.append(answer)
        if answer is not None and answer.ok:
            return ToolResult("through", False)
        return pending(kind="approval", prompt="let it through?")

    return agent("worker", does="gated", uses={"tools": [define_tool(gate, name="gate", description="g")]})


def llm_of(server: LlmServer) -> dict[str, Any]:
    return {"base_url": server.base_url + "/v1", "style": "responses", "model": "gpt-5-mini", "api_key": "sk-test"}


def outputs(request: Any) -> list[Any]:
    return [i for i in request.json["input"] if i.get("type") == "function_call_output"]


async def test_an_agent_suspends_and_resumes_in_place(server):
    log: list[Any] = []
    worker = gated(log)
    # without a store the live runtime replays the turn: the model is asked again and calls the gate again
    server.add(step("responses/gate_call.json"), step("responses/gate_call.json"), step("responses/text.json"))
    r = await worker.run("go", llm=llm_of(server))
    try:
        assert (r.status, r.pending.prompt, r.finish_reason) == ("pending", "let it through?", "tool_calls")
        final = await r.runtime.resume(Answer(id=r.pending.id, ok=True))
        assert final.status == "done" and final.text.startswith("In a peaceful grove")
        # the first run suspended; the replay recognises the halted call and runs it with the answer, once
        assert [a.ok if a else None for a in log] == [None, True]
        items = server.requests[-1].json["input"]
        assert any(i.get("id") == REASONING_ID for i in items)  # the reasoning item survived the suspension
        assert outputs(server.requests[-1]) == [{"type": "function_call_output", "call_id": "call_gate0001",
                                                 "output": "through"}]
    finally:
        await r.runtime.close(r.runtime.root)


async def test_a_durable_run_parks_in_sqlite_and_resumes_on_this_wire(server, tmp_path):
    log: list[Any] = []
    worker = gated(log)
    server.add(step("responses/gate_call.json"), step("responses/text.json"))
    async with open_store(f"sqlite:///{tmp_path / 'runs.db'}") as store, contextlib.AsyncExitStack() as stack:
        r = await worker.run("go", llm=llm_of(server), store=store, run_id="resp-1")
        stack.push_async_callback(r.runtime.aclose)  # for a failure before the aclose below (a second one is a no-op)
        assert r.status == "pending"
        await r.runtime.aclose()
        [waiting] = await store.pending()
        final = await resume(store, Answer(id=waiting.request.id, ok=True), agents=[worker], llm=llm_of(server))
    assert (final.status, final.run_id, final.finish_reason) == ("done", "resp-1", "stop")
    assert len(server.requests) == 2  # continue mode: only what comes after the halted call is asked
    sent = server.requests[1].json["input"]
    assert json.dumps(sent).count(REASONING_ID) == 1
    assert outputs(server.requests[1]) == [{"type": "function_call_output", "call_id": "call_gate0001",
                                            "output": "through"}]


def test_the_command_speaks_the_responses_api(server):
    from support.cli_run import cli_env, run_cli

    server.add(step("responses/text.json"))
    done = run_cli("run", "--style", "responses", "--base-url", server.base_url + "/v1", "--model", "gpt-5-mini",
                   "--no-builtins", "--once", "q", env=cli_env(OPENAI_API_KEY="sk-test"))
    assert done.returncode == 0, done.stderr
    assert done.stdout.startswith("In a peaceful grove")
    assert server.requests[0].path == "/v1/responses"
