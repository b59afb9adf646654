"""The level-1 surface (`agent`, `Agent.run`, `registry`, `as_tool`) and the `task` tool."""

from __future__ import annotations

import asyncio
from typing import Any

import pytest

from support.agent_kit import calls, lookup_tool, make_runtime, scripted, secret_tool, text
from toolnexus.agents import AgentDef, AgentRuntime, agent
from toolnexus.client import create_client
from toolnexus.toolkit import create_toolkit
from toolnexus.types import Answer, pending_of

LLM = {"base_url": "http://mock.local", "style": "openai", "model": "m-inherit", "api_key": "unused"}
ASKER = [
    {"whenNoToolMsgContains": "secret-token", "toolCalls": calls(("check_secret", {}))},
    {"whenToolMsgContains": "secret-token", "text": "asker-done: secret-token"},
]


def test_runtime_constructor_rejects_conflicting_model_sources_with_pinned_text():
    with pytest.raises(ValueError) as both:
        AgentRuntime(registry={}, transport=object(), in_process=lambda r: {})
    assert (
        str(both.value) == "toolnexus.agents: `transport` and `in_process` are mutually exclusive — set one, not both"
    )
    with pytest.raises(ValueError) as llm:
        AgentRuntime(registry={}, llm={"model": "x"}, in_process=lambda r: {})
    assert str(llm.value) == (
        "toolnexus.agents: `llm` and `in_process` are mutually exclusive — "
        "an in-process model has no wire endpoint for `llm` to point at"
    )


def test_unknown_llm_keys_are_rejected_instead_of_silently_dropped():
    with pytest.raises(ValueError, match="unknown llm key\\(s\\) 'headers', 'retries'"):
        AgentRuntime(registry={}, llm={"model": "m", "headers": {}, "retries": 3})


def test_root_is_a_fixed_handle_that_never_runs():
    rt = AgentRuntime(registry={})
    assert rt.root.id == "root" and rt.root.depth == 0 and rt.root.parent is None
    assert (rt.root.defn.name, rt.root.defn.description, rt.root.defn.model) == ("root", "runtime root", "none")
    assert rt.wake(rt.root).ok is False
    assert rt.list() == []


async def test_run_rejects_unknown_runtime_options_but_accepts_in_process():
    a = agent("solo", does="answers")
    with pytest.raises(TypeError, match="unknown runtime option\\(s\\) 'retries'"):
        await a.run("hi", retries=2)
    seen: list[str] = []

    def generate(request: dict[str, Any]) -> dict[str, Any]:
        seen.append(request["model"])
        return {"content": "in-process hello", "usage": {"prompt_tokens": 2, "completion_tokens": 1}}

    r = await a.run("hi", in_process=generate)
    assert (r.status, r.text, r.total_tokens, r.turns) == ("done", "in-process hello", 3, 1)
    assert seen == ["inherit"]  # no llm["model"]: the literal "inherit" is sent
    assert r.runtime is not None and r.runtime.root.state == "closed"


async def test_model_inherit_takes_llm_model_and_an_explicit_model_wins():
    transport = scripted({"m-inherit": text("inherited"), "m-own": text("own")})
    assert (await agent("a", does="x").run("go", transport=transport, llm=LLM)).text == "inherited"
    assert (await agent("b", does="x", model="m-own").run("go", transport=transport, llm=LLM)).text == "own"


async def test_a_failing_run_is_an_error_result_not_an_exception():
    r = await agent("x", does="y").run("go", transport=scripted({}), llm=LLM)
    assert (r.status, r.is_error) == ("error", True)
    assert "no script for model 'm-inherit'" in r.text
    assert r.runtime is not None and r.runtime.root.state == "closed"


def test_registry_maps_the_team_graph_first_visit_wins(tmp_path):
    soul = tmp_path / "soul.md"
    soul.write_text("SOUL FROM FILE", encoding="utf-8")
    leaf = agent("leaf", does="leaf work", soul="leaf soul")
    shadow = agent("leaf", does="never seen")
    mid = agent("mid", does="middle", team=[leaf], guardrails=[lambda ev: "no"])
    top = agent("top", does="top", soul_file=str(soul), team=[mid, shadow], model="m-top")
    reg = top.registry()
    assert list(reg) == ["top", "mid", "leaf"]
    assert reg["top"].system_prompt == "SOUL FROM FILE" and reg["top"].model == "m-top"
    assert reg["top"].task_targets == ["mid", "leaf"]
    assert reg["leaf"].description == "leaf work" and reg["leaf"].model == "inherit"
    assert reg["mid"].hooks["before_tool"] is not None
    assert reg["leaf"].hooks is None


async def test_as_tool_returns_the_final_text_and_usage_metadata():
    transport = scripted({"m-inherit": text("sub answer")})
    tool = agent("helper", does="helps").as_tool(transport=transport, llm=LLM)
    assert (tool.name, tool.description, tool.source) == ("helper", "helps", "native")
    assert tool.input_schema == {"type": "object", "properties": {"prompt": {"type": "string"}}, "required": ["prompt"]}
    result = await tool.execute({"prompt": "go"})
    assert (result.output, result.is_error) == ("sub answer", False)
    assert result.metadata == {"agent": "helper", "turns": 1, "totalTokens": 40}


async def test_as_tool_surfaces_a_suspension_to_the_outer_loop_and_resumes_on_the_answer():
    inner = scripted({"m-inherit": ASKER})
    helper = agent("helper", does="needs approval", uses={"tools": [secret_tool()]})
    tool = helper.as_tool(transport=inner, llm=LLM)

    asked: list[Any] = []

    def approve(request):
        asked.append(request)
        return Answer(id=request.id, ok=True)

    outer = scripted({"m-outer": [
        {"whenToolMsgs": 0, "toolCalls": calls(("helper", {"prompt": "get it"}))},
        {"whenToolMsgs": ">=1", "text": "outer: <last tool msg content>"},
    ]})
    client = create_client(base_url="http://mock.local", style="openai", model="m-outer", api_key="unused",
                           http_transport=outer, wait_for=approve)
    toolkit = await create_toolkit(builtins=False, extra_tools=[tool])
    result = await client.run("go", toolkit)
    assert [r.kind for r in asked] == ["approval"]
    assert asked[0].data["path"] == ["root", "helper.1"]
    assert result.text == "outer: asker-done: secret-token"
    assert len(inner.calls_for("m-inherit")) == 3


async def test_as_tool_pending_without_an_outer_interpreter_halts_the_outer_run():
    tool = agent("helper", does="x", uses={"tools": [secret_tool()]}).as_tool(
        transport=scripted({"m-inherit": ASKER}), llm=LLM
    )
    first = await tool.execute({"prompt": "get it"})
    request = pending_of(first)
    assert first.is_error and request is not None and first.output == "approve secret access?"
    assert first.metadata["agent"] == "helper"
    from toolnexus.types import ToolContext

    resumed = await tool.execute({"prompt": "get it"}, ToolContext(answer=Answer(id=request.id, ok=True)))
    assert (resumed.output, resumed.is_error) == ("asker-done: secret-token", False)
    stale = await tool.execute({"prompt": "get it"}, ToolContext(answer=Answer(id=request.id, ok=True)))
    assert stale.is_error and "no suspended run holds request" in stale.output


async def test_as_tool_closes_the_oldest_parked_run_before_the_overflowing_call_returns(monkeypatch):
    from toolnexus.agents import _surface as surface
    from toolnexus.types import ToolContext

    monkeypatch.setattr(surface, "MAX_PARKED_RUNS", 1)
    closed: list[str] = []
    helper = agent("helper", does="x", uses={"tools": [secret_tool()]}, on_close=lambda h, why: closed.append(why))
    tool = helper.as_tool(transport=scripted({"m-inherit": ASKER}), llm=LLM)
    first = pending_of(await tool.execute({"prompt": "one"}))
    assert first is not None and closed == []
    assert pending_of(await tool.execute({"prompt": "two"})) is not None
    assert closed == ["interrupted"]  # the oldest parked run is closed by the time the call returns
    evicted = await tool.execute({"prompt": "one"}, ToolContext(answer=Answer(id=first.id, ok=True)))
    assert evicted.is_error and "no suspended run holds request" in evicted.output


async def test_guardrails_compose_over_runtime_hooks_instead_of_replacing_them():
    traced: list[int] = []
    transport = scripted({"m-inherit": [
        {"whenToolMsgs": 0, "toolCalls": calls(("lookup", {"q": "x"}))},
        {"whenToolMsgs": ">=1", "text": "saw: <first tool msg content>"},
    ]})
    guarded = agent("g", does="x", uses={"tools": [lookup_tool()]}, guardrails=[lambda ev: "lookups are off"])
    r = await guarded.run(
        "go", transport=transport, llm=LLM, hooks={"before_llm": lambda ev: traced.append(ev["turn"])}
    )
    assert r.text == "saw: denied: lookups are off"
    assert traced == [0, 1]  # the runtime-wide tracer still ran


async def test_cancelling_run_closes_its_runtime():
    transport = scripted({"m-inherit": [{"always": True, "text": "x", "blocksUntil": "released-or-aborted"}]})
    closed: list[str] = []
    a = agent("slow", does="x", on_close=lambda h, reason: closed.append(reason))
    task = asyncio.ensure_future(a.run("go", transport=transport, llm=LLM))
    try:
        assert await asyncio.to_thread(transport.blocked.wait, 10)
        task.cancel()
        with pytest.raises(asyncio.CancelledError):
            await task
        assert closed == ["interrupted"]
    finally:
        transport.release()


# --------------------------------------------------------------------------- the task tool


def team_runtime(scripts, **defs_opts):
    transport = scripted(scripts)
    defs = [AgentDef("coordinator", "splits work", "", "m-coord", task_targets=["explore", "ghost"]),
            AgentDef("explore", "read-only research", "", "m-explore", tools=[lookup_tool()])]
    return make_runtime(defs, transport), transport


async def test_task_tool_description_lists_registered_team_members_and_refuses_outsiders(exits):
    rt, transport = team_runtime({
        "m-coord": [
            {"whenToolMsgs": 0, "toolCalls": calls(("task", {"agent": "stranger", "prompt": "p"}))},
            {"whenToolMsgs": ">=1", "text": "got: <last tool msg content>"},
        ],
    })
    exits.push_async_callback(rt.close, rt.root)
    h = rt.spawn(rt.root, "coordinator")
    rt.wake(h, "go")
    r = await rt.wait(h)
    assert r.text == "got: agent \"stranger\" not in this agent's team (explore, ghost)"
    tools = transport.requests[0]["tools"]
    assert [t["function"]["name"] for t in tools] == ["task"]
    assert tools[0]["function"]["description"] == (
        "Delegate a subtask to an isolated subagent. Available agents — explore: read-only research")
    assert tools[0]["function"]["parameters"] == {
        "type": "object", "properties": {"agent": {"type": "string"}, "prompt": {"type": "string"}},
        "required": ["agent", "prompt"]}


async def test_a_new_wake_reruns_a_task_instead_of_reattaching_to_a_stale_child(exits):
    task_call = {"tool_calls": [{"id": "t1", "name": "task", "arguments": {"agent": "explore", "prompt": "find A"}}]}
    coordinator = iter([task_call, {"content": "first"}, task_call, {"content": "second"}])
    explored = iter(["explore run 1", "explore run 2"])

    def generate(request):
        return next(coordinator) if request["model"] == "m-coord" else {"content": next(explored)}

    defs = [AgentDef("coordinator", "splits work", "", "m-coord", task_targets=["explore"]),
            AgentDef("explore", "read-only research", "", "m-explore")]
    rt = make_runtime(defs, in_process=generate)
    exits.push_async_callback(rt.close, rt.root)
    h = rt.spawn(rt.root, "coordinator")
    for expected in ("first", "second"):
        rt.wake(h, "go")
        assert (await rt.wait(h)).text == expected
    assert [c.id for c in h.children] == ["root/coordinator.1/explore.1", "root/coordinator.1/explore.2"]
    assert [c.last_result.text for c in h.children] == ["explore run 1", "explore run 2"]
    assert not any("REATTACH" in line for line in rt.trace)


async def test_children_without_a_team_get_no_task_tool(exits):
    rt, transport = team_runtime({"m-explore": text("plain")})
    exits.push_async_callback(rt.close, rt.root)
    h = rt.spawn(rt.root, "explore")
    rt.wake(h, "go")
    await rt.wait(h)
    assert [t["function"]["name"] for t in transport.requests[0]["tools"]] == ["lookup"]
