"""Durable suspension in a team: escalation to the root, resume routing, binding and cascade."""

from __future__ import annotations

import json
from typing import Any

import pytest

from support.agent_fixture import transitions_of
from support.agent_kit import calls, delegate, gate_tool, make_runtime, scripted, secret_tool
from toolnexus.agents import AgentDef
from toolnexus.client import ResumeError
from toolnexus.types import Answer

LEAF_SCRIPT = [
    {"whenNoToolMsgContains": "secret-token", "toolCalls": calls(("check_secret", {}))},
    {"whenToolMsgContains": "secret-token", "text": "leaf: secret-token"},
]


def three_level():
    transport = scripted({
        "m-top": delegate("mid", "delegate", "top: <last tool msg content>"),
        "m-mid": delegate("leaf", "dig", "mid: <last tool msg content>"),
        "m-leaf": LEAF_SCRIPT,
    })
    defs = [
        AgentDef("top", "top level", "", "m-top", task_targets=["mid"]),
        AgentDef("mid", "middle", "", "m-mid", task_targets=["leaf"]),
        AgentDef("leaf", "asks for approval", "", "m-leaf", tools=[secret_tool()]),
    ]
    return make_runtime(defs, transport), transport


async def start(rt, name: str, prompt: str = "go"):
    h = rt.spawn(rt.root, name)
    rt.wake(h, prompt)
    return h, await rt.wait(h)


async def test_three_level_team_suspends_at_the_leaf_and_resumes_without_duplicates(exits):
    rt, _ = three_level()
    exits.push_async_callback(rt.close, rt.root)
    top, first = await start(rt, "top")
    mid = top.children[0]
    leaf = mid.children[0]
    assert first.status == "pending" and first.pending.kind == "approval"
    assert first.pending.data["path"] == ["root", "top.1"]
    assert leaf.pending_req.id == mid.pending_req.id == top.pending_req.id == first.pending.id
    assert [leaf.state, mid.state, top.state] == ["suspended"] * 3
    before = {h.id: (h.turns_total, h.usage_total) for h in (top, mid, leaf)}

    final = await rt.resume(Answer(id=first.pending.id, ok=True))

    assert final.status == "done"
    assert final.text == "top: mid: leaf: secret-token"
    assert [c.id for c in top.children] == ["root/top.1/mid.1"]
    assert [c.id for c in mid.children] == ["root/top.1/mid.1/leaf.1"]
    for h in (top, mid, leaf):
        turns, usage = before[h.id]
        assert h.turns_total > turns and h.usage_total > usage, h.id
    assert leaf.turns_total == 3 and mid.turns_total == 3 and top.turns_total == 3
    assert final.turns == 3 and final.total_tokens == rt.inspect(top).tokens == 9 * 40
    assert final.own_tokens == 3 * 40
    assert transitions_of(rt.trace, leaf.id) == [
        "idle→running", "running→suspended", "suspended→idle", "idle→running", "running→idle", "idle→closed"]
    assert sum("REATTACH" in line for line in rt.trace) == 2
    assert f"{top.id}: cascade resume (replay reattaches by task key)" in rt.trace
    assert f"{leaf.id}: resume with Answer(ok=true) at checkpoint (turns so far: 1)" in rt.trace


async def test_durable_trace_shape(exits):
    rt, _ = three_level()
    exits.push_async_callback(rt.close, rt.root)
    top, first = await start(rt, "top")
    leaf = top.children[0].children[0]
    await rt.resume(Answer(id=first.pending.id, ok=True))
    lines = [line for line in rt.trace if line.startswith(leaf.id + ": ")]
    shape = [
        f'{leaf.id}: running→suspended DURABLE (pending "approval", path preserved)',
        f"{leaf.id}: suspended→idle (Answer accepted, checkpoint restored)",
        f"{leaf.id}: idle→running (wake)",
    ]
    start_at = lines.index(shape[0])
    assert lines[start_at:start_at + 4] == [shape[0], lines[start_at + 1], shape[1], shape[2]]
    assert lines[start_at + 1].startswith(f"{leaf.id}: resume with Answer(ok=true)")


async def test_two_children_suspending_in_parallel_are_answered_one_at_a_time(exits):
    transport = scripted({
        "m-par": [
            {"whenToolMsgs": 0, "toolCalls": calls(("task", {"agent": "asker", "prompt": "first"}),
                                                   ("task", {"agent": "asker", "prompt": "second"}))},
            {"whenToolMsgs": ">=1", "text": "par: <join all tool msg contents with ' + '>"},
        ],
        "m-asker": LEAF_SCRIPT,
    })
    defs = [AgentDef("par", "parent", "", "m-par", task_targets=["asker"]),
            AgentDef("asker", "asks", "", "m-asker", tools=[secret_tool()])]
    rt = make_runtime(defs, transport)
    exits.push_async_callback(rt.close, rt.root)
    par, first = await start(rt, "par")
    a, b = par.children
    assert first.status == "pending"
    assert a.state == b.state == "suspended"
    assert first.pending.id == a.pending_req.id != b.pending_req.id

    second = await rt.resume(Answer(id=first.pending.id, ok=True))
    assert second.status == "pending"
    assert second.pending.id == b.pending_req.id
    assert a.state == "closed" and a.last_result.status == "done"
    assert b.state == "suspended"

    final = await rt.resume(Answer(id=second.pending.id, ok=True))
    assert final.status == "done"
    assert final.text == "par: leaf: secret-token + leaf: secret-token"
    assert [c.id for c in par.children] == [a.id, b.id]
    assert a.turns_total == 3 and b.turns_total == 3


async def test_resume_rejects_an_answer_whose_id_matches_no_pending_request(exits):
    rt, _ = three_level()
    exits.push_async_callback(rt.close, rt.root)
    top, first = await start(rt, "top")
    trace_before = list(rt.trace)
    with pytest.raises(ResumeError) as info:
        await rt.resume(Answer(id="pnd-wrong", ok=True))
    message = str(info.value)
    assert "'pnd-wrong'" in message and repr(first.pending.id) in message and "root/top.1/mid.1/leaf.1" in message
    assert rt.trace == trace_before
    assert top.state == "suspended"


async def test_resume_with_nothing_suspended_raises_runtime_error():
    rt, _ = three_level()
    with pytest.raises(RuntimeError, match="no suspended handle"):
        await rt.resume(Answer(id="x", ok=True))


async def test_a_second_resume_with_the_same_answer_changes_nothing(exits):
    rt, _ = three_level()
    exits.push_async_callback(rt.close, rt.root)
    top, first = await start(rt, "top")
    answer = Answer(id=first.pending.id, ok=True)
    final = await rt.resume(answer)
    trace, counters = list(rt.trace), [(v.id, v.state, v.tokens) for v in rt.list()]
    again = await rt.resume(answer)
    assert again == final
    assert rt.trace == trace
    assert [(v.id, v.state, v.tokens) for v in rt.list()] == counters


async def test_resume_accepts_an_answer_rebuilt_from_json(exits):
    rt, _ = three_level()
    exits.push_async_callback(rt.close, rt.root)
    _, first = await start(rt, "top")
    wire = json.loads(json.dumps({"id": first.pending.id, "ok": True, "data": None, "reason": None}))
    final = await rt.resume(wire)
    assert final.status == "done"


async def test_two_independent_pending_subtrees_are_each_answered_by_id(exits):
    transport = scripted({"m-leaf": LEAF_SCRIPT})
    rt = make_runtime([AgentDef("leaf", "asks", "", "m-leaf", tools=[secret_tool()])], transport)
    exits.push_async_callback(rt.close, rt.root)
    a, ra = await start(rt, "leaf")
    b, rb = await start(rt, "leaf")
    assert ra.status == rb.status == "pending"

    done_b = await rt.resume(Answer(id=rb.pending.id, ok=True))  # the later one first
    assert done_b.status == "done"
    assert b.state == "idle" and a.state == "suspended"
    done_a = await rt.resume(Answer(id=ra.pending.id, ok=True))
    assert done_a.status == "done" and a.state == "idle"


async def test_the_answer_binds_only_to_the_halted_call(exits):
    log: list[Any] = []
    replies = iter([
        {"tool_calls": [{"id": "c1", "name": "gate", "arguments": {"x": 1}}]},
        # The replay asks for the approved call AND a new one: only x=1 may use the Answer.
        {"tool_calls": [{"id": "c2", "name": "gate", "arguments": {"x": 1}},
                        {"id": "c3", "name": "gate", "arguments": {"x": 2}}]},
    ])
    rt = make_runtime([AgentDef("g", "gated", "", "m", tools=[gate_tool(log)])], in_process=lambda req: next(replies))
    exits.push_async_callback(rt.close, rt.root)
    h, first = await start(rt, "g")
    assert first.pending.prompt == "approve 1?"
    second = await rt.resume(Answer(id=first.pending.id, ok=True))
    assert second.status == "pending"
    assert second.pending.prompt == "approve 2?"
    assert second.pending.id != first.pending.id
    approved = [x for x, answer_id in log if answer_id == first.pending.id]
    assert approved == [1]  # x=2 never ran with the x=1 approval


async def test_interrupting_a_suspended_parent_cancels_the_whole_pending_subtree(exits):
    rt, _ = three_level()
    exits.push_async_callback(rt.close, rt.root)
    top, first = await start(rt, "top")
    mid = top.children[0]
    leaf = mid.children[0]
    rt.interrupt(top)
    assert [top.state, mid.state, leaf.state] == ["idle"] * 3
    assert top.pending_req is None and leaf.pending_req is None
    assert f'{top.id}: suspended→idle (interrupt cancelled pending "approval")' in rt.trace
    assert (await rt.wait(top)).status == "interrupted"
    with pytest.raises(RuntimeError, match="no suspended handle"):
        await rt.resume(Answer(id=first.pending.id, ok=True))


async def test_inline_escalation_answered_by_an_ancestor_never_reaches_the_host(exits):
    seen: list[str] = []

    def approve(request):
        seen.append(request.prompt)
        return Answer(id=request.id, ok=True)

    rt, transport = three_level()
    exits.push_async_callback(rt.close, rt.root)
    rt.registry["top"].wait_for = approve
    top, result = await start(rt, "top")
    assert result.status == "done" and result.text == "top: mid: leaf: secret-token"
    assert seen == ["approve secret access?"]
    assert 'root/top.1/mid.1/leaf.1: escalate → root/top.1 answers ("nearest interpreter")' in rt.trace
