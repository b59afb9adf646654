"""Executing an A2A tool: submit → poll → pinned result strings and metadata (§1.3, beyond #5 #7).

Every scenario runs against each peer generation (1.0, 0.3, existing-toolnexus mixed form): the
results must not depend on the wire the peer speaks. Polling runs on a `JumpClock` (sleeps
advance virtual time at once), so budgets and `ms` are exact and nothing really waits.
"""

from __future__ import annotations

import asyncio
from types import SimpleNamespace

import pytest

from support.a2a_peers import A2APeer, JumpClock, SleepWatchClock, Step, completed, failed, working
from toolnexus import ToolContext
from toolnexus.a2a import agent, agent_tools

DIALECTS = ["1.0", "0.3", "mixed"]


@pytest.fixture(params=DIALECTS)
def peer(request):
    with A2APeer(request.param, name="Research Bot") as p:
        yield p


async def tool_of(peer, clock=None, **kw):
    kw.setdefault("poll_every", 100)
    [tool] = await agent_tools(agent(peer.card_url, **kw), clock=clock or JumpClock())
    return tool


def meta(task_id="t1", state="completed", polls=0, ms=0):
    return {"agent": "Research Bot", "taskId": task_id, "state": state, "polls": polls, "ms": ms}


async def test_completed_joins_text_parts_of_all_artifacts_and_skips_other_parts(peer):
    data_part = {"data": {"k": 1}} if peer.dialect == "1.0" else {"kind": "data", "data": {"k": 1}}
    peer.polls = [working(), Step("completed", artifacts=(("first", data_part, "second"), ("third",)))]
    res = await (await tool_of(peer)).execute({"task": "find"})
    assert (res.output, res.is_error) == ("first\nsecond\nthird", False)
    assert res.metadata == meta(polls=2, ms=200)
    sent = peer.calls[0].params["message"]["parts"]
    assert [p["text"] for p in sent] == ["find"]


async def test_completed_without_artifacts_falls_back_to_last_agent_history_message_with_text(peer):
    history = (("user", "question"), ("agent", "older answer"), ("agent", "latest answer"), ("agent", ""),
               ("user", "thanks"))
    peer.polls = [Step("completed", history=history)]
    res = await (await tool_of(peer)).execute({"task": "q"})
    assert (res.output, res.is_error) == ("latest answer", False)


async def test_completed_with_no_text_anywhere_is_an_empty_success(peer):
    peer.polls = [Step("completed")]
    res = await (await tool_of(peer)).execute({"task": "q"})
    assert (res.output, res.is_error, res.metadata["state"]) == ("", False, "completed")


async def test_failed_with_status_message_is_pinned_error_with_detail(peer):
    peer.polls = [working(), Step("failed", message="disk full", message_parts=("retry later",))]
    res = await (await tool_of(peer)).execute({"task": "q"})
    assert (res.output, res.is_error) == ("A2A task t1 failed: disk full\nretry later", True)
    assert res.metadata == meta(state="failed", polls=2, ms=200)


async def test_failed_without_message_and_remote_cancel_are_pinned_errors(peer):
    peer.polls = [failed()]
    res = await (await tool_of(peer)).execute({"task": "q"})
    assert (res.output, res.is_error) == ("A2A task t1 failed", True)
    peer.polls = [Step("canceled")]
    res = await (await tool_of(peer)).execute({"task": "q"})
    assert (res.output, res.is_error, res.metadata["state"]) == ("A2A task t2 canceled", True, "canceled")


async def test_rejected_is_an_error_not_a_timeout(peer):
    peer.polls = [Step("rejected", message="not my job")]
    res = await (await tool_of(peer)).execute({"task": "q"})
    assert (res.output, res.is_error, res.metadata["state"]) == ("A2A task t1 rejected: not my job", True, "rejected")


async def test_terminal_submit_reply_means_zero_polls(peer):
    peer.on_send = [completed("instant")]
    res = await (await tool_of(peer)).execute({"task": "q"})
    assert (res.output, res.metadata) == ("instant", meta(polls=0, ms=0))
    assert not {"GetTask", "tasks/get"} & set(peer.methods())


async def test_never_terminal_times_out_with_pinned_string_and_lowercase_state(peer):
    peer.polls = [working()]
    res = await (await tool_of(peer, timeout=1000, poll_every=100)).execute({"task": "q"})
    assert res.output == "A2A task t1 timed out after 1000ms (state=working)"
    assert res.is_error and res.metadata == meta(state="working", polls=10, ms=1000)


async def test_ctx_timeout_in_seconds_overrides_the_agent_timeout(peer):
    peer.polls = [working()]
    tool = await tool_of(peer, timeout=60_000, poll_every=100)
    res = await tool.execute({"task": "q"}, ToolContext(timeout=0.25))
    assert res.output == "A2A task t1 timed out after 250ms (state=working)"
    # the last sleep is clipped to the 50 ms left, so the budget is met exactly
    assert res.metadata == meta(state="working", polls=3, ms=250)


async def test_submitted_state_is_assumed_when_the_reply_has_none_and_polls_keep_the_previous_state(peer):
    peer.on_send = [Step(null_result=True)]
    res = await (await tool_of(peer, timeout=300)).execute({"task": "q"})
    # no task id came back: GetTask("") fails on the peer with its error message
    assert res.output == "Task not found: " and res.metadata["taskId"] == "" and res.metadata["state"] == "submitted"


async def test_bad_json_on_a_poll_keeps_the_previous_state_and_polling_goes_on(peer):
    peer.polls = [working(), Step(raw="{this is not json"), completed("recovered")]
    res = await (await tool_of(peer)).execute({"task": "q"})
    assert (res.output, res.metadata["polls"]) == ("recovered", 3)


async def test_jsonrpc_error_message_becomes_the_output(peer):
    peer.polls = [Step(rpc_error={"code": -32001, "message": "Task vanished"})]
    res = await (await tool_of(peer)).execute({"task": "q"})
    assert (res.output, res.is_error) == ("Task vanished", True)
    assert res.metadata == meta(state="working", polls=0, ms=100)


@pytest.mark.parametrize("error, text", [({"code": -32000}, "JSON-RPC error -32000"),
                                         ({"code": None, "data": 1}, "JSON-RPC error"),
                                         ({"message": "", "code": 7}, "JSON-RPC error 7")])
async def test_jsonrpc_error_without_message_names_the_code(error, text):
    with A2APeer("1.0") as peer:
        peer.on_send = [Step(rpc_error=error)]
        res = await (await tool_of(peer)).execute({"task": "q"})
    assert (res.output, res.is_error, res.metadata["polls"]) == (text, True, 0)


async def test_non_2xx_is_http_status_and_body(peer):
    peer.on_send = [Step(http=(500, "upstream exploded"))]
    res = await (await tool_of(peer)).execute({"task": "q"})
    assert (res.output, res.is_error) == ("HTTP 500: upstream exploded", True)
    assert res.metadata == meta(task_id="", state="submitted")


async def test_unreachable_endpoint_is_an_error_result_not_an_exception():
    with A2APeer("mixed") as peer:
        peer.card_override = {"url": "http://127.0.0.1:9/"}
        tool = await tool_of(peer)
    res = await tool.execute({"task": "q"})
    assert res.is_error and res.output and res.metadata["taskId"] == ""


async def test_abort_during_poll_sleep_returns_canceled_and_cancels_the_remote_task(peer):
    peer.on_send = [working()]
    stop = asyncio.Event()
    # real time and a 10-minute poll interval: only an abortable sleep can return in time
    clock = SleepWatchClock()
    [tool] = await agent_tools(agent(peer.card_url, poll_every=600_000), clock=clock)
    call = asyncio.create_task(tool.execute({"task": "long job"}, ToolContext(signal=stop)))
    await asyncio.wait_for(clock.sleeping.wait(), 5)
    stop.set()
    res = await asyncio.wait_for(call, 5)
    assert (res.output, res.is_error) == ("A2A task t1 canceled", True)
    assert res.metadata["state"] == "canceled" and res.metadata["polls"] == 0 and res.metadata["taskId"] == "t1"
    if peer.dialect != "mixed":  # the mixed-form peer has no cancel method: best effort
        cancel = await peer.arrived({"1.0": "CancelTask", "0.3": "tasks/cancel"}[peer.dialect])
        assert cancel.params["id"] == "t1"
        assert peer.tasks["t1"]["state"] == "canceled"


async def test_abort_signal_with_aborted_attribute_is_checked_during_sleep():
    flag = SimpleNamespace(aborted=False)
    clock = SleepWatchClock()
    with A2APeer("1.0") as peer:
        [tool] = await agent_tools(agent(peer.card_url, poll_every=600_000), clock=clock)
        call = asyncio.create_task(tool.execute({"task": "q"}, ToolContext(signal=flag)))
        await asyncio.wait_for(clock.sleeping.wait(), 5)
        flag.aborted = True
        res = await asyncio.wait_for(call, 5)
        await peer.arrived("CancelTask")
    assert res.output == "A2A task t1 canceled" and res.metadata["polls"] == 0


async def test_abort_while_an_rpc_hangs_returns_canceled_and_drops_the_connection():
    stop = asyncio.Event()
    with A2APeer("1.0") as peer:
        peer.on_send = [working()]
        peer.polls = [Step(hang=True)]
        [tool] = await agent_tools(agent(peer.card_url, poll_every=1))
        call = asyncio.create_task(tool.execute({"task": "q"}, ToolContext(signal=stop)))
        await peer.arrived("GetTask")
        stop.set()
        res = await asyncio.wait_for(call, 5)
        assert await asyncio.to_thread(peer.client_left.wait, 5)
    assert res.output == "A2A task t1 canceled" and res.metadata["state"] == "canceled"


async def test_signal_already_set_sends_nothing():
    stop = asyncio.Event()
    stop.set()
    with A2APeer("1.0", name="Research Bot") as peer:
        tool = await tool_of(peer)
        res = await tool.execute({"task": "q"}, ToolContext(signal=stop))
        assert (res.output, res.is_error) == ("A2A task  canceled", True)
        assert res.metadata == meta(task_id="", state="canceled") and peer.calls == []


async def test_hung_get_task_is_bounded_by_the_remaining_budget():
    clock = JumpClock()
    with A2APeer("1.0") as peer:
        peer.on_send = [working()]
        peer.polls = [Step(hang=True)]
        # 60 s budget, but the (virtual) poll sleep uses 59.9 s of it: the hung GetTask gets only
        # the remaining 0.1 s (raised to the 0.2 s floor), not 60 s
        [tool] = await agent_tools(agent(peer.card_url, timeout=60_000, poll_every=59_900), clock=clock)
        res = await asyncio.wait_for(tool.execute({"task": "q"}), 10)
        assert await asyncio.to_thread(peer.client_left.wait, 5)
    assert res.output == "A2A task t1 timed out after 60000ms (state=working)"
    assert res.metadata["polls"] == 0 and res.metadata["state"] == "working"


async def test_missing_args_send_an_empty_task():
    with A2APeer("1.0") as peer:
        peer.on_send = [completed("ok")]
        res = await (await tool_of(peer)).execute()
        assert res.output == "ok" and peer.calls[0].params["message"]["parts"] == [{"text": ""}]


async def test_cancelling_the_calling_task_propagates_and_closes_the_connection():
    with A2APeer("1.0") as peer:
        peer.on_send = [working()]
        peer.polls = [Step(hang=True)]
        [tool] = await agent_tools(agent(peer.card_url, poll_every=1))
        call = asyncio.create_task(tool.execute({"task": "q"}))
        await peer.arrived("GetTask")
        call.cancel()
        with pytest.raises(asyncio.CancelledError):
            await call
        assert await asyncio.to_thread(peer.client_left.wait, 5)
        assert "CancelTask" not in peer.methods()  # only ctx.signal asks the peer to cancel
