"""Unit behaviour of §7F compaction: the estimator, the split rule, and both tool-call dialects."""

from __future__ import annotations

import json
import math

from support.mock_llm import MockLLM
from toolnexus.agents import agent
from toolnexus.agents.compaction import compactor, estimate_tokens
from toolnexus.client import InMemoryConversationStore


def _summarize(older):
    return f"summarized {len(older)} messages"


def _openai_group(i: int, pad: int = 40) -> list[dict]:
    return [
        {"role": "user", "content": f"question {i} " + "pad " * pad},
        {"role": "assistant", "content": None,
         "tool_calls": [{"id": f"c{i}", "type": "function", "function": {"name": "lookup", "arguments": "{}"}}]},
        {"role": "tool", "tool_call_id": f"c{i}", "content": f"result {i} " + "data " * pad},
        {"role": "assistant", "content": f"answer {i}"},
    ]


def _anthropic_group(i: int, pad: int = 40) -> list[dict]:
    return [
        {"role": "user", "content": f"question {i} " + "pad " * pad},
        {"role": "assistant", "content": [{"type": "tool_use", "id": f"t{i}", "name": "lookup", "input": {}}]},
        {"role": "user", "content": [{"type": "tool_result", "tool_use_id": f"t{i}", "content": "data " * pad,
                                      "is_error": False}]},
        {"role": "assistant", "content": [{"type": "text", "text": f"answer {i}"}]},
    ]


def _anthropic_pair_safe(msgs: list[dict]) -> bool:
    used: set[str] = set()
    for m in msgs:
        blocks = m["content"] if isinstance(m.get("content"), list) else []
        for b in blocks:
            if b.get("type") == "tool_use":
                used.add(b["id"])
            if b.get("type") == "tool_result" and b["tool_use_id"] not in used:
                return False
    return True


def test_estimate_counts_code_points_of_compact_json_rounded_up_per_message():
    m1 = {"role": "user", "content": "héllo ✓"}  # non-ASCII stays one code point each
    m2 = {"content": "x", "role": "user"}  # key order is kept, not sorted
    expected = sum(
        math.ceil(len(json.dumps(m, separators=(",", ":"), ensure_ascii=False)) / 4) for m in (m1, m2)
    )
    assert estimate_tokens([m1, m2]) == expected
    assert estimate_tokens([{"a": "b"}]) == 3  # '{"a":"b"}' is 9 code points -> ceil(9/4)
    assert estimate_tokens([]) == 0


async def test_under_budget_returns_none_so_the_transcript_is_untouched():
    msgs = [{"role": "system", "content": "S"}, *_openai_group(0, pad=1)]
    assert await compactor(max_tokens=10_000, summarize=_summarize)({"messages": msgs}) is None
    exact = estimate_tokens(msgs)
    assert await compactor(max_tokens=exact, summarize=_summarize)({"messages": msgs}) is None


async def test_anthropic_tool_results_are_never_split_from_their_tool_use():
    msgs = [m for i in range(12) for m in _anthropic_group(i)]
    for keep_tail in (0, 60, 150, 400, 900):
        out = await compactor(max_tokens=200, keep_tail=keep_tail, summarize=_summarize)({"messages": msgs})
        assert out is not None
        result = out["messages"]
        # no leading system in the anthropic transcript: the summary comes first, then a real user turn
        assert result[0]["role"] == "system" and result[0]["content"].startswith("[Summary of earlier conversation]\n")
        assert result[1]["role"] == "user" and isinstance(result[1]["content"], str)
        assert _anthropic_pair_safe(result)


async def test_tail_is_the_longest_user_led_suffix_within_keep_tail():
    msgs = [{"role": "system", "content": "SOUL"}] + [m for i in range(6) for m in _openai_group(i)]
    group_cost = estimate_tokens(_openai_group(5))
    out = await compactor(max_tokens=100, keep_tail=2 * group_cost, summarize=_summarize)({"messages": msgs})
    result = out["messages"]
    assert result[2:] == msgs[-8:]  # exactly two whole groups fit
    assert result[1]["content"] == "[Summary of earlier conversation]\nsummarized 16 messages"


async def test_keep_tail_defaults_to_half_of_max_tokens():
    msgs = [{"role": "system", "content": "SOUL"}] + [m for i in range(6) for m in _openai_group(i)]
    group_cost = estimate_tokens(_openai_group(5))
    implicit = await compactor(max_tokens=2 * group_cost + 1, summarize=_summarize)({"messages": msgs})
    explicit = await compactor(max_tokens=2 * group_cost + 1, keep_tail=group_cost, summarize=_summarize)(
        {"messages": msgs}
    )
    assert implicit == explicit
    assert implicit["messages"][2:] == msgs[-4:]


async def test_tail_too_big_for_keep_tail_falls_back_to_most_recent_user_turn():
    msgs = [{"role": "system", "content": "SOUL"}] + [m for i in range(3) for m in _openai_group(i)]
    out = await compactor(max_tokens=10, keep_tail=1, summarize=_summarize)({"messages": msgs})
    assert out["messages"][2:] == msgs[-4:]
    assert out["messages"][1]["content"].endswith("summarized 8 messages")


async def test_no_user_turn_at_all_summarizes_the_whole_body_with_empty_tail():
    msgs = [{"role": "system", "content": "SOUL"}] + [{"role": "assistant", "content": "x" * 200}] * 3
    out = await compactor(max_tokens=10, summarize=_summarize)({"messages": msgs})
    assert out == {"messages": [msgs[0], {"role": "system",
                                          "content": "[Summary of earlier conversation]\nsummarized 3 messages"}]}


async def test_nothing_older_than_the_only_user_turn_returns_none():
    msgs = [{"role": "system", "content": "SOUL"}, {"role": "user", "content": "x" * 400},
            {"role": "assistant", "content": "y" * 400}]
    assert await compactor(max_tokens=10, keep_tail=1, summarize=_summarize)({"messages": msgs}) is None


async def test_async_summarizer_and_custom_counter_are_honoured():
    seen: list[list[dict]] = []

    async def summarize(older):
        seen.append(older)
        return "S!"

    msgs = [m for i in range(5) for m in _openai_group(i, pad=1)]
    hook = compactor(max_tokens=10, keep_tail=4, count_tokens=len, summarize=summarize)
    out = await hook({"messages": msgs})
    assert out["messages"] == [{"role": "system", "content": "[Summary of earlier conversation]\nS!"}, *msgs[-4:]]
    assert seen == [msgs[:-4]]


async def test_missing_messages_is_a_no_op():
    assert await compactor(max_tokens=1, summarize=_summarize)({"turn": 0}) is None


# --------------------------------------------------------------------------- attached to a real run

_ECHO = {"style": "openai", "usagePerCall": {"prompt_tokens": 1, "completion_tokens": 1, "total_tokens": 2},
         "scripts": {"m": [{"always": True, "text": "ok"}]}}


async def _run_with_history(history, hooks):
    mock = MockLLM(_ECHO)
    store = InMemoryConversationStore()
    await store.save("root/a.1", history)
    r = await agent("a", does="x", soul="SOUL", model="m").run("next question", transport=mock, store=store,
                                                              hooks=hooks)
    assert r.text == "ok"
    return mock.requests[0]["messages"]


async def test_runtime_wide_compactor_compacts_the_wire_transcript():
    history = [{"role": "system", "content": "SOUL"}] + [m for i in range(10) for m in _openai_group(i)]
    hook = compactor(max_tokens=600, keep_tail=300, summarize=_summarize)
    wire = await _run_with_history(history, {"before_llm": hook})
    assert wire[0] == {"role": "system", "content": "SOUL"}
    assert wire[1]["content"].startswith("[Summary of earlier conversation]\nsummarized ")
    assert wire[-1] == {"role": "user", "content": "next question"}
    assert estimate_tokens(wire) <= 600
    called = {c["id"] for m in wire if m["role"] == "assistant" for c in m.get("tool_calls") or []}
    assert all(m["tool_call_id"] in called for m in wire if m["role"] == "tool")


async def test_under_budget_compactor_leaves_the_wire_byte_identical():
    history = [{"role": "system", "content": "SOUL"}] + _openai_group(0, pad=2)
    plain = await _run_with_history(history, None)
    hooked = await _run_with_history(history, {"before_llm": compactor(max_tokens=10_000, summarize=_summarize)})
    assert json.dumps(hooked) == json.dumps(plain)
