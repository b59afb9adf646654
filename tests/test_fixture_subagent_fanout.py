"""Fixture subagent-fanout (S1/S2): parallel `task` fan-out, context isolation, usage roll-up."""

from __future__ import annotations

from support.agent_fixture import FixtureRun, assert_transitions
from support.mock_llm import load_fixture

FX = load_fixture("subagent-fanout")


async def test_fanout_runs_children_concurrently_and_rolls_usage_up():
    run = FixtureRun(FX, rendezvous={"m-explore": 2})
    expect = FX["expect"]
    try:
        result = await run.run_entry(FX["run"]["entry"], FX["run"]["prompt"])
        trace = list(run.rt.trace)
        parent = run.handle(FX["run"]["entry"])

        assert result.status == expect["status"]
        for needle in expect["textContains"]:
            assert needle in result.text
        for needle, count in expect["textOccurrences"].items():
            assert result.text.count(needle) == count
        assert result.turns == expect["parentTurns"]
        assert [c.id for c in parent.children] == expect["childIds"]
        assert run.rt.max_observed_concurrent_turns >= expect["concurrentTurnsObservedAtLeast"]
        assert run.rt.inspect(parent).tokens == expect["parentUsageTotal"]
        assert result.total_tokens == expect["parentUsageTotal"]
        if expect["childrenClosedAfterTask"]:
            assert all(c.state == "closed" for c in parent.children)
        assert_transitions(trace, expect["transitions"])
    finally:
        await run.teardown()


async def test_fanout_parent_transcript_gains_exactly_one_tool_message_per_task():
    run = FixtureRun(FX, rendezvous={"m-explore": 2})
    try:
        await run.run_entry(FX["run"]["entry"], FX["run"]["prompt"])
        final_call = run.mock.calls_for("m-coordinator")[-1]
        tool_msgs = [m for m in final_call["messages"] if m.get("role") == "tool"]
        assert len(tool_msgs) == 2
        # Children never see the parent's conversation: each starts from its own prompt.
        for call in run.mock.calls_for("m-explore"):
            users = [m["content"] for m in call["messages"] if m.get("role") == "user"]
            assert users in (["find A"], ["find B"])
    finally:
        await run.teardown()
