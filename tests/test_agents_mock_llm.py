"""The fixtures' scripted model (tests/support/mock_llm.py) renders every placeholder any fixture uses."""

from __future__ import annotations

import json
import re

import pytest

from support.mock_llm import FIXTURES, MockLLM, load_fixture


def payload(model, messages, system=None):
    msgs = ([{"role": "system", "content": system}] if system else []) + messages
    return {"model": model, "messages": msgs}


def reply_text(mock, model, messages, system=None):
    return mock.post("http://mock.local/chat/completions", {}, payload(model, messages, system), 1.0)["choices"][0][
        "message"
    ]["content"]


def test_every_placeholder_in_every_fixture_is_understood():
    placeholders = set()
    for path in FIXTURES.glob("*/fixture.json"):
        fx = load_fixture(path.parent.name)
        for script in (fx.get("mockLLM") or {}).get("scripts", {}).values():
            for rule in script:
                placeholders.update(re.findall(r"<((?:[^<>]|<[^<>]*>)*)>", rule.get("text", "")))
    mock = MockLLM({"scripts": {}})
    for name in placeholders:
        mock._placeholder(name, payload("m", [{"role": "user", "content": "x"}]))  # raises if unknown
    assert len(placeholders) >= 7


def test_tool_message_placeholders_and_usage():
    mock = MockLLM(load_fixture("subagent-fanout")["mockLLM"])
    tools = [
        {"role": "user", "content": "go"},
        {"role": "assistant", "content": None, "tool_calls": []},
        {"role": "tool", "tool_call_id": "a", "content": "one"},
        {"role": "tool", "tool_call_id": "b", "content": "two"},
    ]
    assert reply_text(mock, "m-coordinator", tools) == "synthesis: one + two"
    assert reply_text(mock, "m-explore", tools) == "found:one"
    first = mock.post("u", {}, payload("m-explore", [{"role": "user", "content": "go"}]), 1.0)
    call = first["choices"][0]["message"]["tool_calls"][0]
    assert first["choices"][0]["finish_reason"] == "tool_calls" and first["usage"]["total_tokens"] == 40
    assert json.loads(call["function"]["arguments"]) == {"q": "x"}


def test_escalation_matchers_and_last_tool_content():
    mock = MockLLM(load_fixture("subagent-escalation")["mockLLM"])
    asked = mock.post("u", {}, payload("m-asker", [{"role": "user", "content": "go"}]), 1.0)
    assert asked["choices"][0]["message"]["tool_calls"][0]["function"]["name"] == "check_secret"
    done = [{"role": "user", "content": "go"}, {"role": "tool", "tool_call_id": "c", "content": "secret-token"}]
    assert reply_text(mock, "m-asker", done) == "asker-done: secret-token"
    assert reply_text(mock, "m-approver-parent", done) == "parent-final: secret-token"


def test_persona_placeholders():
    mock = MockLLM(load_fixture("persona-agent")["mockLLM"])
    soul = ("## SOUL.md\n\nYou are Ava.\n\n## USER.md\n\n- Prefers dark roast\n\n"
            "## HEARTBEAT.md\n\nremind about the 3pm sync")
    user = [{"role": "user", "content": "Heartbeat. Read your HEARTBEAT.md section"}]
    assert reply_text(mock, "m-echo-soul", user, soul) == "sections:[SOUL.md,USER.md,HEARTBEAT.md]"
    assert reply_text(mock, "m-recall", user, soul) == "I recall: dark roast"
    assert reply_text(mock, "m-recall", user, "## SOUL.md\n\nnothing") == "no memory"
    assert reply_text(mock, "m-heartbeat", user, soul) == "Reminder: 3pm sync 🔔"
    assert reply_text(mock, "m-heartbeat", [{"role": "user", "content": "hello"}], soul) == "HEARTBEAT_OK"


def test_count_of_numbered_inbox_items():
    mock = MockLLM(load_fixture("subagent-lifecycle")["mockLLM"])
    text = "\n[inbox: 2 item(s) — x]\n1. [from=a channel=b] c\n2. [from=clock channel=timer] tick (x3 coalesced)"
    assert reply_text(mock, "m-peer", [{"role": "user", "content": text}]) == "processed 2 items"


def test_unknown_model_and_unknown_placeholder_fail_loudly():
    mock = MockLLM({"scripts": {"m": [{"always": True, "text": "<no such thing>"}]}})
    with pytest.raises(LookupError, match="no script for model 'other'"):
        mock.post("u", {}, payload("other", []), 1.0)
    with pytest.raises(ValueError, match="unknown template placeholder <no such thing>"):
        mock.post("u", {}, payload("m", []), 1.0)
