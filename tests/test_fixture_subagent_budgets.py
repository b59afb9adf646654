"""Fixture subagent-budgets (S7): carve at spawn, live ancestor walk, maxChildren, loud limits."""

from __future__ import annotations

from support.agent_fixture import FixtureRun
from support.mock_llm import load_fixture
from toolnexus.agents import Handle, SpawnError, TaskResult

FX = load_fixture("subagent-budgets")


async def test_budget_steps_match_the_fixture():
    run = FixtureRun(FX)
    try:
        for step in FX["steps"]:
            outcome = await run.step(step)
            expect = step.get("expect") or {}
            if "effectiveTokens" in expect:
                assert isinstance(outcome, Handle)
                assert outcome.pool.tokens == expect["effectiveTokens"]
            if "isError" in expect:
                assert isinstance(outcome, SpawnError)
                assert expect["isError"] in outcome.error
            if "status" in expect:
                assert isinstance(outcome, TaskResult)
                assert outcome.status == expect["status"], outcome
            if "errorContains" in expect:
                assert expect["errorContains"] in outcome.text
            if "parentPoolAfter" in expect:
                assert run.handle("coordinator").pool.tokens == expect["parentPoolAfter"]
    finally:
        await run.teardown()


async def test_budget_limits_are_named_canonically():
    run = FixtureRun(FX)
    try:
        results = [await run.step(step) for step in FX["steps"]]
        exhausted, looped = results[6], results[8]
        assert exhausted.limit == "maxTokens"
        assert exhausted.text == "budget exhausted (tokens); partial work preserved"
        assert exhausted.is_error
        assert looped.limit == "maxTurns"
        assert looped.text == "hit maxTurns without a final answer"
        assert looped.turns == 3
        # One seq counter per parent, shared by all defs: the looper is root's second child.
        assert "root/looper.2: running→idle (INCOMPLETE at maxTurns 3)" in run.rt.trace
    finally:
        await run.teardown()
