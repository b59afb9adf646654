"""Interoperability with the official `a2a-sdk` 1.x, both ways, and ours calling ours.

- our served toolkit, called by the SDK's own client in 1.0 mode and in 0.3 mode (the wire each
  sends is recorded from its httpx client);
- SDK servers (1.0 only; 1.0 with its 0.3 compatibility layer) called by our outbound A2A tool;
- our outbound tool calling our server.
"""

from __future__ import annotations

import json
from contextlib import asynccontextmanager
from typing import Any, AsyncIterator

import httpx
from a2a.client import ClientConfig, ClientFactory
from a2a.client.card_resolver import parse_agent_card
from a2a.types import a2a_pb2 as pb

from support.a2a_sdk_server import sdk_agent
from support.serve_kit import AgentRecorder, agent_toolkit, agent_toolkit_with_skill, card_of, served_agent
from toolnexus import ToolContext, answer_output
from toolnexus.a2a import agent, agent_tools
from toolnexus.types import Answer


@asynccontextmanager
async def sdk_client(base: str, *, version: str = "1.0", polling: bool = False) -> AsyncIterator[tuple[Any, list]]:
    """The SDK client for our server, restricted to one interface version; yields (client, wire)."""
    wire: list[tuple[str, str]] = []

    async def record(request: httpx.Request) -> None:
        if request.method == "POST":
            wire.append((json.loads(request.content)["method"], request.headers.get("a2a-version", "")))

    http = httpx.AsyncClient(event_hooks={"request": [record]})
    async with http:
        card = await card_of(http, base)
        card["supportedInterfaces"] = [i for i in card["supportedInterfaces"] if i["protocolVersion"] == version]
        client = ClientFactory(ClientConfig(streaming=False, polling=polling, httpx_client=http)).create(
            parse_agent_card(card))
        try:
            yield client, wire
        finally:
            await client.close()


def _message(text: str, **fields: Any) -> pb.SendMessageRequest:
    msg = pb.Message(role=pb.ROLE_USER, message_id="m-" + text[:8], parts=[pb.Part(text=text)], **fields)
    return pb.SendMessageRequest(message=msg)


async def _send(client: Any, request: pb.SendMessageRequest) -> pb.Task:
    events = [ev async for ev in client.send_message(request)]
    assert len(events) == 1 and events[0].HasField("task")
    return events[0].task


def _artifact_text(task: pb.Task) -> str:
    return "".join(p.text for a in task.artifacts for p in a.parts)


async def test_the_sdk_client_in_1_0_mode_sends_and_gets_over_the_1_0_wire() -> None:
    async with served_agent(a2a={"name": "Ours"}) as h, sdk_client(h.url) as (client, wire):
        task = await _send(client, _message("hello"))
        again = await client.get_task(pb.GetTaskRequest(id=task.id))
        follow = await _send(client, _message("recall", context_id=task.context_id))
    assert task.status.state == pb.TASK_STATE_COMPLETED  # 1.0 blocks by default: the outcome comes back
    assert _artifact_text(task) == "echo: hello"
    assert again.id == task.id and again.status.state == pb.TASK_STATE_COMPLETED
    assert _artifact_text(follow) == "you said: hello"
    assert wire == [("SendMessage", "1.0"), ("GetTask", "1.0"), ("SendMessage", "1.0")]


async def test_the_sdk_client_in_0_3_mode_uses_message_send_and_tasks_get() -> None:
    async with served_agent() as h, sdk_client(h.url, version="0.3") as (client, wire):
        task = await _send(client, _message("old school"))
        again = await client.get_task(pb.GetTaskRequest(id=task.id))
    assert task.status.state == pb.TASK_STATE_COMPLETED and _artifact_text(task) == "echo: old school"
    assert again.status.state == pb.TASK_STATE_COMPLETED and task.context_id
    assert wire == [("message/send", "0.3"), ("tasks/get", "0.3")]


async def test_the_sdk_client_answers_an_input_required_task_and_the_run_resumes() -> None:
    rec = AgentRecorder()
    for version in ("1.0", "0.3"):
        async with served_agent(agent_toolkit(rec)) as h, sdk_client(h.url, version=version) as (client, _):
            asked = await _send(client, _message("ask for my name"))
            assert asked.status.state == pb.TASK_STATE_INPUT_REQUIRED
            assert [p.text for p in asked.status.message.parts] == ["What is your name?"]
            done = await _send(client, _message("Ada", task_id=asked.id, context_id=asked.context_id))
        assert done.id == asked.id and done.status.state == pb.TASK_STATE_COMPLETED
        assert _artifact_text(done) == "done: hello Ada"
    assert [a.data for a in rec.answers] == [{"text": "Ada"}, {"text": "Ada"}]


async def test_the_sdk_client_cancels_a_running_task() -> None:
    rec = AgentRecorder()
    async with served_agent(agent_toolkit(rec)) as h, sdk_client(h.url, polling=True) as (client, wire):
        task = await _send(client, _message("block"))
        await rec.blocked.wait()
        canceled = await client.cancel_task(pb.CancelTaskRequest(id=task.id))
        stored = await h.store.get(task.id)
    assert task.status.state in (pb.TASK_STATE_SUBMITTED, pb.TASK_STATE_WORKING)
    assert canceled.status.state == pb.TASK_STATE_CANCELED and rec.block_cancelled.is_set()
    assert stored["status"]["state"] == "canceled"
    assert wire[-1] == ("CancelTask", "1.0")


async def _round_trip(card_url: str) -> tuple[Any, Any, Any]:
    [tool] = await agent_tools(agent(card_url, poll_every=20, timeout=20_000))
    plain = await tool.execute({"task": "hi there"})
    asked = await tool.execute({"task": "ask me"})
    req = asked.metadata["pending"]
    answered = await tool.execute(
        {"task": "ask me"}, ToolContext(answer=Answer(id=req.id, ok=True, data={"text": "Ada"}))
    )
    return plain, asked, answered


async def test_our_tool_calls_an_sdk_1_0_server() -> None:
    async with sdk_agent() as remote:
        plain, asked, answered = await _round_trip(remote.card_url)
        seen = list(remote.seen)
    assert (plain.output, plain.is_error) == ("sdk echo: hi there", False)
    assert asked.metadata["state"] == "input-required" and asked.metadata["pending"].prompt == "What is your name?"
    assert (answered.output, answered.is_error) == ("hello Ada", False)
    assert {m for m, _ in seen} == {"SendMessage", "GetTask"} and {v for _, v in seen} == {"1.0"}


async def test_our_tool_calls_an_sdk_server_with_0_3_compatibility_in_both_versions() -> None:
    async with sdk_agent(compat=True) as remote:
        plain, _, answered = await _round_trip(remote.card_url)
        first = list(remote.seen)
        [legacy] = await agent_tools(agent(remote.legacy_card_url, poll_every=20, timeout=20_000))
        old = await legacy.execute({"task": "from 0.3"})
        later = remote.seen[len(first):]
    assert plain.output == "sdk echo: hi there" and answered.output == "hello Ada"
    assert {v for _, v in first} == {"1.0"}
    assert old.output == "sdk echo: from 0.3" and not old.is_error
    assert [m for m, _ in later] == ["message/send", "tasks/get"]


async def test_ours_calls_ours_through_a_skill_and_answers_the_question() -> None:
    rec = AgentRecorder()
    toolkit = await agent_toolkit_with_skill(rec, "chat")
    async with served_agent(toolkit, a2a={"name": "Inner"}) as h:
        [tool] = await agent_tools(agent(h.url + "/.well-known/agent-card.json", poll_every=20, timeout=20_000))
        plain = await tool.execute({"task": "hello inner"})
        asked = await tool.execute({"task": "ask who I am"})
        req = asked.metadata["pending"]
        answered = await tool.execute({"task": "ask who I am"}, ToolContext(answer=answer_output(req.id, "Grace")))
        stored = await h.store.get(asked.metadata["taskId"])
    assert tool.name == "Inner_chat"
    assert (plain.output, plain.is_error) == ("echo: hello inner", False)
    assert asked.metadata["state"] == "input-required" and req.prompt == "What is your name?"
    assert (answered.output, answered.is_error) == ("done: hello Grace", False)
    assert answered.metadata["taskId"] == asked.metadata["taskId"]  # the same remote task, resumed
    assert stored["status"]["state"] == "completed"
    assert [a.data for a in rec.answers] == [{"text": "Grace"}]
