"""A bounded trace ring plus structured transition events (agents.md beyond #20)."""

from __future__ import annotations

import logging
import math

import pytest

from support.agent_kit import make_runtime, scripted, text
from toolnexus.agents import AgentDef, AgentRuntime, agent, start_agent
from toolnexus.agents._trace import DEFAULT_TRACE_LIMIT, TraceRing
from toolnexus.agents.clock import VirtualClock


def quiet_runtime(**opts):
    defs = [AgentDef("quiet", "answers", "", "m-quiet"), AgentDef("other", "answers", "", "m-quiet")]
    return make_runtime(defs, scripted({"m-quiet": text("quiet done")}), **opts)


async def run_once(rt, name="quiet"):
    h = rt.spawn(rt.root, name)
    rt.wake(h, "hi")
    return h, await rt.wait(h)


def test_the_ring_keeps_only_the_newest_lines_and_still_behaves_like_a_list():
    ring = TraceRing(3)
    for n in range(5):
        ring.append(f"line {n}")
    ring.extend(["line 5"])
    ring += ["line 6"]
    assert ring == ["line 4", "line 5", "line 6"] and ring.dropped == 4
    assert ring[0] == "line 4" and ring[-2:] == ["line 5", "line 6"] and "line 5" in ring and len(ring) == 3
    assert list(iter(ring)) == ["line 4", "line 5", "line 6"]
    unbounded = TraceRing(None, (str(n) for n in range(DEFAULT_TRACE_LIMIT + 5)))
    assert len(unbounded) == DEFAULT_TRACE_LIMIT + 5 and unbounded.dropped == 0
    assert TraceRing(math.inf).limit is None and TraceRing(0, ["x"]) == []


async def test_the_runtime_trace_is_bounded_by_trace_limit(exits):
    rt = quiet_runtime(trace_limit=4)
    exits.push_async_callback(rt.close, rt.root)
    spawned = [rt.spawn(rt.root, "quiet") for _ in range(6)]
    assert rt.trace == [f"{h.id}: spawned (depth 1, tokens inf)" for h in spawned[2:]]
    assert rt.trace.dropped == 2
    assert quiet_runtime().trace.limit == DEFAULT_TRACE_LIMIT
    assert quiet_runtime(trace_limit=None).trace.limit is None


async def test_every_transition_is_a_structured_event_that_mirrors_its_trace_line():
    clock = VirtualClock()
    rt = quiet_runtime(clock=clock)
    await clock.advance(2.5)
    h, result = await run_once(rt)
    await rt.close(rt.root)
    assert result.text == "quiet done"
    assert [(e["handle"], e["from"], e["to"]) for e in rt.events] == [
        (h.id, "idle", "running"), (h.id, "running", "idle"), (h.id, "idle", "closed"), ("root", "idle", "closed")]
    assert all(e["at"] == 2.5 for e in rt.events)
    assert rt.events[0]["detail"] == "(wake)"
    transitions = [line for line in rt.trace if "→" in line and "spawned" not in line]
    assert transitions == [f"{e['handle']}: {e['from']}→{e['to']} {e['detail']}" for e in rt.events]


async def test_events_are_bounded_like_the_trace(exits):
    rt = quiet_runtime(trace_limit=2)
    exits.push_async_callback(rt.close, rt.root)
    for _ in range(3):
        await run_once(rt)
    assert len(rt.events) == 2 and rt.events.dropped == 4
    assert [e["to"] for e in rt.events] == ["running", "idle"]


async def test_on_transition_is_def_over_runtime_and_its_failures_are_isolated(caplog, exits):
    seen_by_runtime, seen_by_def = [], []

    def broken(event):
        raise RuntimeError("observer down")

    defs = [AgentDef("quiet", "answers", "", "m-quiet", on_transition=seen_by_def.append),
            AgentDef("other", "answers", "", "m-quiet", on_transition=broken)]
    rt = make_runtime(defs, scripted({"m-quiet": text("quiet done")}), on_transition=seen_by_runtime.append)
    exits.push_async_callback(rt.close, rt.root)  # the close below is under test; this is for a failure before it
    await run_once(rt, "quiet")
    with caplog.at_level(logging.WARNING, logger="toolnexus"):
        other, result = await run_once(rt, "other")
    assert result.status == "done" and other.state == "idle"
    assert [(e["from"], e["to"]) for e in seen_by_def] == [("idle", "running"), ("running", "idle")]
    assert seen_by_runtime == []  # the def's callback replaces the runtime's
    assert "[toolnexus] agents: on_transition raised RuntimeError: observer down" in caplog.messages
    seen_by_def[0]["to"] = "tampered"
    assert rt.events[0]["to"] == "running"  # callbacks get a copy
    await rt.close(rt.root)
    assert [e["handle"] for e in seen_by_runtime] == ["root"]  # root's close: the runtime's callback


async def test_trace_options_reach_the_level_one_surface_and_are_validated(exits):
    seen = []
    a = agent("quiet", does="answers", model="m-quiet")
    r = await a.run("hi", transport=scripted({"m-quiet": text("quiet done")}), trace_limit=2, on_transition=seen.append)
    assert r.runtime.trace.limit == 2 and len(r.runtime.trace) == 2
    assert [e["to"] for e in seen] == ["running", "idle", "closed", "closed"]
    unbounded = await a.run("hi", transport=scripted({"m-quiet": text("quiet done")}), trace_limit=math.inf)
    assert unbounded.runtime.trace.limit is None
    started = start_agent(a, transport=scripted({"m-quiet": text("quiet done")}), trace_limit=7, resume_mode="continue")
    exits.push_async_callback(started.stop)
    assert (started.rt.trace.limit, started.rt.resume_mode) == (7, "continue")
    tool = a.as_tool(transport=scripted({"m-quiet": text("quiet done")}), trace_limit=3, on_transition=seen.append)
    assert (await tool.execute({"prompt": "hi"})).output == "quiet done"
    for bad in (-1, "10", 2.5, True):
        with pytest.raises(ValueError, match="trace_limit"):
            AgentRuntime(registry={}, trace_limit=bad)
