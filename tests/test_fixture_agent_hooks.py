"""Fixture agent-hooks (H1–H6): `hooks` and `on_metric` reach each handle's client verbatim,
resolved def over runtime (replace, never merge); a compactor attached per def compacts an
agent run, and a suspended turn discards its compaction with the rest of the turn."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from support.agent_fixture import fixture_tools
from support.mock_llm import FIXTURES, MockLLM
from toolnexus.agents import AgentDef, AgentRuntime, compactor
from toolnexus.agents.clock import VirtualClock
from toolnexus.client import create_client

FX = json.loads(Path(FIXTURES / "agent-hooks" / "fixture.json").read_text(encoding="utf-8"))
SCENARIOS = {s["id"]: s for s in FX["scenarios"]}
USAGE = {"prompt_tokens": 30, "completion_tokens": 10, "total_tokens": 40}
SECRET_TOOL = {"check_secret": {"inputSchema": {"type": "object", "properties": {}}}}


def mock() -> MockLLM:
    return MockLLM({
        "style": "openai",
        "usagePerCall": USAGE,
        "scripts": {
            "m-plain": [{"always": True, "text": "ok"}],
            "m-suspend": [{"whenToolMsgs": 0, "toolCalls": [{"name": "check_secret", "args": {}}]}],
        },
    })


def runtime(transport: MockLLM, defs: list[AgentDef], **opts: Any) -> AgentRuntime:
    return AgentRuntime(registry={d.name: d for d in defs}, transport=transport, clock=VirtualClock(), **opts)


async def one_turn(rt: AgentRuntime, name: str, prompt: str = "go"):
    h = rt.spawn(rt.root, name)
    rt.wake(h, prompt)
    return h, await rt.wait(h)


def seeded_transcript() -> list[dict[str, Any]]:
    gen = SCENARIOS["H5"]["given"]["generator"]
    msgs = [dict(gen["leading"])]
    for _ in range(gen["pairs"]):
        msgs.append({"role": "user", "content": "q" * 200})
        msgs.append({"role": "assistant", "content": "a" * 200})
    return msgs


def compactor_hooks() -> dict[str, Any]:
    opts = SCENARIOS["H5"]["given"]["compactorOptions"]
    return {"before_llm": compactor(max_tokens=opts["maxTokens"], keep_tail=opts["keepTail"],
                                    summarize=lambda older: "SUMMARY-OF-HEAD")}


async def test_h1_runtime_hooks_rewrite_reaches_the_provider_payload():
    ran = []

    def inject(ev):
        ran.append(ev["turn"])
        return {"messages": [*ev["messages"], {"role": "system", "content": "INJECTED-BY-HOOK"}]}

    transport = mock()
    rt = runtime(transport, [AgentDef("a", "a", "soul", "m-plain")], hooks={"before_llm": inject})
    try:
        _, result = await one_turn(rt, "a")
        assert result.status == "done"
        assert ran == [0]
        assert any(m.get("content") == "INJECTED-BY-HOOK" for m in transport.requests[0]["messages"])
    finally:
        await rt.close(rt.root)


async def test_h2_runtime_on_metric_receives_the_same_events_as_a_direct_client():
    events: list[dict[str, Any]] = []
    rt = runtime(mock(), [AgentDef("a", "a", "soul", "m-plain")], on_metric=events.append)
    try:
        await one_turn(rt, "a")
    finally:
        await rt.close(rt.root)
    direct: list[dict[str, Any]] = []
    client = create_client(base_url="http://mock.local", style="openai", model="m-plain", api_key="unused",
                           system_prompt="soul", http_transport=mock(), on_metric=direct.append)
    await client.ask("go", None, id="x")
    assert [e["event"] for e in events] == SCENARIOS["H2"]["expect"]["eventsReceived"]
    assert [sorted(e) for e in events] == [sorted(e) for e in direct]


async def test_h3_a_def_hooks_replace_the_runtime_hooks_for_that_agent_only():
    fired = {"runtime": 0, "a": 0}

    def counter(key):
        def hook(ev):
            fired[key] += 1
        return hook

    defs = [AgentDef("a", "a", "", "m-plain", hooks={"before_llm": counter("a")}), AgentDef("b", "b", "", "m-plain")]
    rt = runtime(mock(), defs, hooks={"before_llm": counter("runtime")})
    try:
        await one_turn(rt, "a")
        await one_turn(rt, "b")
    finally:
        await rt.close(rt.root)
    expect = SCENARIOS["H3"]["expect"]
    assert fired == {"a": expect["agentAHookFired"], "runtime": expect["runtimeHookFired"]}


async def test_h4_hooks_and_on_metric_resolve_independently():
    fired = {"runtime": 0, "def": 0}
    events: list[dict[str, Any]] = []
    defs = [
        AgentDef("a", "a", "", "m-plain", hooks={"before_llm": lambda ev: fired.__setitem__("def", fired["def"] + 1)})
    ]
    rt = runtime(
        mock(), defs, hooks={"before_llm": lambda ev: fired.__setitem__("runtime", 1)}, on_metric=events.append
    )
    try:
        await one_turn(rt, "a")
    finally:
        await rt.close(rt.root)
    assert (fired["def"] == 1 and fired["runtime"] == 0) is SCENARIOS["H4"]["expect"]["usesDefHooks"]
    assert bool(events) is SCENARIOS["H4"]["expect"]["usesRuntimeOnMetric"]


async def test_h5_a_per_def_compactor_compacts_the_agent_run():
    transport = mock()
    rt = runtime(transport, [AgentDef("a", "a", "SOUL-VERBATIM", "m-plain", hooks=compactor_hooks())])
    try:
        h = rt.spawn(rt.root, "a")
        seeded = seeded_transcript()
        await rt.conversation_store.save(h.id, seeded)
        expect = SCENARIOS["H5"]["expect"]
        assert len(await rt.conversation_store.get(h.id)) == expect["preRunStoredMessages"]
        rt.wake(h, "next question")
        result = await rt.wait(h)
        assert result.status == "done"
        wire = transport.requests[0]["messages"]
        assert len(wire) < expect["preRunStoredMessages"]
        assert wire[0]["content"] == expect["firstWireMessageContent"]
        assert any(expect["wireTranscriptContains"] in (m.get("content") or "") for m in wire)
        assert wire[-1] == {"role": "user", "content": "next question"}
    finally:
        await rt.close(rt.root)


async def test_h6_a_suspended_compacted_turn_is_rewound_to_the_full_checkpoint():
    transport = mock()
    tools = list(fixture_tools(SECRET_TOOL).values())
    rt = runtime(transport, [AgentDef("a", "a", "SOUL-VERBATIM", "m-suspend", tools=tools, hooks=compactor_hooks())])
    try:
        h = rt.spawn(rt.root, "a")
        seeded = seeded_transcript()
        await rt.conversation_store.save(h.id, seeded)
        rt.wake(h, "next question")
        result = await rt.wait(h)
        expect = SCENARIOS["H6"]["expect"]
        assert result.status == expect["status"]
        stored = await rt.conversation_store.get(h.id)
        assert len(stored) == expect["storedMessagesAfter"]
        assert stored == seeded
        assert any("SUMMARY-OF-HEAD" in (m.get("content") or "") for m in transport.requests[0]["messages"])
    finally:
        await rt.close(rt.root)


async def test_unset_hooks_and_on_metric_leave_the_wire_and_store_identical_to_a_bare_client():
    transport = mock()
    rt = runtime(transport, [AgentDef("a", "a", "soul", "m-plain")])
    h, result = await one_turn(rt, "a")
    stored = await rt.conversation_store.get(h.id)
    await rt.close(rt.root)

    bare_transport = mock()
    client = create_client(base_url="http://mock.local", style="openai", model="m-plain", api_key="unused",
                           system_prompt="soul", http_transport=bare_transport)
    bare = await client.ask("go", None, id=h.id)
    assert transport.requests == bare_transport.requests
    assert stored == await client.conversation_store.get(h.id)
    assert result.text == bare.text
    assert [line.split(": ", 1)[1] for line in rt.trace if line.startswith(h.id + ":")] == [
        "spawned (depth 1, tokens inf)",
        "idle→running (wake)",
        "running→idle (done, turns=1, tokens=40)",
        "idle→closed (closed)",
    ]
