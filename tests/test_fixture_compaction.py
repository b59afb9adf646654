"""Drives shared/fixtures/compaction/fixture.json (toolnexus-compaction-fixture/v1) end to end."""

from __future__ import annotations

import json
import re

import pytest

from support.shared import FIXTURES
from toolnexus.agents.compaction import compactor, estimate_tokens

FIXTURE = json.loads(
    (FIXTURES / "compaction" / "fixture.json").read_text(encoding="utf-8")
)
OPTIONS = FIXTURE["options"]
EXPECT = FIXTURE["expect"]


def _expand(value, i):
    """Render one generator template value for group index `i`."""
    if isinstance(value, str):
        value = re.sub(r"<repeat '([^']*)' (\d+) times>", lambda m: m.group(1) * int(m.group(2)), value)
        return value.replace("<i>", str(i))
    if isinstance(value, list):
        return [_expand(v, i) for v in value]
    if isinstance(value, dict):
        return {k: _expand(v, i) for k, v in value.items()}
    return value


def build_transcript() -> list[dict]:
    spec = FIXTURE["input"]
    msgs = [{"role": "system", "content": spec["systemPrompt"]}]
    for i in range(spec["generator"]["userTurns"]):
        msgs.extend(_expand(m, i) for m in spec["generator"]["group"])
    return msgs


def summarize(older: list[dict]) -> str:
    return f"summarized {len(older)} messages"


def hook(**extra):
    return compactor(max_tokens=OPTIONS["maxTokens"], keep_tail=OPTIONS["keepTail"], summarize=summarize, **extra)


def assert_tool_pair_safe(msgs: list[dict]) -> None:
    called: set[str] = set()
    for m in msgs:
        if m["role"] == "assistant":
            called.update(c["id"] for c in m.get("tool_calls") or [])
        if m["role"] == "tool":
            assert m["tool_call_id"] in called, f"orphaned tool result {m['tool_call_id']}"


def test_generated_transcript_matches_the_reference_size():
    msgs = build_transcript()
    assert len(msgs) == 121
    assert estimate_tokens(msgs) == 4752
    assert msgs[1]["content"] == "question 0 " + "pad " * 40


async def test_over_budget_transcript_compacts_to_summary_plus_user_led_tail():
    msgs = build_transcript()
    out = (await hook()({"messages": msgs}))["messages"]

    assert EXPECT["compacts"] is True
    assert estimate_tokens(out) < estimate_tokens(msgs)
    assert estimate_tokens(out) == 824
    # leading system prompt kept verbatim and first
    lead = EXPECT["leadingSystemMessage"]
    assert out[0] is msgs[0] or out[0] == msgs[0]
    assert out[0]["role"] == lead["role"] and lead["contentContains"] in out[0]["content"]
    # one summary system message, exact text
    assert out[1] == {"role": "system", "content": EXPECT["summaryContentPrefix"] + "summarized 100 messages"}
    # the tail: 20 messages from "question 25 …", starting at a user turn
    tail = out[2:]
    assert len(out) == 22 and len(tail) == 20
    assert tail == msgs[101:]
    first_non_system = next(m for m in out if m["role"] != "system")
    assert first_non_system["role"] == EXPECT["firstNonSystemMessageRole"]
    assert first_non_system["content"].startswith("question 25 ")
    assert_tool_pair_safe(out)


async def test_flush_to_memory_variant_inserts_memory_instruction_before_tail():
    msgs = build_transcript()
    out = (await hook(flush_to_memory=True)({"messages": msgs}))["messages"]
    assert len(out) == 23
    assert [m["role"] for m in out[:4]] == ["system", "system", "system", "user"]
    assert out[2] == {
        "role": "system",
        "content": "Before continuing: if anything from earlier is worth keeping, save it with the memory tool "
        "now — the earlier transcript is about to be summarized.",
    }
    assert out[3:] == msgs[101:]
    assert_tool_pair_safe(out)


async def test_short_transcript_is_a_no_op():
    msgs = build_transcript()[:5]
    before = json.dumps(msgs)
    assert await hook()({"messages": msgs}) is None
    assert json.dumps(msgs) == before


@pytest.mark.parametrize("keep_tail", [0, 50, 300, 800, 1500, 4000])
async def test_no_tool_result_is_orphaned_for_any_tail_budget(keep_tail):
    msgs = build_transcript()
    out = await compactor(max_tokens=100, keep_tail=keep_tail, summarize=summarize)({"messages": msgs})
    if out is not None:
        assert_tool_pair_safe(out["messages"])
        assert out["messages"][2]["role"] == "user"
