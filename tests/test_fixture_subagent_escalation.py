"""Fixture subagent-escalation (S3): the parent's wait_for answers the child's suspension inline."""

from __future__ import annotations

import re

from support.agent_fixture import FixtureRun, assert_transitions, transitions_of
from support.mock_llm import load_fixture

FX = load_fixture("subagent-escalation")


async def test_nearest_interpreter_answers_the_child_inline():
    run = FixtureRun(FX)
    expect = FX["expect"]
    try:
        result = await run.run_entry(FX["run"]["entry"], FX["run"]["prompt"])
        trace = list(run.rt.trace)
        assert result.status == expect["status"]
        for needle in expect["textContains"]:
            assert needle in result.text
        answered = [m.group(1) for line in trace if (m := re.search(r"escalate → (\S+) answers", line))]
        assert answered == [expect["escalation"]["answeredBy"]]
        child = run.handle(FX["run"]["entry"]).children[0]
        child_trace = transitions_of(trace, child.id)
        for pair in expect["escalation"]["childTrace"]:
            assert any(t.startswith(pair) for t in child_trace)
        assert_transitions(trace, expect["transitions"])
        assert f'{child.id}: running→suspended (pending "approval": approve secret access?)' in trace
        assert f"{child.id}: suspended→running (Answer ok=true)" in trace
    finally:
        await run.teardown()
