"""Single-turn translation (client.md §14): the pure OpenAI⇄Anthropic helpers and one call end to end."""

from __future__ import annotations

import asyncio
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
from toolnexus.client import ProviderError, ProviderResponseError, RunCancelled, create_client
from toolnexus.toolkit import create_toolkit
from toolnexus.translate import (
    TranslatedToolCall,
    TranslateResult,
    anthropic_blocks,
    args_object,
    args_string,
    content_text,
    finish_reason_for,
    has_system_message,
    openai_messages_to_anthropic,
    openai_tool_choice_to_anthropic,
    openai_tools_to_anthropic,
    part_to_anthropic,
    tool_calls_of,
)
from toolnexus.types import Tool, ToolResult

PNG_B64 = "iVBORw0KGgo="  # 8 bytes
PDF_B64 = "JVBERi0xLjQK"  # 9 bytes


# --------------------------------------------------------------------------- result types


def test_translate_result_defaults_are_an_empty_stop_turn_with_zero_usage():
    r = TranslateResult()
    assert (r.text, r.tool_calls, r.finish_reason, r.model, r.raw) == ("", [], "stop", "", None)
    assert r.usage == {"prompt_tokens": 0, "completion_tokens": 0, "total_tokens": 0}
    assert TranslateResult().usage is not r.usage  # no shared mutable default


def test_tool_calls_json_renders_an_openai_tool_calls_array_in_order():
    r = TranslateResult(tool_calls=[TranslatedToolCall("c1", "add", '{"a":1}'), TranslatedToolCall("c2", "ls", "{}")])
    assert r.tool_calls_json() == [
        {"id": "c1", "type": "function", "function": {"name": "add", "arguments": '{"a":1}'}},
        {"id": "c2", "type": "function", "function": {"name": "ls", "arguments": "{}"}},
    ]


# --------------------------------------------------------------------------- scalar helpers


@pytest.mark.parametrize(
    ("has_calls", "stop", "expected"),
    [
        (True, "end_turn", "tool_calls"),
        (True, "max_tokens", "tool_calls"),
        (False, "max_tokens", "length"),
        (False, "length", "length"),
        (False, "refusal", "content_filter"),
        (False, "content_filter", "content_filter"),
        (False, "end_turn", "stop"),
        (False, "stop_sequence", "stop"),
        (False, None, "stop"),
    ],
)
def test_finish_reason_for_maps_stop_reasons_and_tool_calls_win(has_calls, stop, expected):
    assert finish_reason_for(has_calls, stop) == expected


def test_finish_reason_for_defaults_stop_to_none():
    assert finish_reason_for(False) == "stop"
    assert finish_reason_for(True) == "tool_calls"


@pytest.mark.parametrize(
    ("content", "expected"),
    [
        ("plain", "plain"),
        ("", ""),
        (
            [{"type": "text", "text": "a"}, {"type": "image", "mimeType": "image/png"}, {"type": "text", "text": "b"}],
            "ab",
        ),
        ([{"type": "text", "text": 3}, "bare string", {"text": "no type still counts"}], "no type still counts"),
        ([], ""),
        (None, ""),
        (42, ""),
        ({"text": "a dict is not a parts list"}, ""),
    ],
)
def test_content_text_reads_strings_and_text_of_part_lists(content, expected):
    assert content_text(content) == expected


def test_args_object_keeps_dicts_and_parses_json_object_strings():
    d = {"a": 1}
    assert args_object(d) is d
    assert args_object('{"a": [1, 2]}') == {"a": [1, 2]}


@pytest.mark.parametrize("value", ["", "   ", "not json", "[1, 2]", '"str"', "3", None, 7, ["a"]])
def test_args_object_falls_back_to_an_empty_object(value):
    assert args_object(value) == {}


@pytest.mark.parametrize(
    ("value", "expected"),
    [
        ('{"a": 1}', '{"a": 1}'),
        ("not json is kept verbatim", "not json is kept verbatim"),
        ("", ""),
        ({"a": 1, "b": [1, 2]}, '{"a":1,"b":[1,2]}'),
        ({}, "{}"),
        (None, "{}"),
        ([1], "{}"),
        (5, "{}"),
    ],
)
def test_args_string_renders_the_openai_arguments_string(value, expected):
    assert args_string(value) == expected


def test_tool_calls_of_reads_openai_calls_and_skips_entries_without_a_function():
    message = {
        "role": "assistant",
        "tool_calls": [
            {"id": "c1", "type": "function", "function": {"name": "add", "arguments": '{"a": 1}'}},
            {"id": "c2", "function": {"name": "obj", "arguments": {"x": True}}},
            {"id": "bad", "function": "not an object"},
            "not a dict",
            {"function": {}},
        ],
    }
    assert tool_calls_of(message) == [
        TranslatedToolCall("c1", "add", '{"a": 1}'),
        TranslatedToolCall("c2", "obj", '{"x":true}'),
        TranslatedToolCall("", "", "{}"),
    ]


@pytest.mark.parametrize("message", [{"role": "assistant"}, {"tool_calls": None}, {"tool_calls": "x"}, "str", None])
def test_tool_calls_of_without_a_calls_list_is_empty(message):
    assert tool_calls_of(message) == []


def test_has_system_message_looks_for_system_or_developer_roles():
    assert has_system_message([{"role": "user"}, {"role": "system", "content": "s"}])
    assert has_system_message([{"role": "developer", "content": "d"}])
    assert not has_system_message([{"role": "user", "content": "system"}, "system", None])
    assert not has_system_message([])
    assert not has_system_message(None)


# --------------------------------------------------------------------------- content parts


def test_part_to_anthropic_maps_canonical_and_openai_images():
    assert part_to_anthropic({"type": "image", "mimeType": "image/png", "data": PNG_B64}) == {
        "type": "image",
        "source": {"type": "base64", "media_type": "image/png", "data": PNG_B64},
    }
    assert part_to_anthropic({"type": "image", "mimeType": "image/png", "url": "https://x/i.png"}) == {
        "type": "image",
        "source": {"type": "url", "url": "https://x/i.png"},
    }
    data_url = {"type": "image_url", "image_url": {"url": f"data:image/jpeg;base64,{PNG_B64}"}}
    assert part_to_anthropic(data_url) == {
        "type": "image",
        "source": {"type": "base64", "media_type": "image/jpeg", "data": PNG_B64},
    }
    assert part_to_anthropic({"type": "image_url", "image_url": {"url": "https://x/y.gif"}}) == {
        "type": "image",
        "source": {"type": "url", "url": "https://x/y.gif"},
    }
    assert part_to_anthropic({"type": "image_url", "image_url": "https://x/bare.png"})["source"] == {
        "type": "url",
        "url": "https://x/bare.png",
    }


def test_part_to_anthropic_maps_pdf_files_to_documents():
    canonical = {"type": "file", "mimeType": "application/pdf", "data": PDF_B64, "name": "a.pdf"}
    openai = {"type": "file", "file": {"filename": "a.pdf", "file_data": f"data:application/pdf;base64,{PDF_B64}"}}
    for part in (canonical, openai):
        block = part_to_anthropic(part)
        assert block["type"] == "document"
        assert block["source"] == {"type": "base64", "media_type": "application/pdf", "data": PDF_B64}


def test_part_to_anthropic_text_part_stays_text():
    assert part_to_anthropic({"type": "text", "text": "hi"}) == {"type": "text", "text": "hi"}


@pytest.mark.parametrize(
    ("part", "placeholder"),
    [
        (
            {"type": "audio", "mimeType": "audio/wav", "data": "UklGRg=="},
            "[unsupported audio part (audio/wav, 4 bytes)]",
        ),
        (
            {"type": "input_audio", "input_audio": {"data": "SUQz", "format": "mp3"}},
            "[unsupported audio part (audio/mpeg, 3 bytes)]",
        ),
        (
            {"type": "file", "mimeType": "application/zip", "data": "UEsDBA=="},
            "[unsupported file part (application/zip, 4 bytes)]",
        ),
        ({"type": "file", "file": {"file_id": "file-123"}}, "[unsupported file part (, 0 bytes)]"),
        ({"type": "image", "mimeType": "image/png"}, "[unsupported image part (image/png, 0 bytes)]"),
    ],
)
def test_part_to_anthropic_degrades_what_anthropic_cannot_carry_to_a_named_placeholder(part, placeholder):
    assert part_to_anthropic(part) == {"type": "text", "text": placeholder}


def test_part_to_anthropic_warns_when_it_degrades_a_part(caplog):
    with caplog.at_level(logging.WARNING, logger="toolnexus"):
        part_to_anthropic({"type": "audio", "mimeType": "audio/x-translate-test", "data": "AAAA"})
    assert ('[toolnexus] no "anthropic" block shape for a audio part (audio/x-translate-test) — sent as a text '
            "placeholder") in [r.getMessage() for r in caplog.records]


def test_part_to_anthropic_passes_unknown_and_native_blocks_through_verbatim():
    native = {"type": "image", "source": {"type": "base64", "media_type": "image/png", "data": PNG_B64}}
    refusal = {"type": "refusal", "refusal": "no"}
    assert part_to_anthropic(native) is native
    assert part_to_anthropic(refusal) is refusal


def test_anthropic_blocks_maps_only_non_text_parts_in_order():
    content = [
        {"type": "text", "text": "look"},
        {"type": "image", "mimeType": "image/png", "url": "https://x/1.png"},
        "bare",
        {"type": "image_url", "image_url": {"url": "https://x/2.png"}},
    ]
    assert anthropic_blocks(content) == [
        {"type": "image", "source": {"type": "url", "url": "https://x/1.png"}},
        {"type": "image", "source": {"type": "url", "url": "https://x/2.png"}},
    ]
    assert anthropic_blocks("text") == []
    assert anthropic_blocks([{"type": "text", "text": "only text"}]) == []
    assert anthropic_blocks(None) == []


# --------------------------------------------------------------------------- messages OpenAI -> Anthropic


def test_openai_messages_to_anthropic_full_tool_round_trip():
    msgs = [
        {"role": "system", "content": "be brief"},
        {"role": "developer", "content": [{"type": "text", "text": "use tools"}]},
        {"role": "user", "content": "add 1 and 2, then list"},
        {
            "role": "assistant",
            "content": "calling",
            "tool_calls": [
                {"id": "c1", "type": "function", "function": {"name": "add", "arguments": '{"a":1,"b":2}'}},
                {"id": "c2", "type": "function", "function": {"name": "ls", "arguments": ""}},
            ],
        },
        {"role": "tool", "tool_call_id": "c1", "content": "3"},
        {"role": "tool", "tool_call_id": 7, "content": [{"type": "text", "text": "a.txt"}]},
        {"role": "assistant", "content": "done"},
    ]
    out, system = openai_messages_to_anthropic(msgs)
    assert system == "be brief\n\nuse tools"
    assert out == [
        {"role": "user", "content": "add 1 and 2, then list"},
        {
            "role": "assistant",
            "content": [
                {"type": "text", "text": "calling"},
                {"type": "tool_use", "id": "c1", "name": "add", "input": {"a": 1, "b": 2}},
                {"type": "tool_use", "id": "c2", "name": "ls", "input": {}},
            ],
        },
        {
            "role": "user",
            "content": [
                {"type": "tool_result", "content": "3", "tool_use_id": "c1"},
                {"type": "tool_result", "content": "a.txt", "tool_use_id": "7"},
            ],
        },
        {"role": "assistant", "content": [{"type": "text", "text": "done"}]},
    ]


def test_assistant_without_text_has_only_tool_use_blocks_and_object_arguments_pass():
    msgs = [
        {
            "role": "assistant",
            "content": None,
            "tool_calls": [{"id": "x", "function": {"name": "f", "arguments": {"k": "v"}}}],
        }
    ]
    out, _ = openai_messages_to_anthropic(msgs)
    assert out == [
        {"role": "assistant", "content": [{"type": "tool_use", "id": "x", "name": "f", "input": {"k": "v"}}]}
    ]


def test_consecutive_tool_results_merge_but_a_user_message_splits_them():
    msgs = [
        {"role": "tool", "tool_call_id": "a", "content": "1"},
        {"role": "function", "name": "legacy", "content": "2"},
        {"role": "user", "content": "next"},
        {"role": "tool", "tool_call_id": "b", "content": "3"},
    ]
    out, system = openai_messages_to_anthropic(msgs)
    assert system == ""
    assert out == [
        {"role": "user", "content": [
            {"type": "tool_result", "content": "1", "tool_use_id": "a"},
            {"type": "tool_result", "content": "2"},  # no id ⇒ no tool_use_id key
        ]},
        {"role": "user", "content": "next"},
        {"role": "user", "content": [{"type": "tool_result", "content": "3", "tool_use_id": "b"}]},
    ]


def test_a_hoisted_system_message_does_not_split_tool_results():
    msgs = [
        {"role": "tool", "tool_call_id": "a", "content": "1"},
        {"role": "system", "content": "note"},
        {"role": "tool", "tool_call_id": "b", "content": "2"},
    ]
    out, system = openai_messages_to_anthropic(msgs)
    assert system == "note"
    assert out == [{"role": "user", "content": [
        {"type": "tool_result", "content": "1", "tool_use_id": "a"},
        {"type": "tool_result", "content": "2", "tool_use_id": "b"},
    ]}]


def test_tool_result_with_media_carries_text_then_media_blocks():
    image = {"type": "image", "mimeType": "image/png", "data": PNG_B64}
    mapped = {"type": "image", "source": {"type": "base64", "media_type": "image/png", "data": PNG_B64}}
    out, _ = openai_messages_to_anthropic([
        {"role": "tool", "tool_call_id": "a", "content": [{"type": "text", "text": "shot"}, image]},
        {"role": "tool", "tool_call_id": "b", "content": [image]},
    ])
    assert out == [{"role": "user", "content": [
        {"type": "tool_result", "content": [{"type": "text", "text": "shot"}, mapped], "tool_use_id": "a"},
        {"type": "tool_result", "content": [mapped], "tool_use_id": "b"},  # no empty text block
    ]}]


def test_user_media_lists_put_one_merged_text_block_before_the_media_in_order():
    msgs = [{"role": "user", "content": [
        {"type": "text", "text": "compare "},
        {"type": "image_url", "image_url": {"url": "https://x/1.png"}},
        {"type": "text", "text": "these"},
        {"type": "image", "mimeType": "image/png", "url": "https://x/2.png"},
    ]}]
    out, _ = openai_messages_to_anthropic(msgs)
    assert out == [{"role": "user", "content": [
        {"type": "text", "text": "compare these"},
        {"type": "image", "source": {"type": "url", "url": "https://x/1.png"}},
        {"type": "image", "source": {"type": "url", "url": "https://x/2.png"}},
    ]}]


def test_user_media_only_list_has_no_text_block():
    out, _ = openai_messages_to_anthropic([{"role": "user", "content": [{"type": "image_url", "image_url": {"url": "https://x/1.png"}}]}])
    assert out == [{"role": "user", "content": [{"type": "image", "source": {"type": "url", "url": "https://x/1.png"}}]}]


def test_user_text_parts_become_a_string_and_other_roles_count_as_user():
    out, _ = openai_messages_to_anthropic([
        {"role": "user", "content": [{"type": "text", "text": "a"}, {"type": "text", "text": "b"}]},
        {"role": "critic", "content": "odd role"},
        {"content": "no role"},
    ])
    assert out == [
        {"role": "user", "content": "ab"},
        {"role": "user", "content": "odd role"},
        {"role": "user", "content": "no role"},
    ]


def test_empty_turns_are_dropped_and_text_less_lists_pass_raw():
    raw = [{"type": "text", "text": ""}]
    out, system = openai_messages_to_anthropic([
        "not a dict",
        None,
        {"role": "user", "content": ""},
        {"role": "user", "content": []},
        {"role": "user"},
        {"role": "assistant", "content": ""},
        {"role": "assistant", "content": None, "tool_calls": []},
        {"role": "system", "content": ""},
        {"role": "user", "content": raw},
    ])
    assert system == ""
    assert out == [{"role": "user", "content": raw}]


def test_openai_messages_to_anthropic_of_nothing_is_empty():
    assert openai_messages_to_anthropic([]) == ([], "")
    assert openai_messages_to_anthropic(None) == ([], "")


def test_conversion_does_not_mutate_the_callers_messages():
    msgs = [
        {
            "role": "user",
            "content": [{"type": "text", "text": "x"}, {"type": "image", "mimeType": "image/png", "url": "u"}],
        },
        {"role": "assistant", "tool_calls": [{"id": "c", "function": {"name": "f", "arguments": "{}"}}]},
        {"role": "tool", "tool_call_id": "c", "content": "r"},
    ]
    before = json.dumps(msgs)
    openai_messages_to_anthropic(msgs)
    assert json.dumps(msgs) == before


# --------------------------------------------------------------------------- tools and tool_choice


def test_openai_tools_to_anthropic_converts_functions_and_passes_native_entries():
    params = {"type": "object", "properties": {"q": {"type": "string"}}}
    native = {"name": "native", "description": "n", "input_schema": {"type": "object"}}
    tools = [
        {"type": "function", "function": {"name": "search", "description": "find", "parameters": params}},
        {"type": "function", "function": {"name": "bare", "description": ""}},
        {"type": "function", "function": {"name": "weird", "parameters": "nope"}},
        {"type": "function", "function": {"description": "no name"}},
        native,
        {"type": "web_search"},
        "junk",
    ]
    assert openai_tools_to_anthropic(tools) == [
        {"name": "search", "description": "find", "input_schema": params},
        {"name": "bare", "input_schema": {"type": "object", "properties": {}}},
        {"name": "weird", "input_schema": {"type": "object", "properties": {}}},
        native,
    ]
    assert openai_tools_to_anthropic(None) == []


@pytest.mark.parametrize(
    ("choice", "expected"),
    [
        ("required", {"type": "any"}),
        ("any", {"type": "any"}),
        ("none", {"type": "none"}),
        ({"type": "function", "function": {"name": "add"}}, {"type": "tool", "name": "add"}),
        ("auto", None),
        (None, None),
        ({"type": "function", "function": {}}, None),
        ({"type": "function"}, None),
        (["required"], None),
    ],
)
def test_openai_tool_choice_to_anthropic(choice, expected):
    assert openai_tool_choice_to_anthropic(choice) == expected


# --------------------------------------------------------------------------- one call, end to end

ADD_SCHEMA = {"type": "object", "properties": {"a": {"type": "number"}, "b": {"type": "number"}}}
CALLER_TOOL = {
    "type": "function",
    "function": {"name": "lookup", "description": "Look up", "parameters": {"type": "object"}},
}


async def _add(args=None, ctx=None) -> ToolResult:
    return ToolResult(str((args or {}).get("a", 0) + (args or {}).get("b", 0)), False)


ADD_TOOL = Tool("add", "Add two numbers", ADD_SCHEMA, "native", _add)


def make_client(transport, **options):
    opts = {"base_url": "https://api.example.com/v1", "style": "openai", "model": "m-1", "api_key": "sk-test",
            "http_transport": transport, "retry_base_ms": 0}
    opts.update(options)
    return create_client(**opts)


def metric_sink():
    events: list[dict] = []
    return events, events.append


@pytest.fixture
async def toolkit_with_skill(tmp_path):
    skill = tmp_path / "skills" / "greet"
    skill.mkdir(parents=True)
    (skill / "SKILL.md").write_text("---\nname: greet\ndescription: Say hello nicely\n---\nSay hello.\n")
    tk = await create_toolkit(skills_dir=str(tmp_path / "skills"), extra_tools=[ADD_TOOL], builtins=False)
    assert "greet" in tk.skills_prompt()
    yield tk
    await tk.close()


@pytest.mark.parametrize(
    ("base_url", "url"),
    [
        ("https://api.example.com", "https://api.example.com/v1/chat/completions"),
        ("https://api.example.com/", "https://api.example.com/v1/chat/completions"),
        ("https://api.example.com/v1", "https://api.example.com/v1/chat/completions"),
        ("https://api.example.com/v1/", "https://api.example.com/v1/chat/completions"),
        ("https://openrouter.ai/api", "https://openrouter.ai/api/v1/chat/completions"),
        ("https://gw.example.com/chat/v2", "https://gw.example.com/chat/v2/chat/completions"),
    ],
)
async def test_openai_translate_url_adds_v1_unless_present_or_a_chat_path(base_url, url):
    transport = RecordingTransport(openai_text("ok"))
    await make_client(transport, base_url=base_url).translate([{"role": "user", "content": "hi"}])
    assert transport.calls[0][0] == url


async def test_openai_translate_headers_are_lowercase_in_order_then_client_headers():
    transport = RecordingTransport(openai_text("ok"))
    await make_client(transport, headers={"X-Title": "app"}).translate([{"role": "user", "content": "hi"}])
    assert list(transport.calls[0][1].items()) == [
        ("content-type", "application/json"),
        ("authorization", "Bearer sk-test"),
        ("X-Title", "app"),
    ]


async def test_openai_translate_minimal_body_is_model_and_messages_verbatim():
    transport = RecordingTransport(openai_text("hello"))
    msgs = [{"role": "user", "content": [{"type": "text", "text": "hi"}], "name": "u1"}]
    result = await make_client(transport).translate(msgs)
    assert transport.payloads == [{"model": "m-1", "messages": msgs}]
    assert (result.text, result.finish_reason, result.model) == ("hello", "stop", "m-1")
    assert result.usage == {"prompt_tokens": 3, "completion_tokens": 1, "total_tokens": 4}
    assert result.raw == openai_text("hello")


async def test_openai_translate_full_body_order_and_toolkit_tools_first(toolkit_with_skill):
    transport = RecordingTransport(openai_text("ok"))
    msgs = [{"role": "user", "content": "add"}]
    await make_client(transport, system_prompt="client prompt").translate(
        msgs, tools=[CALLER_TOOL], toolkit=toolkit_with_skill, tool_choice="required", system="be brief", max_tokens=64
    )
    body = transport.payloads[0]
    assert list(body) == ["model", "messages", "tools", "tool_choice", "max_tokens"]
    assert body["messages"] == [{"role": "system", "content": "be brief"}, {"role": "user", "content": "add"}]
    assert body["tools"] == json.loads(json.dumps(toolkit_with_skill.to_openai())) + [CALLER_TOOL]
    assert [t["function"]["name"] for t in body["tools"]] == ["skill", "add", "lookup"]
    assert (body["tool_choice"], body["max_tokens"]) == ("required", 64)
    assert msgs == [{"role": "user", "content": "add"}]  # the caller's list is not modified


async def test_openai_translate_never_adds_the_skills_prompt(toolkit_with_skill):
    transport = RecordingTransport(openai_text("ok"))
    await make_client(transport).translate([{"role": "user", "content": "hi"}], toolkit=toolkit_with_skill)
    assert transport.payloads[0]["messages"] == [{"role": "user", "content": "hi"}]


@pytest.mark.parametrize(
    ("system_prompt", "system", "msgs", "first"),
    [
        ("client", None, [{"role": "user", "content": "q"}], {"role": "system", "content": "client"}),
        ("client", "arg", [{"role": "user", "content": "q"}], {"role": "system", "content": "arg"}),
        ("client", "arg", [{"role": "developer", "content": "dev"}, {"role": "user", "content": "q"}],
         {"role": "developer", "content": "dev"}),
        ("client", "arg", [{"role": "user", "content": "q"}, {"role": "system", "content": "late"}],
         {"role": "user", "content": "q"}),
        ("client", "", [{"role": "user", "content": "q"}], {"role": "user", "content": "q"}),
        (None, None, [{"role": "user", "content": "q"}], {"role": "user", "content": "q"}),
    ],
)
async def test_openai_translate_prepends_system_only_when_none_is_present(system_prompt, system, msgs, first):
    transport = RecordingTransport(openai_text("ok"))
    await make_client(transport, system_prompt=system_prompt).translate(msgs, system=system)
    sent = transport.payloads[0]["messages"]
    assert sent[0] == first
    assert len(sent) == len(msgs) + (1 if first["role"] == "system" and first not in msgs else 0)


async def test_openai_translate_sends_tool_choice_even_without_tools_and_omits_empty_tools():
    transport = RecordingTransport(openai_text("ok"))
    choice = {"type": "function", "function": {"name": "x"}}
    await make_client(transport).translate([{"role": "user", "content": "q"}], tools=[], tool_choice=choice)
    assert transport.payloads[0] == {
        "model": "m-1",
        "messages": [{"role": "user", "content": "q"}],
        "tool_choice": choice,
    }


async def test_openai_translate_reads_tool_calls_as_argument_strings_and_finish_reason_tool_calls():
    reply = openai_calls(("c1", "add", '{"a": 1, "b": 2}'), ("c2", "lookup", "{}"), content=None)
    reply["choices"][0]["message"]["tool_calls"].append(
        {"id": "c3", "function": {"name": "obj", "arguments": {"k": 1}}}
    )
    reply["choices"][0]["finish_reason"] = "stop"  # a provider that mislabels a tool turn
    transport = RecordingTransport(reply)
    result = await make_client(transport).translate([{"role": "user", "content": "q"}])
    assert result.text == ""
    assert result.tool_calls == [
        TranslatedToolCall("c1", "add", '{"a": 1, "b": 2}'),
        TranslatedToolCall("c2", "lookup", "{}"),
        TranslatedToolCall("c3", "obj", '{"k":1}'),
    ]
    assert result.finish_reason == "tool_calls"
    assert result.usage == {"prompt_tokens": 6, "completion_tokens": 2, "total_tokens": 8}
    assert result.tool_calls_json()[0] == {
        "id": "c1",
        "type": "function",
        "function": {"name": "add", "arguments": '{"a": 1, "b": 2}'},
    }


@pytest.mark.parametrize(
    ("provider", "expected"), [("length", "length"), ("content_filter", "content_filter"), (None, "stop"), ("", "stop")]
)
async def test_openai_translate_passes_the_provider_finish_reason_without_calls(provider, expected):
    reply = openai_text("partial")
    reply["choices"][0]["finish_reason"] = provider
    result = await make_client(RecordingTransport(reply)).translate([{"role": "user", "content": "q"}])
    assert (result.text, result.finish_reason) == ("partial", expected)


async def test_openai_translate_without_choices_is_an_empty_result_with_usage():
    reply = {"usage": {"prompt_tokens": 2, "completion_tokens": 0}}
    result = await make_client(RecordingTransport(reply)).translate([{"role": "user", "content": "q"}])
    assert (result.text, result.tool_calls, result.finish_reason) == ("", [], "stop")
    assert result.usage == {"prompt_tokens": 2, "completion_tokens": 0, "total_tokens": 2}
    assert result.raw == reply


async def test_openai_translate_flattens_a_parts_list_reply():
    reply = openai_text(None)
    reply["choices"][0]["message"]["content"] = [{"type": "text", "text": "a"}, {"type": "text", "text": "b"}]
    result = await make_client(RecordingTransport(reply)).translate([{"role": "user", "content": "q"}])
    assert result.text == "ab"


@pytest.mark.parametrize(
    ("base_url", "url"),
    [
        ("https://api.anthropic.com", "https://api.anthropic.com/v1/messages"),
        ("https://api.anthropic.com/v1/", "https://api.anthropic.com/v1/messages"),
        ("https://gw.example.com/anthropic/", "https://gw.example.com/anthropic/v1/messages"),
        ("https://gw.example.com/chat/", "https://gw.example.com/chat/v1/messages"),
    ],
)
async def test_anthropic_translate_url_uses_the_run_v1_rule(base_url, url):
    transport = RecordingTransport(anthropic_text("ok"))
    await make_client(transport, style="anthropic", base_url=base_url).translate([{"role": "user", "content": "hi"}])
    assert transport.calls[0][0] == url


async def test_anthropic_translate_headers_in_order_then_client_headers():
    transport = RecordingTransport(anthropic_text("ok"))
    await make_client(transport, style="anthropic", headers={"anthropic-beta": "x"}).translate(
        [{"role": "user", "content": "hi"}]
    )
    assert list(transport.calls[0][1].items()) == [
        ("content-type", "application/json"),
        ("x-api-key", "sk-test"),
        ("anthropic-version", "2023-06-01"),
        ("anthropic-beta", "x"),
    ]


async def test_anthropic_translate_converts_messages_tools_and_tool_choice(toolkit_with_skill):
    transport = RecordingTransport(anthropic_text("ok"))
    msgs = [
        {"role": "system", "content": "hoisted"},
        {"role": "user", "content": "add 1 and 2"},
        {"role": "assistant", "tool_calls": [{"id": "c1", "function": {"name": "add", "arguments": '{"a":1,"b":2}'}}]},
        {"role": "tool", "tool_call_id": "c1", "content": "3"},
    ]
    await make_client(transport, style="anthropic").translate(
        msgs, tools=[CALLER_TOOL], toolkit=toolkit_with_skill, tool_choice={"function": {"name": "add"}}
    )
    body = transport.payloads[0]
    assert list(body) == ["model", "max_tokens", "system", "messages", "tools", "tool_choice"]
    assert (body["model"], body["max_tokens"], body["system"]) == ("m-1", 4096, "hoisted")
    assert body["messages"] == json.loads(json.dumps(openai_messages_to_anthropic(msgs)[0]))
    assert body["tools"] == json.loads(json.dumps(toolkit_with_skill.to_anthropic())) + [
        {"name": "lookup", "description": "Look up", "input_schema": {"type": "object"}}
    ]
    assert "greet" not in json.dumps(body["system"])  # skills text never added
    assert body["tool_choice"] == {"type": "tool", "name": "add"}


@pytest.mark.parametrize(
    ("system_prompt", "system", "expected"),
    [
        ("client", "arg", "arg"),
        ("client", None, "client"),
        (None, None, "hoisted"),
        ("client", "", None),  # explicit empty system: key omitted
    ],
)
async def test_anthropic_translate_system_precedence_arg_then_client_then_hoisted(system_prompt, system, expected):
    transport = RecordingTransport(anthropic_text("ok"))
    msgs = [{"role": "system", "content": "hoisted"}, {"role": "user", "content": "q"}]
    await make_client(transport, style="anthropic", system_prompt=system_prompt).translate(msgs, system=system)
    assert transport.payloads[0].get("system") == expected
    assert transport.payloads[0]["messages"] == [{"role": "user", "content": "q"}]


async def test_anthropic_translate_minimal_body_omits_empty_system_tools_and_auto_choice():
    transport = RecordingTransport(anthropic_text("ok"))
    await make_client(transport, style="anthropic").translate(
        [{"role": "user", "content": "q"}], tools=[], tool_choice="auto", max_tokens=100
    )
    assert transport.payloads[0] == {"model": "m-1", "max_tokens": 100, "messages": [{"role": "user", "content": "q"}]}


async def test_anthropic_translate_reads_text_and_tool_use_as_openai_calls():
    reply = anthropic_calls(
        ("tu1", "add", {"a": 1, "b": 2}), ("tu2", "noop", None), text="let me", input_tokens=7, output_tokens=5
    )
    reply["content"].append({"type": "text", "text": " add"})
    result = await make_client(RecordingTransport(reply), style="anthropic").translate(
        [{"role": "user", "content": "q"}]
    )
    assert result.text == "let me add"
    assert result.tool_calls == [
        TranslatedToolCall("tu1", "add", '{"a":1,"b":2}'),
        TranslatedToolCall("tu2", "noop", "{}"),
    ]
    assert result.finish_reason == "tool_calls"
    assert result.usage == {"prompt_tokens": 7, "completion_tokens": 5, "total_tokens": 12}
    assert (result.model, result.raw) == ("m-1", reply)


@pytest.mark.parametrize(("stop", "expected"), [("end_turn", "stop"), ("max_tokens", "length"), ("refusal", "refusal"),
                                              ("pause_turn", "pause"), (None, "stop")])
async def test_anthropic_translate_maps_stop_reason_to_openai_finish_reason(stop, expected):
    reply = anthropic_text("x")
    reply["stop_reason"] = stop
    result = await make_client(RecordingTransport(reply), style="anthropic").translate(
        [{"role": "user", "content": "q"}]
    )
    assert result.finish_reason == expected


async def test_before_llm_sees_the_wire_request_once_and_may_override_it_and_after_llm_sees_the_reply():
    seen: list[tuple[str, dict]] = []

    def before_llm(ev):
        seen.append(("before", json.loads(json.dumps(ev))))
        return {"model": "m-override", "messages": ev["messages"] + [{"role": "user", "content": "added"}], "tools": []}

    async def after_llm(ev):
        seen.append(("after", ev))

    events, sink = metric_sink()
    reply = anthropic_text("ok")
    transport = RecordingTransport(reply)
    client = make_client(
        transport, style="anthropic", hooks={"before_llm": before_llm, "after_llm": after_llm}, on_metric=sink
    )
    result = await client.translate([{"role": "user", "content": "q"}], tools=[CALLER_TOOL])
    assert seen[0] == ("before", {
        "messages": [{"role": "user", "content": "q"}],
        "tools": [{"name": "lookup", "description": "Look up", "input_schema": {"type": "object"}}],
        "model": "m-1",
        "turn": 0,
    })
    assert seen[1] == ("after", {"response": reply, "model": "m-override", "turn": 0})
    assert len(seen) == 2
    body = transport.payloads[0]
    assert body["model"] == "m-override" and "tools" not in body
    assert body["messages"] == [{"role": "user", "content": "q"}, {"role": "user", "content": "added"}]
    assert result.model == "m-override"
    assert [e["model"] for e in events] == ["m-override"]


async def test_hook_objects_with_attributes_work_and_a_none_return_changes_nothing():
    class Hooks:
        calls = 0

        def before_llm(self, ev):
            Hooks.calls += 1

    transport = RecordingTransport(openai_text("ok"))
    await make_client(transport, hooks=Hooks()).translate([{"role": "user", "content": "q"}], tools=[CALLER_TOOL])
    assert Hooks.calls == 1
    assert transport.payloads[0]["tools"] == [CALLER_TOOL] and transport.payloads[0]["model"] == "m-1"


async def test_request_params_and_body_transform_shape_the_body(caplog):
    def transform(body):
        return {**body, "seed": 7}

    transport = RecordingTransport(openai_text("ok"))
    client = make_client(transport, request_params={"temperature": 0, "messages": "nope"}, body_transform=transform)
    with caplog.at_level(logging.WARNING, logger="toolnexus"):
        await client.translate([{"role": "user", "content": "q"}])
    assert transport.payloads[0] == {
        "model": "m-1",
        "messages": [{"role": "user", "content": "q"}],
        "temperature": 0,
        "seed": 7,
    }
    assert '[toolnexus] request_params key "messages" is not allowed — ignored (use body_transform)' in caplog.messages


async def test_one_ok_llm_metric_with_attempts_after_a_retried_call():
    events, sink = metric_sink()
    transport = RecordingTransport(ProviderError(503, "busy"), openai_text("ok", prompt=4, completion=2))
    client = make_client(transport, on_metric=sink)
    result = await client.translate([{"role": "user", "content": "q"}])
    assert result.text == "ok" and len(transport.payloads) == 2
    assert len(events) == 1
    ev = events[0]
    assert {k: ev[k] for k in ("event", "model", "status", "prompt_tokens", "completion_tokens", "attempts")} == {
        "event": "llm", "model": "m-1", "status": "ok", "prompt_tokens": 4, "completion_tokens": 2, "attempts": 2}
    assert isinstance(ev["ms"], float) and ev["ms"] >= 0
    assert "parts" not in ev
    text = client.metrics()
    assert 'toolnexus_llm_requests_total{model="m-1",status="ok"} 1' in text
    assert 'toolnexus_llm_tokens_total{type="prompt"} 4' in text
    assert "toolnexus_run_errors_total{" not in text  # translate emits only llm


async def test_a_failed_call_raises_and_emits_an_llm_error_metric_with_zero_tokens():
    events, sink = metric_sink()
    transport = RecordingTransport(ProviderError(400, '{"error": "bad request"}'))
    client = make_client(transport, on_metric=sink)
    with pytest.raises(ProviderError) as info:
        await client.translate([{"role": "user", "content": "q"}])
    assert info.value.status == 400
    assert [(e["event"], e["status"], e["prompt_tokens"], e["completion_tokens"]) for e in events] == [
        ("llm", "error", 0, 0)
    ]
    assert 'toolnexus_llm_requests_total{model="m-1",status="error"} 1' in client.metrics()


async def test_a_reply_that_is_not_a_json_object_is_a_provider_response_error():
    events, sink = metric_sink()
    client = make_client(RecordingTransport(["not", "an", "object"]), on_metric=sink)
    with pytest.raises(ProviderResponseError, match="expected a JSON object"):
        await client.translate([{"role": "user", "content": "q"}])
    assert [e["status"] for e in events] == ["error"]


async def test_missing_api_key_raises_the_pinned_error_before_any_request(monkeypatch):
    for name in ("OPENROUTER_API_KEY", "OPENAI_API_KEY", "ANTHROPIC_API_KEY"):
        monkeypatch.delenv(name, raising=False)
    events, sink = metric_sink()
    transport = RecordingTransport(openai_text("never"))
    client = make_client(transport, api_key=None, on_metric=sink)
    with pytest.raises(RuntimeError) as info:
        await client.translate([{"role": "user", "content": "q"}])
    assert str(info.value) == "No API key: set api_key or OPENROUTER_API_KEY / OPENAI_API_KEY / ANTHROPIC_API_KEY"
    assert transport.payloads == [] and events == []


async def test_api_key_is_resolved_from_the_environment_per_call(monkeypatch):
    monkeypatch.delenv("OPENROUTER_API_KEY", raising=False)
    monkeypatch.setenv("ANTHROPIC_API_KEY", "env-anthropic")
    transport = RecordingTransport(anthropic_text("ok"))
    await make_client(transport, style="anthropic", api_key=None).translate([{"role": "user", "content": "q"}])
    assert transport.calls[0][1]["x-api-key"] == "env-anthropic"


async def test_a_set_cancel_event_aborts_before_the_request():
    events, sink = metric_sink()
    transport = RecordingTransport(openai_text("never"))
    cancel = asyncio.Event()
    cancel.set()
    with pytest.raises(RunCancelled):
        await make_client(transport, on_metric=sink).translate([{"role": "user", "content": "q"}], cancel=cancel)
    assert transport.payloads == []
    assert [e["status"] for e in events] == ["error"]


async def test_transport_timeout_is_the_budget_left_or_120_seconds():
    transport = RecordingTransport(openai_text("a"), openai_text("b"))
    await make_client(transport).translate([{"role": "user", "content": "q"}])
    await make_client(transport, timeout_ms=5000).translate([{"role": "user", "content": "q"}])
    assert transport.calls[0][2] == 120.0
    assert 4.0 < transport.calls[1][2] <= 5.0


async def test_bad_arguments_are_rejected_before_any_request():
    transport = RecordingTransport(openai_text("never"))
    client = make_client(transport)
    with pytest.raises(TypeError, match="messages must be a list"):
        await client.translate("hello")  # type: ignore[arg-type]
    with pytest.raises(TypeError, match="tools must be a list"):
        await client.translate([], tools={"name": "x"})  # type: ignore[arg-type]
    with pytest.raises(TypeError, match="max_tokens must be an int"):
        await client.translate([], max_tokens="100")  # type: ignore[arg-type]
    with pytest.raises(ValueError, match="does not support style 'gemini'"):
        await make_client(transport, style="gemini").translate([])
    assert transport.payloads == []


async def test_llm_metric_lists_media_parts_of_the_callers_messages():
    events, sink = metric_sink()
    msgs = [{"role": "user", "content": [
        {"type": "text", "text": "what is this"},
        {"type": "image_url", "image_url": {"url": f"data:image/png;base64,{PNG_B64}"}},
        {"type": "file", "mimeType": "application/pdf", "data": PDF_B64},
    ]}]
    transport = RecordingTransport(anthropic_text("a cat"))
    await make_client(transport, style="anthropic", on_metric=sink).translate(msgs)
    assert events[0]["parts"] == [
        {"type": "image", "mimeType": "image/png", "bytes": 8},
        {"type": "file", "mimeType": "application/pdf", "bytes": 9},
    ]
    assert [b["type"] for b in transport.payloads[0]["messages"][0]["content"]] == ["text", "image", "document"]


async def test_translate_over_real_http_with_the_default_transport():
    with LlmServer() as server:
        server.add(Json(anthropic_calls(("tu1", "add", {"a": 1}))))
        client = create_client(base_url=server.base_url, style="anthropic", model="claude-x", api_key="sk-live",
                               headers={"x-trace": "t1"})
        try:
            result = await client.translate([{"role": "user", "content": "q"}], max_tokens=10)
        finally:
            await client.aclose()
    request = server.requests[0]
    assert (request.method, request.path) == ("POST", "/v1/messages")
    names = [k.lower() for k, _ in request.header_items]
    ours = ["content-type", "x-api-key", "anthropic-version", "x-trace"]
    assert [n for n in names if n in ours] == ours
    assert request.headers["x-api-key"] == "sk-live" and request.headers["anthropic-version"] == "2023-06-01"
    assert request.json == {"model": "claude-x", "max_tokens": 10, "messages": [{"role": "user", "content": "q"}]}
    assert result.tool_calls == [TranslatedToolCall("tu1", "add", '{"a":1}')]
    assert result.finish_reason == "tool_calls"
