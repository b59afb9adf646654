"""Request bodies built incrementally: the same bytes as encoding everything each turn, work that
grows with the new messages only, and declarations encoded once per toolkit change."""

from __future__ import annotations

import base64
import json
from typing import Any

import pytest

from support.llm_server import anthropic_calls, anthropic_text, openai_calls, openai_text
from toolnexus import create_client, create_toolkit, define_tool
from toolnexus.client._body import EncodedList, encode_payload
from toolnexus.client._prepared import PreparedTranscript
from toolnexus.client._wire import dialect_for
from toolnexus.types import ToolResult

PNG = base64.b64encode(b"\x89PNG\r\n\x1a\n" + b"\0" * 16).decode()


class Bodies:
    """An async transport that keeps each request body exactly as a real transport would send it."""

    def __init__(self, *replies: Any) -> None:
        self.replies = list(replies)
        self.sent: list[bytes] = []
        self.kept: list[bool] = []  # did the body arrive with its JSON kept (the incremental path)?

    async def post(self, url: str, headers: dict, payload: dict, timeout: float) -> Any:
        self.sent.append(encode_payload(payload))
        self.kept.append(type(payload["messages"]) is EncodedList and type(payload["tools"]) is EncodedList)
        return self.replies.pop(0)

    async def open(self, *args: Any) -> Any:
        raise NotImplementedError


def test_encode_payload_with_kept_chunks_is_byte_for_byte_json_dumps():
    payload = {"model": "m", "messages": EncodedList([{"role": "user", "content": "héllo \u2603"}, {"n": [1, 2.5]}]),
               "tools": EncodedList([]), "stream": True, "x": None}
    assert encode_payload(payload) == json.dumps(payload).encode()
    chunked = EncodedList([1, 2, 3], [json.dumps([1, 2])[1:-1].encode(), b"3"])
    assert encode_payload({"a": chunked}) == b'{"a": [1, 2, 3]}'
    chunked.append(4)  # resized behind its back: encoded afresh, never stale
    assert encode_payload({"a": chunked}) == b'{"a": [1, 2, 3, 4]}'


def _tools() -> list[Any]:
    def lookup(q: int) -> str:
        """Look up q."""
        return f"result {q}"

    async def snapshot(args: Any = None, ctx: Any = None) -> ToolResult:
        return ToolResult("a picture", False, None, [{"type": "image", "mimeType": "image/png", "data": PNG}])

    return [define_tool(lookup), define_tool(snapshot, name="snapshot", description="Takes a picture.",
                                              input_schema={"type": "object", "properties": {}})]


def _script(style: str) -> list[Any]:
    calls, text = (openai_calls, openai_text) if style == "openai" else (anthropic_calls, anthropic_text)
    turns = []
    for i in range(6):
        if i % 3 == 1:  # a turn with a media result and a plain one: OpenAI folds the picture in
            turns.append(calls((f"s{i}", "snapshot", {}), (f"l{i}", "lookup", {"q": i})))
        else:
            turns.append(calls((f"l{i}", "lookup", {"q": i})))
    return [*turns, text("done")]


@pytest.mark.parametrize("style", ["openai", "anthropic"])
async def test_incremental_bodies_equal_bodies_encoded_whole_each_turn(style: str):
    """The fast path (kept declarations and transcript) sends exactly what the plain path — taken
    when a `before_llm` hook could edit things — sends, turn after turn, media results included."""
    sent = {}
    for path, hooks in (("fast", None), ("plain", {"before_llm": lambda event: None})):
        transport = Bodies(*_script(style))
        toolkit = await create_toolkit(builtins=False, extra_tools=_tools())
        client = create_client(base_url="http://model.invalid/v1", style=style, model="m", api_key="k",
                               http_transport=transport, hooks=hooks, system_prompt="Be brief.")
        history = [{"role": "user", "content": "earlier"}, {"role": "assistant", "content": "noted"}]
        result = await client.run("go", toolkit, history=history)
        assert result.text == "done" and result.turns == 7
        assert transport.kept == [path == "fast"] * 7
        sent[path] = transport.sent
    assert len(sent["fast"]) == 7
    assert sent["fast"] == sent["plain"]
    last = json.loads(sent["fast"][-1])
    if style == "openai":  # the picture rode in the synthetic user message after the tool results
        assert any(m["role"] == "user" and isinstance(m["content"], list)
                   and any(p.get("type") == "image_url" for p in m["content"]) for m in last["messages"])


@pytest.mark.parametrize("style", ["openai", "anthropic"])
def test_each_message_is_converted_a_bounded_number_of_times_however_long_the_run(style: str):
    """Turn n converts only what is new since turn n-1 (plus the open tail), so a run of n turns
    converts O(n) messages, not O(n²)."""
    dialect = dialect_for(style)
    converted = []
    real = dialect.wire_messages

    def counting(messages: list) -> list:
        converted.append(len(messages))
        return real(messages)

    dialect.wire_messages = counting  # type: ignore[method-assign]
    prepared = PreparedTranscript(dialect)
    messages: list[dict] = [{"role": "user", "content": "go"}]
    for turn in range(200):
        wire, _media = prepared.prepare(messages)
        assert json.loads(encode_payload({"messages": wire})) == {"messages": real(messages)}
        if style == "openai":
            messages.append({"role": "assistant", "content": None, "tool_calls": [
                {"id": f"c{turn}", "type": "function", "function": {"name": "t", "arguments": "{}"}}]})
            messages.append({"role": "tool", "tool_call_id": f"c{turn}", "content": "r"})
        else:
            messages.append({"role": "assistant", "content": [{"type": "tool_use", "id": f"c{turn}", "name": "t",
                                                               "input": {}}]})
            messages.append({"role": "user", "content": [{"type": "tool_result", "tool_use_id": f"c{turn}",
                                                          "content": "r"}]})
    assert sum(converted) <= 3 * len(messages)


def test_a_rewritten_transcript_is_converted_afresh():
    dialect = dialect_for("openai")
    prepared = PreparedTranscript(dialect)
    messages = [{"role": "user", "content": "a"}, {"role": "assistant", "content": "b"}]
    prepared.prepare(messages)
    rewritten = [{"role": "user", "content": "A (edited copy)"}, messages[1], {"role": "user", "content": "c"}]
    wire, _ = prepared.prepare(rewritten)
    assert json.loads(encode_payload({"m": wire}))["m"] == rewritten


async def test_a_before_llm_hook_that_edits_messages_in_place_is_sent_its_edits():
    transport = Bodies(openai_calls(("c1", "lookup", {"q": 1})), openai_text("done"))

    def shout(event: dict) -> None:
        for m in event["messages"]:
            if m.get("role") == "user":
                m["content"] = str(m["content"]).upper()

    toolkit = await create_toolkit(builtins=False, extra_tools=_tools()[:1])
    client = create_client(base_url="http://model.invalid/v1", style="openai", model="m", api_key="k",
                           http_transport=transport, hooks={"before_llm": shout})
    await client.run("quiet please", toolkit)
    assert [json.loads(b)["messages"][0]["content"] for b in transport.sent] == ["QUIET PLEASE", "QUIET PLEASE"]


async def test_declarations_are_encoded_once_per_toolkit_change():
    toolkit = await create_toolkit(builtins=False, extra_tools=_tools())
    first = toolkit.declarations("openai")
    assert toolkit.declarations("openai") is first  # kept while nothing changed
    assert json.loads(encode_payload({"tools": first}))["tools"] == toolkit.to_openai()
    assert toolkit.declarations("anthropic") == toolkit.to_anthropic()

    def extra(x: str) -> str:
        """Extra."""
        return x

    toolkit.register(define_tool(extra))
    grown = toolkit.declarations("openai")
    assert grown is not first and [d["function"]["name"] for d in grown] == ["lookup", "snapshot", "extra"]
    toolkit.get("extra").description = "Extra, described again."  # a field replaced: declared again
    assert toolkit.declarations("openai")[-1]["function"]["description"] == "Extra, described again."
    copy = toolkit.to_openai()
    copy[0]["function"]["description"] = "edited copy"  # the copies stay the caller's to edit
    assert toolkit.declarations("openai")[0]["function"]["description"] == "Look up q."
