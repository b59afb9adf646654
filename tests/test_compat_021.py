"""Compatibility gaps found running 0.21-style programs against ours."""

from __future__ import annotations

import json

from support.llm_server import RecordingTransport, anthropic_calls, anthropic_text, openai_calls, openai_text
from toolnexus.agents.compaction import compactor, estimate_tokens
from toolnexus.client import create_client, create_in_process_client
from toolnexus.toolkit import Toolkit
from toolnexus.types import Tool, ToolResult


def make_tool(name, output):
    async def execute(args=None, ctx=None):
        return ToolResult(output, False)

    return Tool(name, f"{name} tool", {"type": "object", "properties": {}}, "native", execute)


def kit(*tools):
    return Toolkit(None, None, [], [], list(tools))


async def test_every_on_metric_event_carries_the_runs_model():
    events = []
    c = create_client(base_url="http://llm.invalid", style="openai", model="gpt-x", api_key="k",
                      http_transport=RecordingTransport(openai_calls(("c1", "look", {}), ("c2", "look", {})),
                                                        openai_text("done")),
                      on_metric=events.append)
    await c.run("go", kit(make_tool("look", "seen")))
    assert [e["event"] for e in events] == ["tool", "tool", "llm", "llm", "run"] or sorted(
        e["event"] for e in events) == ["llm", "llm", "run", "tool", "tool"]
    assert all(e.get("model") == "gpt-x" for e in events), events


async def test_tool_metric_model_follows_a_before_llm_model_override():
    events = []

    def before_llm(ev):
        return {"model": "cheap-model"} if ev["turn"] == 0 else None

    c = create_client(base_url="http://llm.invalid", style="anthropic", model="big-model", api_key="k",
                      http_transport=RecordingTransport(anthropic_calls(("u1", "look", {})), anthropic_text("done")),
                      on_metric=events.append, hooks={"before_llm": before_llm})
    await c.run("go", kit(make_tool("look", "seen")))
    by_event = [(e["event"], e["model"]) for e in events]
    assert ("tool", "cheap-model") in by_event and ("llm", "big-model") in by_event
    assert all("model" in e for e in events)


async def test_compactor_as_before_llm_compacts_during_a_long_tool_loop():
    calls = {"n": 0}
    sizes = []
    summaries = []

    def generate(request):
        sizes.append(estimate_tokens(request["messages"]))
        calls["n"] += 1
        if calls["n"] < 20:
            return {"tool_calls": [{"id": f"c{calls['n']}", "name": "fetch", "args": {"page": calls["n"]}}]}
        return {"content": "all pages read"}

    def summarize(older):
        summaries.append(len(older))
        return f"read {len(older)} earlier messages"

    c = create_in_process_client(model="m", generate=generate, max_turns=25,
                                 hooks={"before_llm": compactor(max_tokens=600, summarize=summarize)})
    result = await c.run("read every page", kit(make_tool("fetch", "x" * 1200)))
    assert result.status == "done" and result.text == "all pages read" and result.turns == 20
    assert summaries, "the compactor never fired during the run"
    # bounded: every request after the first tool round stays near the budget instead of growing with the turns
    assert max(sizes) < 1200, sizes
    assert estimate_tokens(result.messages) < 1200
    roles = [m["role"] for m in result.messages]
    assert roles[0] == "user" and result.messages[0]["content"] == "read every page"  # the task survives
    for i, m in enumerate(result.messages):  # no tool result is ever separated from its call
        if m["role"] == "tool":
            callers = [p for p in result.messages[:i] if p["role"] == "assistant"
                       and any(tc["id"] == m["tool_call_id"] for tc in p.get("tool_calls") or [])]
            assert callers, json.dumps(result.messages)[:400]


async def test_compactor_keeps_a_long_tool_loop_bounded_on_the_anthropic_wire_too():
    replies = [anthropic_calls((f"u{i}", "fetch", {"page": i})) for i in range(19)] + [anthropic_text("all read")]
    transport = RecordingTransport(*replies)
    c = create_client(base_url="http://llm.invalid", style="anthropic", model="m", api_key="k", max_turns=25,
                      http_transport=transport,
                      hooks={"before_llm": compactor(max_tokens=600, summarize=lambda older: f"{len(older)} earlier")})
    result = await c.run("read every page", kit(make_tool("fetch", "y" * 1200)))
    assert result.status == "done" and result.turns == 20
    assert max(estimate_tokens(p["messages"]) for p in transport.payloads) < 1200
    wire = transport.payloads[-1]["messages"]
    assert wire[0] == {"role": "user", "content": "read every page"}
    used = set()
    for m in wire:  # every tool_result block follows the tool_use that asked for it
        for b in m["content"] if isinstance(m["content"], list) else []:
            if b.get("type") == "tool_use":
                used.add(b["id"])
            if b.get("type") == "tool_result":
                assert b["tool_use_id"] in used


async def test_compactor_bounds_a_tool_loop_in_a_later_user_turn_after_an_earlier_summary():
    msgs = [{"role": "system", "content": "SOUL"},
            {"role": "system", "content": "[Summary of earlier conversation]\nolder talk"},
            {"role": "user", "content": "now read the pages"}]
    for i in range(6):
        msgs += [{"role": "assistant", "content": None, "tool_calls": [
                     {"id": f"c{i}", "type": "function", "function": {"name": "fetch", "arguments": "{}"}}]},
                 {"role": "tool", "tool_call_id": f"c{i}", "content": "z" * 1200}]
    out = await compactor(max_tokens=600, summarize=lambda older: f"{len(older)} earlier")({"messages": msgs})
    result = out["messages"]
    assert result[:3] == [
        msgs[0],
        msgs[2],
        {"role": "system", "content": "[Summary of earlier conversation]\n11 earlier"},
    ]
    assert result[3:] == msgs[-2:]
    assert estimate_tokens(result) <= 600


def test_021_module_imports_work_and_construct_nothing():
    import subprocess
    import sys

    code = (
        "import sys\n"
        "from toolnexus.classifier import create_classifier, NoulQuestion, Decision, ClassifierError\n"
        "from toolnexus.judge import noul, ask, gate, Rule, Policy, Tape\n"
        "from toolnexus.judge_batteries import ToolGuardClassifier, ContentGuardBlocked, ROLE_TOOL_GUARD\n"
        "from toolnexus.content import image, file, audio, text, encode_part\n"
        "from toolnexus.acp import load_acp, ACPOptions, ACPError\n"
        "import toolnexus\n"
        "assert toolnexus.create_classifier is create_classifier\n"
        "assert toolnexus.ToolGuardClassifier is ToolGuardClassifier\n"
        "print(sorted(m for m in ('httpx', 'mcp', 'toolnexus.client', 'urllib.request') if m in sys.modules))\n"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout
    assert out.strip() == "[]"


def test_client_has_no_classifier_parameter():
    import inspect

    from toolnexus.client import Client

    assert "classifier" not in inspect.signature(Client.__init__).parameters


def _responses_call(i: int) -> dict:
    return {"id": f"resp_{i}", "object": "response", "status": "completed",
            "output": [{"type": "function_call", "id": f"fc_{i}", "call_id": f"call_{i}", "name": "fetch",
                        "arguments": json.dumps({"page": i}), "status": "completed"}],
            "usage": {"input_tokens": 6, "output_tokens": 2, "total_tokens": 8}}


def _responses_text(text: str) -> dict:
    return {"id": "resp_end", "object": "response", "status": "completed",
            "output": [{"type": "message", "id": "msg_end", "role": "assistant", "status": "completed",
                        "content": [{"type": "output_text", "text": text, "annotations": []}]}],
            "usage": {"input_tokens": 6, "output_tokens": 2, "total_tokens": 8}}


async def test_compactor_keeps_a_long_tool_loop_bounded_on_the_responses_wire_too():
    """Responses assistant turns carry `function_call` output items: they are cut points between rounds too."""
    transport = RecordingTransport(*[_responses_call(i) for i in range(19)], _responses_text("all read"))
    c = create_client(base_url="http://llm.invalid", style="responses", model="m", api_key="k", max_turns=25,
                      http_transport=transport,
                      hooks={"before_llm": compactor(max_tokens=600, summarize=lambda older: f"{len(older)} earlier")})
    result = await c.run("read every page", kit(make_tool("fetch", "y" * 1200)))
    assert result.status == "done" and result.text == "all read" and result.turns == 20
    assert max(estimate_tokens(p["input"]) for p in transport.payloads) < 1200
    wire = transport.payloads[-1]["input"]
    assert wire[0] == {"role": "user", "content": "read every page"}
    called = set()
    for item in wire:  # every function_call_output follows the function_call that asked for it
        if item.get("type") == "function_call":
            called.add(item["call_id"])
        if item.get("type") == "function_call_output":
            assert item["call_id"] in called
