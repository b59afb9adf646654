"""Fixture subagent-durable-resume (S4): durable pending at the root, resume at the deepest
suspended handle, parent cascade reattaching to the finished child by task key."""

from __future__ import annotations

from support.agent_fixture import FixtureRun, assert_transitions
from support.mock_llm import load_fixture
from toolnexus.types import Answer

FX = load_fixture("subagent-durable-resume")


async def test_durable_resume_cascades_and_reattaches():
    run = FixtureRun(FX)
    try:
        first = await run.run_entry(FX["run"]["entry"], FX["run"]["prompt"])
        parent = run.handle(FX["run"]["entry"])
        leaf = parent.children[0]

        p1 = FX["phase1_expect"]
        assert first.status == p1["status"]
        assert first.pending is not None and first.pending.kind == p1["pendingKind"]
        assert "/".join(first.pending.data["path"]) == p1["pendingDataPathEndsWithin"]
        assert {v.state for v in run.rt.list()} == {p1["allHandles"]}
        leaf_turns, leaf_usage = leaf.turns_total, leaf.usage_total

        second = await run.rt.resume(Answer(id=first.pending.id, **FX["resume"]["answer"]))
        trace = list(run.rt.trace)

        p2 = FX["phase2_expect"]
        assert second.status == "done"
        assert "asker-done: secret-token" in second.text
        if p2["leafResumedAtCheckpoint"]:
            assert leaf.turns_total > leaf_turns
        if p2["leafUsageGrewNotReset"]:
            assert leaf.usage_total > leaf_usage
        if p2["noDuplicateChildIds"]:
            assert [c.id for c in parent.children] == [leaf.id]
        if p2["parentCascadeReattached"]:
            assert any(f"REATTACH to {leaf.id}" in line for line in trace)
        assert parent.state == p2["finalParentState"]
        for needle in p2["traceContains"]:
            assert any(needle in line for line in trace)
        assert_transitions(trace, p2["transitions"])
    finally:
        await run.teardown()


async def test_durable_pending_rewinds_each_transcript_to_its_checkpoint():
    run = FixtureRun(FX)
    try:
        first = await run.run_entry(FX["run"]["entry"], FX["run"]["prompt"])
        parent = run.handle(FX["run"]["entry"])
        store = run.rt.conversation_store
        # Both suspended turns were rolled back: no placeholder survives in the store.
        assert await store.get(parent.id) in (None, [])
        assert await store.get(parent.children[0].id) in (None, [])
        assert first.turns == 1 and parent.children[0].turns_total == 1
    finally:
        await run.teardown()
