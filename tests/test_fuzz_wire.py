"""Property tests for what the LLM client reads from a peer: the SSE parser, both dialects' stream
accumulators and reply readers, tool-call argument parsing, JSON bodies and the error scrubber.
They raise nothing but our clear error types and never hang (issue #11, fuzzing)."""

from __future__ import annotations

import json

import pytest
from hypothesis import given, strategies as st

from fuzz_strategies import json_values, words
from toolnexus.client._errors import ProviderError, ProviderResponseError, redact_secrets
from toolnexus.client._sse import SseEvent, SseParser, json_payloads
from toolnexus.client._transport import decode_json_body
from toolnexus.client._wire import dialect_for
from toolnexus.client._wire.base import Turn, read_arguments
from toolnexus.errors import InputTooLarge

pytestmark = pytest.mark.timeout(60)

SSE_PIECES = st.sampled_from([b"data: ", b"data:", b"event: message_stop\n", b"\n", b"\r\n", b"\n\n", b": ping\n",
                              b"[DONE]", b'{"choices": [', b'{"type": "message_stop"}', b"id: 1\n", b"retry: 5\n",
                              b"\xff\xfe", b"data: {\n"]) | st.binary(max_size=40)


@given(st.lists(SSE_PIECES, max_size=40), st.integers(1, 64))
def test_the_sse_parser_takes_any_bytes_in_any_chunking(pieces, cut):
    raw = b"".join(pieces)
    parser = SseParser(max_event_bytes=256)
    events = []
    try:
        for i in range(0, len(raw), cut):
            events += parser.feed(raw[i:i + cut])
        events += parser.close()
    except InputTooLarge:
        return
    for event in events:
        assert isinstance(event, SseEvent)
        list(json_payloads(event))


EVENT_KEYS = words("type", "choices", "delta", "content", "tool_calls", "index", "id", "function", "name",
                   "arguments", "usage", "finish_reason", "message", "content_block", "partial_json", "text",
                   "stop_reason", "input", "prompt_tokens", "input_tokens", "output_tokens")
EVENT_TYPES = words("message_start", "content_block_start", "content_block_delta", "message_delta", "message_stop",
                    "input_json_delta", "text_delta", "tool_use", "thinking_delta", "[DONE]")


@given(st.sampled_from(["openai", "anthropic"]),
       st.lists(st.tuples(st.none() | EVENT_TYPES, json_values(EVENT_KEYS | EVENT_TYPES) | EVENT_TYPES), max_size=12))
def test_stream_accumulators_take_any_events_and_always_assemble_a_turn(style, events):
    acc = dialect_for(style).new_stream()
    for name, payload in events:
        data = payload if isinstance(payload, str) and payload == "[DONE]" else json.dumps(payload)
        deltas = acc.feed(SseEvent(name, [data]))
        assert all(isinstance(d, str) for d in deltas)
    turn = acc.turn()
    assert isinstance(turn, Turn) and isinstance(acc.complete, bool)
    for call in turn.tool_calls:
        assert isinstance(call.args, dict) and (call.args_error is None or isinstance(call.args_error, str))


@given(st.sampled_from(["openai", "anthropic"]), json_values(EVENT_KEYS | EVENT_TYPES))
def test_reply_readers_accept_or_refuse_with_a_provider_response_error(style, data):
    try:
        turn = dialect_for(style).parse_response(data)
    except ProviderResponseError:
        return
    assert isinstance(turn.text, str)
    for call in turn.tool_calls:
        assert isinstance(call.args, dict)


@given(json_values() | st.text(max_size=60) | st.sampled_from(['{"a": 1', "[" * 5000, "{" * 3000 + "}" * 3000,
                                                              '"\\ud800"', "1e999", "null"]))
def test_tool_arguments_are_a_dict_or_a_stated_problem_never_an_exception(raw):
    for value in (raw, json.dumps(raw) if not isinstance(raw, str) else raw):
        args, problem = read_arguments(value)
        assert isinstance(args, dict)
        assert (problem is None) or (isinstance(problem, str) and args == {})


@given(st.binary(max_size=200) | st.sampled_from([b"[" * 100000, b'{"a":' * 50000]))
def test_json_bodies_decode_or_raise_a_provider_response_error(raw):
    try:
        decode_json_body(raw, "http://x.invalid/")
    except ProviderResponseError:
        pass


@given(st.integers(100, 599), st.text(max_size=300), st.lists(st.text(max_size=20), max_size=4))
def test_provider_errors_scrub_any_secret_from_any_body(status, body, secrets):
    error = ProviderError(status, body).scrub(secrets)
    for secret in secrets:
        if len(secret) >= 4 and secret not in "«redacted»":
            assert secret not in error.body
    assert isinstance(redact_secrets(body, secrets), str)
