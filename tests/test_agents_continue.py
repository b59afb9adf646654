"""`resume_mode="continue"`: a durable resume continues the halted turn instead of replaying it
(agents.md beyond #7), so a leaf's own side-effecting tools do not run again."""

from __future__ import annotations

from typing import Any

import pytest

from support.agent_fixture import transitions_of
from support.agent_kit import calls, delegate, gate_tool, make_runtime, scripted
from toolnexus.agents import AgentDef, InboxItem, agent
from toolnexus.client import ResumeError
from toolnexus.types import Answer, Tool, ToolResult, pending

# bump (a side effect) → gate(1) (suspends) → final text. Rule order makes it valid in both modes.
LEAF = [
    {"whenNoToolMsgContains": "bumped", "toolCalls": calls(("bump", {}))},
    {"whenNoToolMsgContains": "gated 1 ok", "toolCalls": calls(("gate", {"x": 1}))},
    {"always": True, "text": "leaf done: <last tool msg content>"},
]


class Counter:
    def __init__(self) -> None:
        self.runs = 0

    def tool(self) -> Tool:
        async def execute(args: Any = None, ctx: Any = None) -> ToolResult:
            self.runs += 1
            return ToolResult(f"bumped {self.runs}", False)

        return Tool("bump", "a side effect", {"type": "object", "properties": {}}, "native", execute)


def leaf_def(counter: Counter, log: list, model: str = "m-leaf", **kw: Any) -> AgentDef:
    return AgentDef("leaf", "bumps then asks", "", model, tools=[counter.tool(), gate_tool(log)], **kw)


async def start(rt, name: str = "leaf", prompt: str = "go"):
    h = rt.spawn(rt.root, name)
    rt.wake(h, prompt)
    return h, await rt.wait(h)


# The gate runs twice in both modes: it asks, then runs once with the answer (a replay binds the answer
# to the halted call without running its asking branch again).
@pytest.mark.parametrize("mode,bumps,model_calls,gate_runs", [("replay", 2, 5, 2), ("continue", 1, 3, 2)])
async def test_a_side_effect_runs_again_only_in_replay_mode(mode, bumps, model_calls, gate_runs, exits):
    counter, log = Counter(), []
    transport = scripted({"m-leaf": LEAF})
    rt = make_runtime([leaf_def(counter, log)], transport, resume_mode=mode)
    exits.push_async_callback(rt.close, rt.root)
    h, first = await start(rt)
    assert first.status == "pending" and counter.runs == 1
    before = (h.turns_total, h.usage_total)

    final = await rt.resume(Answer(id=first.pending.id, ok=True))

    assert (final.status, final.text) == ("done", "leaf done: gated 1 ok")
    assert counter.runs == bumps
    assert len(transport.calls_for("m-leaf")) == model_calls
    assert len(log) == gate_runs and log[-1] == (1, first.pending.id)
    assert h.turns_total > before[0] and h.usage_total > before[1]
    assert final.turns == model_calls and final.total_tokens == 40 * model_calls


async def test_continue_keeps_earlier_results_and_does_not_re_ask_for_the_halted_call(exits):
    counter, log = Counter(), []
    transport = scripted({"m-leaf": LEAF})
    rt = make_runtime([leaf_def(counter, log, resume_mode="continue")], transport)
    exits.push_async_callback(rt.close, rt.root)
    h, first = await start(rt)
    halted = await rt.conversation_store.get(h.id)
    assert halted[-1]["role"] == "tool" and halted[-1]["content"] == "approve 1?"  # not rewound
    assert h.pending_mode == "continue"

    await rt.resume(Answer(id=first.pending.id, ok=True))

    after = await rt.conversation_store.get(h.id)
    assert after[: len(halted) - 1] == halted[:-1]  # byte for byte up to the halted slot
    assert after[len(halted) - 1]["content"] == "gated 1 ok"
    resumed_requests = transport.calls_for("m-leaf")[2:]
    assert len(resumed_requests) == 1  # one LLM call after the resume: the final answer
    assert resumed_requests[0]["messages"][-1]["content"] == "gated 1 ok"
    assert transitions_of(rt.trace, h.id) == [
        "idle→running", "running→suspended", "suspended→idle", "idle→running", "running→idle"]


@pytest.mark.parametrize("boss_mode,leaf_mode", [("continue", "continue"), ("replay", "continue"),
                                                 ("continue", "replay"), ("replay", "replay")])
async def test_the_cascade_reattaches_in_every_mode_mix(boss_mode, leaf_mode, exits):
    counter, log = Counter(), []
    transport = scripted({"m-boss": delegate("leaf", "do it", "boss: <last tool msg content>"), "m-leaf": LEAF})
    boss = AgentDef("boss", "delegates", "", "m-boss", task_targets=["leaf"], resume_mode=boss_mode)
    rt = make_runtime([boss, leaf_def(counter, log, resume_mode=leaf_mode)], transport)
    exits.push_async_callback(rt.close, rt.root)
    b, first = await start(rt, "boss")
    assert first.status == "pending" and first.pending.data["path"] == ["root", "boss.1"]

    final = await rt.resume(Answer(id=first.pending.id, ok=True))

    assert (final.status, final.text) == ("done", "boss: leaf done: gated 1 ok")
    assert [c.id for c in b.children] == ["root/boss.1/leaf.1"] and b.children[0].state == "closed"
    assert counter.runs == (1 if leaf_mode == "continue" else 2)
    boss_calls = 2 if boss_mode == "continue" else 3
    leaf_calls = 3 if leaf_mode == "continue" else 5
    assert len(transport.calls_for("m-boss")) == boss_calls and b.turns_total == boss_calls
    assert final.total_tokens == 40 * (boss_calls + leaf_calls) == rt.inspect(b).tokens
    assert any(line.startswith(f"{b.id}: task replay → REATTACH to root/boss.1/leaf.1") for line in rt.trace)


async def test_a_child_that_suspends_again_relays_its_new_request_up_a_continued_parent(exits):
    counter, log = Counter(), []
    two_gates = [
        {"whenNoToolMsgContains": "bumped", "toolCalls": calls(("bump", {}))},
        {"whenNoToolMsgContains": "gated 1 ok", "toolCalls": calls(("gate", {"x": 1}))},
        {"whenNoToolMsgContains": "gated 2 ok", "toolCalls": calls(("gate", {"x": 2}))},
        {"always": True, "text": "leaf done: <last tool msg content>"},
    ]
    transport = scripted({"m-boss": delegate("leaf", "do it", "boss: <last tool msg content>"), "m-leaf": two_gates})
    boss = AgentDef("boss", "delegates", "", "m-boss", task_targets=["leaf"])
    rt = make_runtime([boss, leaf_def(counter, log)], transport, resume_mode="continue")
    exits.push_async_callback(rt.close, rt.root)
    b, first = await start(rt, "boss")
    leaf = b.children[0]

    second = await rt.resume(Answer(id=first.pending.id, ok=True))

    assert second.status == "pending" and second.pending.prompt == "approve 2?"
    assert second.pending.data["path"] == ["root", "boss.1"]
    assert b.state == leaf.state == "suspended" and b.pending_req.id == leaf.pending_req.id == second.pending.id
    assert len(transport.calls_for("m-boss")) == 1  # the boss was not run: its task call is still open
    final = await rt.resume(Answer(id=second.pending.id, ok=True))
    assert (final.status, final.text) == ("done", "boss: leaf done: gated 2 ok")
    assert counter.runs == 1 and len(b.children) == 1 and len(transport.calls_for("m-boss")) == 2


async def test_a_parent_parked_on_its_own_request_is_not_answered_by_its_childs_answer(exits):
    counter, boss_log, leaf_log = Counter(), [], []
    transport = scripted({
        "m-boss": [
            {"whenToolMsgs": 0, "toolCalls": calls(("gate", {"x": 9}), ("task", {"agent": "leaf", "prompt": "do it"}))},
            {"whenToolMsgs": ">=1", "text": "boss: <join all tool msg contents with ' + '>"},
        ],
        "m-leaf": LEAF,
    })
    boss = AgentDef("boss", "gates and delegates", "", "m-boss", task_targets=["leaf"], tools=[gate_tool(boss_log)])
    rt = make_runtime([boss, leaf_def(counter, leaf_log)], transport, resume_mode="continue")
    exits.push_async_callback(rt.close, rt.root)
    b, first = await start(rt, "boss")
    leaf = b.children[0]
    assert first.pending.prompt == "approve 9?" and leaf.state == "suspended"

    still = await rt.resume(Answer(id=leaf.pending_req.id, ok=True))  # the child's own request

    assert still.status == "pending" and still.pending.id == first.pending.id  # the boss's gate is still open
    assert b.state == "suspended" and leaf.state == "idle" and leaf.last_result.status == "done"
    assert boss_log == [(9, None)]  # the boss's gate never ran with an answer
    final = await rt.resume(Answer(id=first.pending.id, ok=True))
    assert (final.status, final.text) == ("done", "boss: gated 9 ok + leaf done: gated 1 ok")
    assert boss_log == [(9, None), (9, first.pending.id)] and len(b.children) == 1 and counter.runs == 1


def schema_gate() -> Tool:
    async def execute(args: Any = None, ctx: Any = None) -> ToolResult:
        answer = getattr(ctx, "answer", None)
        if answer is not None and answer.ok:
            return ToolResult(f"code {answer.data['code']}", False)
        schema = {"type": "object", "properties": {"code": {"type": "string"}}, "required": ["code"]}
        return pending(kind="input", prompt="enter the code", data={"schema": schema})

    return Tool("ask_code", "asks for a code", {"type": "object", "properties": {}}, "native", execute)


async def test_a_refused_continuation_leaves_the_handle_suspended_on_the_same_request(exits):
    transport = scripted({"m-leaf": [
        {"whenNoToolMsgContains": "code ", "toolCalls": calls(("ask_code", {}))},
        {"always": True, "text": "got <last tool msg content>"},
    ]})
    rt = make_runtime([AgentDef("leaf", "asks", "", "m-leaf", tools=[schema_gate()])], transport,
                      resume_mode="continue")
    exits.push_async_callback(rt.close, rt.root)
    h, first = await start(rt)
    turns = h.turns_total

    with pytest.raises(ResumeError, match="schema"):
        await rt.resume(Answer(id=first.pending.id, ok=True, data={"wrong": 1}))

    assert h.state == "suspended" and h.pending_req.id == first.pending.id and h.turns_total == turns
    assert (await rt.wait(h)).status == "pending"
    final = await rt.resume(Answer(id=first.pending.id, ok=True, data={"code": "42"}))
    assert (final.status, final.text) == ("done", "got code 42")


async def test_interrupting_a_continued_suspension_keeps_the_transcript_and_consumes_the_drained_inbox(exits):
    counter, log = Counter(), []
    rt = make_runtime([leaf_def(counter, log)], scripted({"m-leaf": LEAF}), resume_mode="continue")
    exits.push_async_callback(rt.close, rt.root)
    h = rt.spawn(rt.root, "leaf")
    rt.post(h, InboxItem("external", "chat", "hello"))
    rt.wake(h, "go")
    assert (await rt.wait(h)).status == "pending"
    assert h.drained == []  # the item is in the kept transcript
    rt.interrupt(h)
    assert h.state == "idle" and h.inbox == [] and h.pending_req is None
    stored = await rt.conversation_store.get(h.id)
    assert any("hello" in str(m.get("content")) for m in stored) and stored[-1]["content"] == "approve 1?"


async def test_resume_mode_is_validated_and_reachable_from_the_level_one_surface(exits):
    with pytest.raises(ValueError, match="resume_mode"):
        make_runtime([], resume_mode="rewind")
    with pytest.raises(ValueError, match="resume_mode"):
        make_runtime([AgentDef("x", "", "", "m", resume_mode="later")])
    with pytest.raises(ValueError, match="resume_mode"):
        agent("x", does="d", resume_mode="sometimes")

    counter, log = Counter(), []
    a = agent("leaf", does="bumps then asks", uses={"tools": [counter.tool(), gate_tool(log)]}, model="m-leaf")
    first = await a.run("go", transport=scripted({"m-leaf": LEAF}), resume_mode="continue")
    exits.push_async_callback(first.runtime.close, first.runtime.root)
    assert first.status == "pending" and first.runtime.resume_mode == "continue"
    final = await first.runtime.resume(Answer(id=first.pending.id, ok=True))
    assert final.text == "leaf done: gated 1 ok" and counter.runs == 1
