"""Served tasks that suspend, resume, get cancelled, or are cut short by `stop()`.

A run that ends `pending` becomes `input-required` (or `auth-required`) carrying the request; a
later message on that task resumes the halted run through `client.ask_with_answer` with
`data={"text": <message>}`. Raw JSON-RPC in the existing toolnexus form unless a test says so.
"""

from __future__ import annotations

import asyncio
import json

import httpx

from support.serve_kit import AgentRecorder, agent_toolkit, rpc, served_agent, wait_state
from toolnexus import Tool, ToolResult
from toolnexus.serve import ServeLimits

OBJ = {"type": "object", "properties": {}}


def _send(text: str, **message: object) -> dict:
    return {"message": {"role": "user", "messageId": "m-1", "parts": [{"kind": "text", "text": text}], **message},
            "configuration": {"blocking": False}}


async def test_a_suspended_run_is_input_required_and_a_follow_up_resumes_it() -> None:
    rec, events = AgentRecorder(), []
    async with served_agent(agent_toolkit(rec), on_task=events.append) as h, httpx.AsyncClient() as http:
        task = (await rpc(http, h.url, "SendMessage", _send("ask for my name")))["result"]
        asked = await wait_state(h.store, task["id"], {"input-required"})
        reply = (await rpc(http, h.url, "SendMessage", _send("Ada", taskId=task["id"])))["result"]
        done = await wait_state(h.store, task["id"], {"completed"})
    assert asked["status"]["message"] == {"role": "agent", "parts": [{"kind": "text", "text": "What is your name?"}]}
    assert "artifacts" not in asked
    pending = asked["metadata"]["pending"]
    assert (pending["kind"], pending["prompt"]) == ("input", "What is your name?")
    assert reply["id"] == task["id"] and reply["status"]["state"] in ("working", "completed")
    assert done["artifacts"][0]["parts"] == [{"kind": "text", "text": "done: hello Ada"}]
    assert done["contextId"] == task["contextId"] == asked["contextId"]
    assert [(a.id, a.ok, a.data) for a in rec.answers] == [(pending["id"], True, {"text": "Ada"})]
    assert [e["state"] for e in events] == ["input-required", "completed"]
    assert events[0]["result"].status == "pending"


async def test_an_answer_sent_the_moment_the_question_is_saved_is_not_refused_as_busy() -> None:
    """The question is in the store while its run is still finishing (here: an `on_task` observer
    that holds on until told); a client that polls and answers at once must get through, not get
    `TaskBusy` (found as a flaky served round trip on a loaded machine)."""
    from types import SimpleNamespace

    from toolnexus import Request
    from toolnexus.serve import InMemoryTaskStore
    from toolnexus.serve._fulfil import Fulfiller

    observing, release, reread = asyncio.Event(), asyncio.Event(), asyncio.Event()

    class Watched(InMemoryTaskStore):
        async def get(self, task_id):  # type: ignore[no-untyped-def]
            found = await super().get(task_id)
            if observing.is_set():
                reread.set()  # the answer has read the question
            return found

    async def run_task(text: str, context: object) -> object:
        return SimpleNamespace(status="pending", pending=Request(id="q-1", kind="input", prompt="Name?"))

    async def resume_task(context: object, request: Request, answer: object) -> object:
        return SimpleNamespace(status="done", text=f"hello {answer.data['text']}")  # type: ignore[attr-defined]

    async def observer(event: dict) -> None:
        if event["state"] == "input-required":
            observing.set()
            await release.wait()

    fulfiller = Fulfiller(Watched(), run_task, resume_task=resume_task, on_task=observer)
    task = await fulfiller.submit("ask", None)
    await observing.wait()  # the question is saved; its run is inside the observer
    answering = asyncio.ensure_future(fulfiller.follow_up(task["id"], "Ada"))
    await reread.wait()  # the answer saw the question and is now waiting for the run to finish up
    release.set()
    reply = await answering
    await fulfiller.wait_settled(task["id"], 10)
    done = await fulfiller.store.get(task["id"])
    assert reply["id"] == task["id"]
    assert done["status"]["state"] == "completed"
    assert done["artifacts"][0]["parts"] == [{"kind": "text", "text": "hello Ada"}]


async def test_an_authorization_request_is_auth_required_with_its_link_in_both_generations() -> None:
    rec = AgentRecorder()
    async with served_agent(agent_toolkit(rec)) as h, httpx.AsyncClient() as http:
        task = (await rpc(http, h.url, "SendMessage", _send("login please")))["result"]
        stored = await wait_state(h.store, task["id"], {"auth-required"})
        v1 = (await rpc(http, h.url, "GetTask", {"id": task["id"]}, headers={"A2A-Version": "1.0"}))["result"]
        v03 = (await rpc(http, h.url, "tasks/get", {"id": task["id"]}))["result"]
        await rpc(http, h.url, "SendMessage", _send("done", taskId=task["id"]))
        done = await wait_state(h.store, task["id"], {"completed"})
    assert stored["status"]["message"]["parts"] == [{"kind": "text", "text": "Sign in to continue"},
                                                    {"kind": "file", "file": {"uri": "https://auth.example/authorize"}}]
    assert v1["status"]["state"] == "TASK_STATE_AUTH_REQUIRED"
    assert v1["status"]["message"]["role"] == "ROLE_AGENT"
    assert v1["status"]["message"]["parts"] == [{"text": "Sign in to continue"}, {"url": "https://auth.example/authorize"}]
    assert v03["kind"] == "task" and v03["status"]["state"] == "auth-required"
    assert v03["status"]["message"]["kind"] == "message" and v03["status"]["message"]["messageId"]
    assert done["artifacts"][0]["parts"][0]["text"] == "done: signed in"


async def test_a_resume_in_1_0_form_blocks_until_the_outcome() -> None:
    rec = AgentRecorder()
    v1 = {"A2A-Version": "1.0"}
    async with served_agent(agent_toolkit(rec)) as h, httpx.AsyncClient() as http:
        asked = (await rpc(http, h.url, "SendMessage", {"message": {
            "role": "ROLE_USER", "messageId": "a", "parts": [{"text": "ask"}]}}, headers=v1))["result"]["task"]
        done = (await rpc(http, h.url, "SendMessage", {"message": {
            "role": "ROLE_USER", "messageId": "b", "taskId": asked["id"], "parts": [{"text": "Lin"}]}},
            headers=v1))["result"]["task"]
    assert asked["status"]["state"] == "TASK_STATE_INPUT_REQUIRED"
    assert done["status"]["state"] == "TASK_STATE_COMPLETED"
    assert done["artifacts"][0]["parts"] == [{"text": "done: hello Lin"}]


async def test_messages_to_finished_or_unknown_tasks_are_refused() -> None:
    rec = AgentRecorder()
    async with served_agent(agent_toolkit(rec)) as h, httpx.AsyncClient() as http:
        done = (await rpc(http, h.url, "SendMessage", _send("hi")))["result"]
        await wait_state(h.store, done["id"], {"completed"})
        to_done = await rpc(http, h.url, "SendMessage", _send("more", taskId=done["id"]))
        to_none = await rpc(http, h.url, "SendMessage", _send("more", taskId="t-missing"))
    assert to_done["error"] == {"code": -32004, "message": f"Task {done['id']} is in terminal state: completed"}
    assert to_none["error"] == {"code": -32001, "message": "Task not found: t-missing"}


async def test_two_answers_to_one_question_race_and_exactly_one_wins() -> None:
    rec = AgentRecorder()
    async with served_agent(agent_toolkit(rec)) as h, httpx.AsyncClient() as http:
        task = (await rpc(http, h.url, "SendMessage", _send("ask")))["result"]
        await wait_state(h.store, task["id"], {"input-required"})
        replies = await asyncio.gather(*(rpc(http, h.url, "SendMessage", _send(n, taskId=task["id"]))
                                         for n in ("Ann", "Bob")))
        done = await wait_state(h.store, task["id"], {"completed"})
    assert sorted("result" in r for r in replies) == [False, True]
    assert [r["error"]["code"] for r in replies if "error" in r] == [-32004]
    assert len(rec.answers) == 1 and done["artifacts"][0]["parts"][0]["text"] in ("done: hello Ann", "done: hello Bob")


async def test_cancel_task_stops_the_run_and_stores_canceled() -> None:
    rec, events = AgentRecorder(), []
    async with served_agent(agent_toolkit(rec), on_task=events.append) as h, httpx.AsyncClient() as http:
        task = (await rpc(http, h.url, "SendMessage", _send("block")))["result"]
        await rec.blocked.wait()
        canceled = (await rpc(http, h.url, "CancelTask", {"id": task["id"]}))["result"]
        asked = (await rpc(http, h.url, "SendMessage", _send("ask")))["result"]
        await wait_state(h.store, asked["id"], {"input-required"})
        canceled_question = (await rpc(http, h.url, "tasks/cancel", {"id": asked["id"]}))["result"]
        again = await rpc(http, h.url, "CancelTask", {"id": task["id"]})
        unknown = await rpc(http, h.url, "CancelTask", {"id": "nope"})
    assert rec.block_cancelled.is_set()
    assert canceled["id"] == task["id"] and canceled["status"]["state"] == "canceled"
    assert canceled_question["kind"] == "task" and canceled_question["status"]["state"] == "canceled"
    assert again["error"] == {"code": -32002, "message": f"Task cannot be canceled: {task['id']} is canceled"}
    assert unknown["error"] == {"code": -32001, "message": "Task not found: nope"}
    assert [e["state"] for e in events] == ["canceled", "input-required", "canceled"]


async def test_stop_cancels_fulfilments_still_running_after_the_drain_time() -> None:
    rec, events = AgentRecorder(), []
    toolkit = agent_toolkit(rec)
    async with served_agent(toolkit, on_task=events.append, limits=ServeLimits(drain_timeout=0)) as h:
        async with httpx.AsyncClient() as http:
            task = (await rpc(http, h.url, "SendMessage", _send("block")))["result"]
        await rec.blocked.wait()
        store = h.store
        await h.stop()
        stored = await store.get(task["id"])
    assert stored["status"]["state"] == "canceled" and stored["contextId"] == task["contextId"]
    assert stored["status"]["message"]["parts"][0]["text"] == "canceled: the server stopped before the task finished"
    assert rec.block_cancelled.is_set() and [e["state"] for e in events] == ["canceled"]
    assert not [t for t in await store.list_tasks() if t["status"]["state"] in ("submitted", "working")]


async def test_stop_lets_a_fulfilment_finish_within_the_drain_time() -> None:
    release = asyncio.Event()

    async def slow(args: dict, ctx: object = None) -> ToolResult:
        await release.wait()
        return ToolResult("finished", False)

    toolkit = agent_toolkit(AgentRecorder(), replace={"block": Tool("block", "waits", OBJ, "native", slow)})
    async with served_agent(toolkit, limits=ServeLimits(drain_timeout=30)) as h:
        async with httpx.AsyncClient() as http:
            task = (await rpc(http, h.url, "SendMessage", _send("block")))["result"]
        await wait_state(h.store, task["id"], {"working"})
        stopper = asyncio.ensure_future(h.stop())
        loop = asyncio.get_running_loop()
        deadline = loop.time() + 10
        while not h._server.should_exit and loop.time() < deadline:  # stop() has begun draining
            await asyncio.sleep(0.01)
        assert not stopper.done()
        release.set()
        await stopper
        stored = await h.store.get(task["id"])
    assert stored["status"]["state"] == "completed"
    assert stored["artifacts"][0]["parts"][0]["text"] == "done: finished"


async def test_the_round_trip_works_with_a_file_store_on_disk(tmp_path) -> None:
    rec = AgentRecorder()
    folder = tmp_path / "tasks"
    async with served_agent(agent_toolkit(rec), a2a={"store": f"file:{folder}"}) as h, httpx.AsyncClient() as http:
        task = (await rpc(http, h.url, "SendMessage", _send("ask")))["result"]
        await wait_state(h.store, task["id"], {"input-required"})
        on_disk = json.loads((folder / f"{task['id']}.json").read_text())
        await rpc(http, h.url, "SendMessage", _send("Kim", taskId=task["id"]))
        done = await wait_state(h.store, task["id"], {"completed"})
    assert on_disk["status"]["state"] == "input-required" and on_disk["metadata"]["pending"]["kind"] == "input"
    assert done["artifacts"][0]["parts"][0]["text"] == "done: hello Kim"


async def test_once_stop_begins_new_tasks_and_answers_are_refused() -> None:
    from toolnexus.serve import InMemoryTaskStore
    from toolnexus.serve._fulfil import Fulfiller, ServerStopping

    async def run_task(text: str, context_id: str | None) -> ToolResult:
        raise AssertionError("never started")

    fulfiller = Fulfiller(InMemoryTaskStore(), run_task)
    await fulfiller.stop(0)
    for attempt in (fulfiller.submit("hi", None), fulfiller.follow_up("t-1", "answer")):
        try:
            await attempt
        except ServerStopping:
            continue
        raise AssertionError("accepted work after stop()")
    assert await fulfiller.store.list_tasks() == []
