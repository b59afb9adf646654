"""Hierarchical budgets: every limit stops work loudly, canonically named, with `on_budget`."""

from __future__ import annotations

import math

from support.agent_kit import calls, lookup_tool, make_runtime, scripted
from toolnexus.agents import AgentDef, Budget, Completion, SpawnError, Verdict
from toolnexus.agents.clock import VirtualClock

LOOKUP_THEN_DONE = [
    {"whenToolMsgs": 0, "toolCalls": calls(("lookup", {"q": "x"}))},
    {"whenToolMsgs": ">=1", "text": "found:<first tool msg content>"},
]


def worker_runtime(budget: Budget, **opts):
    stops: list[tuple[str, str]] = []
    transport = scripted(
        {"m-work": LOOKUP_THEN_DONE, "m-loop": [{"always": True, "toolCalls": calls(("lookup", {"q": "again"}))}]}
    )
    defs = [AgentDef("worker", "works", "", "m-work", tools=[lookup_tool()], budget=budget),
            AgentDef("looper", "loops", "", "m-loop", tools=[lookup_tool()], budget=budget)]
    rt = make_runtime(defs, transport, on_budget=lambda h, limit: stops.append((h.id, limit)), **opts)
    return rt, stops


async def wake_wait(rt, h, prompt="go"):
    rt.wake(h, prompt)
    return await rt.wait(h)


async def test_max_tokens_stops_the_next_wake(exits):
    rt, stops = worker_runtime(Budget(max_tokens=50))
    exits.push_async_callback(rt.close, rt.root)
    h = rt.spawn(rt.root, "worker")
    assert (await wake_wait(rt, h)).status == "done"
    assert h.pool.tokens == 50 - 80
    refused = await wake_wait(rt, h, "again")
    assert (refused.status, refused.limit, refused.is_error) == ("incomplete", "maxTokens", True)
    assert refused.text == "budget exhausted (tokens); partial work preserved"
    assert stops == [(h.id, "maxTokens")]
    assert h.turns_total == 2  # no turn ran for the refused wake


async def test_max_tool_calls_stops_the_next_wake(exits):
    rt, stops = worker_runtime(Budget(max_tool_calls=1))
    exits.push_async_callback(rt.close, rt.root)
    h = rt.spawn(rt.root, "worker")
    assert (await wake_wait(rt, h)).status == "done"
    assert h.pool.tool_calls == 0
    refused = await wake_wait(rt, h, "again")
    assert (refused.status, refused.limit) == ("incomplete", "maxToolCalls")
    assert stops == [(h.id, "maxToolCalls")]


async def test_max_wall_ms_is_measured_on_the_runtime_clock_from_spawn(exits):
    clock = VirtualClock()
    rt, stops = worker_runtime(Budget(max_wall_ms=1000), clock=clock)
    exits.push_async_callback(rt.close, rt.root)
    h = rt.spawn(rt.root, "worker")
    await clock.advance(0.999)
    assert (await wake_wait(rt, h)).status == "done"
    await clock.advance(0.001)
    refused = await wake_wait(rt, h, "again")
    assert (refused.status, refused.limit) == ("incomplete", "maxWallMs")
    assert refused.text == "budget exhausted (wallMs); partial work preserved"


async def test_max_turns_ends_the_run_incomplete_not_done(exits):
    rt, stops = worker_runtime(Budget(max_turns=2))
    exits.push_async_callback(rt.close, rt.root)
    h = rt.spawn(rt.root, "looper")
    result = await wake_wait(rt, h)
    assert (result.status, result.limit, result.text) == (
        "incomplete",
        "maxTurns",
        "hit maxTurns without a final answer",
    )
    assert result.turns == 2 and result.total_tokens == 80
    assert f"{h.id}: running→idle (INCOMPLETE at maxTurns 2)" in rt.trace
    assert stops == [(h.id, "maxTurns")]


async def test_max_children_is_a_lifetime_cap_at_spawn(exits):
    rt, stops = worker_runtime(Budget())
    exits.push_async_callback(rt.close, rt.root)
    parent = rt.spawn(rt.root, "worker", Budget(max_children=1))
    child = rt.spawn(parent, "worker")
    await rt.close(child)
    refused = rt.spawn(parent, "worker")  # closed children still count
    assert isinstance(refused, SpawnError) and refused.error == "maxChildren 1 exceeded"
    assert stops == [(parent.id, "maxChildren")]


async def test_max_depth_is_the_minimum_over_the_ancestor_chain(exits):
    rt, stops = worker_runtime(Budget())
    exits.push_async_callback(rt.close, rt.root)
    top = rt.spawn(rt.root, "worker", Budget(max_depth=2))
    mid = rt.spawn(top, "worker", Budget(max_depth=10))  # cannot raise the limit locally
    refused = rt.spawn(mid, "worker")
    assert isinstance(refused, SpawnError) and refused.error == "maxDepth 2 exceeded"
    assert stops == [(mid.id, "maxDepth")]


async def test_spawn_is_refused_when_an_ancestor_pool_is_spent(exits):
    rt, _ = worker_runtime(Budget())
    exits.push_async_callback(rt.close, rt.root)
    parent = rt.spawn(rt.root, "worker", Budget(max_tokens=40))
    assert (await wake_wait(rt, parent)).status == "done"  # 80 tokens: the pool is now negative
    refused = rt.spawn(parent, "worker")
    assert isinstance(refused, SpawnError) and refused.error == "budget exhausted (tokens); incomplete"


async def test_carving_takes_the_minimum_and_sibling_spend_is_seen_live(exits):
    rt, _ = worker_runtime(Budget())
    exits.push_async_callback(rt.close, rt.root)
    parent = rt.spawn(rt.root, "worker", Budget(max_tokens=100))
    a = rt.spawn(parent, "worker", Budget(max_tokens=500))
    b = rt.spawn(parent, "worker")
    assert (a.pool.tokens, b.pool.tokens, rt.root.pool.tokens) == (100, 100, math.inf)
    await wake_wait(rt, a)
    await wake_wait(rt, b)  # parent pool 20 > 0 at admission
    refused = await wake_wait(rt, b, "again")  # b's own pool is fine, the parent's is not
    assert b.pool.tokens == 20 and parent.pool.tokens == -60
    assert refused.limit == "maxTokens"


async def test_completion_gate_counts_every_attempt_and_names_the_limit(exits):
    rt, stops = worker_runtime(Budget())
    exits.push_async_callback(rt.close, rt.root)
    rt.registry["worker"].completion = Completion(verify=lambda r: Verdict(False, "not yet"), max_attempts=2)
    h = rt.spawn(rt.root, "worker")
    result = await wake_wait(rt, h)
    assert (result.status, result.limit) == ("incomplete", "completion")
    assert result.text.startswith("hit completion without a final answer")
    assert "completion.verify failed 2x: not yet" in result.text
    # Attempt 1: lookup + answer (2 calls); attempt 2: answer (1 call). All of it is counted.
    assert result.turns == 3 and result.total_tokens == 3 * 40
    assert stops == [(h.id, "completion")]
