"""Content parts through the client: both wires (real loopback HTTP, bytes checked), translate, the part
policy (size, allowlist, warnings once per client), tool-derived parts, and 0.21 transcript round trips."""

from __future__ import annotations

import base64
import json
import logging

import pytest

from support.llm_server import (
    Json,
    LlmServer,
    RecordingTransport,
    anthropic_calls,
    anthropic_text,
    openai_calls,
    openai_text,
)
from toolnexus import content
from toolnexus.client import ContentPartError, create_client, create_in_process_client
from toolnexus.content import ContentPart, UnsupportedPartError
from toolnexus.toolkit import Toolkit
from toolnexus.types import Tool, ToolResult

PNG_BYTES = b"\x89PNG\r\n\x1a\n-pixels-"
PDF_BYTES = b"%PDF-1.7 tiny document"
WAV_BYTES = b"RIFF\x24\x00\x00\x00WAVEfmt "
B64 = {k: base64.b64encode(v).decode() for k, v in (("png", PNG_BYTES), ("pdf", PDF_BYTES), ("wav", WAV_BYTES))}


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


def llm(server, style, **kw):
    return create_client(base_url=server.base_url, style=style, model="m", api_key="sk-test", **kw)


def recording(style, *replies, **kw):
    transport = RecordingTransport(*replies)
    return create_client(base_url="http://llm.invalid", style=style, model="m", api_key="k",
                         http_transport=transport, **kw), transport


def parts_prompt(tmp_path):
    (tmp_path / "cat.png").write_bytes(PNG_BYTES)
    (tmp_path / "report.pdf").write_bytes(PDF_BYTES)
    (tmp_path / "hello.wav").write_bytes(WAV_BYTES)
    return ["what is in these?", content.image(tmp_path / "cat.png"), content.file(tmp_path / "report.pdf"),
            content.audio(tmp_path / "hello.wav")]


def decoded(data_url_or_b64: str) -> bytes:
    return base64.b64decode(data_url_or_b64.split(",", 1)[-1])


# -- acceptance: image, file and audio parts on both wires and through translate --------------------------


async def test_openai_wire_carries_image_file_and_audio_parts_byte_for_byte(server, tmp_path):
    server.add(Json(openai_text("a cat, a report, a greeting")))
    async with llm(server, "openai") as c:
        r = await c.run(parts_prompt(tmp_path))
    body = json.loads(server.requests[0].body)
    sent = body["messages"][0]["content"]
    assert sent == [
        {"type": "text", "text": "what is in these?"},
        {"type": "image_url", "image_url": {"url": f"data:image/png;base64,{B64['png']}"}},
        {"type": "file", "file": {"filename": "report.pdf", "file_data": f"data:application/pdf;base64,{B64['pdf']}"}},
        {"type": "input_audio", "input_audio": {"data": B64["wav"], "format": "wav"}},
    ]
    assert decoded(sent[1]["image_url"]["url"]) == PNG_BYTES
    assert decoded(sent[2]["file"]["file_data"]) == PDF_BYTES
    assert decoded(sent[3]["input_audio"]["data"]) == WAV_BYTES
    assert r.messages[0]["content"][1:] == [  # the transcript keeps canonical part dicts
        {"type": "image", "mimeType": "image/png", "data": B64["png"], "name": "cat.png"},
        {"type": "file", "mimeType": "application/pdf", "data": B64["pdf"], "name": "report.pdf"},
        {"type": "audio", "mimeType": "audio/wav", "data": B64["wav"], "name": "hello.wav"}]


async def test_anthropic_wire_carries_image_and_pdf_and_refuses_attached_audio_before_any_request(server, tmp_path):
    prompt = parts_prompt(tmp_path)
    async with llm(server, "anthropic") as c:
        with pytest.raises(UnsupportedPartError) as e:
            await c.run(prompt)
        assert str(e.value) == 'no "anthropic" block shape for a audio part (audio/wav)'
        assert server.requests == []
        server.add(Json(anthropic_text("a cat and a report")))
        await c.run(prompt[:3])
    sent = json.loads(server.requests[0].body)["messages"][0]["content"]
    assert sent == [
        {"type": "text", "text": "what is in these?"},
        {"type": "image", "source": {"type": "base64", "media_type": "image/png", "data": B64["png"]}},
        {"type": "document", "source": {"type": "base64", "media_type": "application/pdf", "data": B64["pdf"]}},
    ]
    assert decoded(sent[1]["source"]["data"]) == PNG_BYTES and decoded(sent[2]["source"]["data"]) == PDF_BYTES


async def test_tool_returned_image_file_and_audio_parts_on_both_wires(server):
    parts = [content.image(PNG_BYTES, mime_type="image/png"), content.file(PDF_BYTES, mime_type="application/pdf"),
             content.audio(WAV_BYTES, mime_type="audio/wav")]
    tool = make_tool("capture", ToolResult("captured", False, parts=parts))
    server.add(Json(openai_calls(("c1", "capture", {}))), Json(openai_text("ok")))
    async with llm(server, "openai") as c:
        r = await c.run("go", kit(tool))
    sent = json.loads(server.requests[1].body)["messages"]
    header = {"type": "text", "text": "Output of tool capture (c1):"}
    assert sent[-2] == {"role": "tool", "tool_call_id": "c1", "content": "captured"}
    assert sent[-1] == {
        "role": "user",
        "content": [
            header,
            {"type": "image_url", "image_url": {"url": f"data:image/png;base64,{B64['png']}"}},
            header,
            {"type": "file", "file": {"filename": "file", "file_data": f"data:application/pdf;base64,{B64['pdf']}"}},
            header,
            {"type": "input_audio", "input_audio": {"data": B64["wav"], "format": "wav"}},
        ],
    }
    stored = r.messages[-2]
    assert list(stored) == ["role", "tool_call_id", "content", "parts", "name"]
    assert stored["parts"] == [content.to_dict(p) for p in parts] and stored["name"] == "capture"

    server.add(Json(anthropic_calls(("u1", "capture", {}))), Json(anthropic_text("ok")))
    async with llm(server, "anthropic") as c:
        r = await c.run("go", kit(tool))
    block = json.loads(server.requests[3].body)["messages"][-1]["content"][0]
    assert block == {"type": "tool_result", "tool_use_id": "u1", "is_error": False, "content": [
        {"type": "text", "text": "captured"},
        {"type": "image", "source": {"type": "base64", "media_type": "image/png", "data": B64["png"]}},
        {"type": "document", "source": {"type": "base64", "media_type": "application/pdf", "data": B64["pdf"]}},
        {"type": "text", "text": f"[unsupported audio part (audio/wav, {len(WAV_BYTES)} bytes)]"}]}
    assert r.messages[-2]["content"][0]["parts"] == [content.to_dict(p) for p in parts]


async def test_translate_carries_image_file_and_audio_parts_on_both_wires(tmp_path):
    user = {"role": "user", "content": [content.to_dict(p) if not isinstance(p, str) else {"type": "text", "text": p}
                                        for p in parts_prompt(tmp_path)]}
    c, t = recording("openai", openai_text("seen"))
    await c.translate([user])
    assert t.payloads[0]["messages"][0]["content"][1:] == [
        {"type": "image_url", "image_url": {"url": f"data:image/png;base64,{B64['png']}"}},
        {"type": "file", "file": {"filename": "report.pdf", "file_data": f"data:application/pdf;base64,{B64['pdf']}"}},
        {"type": "input_audio", "input_audio": {"data": B64["wav"], "format": "wav"}}]
    c, t = recording("anthropic", anthropic_text("seen"))
    await c.translate([user])
    assert t.payloads[0]["messages"][0]["content"] == [
        {"type": "text", "text": "what is in these?"},
        {"type": "image", "source": {"type": "base64", "media_type": "image/png", "data": B64["png"]}},
        {"type": "document", "source": {"type": "base64", "media_type": "application/pdf", "data": B64["pdf"]}},
        {"type": "text", "text": f"[unsupported audio part (audio/wav, {len(WAV_BYTES)} bytes)]"}]


# -- transcripts round-trip unchanged ------------------------------------------------------------------------


async def test_a_021_transcript_with_parts_round_trips_unchanged_through_the_store():
    history = [
        {"role": "system", "content": "be brief"},
        {"role": "user", "content": [{"type": "text", "text": "look"},
                                     {"type": "image", "mimeType": "image/png", "url": "https://x/cat.png"}]},
        {"role": "assistant", "content": None, "tool_calls": [
            {"id": "c1", "type": "function", "function": {"name": "snap", "arguments": "{}"}}]},
        {"role": "tool", "tool_call_id": "c1", "content": "snapped",
         "parts": [{"type": "image", "mimeType": "image/jpeg", "data": B64["png"], "name": "s.jpg"}], "name": "snap"},
        {"role": "assistant", "content": "a cat"},
    ]
    frozen = json.dumps(history)
    c, t = recording("openai", openai_text("still a cat"))
    await c.store.save("conv", history)
    r = await c.ask("and now?", id="conv")
    assert json.dumps(r.messages[: len(history)]) == frozen
    assert json.dumps((await c.store.get("conv"))[: len(history)]) == frozen
    assert json.dumps(history) == frozen  # the caller's list was not touched
    wire = t.payloads[0]["messages"]
    assert wire[3] == {"role": "tool", "tool_call_id": "c1", "content": "snapped"}
    assert wire[4]["content"][1] == {"type": "image_url", "image_url": {"url": f"data:image/jpeg;base64,{B64['png']}"}}


async def test_text_parts_of_a_tool_extend_its_tool_message_and_each_media_part_gets_its_header():
    result = ToolResult("main", False, parts=[{"type": "text", "text": "extra"},
                                               {"type": "image", "mimeType": "image/png", "data": B64["png"]},
                                               {"type": "image", "mimeType": "image/gif", "url": "https://x/a.gif"}])
    c, t = recording("openai", openai_calls(("c7", "shots", {})), openai_text("ok"))
    await c.run("x", kit(make_tool("shots", result)))
    wire = t.payloads[1]["messages"]
    assert wire[-2] == {"role": "tool", "tool_call_id": "c7",
                        "content": [{"type": "text", "text": "main"}, {"type": "text", "text": "extra"}]}
    header = {"type": "text", "text": "Output of tool shots (c7):"}
    assert wire[-1]["content"] == [
        header,
        {"type": "image_url", "image_url": {"url": f"data:image/png;base64,{B64['png']}"}},
        header,
        {"type": "image_url", "image_url": {"url": "https://x/a.gif"}},
    ]


async def test_in_process_generate_receives_the_openai_wire_messages():
    seen = []
    replies = iter([{"tool_calls": [{"name": "snap", "args": {}}]}, {"content": "done"}])

    def generate(request):
        seen.append(json.loads(json.dumps(request["messages"])))
        return next(replies)

    c = create_in_process_client(model="local", generate=generate)
    shot = ToolResult("ok", False, parts=[content.image(PNG_BYTES, mime_type="image/png")])
    await c.run("x", kit(make_tool("snap", shot)))
    assert seen[1][-1] == {"role": "user", "content": [
        {"type": "text", "text": "Output of tool snap (call_0):"},
        {"type": "image_url", "image_url": {"url": f"data:image/png;base64,{B64['png']}"}}]}
    assert "parts" not in seen[1][-2]


# -- the part policy ------------------------------------------------------------------------------------------


async def test_size_rule_raises_for_attached_and_degrades_tool_parts_with_one_warning(caplog):
    big = {"type": "image", "mimeType": "image/png", "data": B64["png"]}
    c, t = recording("openai", openai_calls(("c1", "snap", {})), openai_text("ok"), openai_calls(("c2", "snap", {})),
                     openai_text("ok"), max_part_bytes=4)
    with pytest.raises(ContentPartError) as e:
        await c.run([big])
    assert str(e.value) == f"content part is {len(PNG_BYTES)} decoded bytes, over the maxPartBytes limit of 4"
    assert t.payloads == []
    toolkit = kit(make_tool("snap", ToolResult("shot", False, parts=[big])))
    with caplog.at_level(logging.WARNING, logger="toolnexus"):
        await c.run("x", toolkit)
        await c.run("x", toolkit)
    placeholder = f"[unsupported image part (image/png, {len(PNG_BYTES)} bytes)]"
    assert t.payloads[1]["messages"][-1]["content"][1] == {"type": "text", "text": placeholder}
    notices = [r.getMessage() for r in caplog.records if "maxPartBytes" in r.getMessage()]
    assert notices == [f"[toolnexus] content part is {len(PNG_BYTES)} decoded bytes, over the maxPartBytes limit of 4"
                       " — sent as a text placeholder"]


async def test_process_wide_limit_applies_when_the_client_sets_none():
    content.set_max_part_bytes(4)
    try:
        c, t = recording("openai")
        with pytest.raises(ContentPartError, match="over the maxPartBytes limit of 4"):
            await c.run([{"type": "image", "mimeType": "image/png", "data": B64["png"]}])
    finally:
        content.set_max_part_bytes(None)


async def test_unsupported_warning_is_once_per_client_and_key(caplog):
    clip = ToolResult("clip", False, parts=[{"type": "audio", "mimeType": "audio/wav", "data": B64["wav"]}])
    with caplog.at_level(logging.WARNING, logger="toolnexus"):
        for _ in range(2):
            c, _t = recording("anthropic", anthropic_calls(("u1", "rec", {})), anthropic_text("ok"),
                              anthropic_calls(("u2", "rec", {})), anthropic_text("ok"))
            await c.run("x", kit(make_tool("rec", clip)))
            await c.run("x", kit(make_tool("rec", clip)))
    notice = '[toolnexus] no "anthropic" block shape for a audio part (audio/wav) — sent as a text placeholder'
    assert [r.getMessage() for r in caplog.records].count(notice) == 2  # two clients, one notice each


async def test_on_unsupported_part_error_fails_a_tool_derived_part_before_that_turns_request():
    clip = ToolResult("clip", False, parts=[{"type": "audio", "mimeType": "audio/ogg", "data": B64["wav"]}])
    c, t = recording("openai", openai_calls(("c1", "rec", {})), openai_text("never"), on_unsupported_part="error")
    with pytest.raises(UnsupportedPartError, match='no "openai" block shape for a audio part'):
        await c.run("x", kit(make_tool("rec", clip)))
    assert len(t.payloads) == 1


async def test_llm_metric_lists_the_media_parts_of_the_transcript():
    events = []
    c, _ = recording("openai", openai_text("ok"), on_metric=events.append)
    await c.run(["hi", content.image(PNG_BYTES, mime_type="image/png")])
    llm_event = next(e for e in events if e["event"] == "llm")
    assert llm_event["parts"] == [{"type": "image", "mimeType": "image/png", "bytes": len(PNG_BYTES)}]


# -- beyond 0.21 ---------------------------------------------------------------------------------------------------


async def test_tool_derived_parts_are_normalised_and_validated_when_recorded(caplog):
    """Tool-derived parts are now validated: a ContentPart object in ToolResult.parts is normalised to its dict
    (instead of crashing the openai path), and an invalid {"type":"image"} becomes a placeholder with a warning
    instead of going out as data:None;base64,None."""
    result = ToolResult("shot", False, parts=[ContentPart("image", mimeType="image/png", data=B64["png"]),
                                               {"type": "image"}])
    c, t = recording("openai", openai_calls(("c1", "snap", {})), openai_text("ok"))
    with caplog.at_level(logging.WARNING, logger="toolnexus"):
        r = await c.run("x", kit(make_tool("snap", result)))
    stored = r.messages[-2]["parts"]
    assert stored == [{"type": "image", "mimeType": "image/png", "data": B64["png"]},
                      {"type": "text", "text": "[invalid image part: a image part needs a mimeType]"}]
    wire = json.dumps(t.payloads[1])
    assert "None" not in wire and "data:None" not in wire
    assert any("tool 'snap' returned an invalid content part: a image part needs a mimeType" in r.getMessage()
               for r in caplog.records)


async def test_openai_translate_encodes_canonical_parts_by_allowlist_and_provenance():
    """openai translate no longer forwards canonical parts the provider rejects: they are encoded with the run
    loop's allowlist — a user-attached unsupported part raises, a tool-derived one becomes a placeholder."""
    ogg = {"type": "audio", "mimeType": "audio/ogg", "data": B64["wav"]}
    c, t = recording("openai", openai_text("ok"))
    await c.translate([{"role": "user", "content": [{"type": "text", "text": "hear"},
                                                    {"type": "image", "mimeType": "image/png", "url": "https://x/a.png"}]},
                       {"role": "tool", "tool_call_id": "c1", "content": [{"type": "text", "text": "r"}, ogg]}])
    sent = t.payloads[0]["messages"]
    assert sent[0]["content"][1] == {"type": "image_url", "image_url": {"url": "https://x/a.png"}}
    assert sent[1]["content"][1] == {
        "type": "text",
        "text": f"[unsupported audio part (audio/ogg, {len(WAV_BYTES)} bytes)]",
    }
    native = {"type": "image_url", "image_url": {"url": "https://x/native.png"}}
    c, t = recording("openai", openai_text("ok"))
    await c.translate([{"role": "user", "content": [native]}])
    assert t.payloads[0]["messages"][0]["content"] == [native]  # provider-native blocks pass as given
    c, t = recording("openai")
    with pytest.raises(UnsupportedPartError):
        await c.translate([{"role": "user", "content": [ogg]}])
    assert t.payloads == []
