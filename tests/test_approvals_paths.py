"""Approvals on every resume path, each answered with an approval and with a rejection: the
in-process `wait_for` (see test_approvals_sources), `rt.resume`, `toolnexus.agents.resume` from a
SQLite store, the client's `run_with_answer` / `ask_with_answer`, a served A2A task's
`input-required`, MCP elicitation when served, and a Temporal worker (the interactive CLI prompt
is in test_approvals_cli). Then what only store state can give: a restored run keeps a sticky
decision, N approvals need N distinct answerers across restarts, and an expiry escalates.

The same gated tool everywhere: `deploy(service)` with `needs_approval=True`, whose body appends
to `RAN`; the model calls it once and then repeats the tool result it was sent, so the final text
is what the model received.
"""

from __future__ import annotations

import json
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import httpx
import mcp_types as mtypes
import pytest
from mcp.client.client import Client as McpClient

from support.serve_kit import rpc, wait_state
from support.stores import shared_store_url  # noqa: F401 - fixture: file, SQLite and PostgreSQL
from support.temporal_server import run_id, temporal_server, worker  # noqa: F401 - fixture
from toolnexus import Answer, ApprovalRule, Escalate, create_in_process_client, create_toolkit, define_tool, pending
from toolnexus.agents import agent, resume
from toolnexus.approvals import approval_of
from toolnexus.client import ResumeError
from toolnexus.stores import open_store

RAN: list[str] = []
BODY_RUNS: list[Any] = []
LLM = {"base_url": "http://mock.local", "style": "openai", "model": "stub-model", "api_key": "unused"}


def deploy(service: str) -> str:
    """Deploy a service."""
    RAN.append(service)
    return f"{service} deployed"


DEPLOY = define_tool(deploy, needs_approval=True)
DEPLOYER = agent("deployer", does="deploys", uses={"tools": [DEPLOY]})


@pytest.fixture(autouse=True)
def _fresh() -> None:
    RAN.clear()
    BODY_RUNS.clear()


def _reply(message: dict[str, Any]) -> dict[str, Any]:
    return {"choices": [{"message": {"role": "assistant", **message},
                         "finish_reason": "tool_calls" if message.get("tool_calls") else "stop"}],
            "usage": {"prompt_tokens": 2, "completion_tokens": 1, "total_tokens": 3}}


class EchoModel:
    """Calls `tool` with each of `calls` in turn (one per turn), then says `saw: <last tool result>`."""

    def __init__(self, tool: str = "deploy", *calls: dict[str, Any]) -> None:
        self.tool, self.calls = tool, list(calls) or [{"service": "billing"}]

    def post(self, url: str, headers: dict[str, str], payload: dict[str, Any], timeout: float) -> dict[str, Any]:
        messages = payload["messages"]
        results = [m for m in messages if m.get("role") == "tool"]
        made = sum(len(m.get("tool_calls") or []) for m in messages if m.get("role") == "assistant")
        if made < len(self.calls) and (not results or results[-1]["tool_call_id"] == f"c{made - 1}"):
            return _reply({"content": None, "tool_calls": [{"id": f"c{made}", "type": "function", "function": {
                "name": self.tool, "arguments": json.dumps(self.calls[made])}}]})
        return _reply({"content": "saw: " + (results[-1]["content"] if results else "")})

    def open(self, *args: Any) -> Any:
        raise NotImplementedError


def deploy_then_echo(request: dict) -> dict:
    """`EchoModel` for an in-process client (test_approvals_who uses it too)."""
    last = request["messages"][-1]
    if last["role"] == "tool":
        return {"content": "saw: " + last["content"]}
    return {"tool_calls": [{"name": "deploy", "args": {"service": "billing"}}]}


def _declined(prompt: str, who: str = "message") -> str:
    return f"saw: declined/expired: {prompt}\n{who}: not today"


DECISIONS = ["approve", "reject"]


def _answer(decision: str, request_id: str, **extra: Any) -> Answer:
    if decision == "approve":
        return Answer(id=request_id, ok=True, **extra)
    return Answer(id=request_id, ok=False, reason="declined", message="not today", **extra)


# -- rt.resume (no store: replay) ------------------------------------------------------------------------


@pytest.mark.parametrize("decision", DECISIONS)
async def test_runtime_resume(decision: str, exits) -> None:
    r = await DEPLOYER.run("ship it", transport=EchoModel(), llm=LLM)
    exits.push_async_callback(r.runtime.close, r.runtime.root)
    assert r.status == "pending" and RAN == []
    a = approval_of(r.pending)
    assert a["agent_path"] == ["root", "deployer.1"] and r.pending.data["path"] == ["root", "deployer.1"]
    final = await r.runtime.resume(_answer(decision, r.pending.id))
    if decision == "approve":
        assert (final.status, final.text, RAN) == ("done", "saw: billing deployed", ["billing"])
    else:
        assert (final.status, final.text, RAN) == ("done", _declined(r.pending.prompt), [])


# -- toolnexus.agents.resume from a store (continue) -------------------------------------------------------


@pytest.mark.parametrize("decision", DECISIONS)
async def test_agents_resume_from_a_store(decision: str, tmp_path: Path) -> None:
    url = f"sqlite:///{tmp_path / 'runs.db'}"
    async with open_store(url) as store:
        r = await DEPLOYER.run("ship it", transport=EchoModel(), llm=LLM, store=store, run_id="ship-1")
        await r.runtime.aclose()
    assert r.status == "pending" and RAN == []
    async with open_store(url) as store:  # another "process": nothing but the store
        [waiting] = await store.pending()
        assert approval_of(waiting.request)["tool"] == "deploy"
        final = await resume(store, _answer(decision, waiting.request.id, by="ann", via="api"),
                             agents=[DEPLOYER], llm=LLM, transport=EchoModel())
    if decision == "approve":
        assert (final.status, final.text, RAN) == ("done", "saw: billing deployed", ["billing"])
    else:
        assert (final.status, final.text, RAN) == ("done", _declined(r.pending.prompt, "message from ann"), [])


# -- the client: run_with_answer, ask_with_answer ------------------------------------------------------------


@pytest.mark.parametrize("decision", DECISIONS)
async def test_client_run_with_answer_and_ask_with_answer(decision: str, tmp_path: Path) -> None:
    toolkit = await create_toolkit(builtins=False, extra_tools=[DEPLOY])
    client = create_in_process_client(model="m", generate=deploy_then_echo)
    halted = await client.run("ship it", toolkit)
    assert halted.status == "pending" and RAN == []
    final = await client.run_with_answer(toolkit, halted.messages, halted.pending, _answer(decision, halted.pending.id))
    async with open_store(f"sqlite:///{tmp_path / 'runs.db'}") as store:
        durable = create_in_process_client(model="m", generate=deploy_then_echo, store=store)
        parked = await durable.ask("ship it", toolkit, id="conv-1")
        [waiting] = await store.pending()
        assert waiting.request.id == parked.pending.id and waiting.run_id == "conversation:conv-1"
        later = create_in_process_client(model="m", generate=deploy_then_echo, store=store)  # a fresh client
        asked = await later.ask_with_answer(toolkit, "conv-1", waiting.request, _answer(decision, parked.pending.id))
    if decision == "approve":
        assert (final.text, asked.text, RAN) == ("saw: billing deployed", "saw: billing deployed", ["billing"] * 2)
    else:
        assert (final.text, asked.text, RAN) == (_declined(halted.pending.prompt), _declined(parked.pending.prompt), [])


# -- A2A: input-required, answered by a follow-up message ------------------------------------------------


def _send(text: str, **message: Any) -> dict:
    return {"message": {"role": "user", "messageId": "m-1", "parts": [{"kind": "text", "text": text}], **message},
            "configuration": {"blocking": False}}


@pytest.mark.parametrize("decision", DECISIONS)
async def test_a2a_input_required(decision: str) -> None:
    toolkit = await create_toolkit(builtins=False, extra_tools=[DEPLOY])
    client = create_in_process_client(model="m", generate=deploy_then_echo)
    handle = await toolkit.serve("127.0.0.1:0", client=client, a2a={})
    try:
        async with httpx.AsyncClient() as http:
            task = (await rpc(http, handle.url, "SendMessage", _send("ship it")))["result"]
            asked = await wait_state(handle.store, task["id"], {"input-required"})
            request = asked["metadata"]["pending"]
            assert RAN == [] and request["kind"] == "approval"
            assert request["data"]["approval"]["arguments"] == {"service": "billing"}
            assert asked["status"]["message"]["parts"] == [{"kind": "text", "text": request["prompt"]}]
            reply = "approve" if decision == "approve" else "reject: not today"
            await rpc(http, handle.url, "SendMessage", _send(reply, taskId=task["id"]))
            done = await wait_state(handle.store, task["id"], {"completed"})
    finally:
        await handle.stop()
        await toolkit.close()
    text = done["artifacts"][0]["parts"][0]["text"]
    if decision == "approve":
        assert (text, RAN) == ("saw: billing deployed", ["billing"])
    else:
        assert (text, RAN) == (_declined(request["prompt"]), [])


# -- MCP: a served tool asks its caller through elicitation --------------------------------------------


@pytest.mark.parametrize("decision", DECISIONS)
async def test_mcp_elicitation_when_served(decision: str) -> None:
    asked: list[Any] = []

    async def callback(ctx: Any, params: Any) -> mtypes.ElicitResult:
        asked.append((params, list(RAN)))
        content = {"decision": "approve"} if decision == "approve" else {"decision": "reject", "message": "not today"}
        return mtypes.ElicitResult(action="accept", content=content)

    toolkit = await create_toolkit(builtins=False, extra_tools=[DEPLOY])
    handle = await toolkit.serve("127.0.0.1:0", mcp={})
    try:
        async with McpClient(handle.url + "/mcp", elicitation_callback=callback) as mcp:
            result = await mcp.call_tool("deploy", {"service": "billing"})
    finally:
        await handle.stop()
        await toolkit.close()
    [(params, ran_then)] = asked
    assert ran_then == [] and params.message.startswith('Approve deploy {"service": "billing"}? (native)')
    assert params.requested_schema["properties"]["decision"]["enum"] == ["approve", "reject"]
    if decision == "approve":
        assert (result.content[0].text, result.is_error, RAN) == ("billing deployed", False, ["billing"])
    else:
        assert result.is_error and RAN == []
        assert result.content[0].text == f"declined/expired: {params.message}\nmessage: not today"


# -- Temporal: a worker runs the agent, the host answers ----------------------------------------------------


@pytest.mark.parametrize("decision", DECISIONS)
async def test_temporal_worker(decision: str, temporal_server: Any) -> None:
    pytest.importorskip("temporalio")
    async with worker(temporal_server, agents=[DEPLOYER], llm=LLM, transport=EchoModel()) as host:
        rid = run_id("approve")
        first = await host.start("deployer", "ship it", run_id=rid, wait=True)
        assert first.status == "pending" and RAN == []
        [listed] = await host.pending(rid)  # the query shows the approval in full
        assert approval_of(listed.request)["arguments"] == {"service": "billing"}
        assert approval_of(listed.request)["agent_path"] == ["root", "deployer.1"]
        final = await host.answer(_answer(decision, first.pending.id, via="temporal"))
    if decision == "approve":
        assert (final.status, final.text, RAN) == ("done", "saw: billing deployed", ["billing"])
    else:
        assert (final.status, final.text, RAN) == ("done", _declined(first.pending.prompt), [])


# -- what the body runs, without a store -------------------------------------------------------------------


async def hand_written(service: str, ctx: Any = None) -> Any:
    """Deploy, asking first (the hand-written way)."""
    BODY_RUNS.append(ctx.answer.ok if ctx is not None and ctx.answer is not None else None)
    if ctx is None or ctx.answer is None:
        return pending(kind="approval", prompt=f"Deploy {service}?")
    return f"{service} deployed"


async def test_without_a_store_a_tool_that_asks_runs_twice_and_a_gated_tool_once(exits) -> None:
    asker = agent("deployer", does="deploys", uses={"tools": [define_tool(hand_written, name="deploy")]})
    r = await asker.run("ship it", transport=EchoModel(), llm=LLM)
    exits.push_async_callback(r.runtime.close, r.runtime.root)
    final = await r.runtime.resume(Answer(id=r.pending.id, ok=True))
    assert final.text == "saw: billing deployed"
    assert BODY_RUNS == [None, True]  # asked, then ran with the answer: twice (the replay does not ask again)

    r = await DEPLOYER.run("ship it", transport=EchoModel(), llm=LLM)
    exits.push_async_callback(r.runtime.close, r.runtime.root)
    await r.runtime.resume(Answer(id=r.pending.id, ok=True))
    assert RAN == ["billing"]  # the gate asked; the body ran once, after the approval


# -- sticky decisions survive a restore --------------------------------------------------------------------


@pytest.mark.parametrize("sticky", [True, False], ids=["approve", "reject"])
async def test_a_restored_run_keeps_its_sticky_decision(sticky: bool, shared_store_url: str) -> None:
    """`always` (approve, or reject with a message) on deploy, then a park on another tool; the run
    restored from the store decides the next deploy from its memory, without asking."""
    other: list[str] = []
    sent: list[list[str]] = []  # the tool results the model had been sent, per model call

    def audit(note: str) -> str:
        """Write an audit note."""
        other.append(note)
        return "noted"

    steady = agent("deployer", does="deploys", uses={"tools": [DEPLOY, define_tool(audit, needs_approval=True)]})
    calls = [("deploy", {"service": "a"}), ("deploy", {"service": "b"}), ("audit", {"note": "n"}),
             ("deploy", {"service": "c"})]

    class Model(EchoModel):
        def post(self, url: str, headers: dict[str, str], payload: dict[str, Any], timeout: float) -> dict:
            sent.append([m["content"] for m in payload["messages"] if m.get("role") == "tool"])
            made = sum(len(m.get("tool_calls") or []) for m in payload["messages"] if m.get("role") == "assistant")
            if made < len(calls):
                name, args = calls[made]
                return _reply({"content": None, "tool_calls": [{"id": f"c{made}", "type": "function", "function": {
                    "name": name, "arguments": json.dumps(args)}}]})
            return _reply({"content": "all done"})

    url = shared_store_url
    async with open_store(url) as store:
        r = await steady.run("go", transport=Model(), llm=LLM, store=store, run_id="sticky-1")
        await r.runtime.aclose()
        assert approval_of(r.pending)["tool"] == "deploy"
        decided = Answer(id=r.pending.id, ok=sticky, always=True, by="ann", **({} if sticky else {
            "reason": "declined", "message": "frozen until Monday"}))
        nxt = await resume(store, decided, agents=[steady], llm=LLM, transport=Model())
    assert nxt.status == "pending" and approval_of(nxt.pending)["tool"] == "audit"
    assert RAN == (["a", "b"] if sticky else [])
    async with open_store(url) as store:  # restored from the store alone
        final = await resume(store, Answer(id=nxt.pending.id, ok=True), agents=[steady], llm=LLM, transport=Model())
        assert await store.pending() == []
    assert (final.status, RAN, other) == ("done", ["a", "b", "c"] if sticky else [], ["n"])
    deploys = [sent[-1][i] for i in (0, 1, 3)]  # what the model was told of each deploy call
    if sticky:
        assert deploys == ["a deployed", "b deployed", "c deployed"]
    else:
        shown = json.dumps({"service": "a"})  # the first deploy's arguments, in its prompt
        prompts = [r.pending.prompt.replace(shown, json.dumps({"service": s})) for s in "abc"]
        assert deploys == [f"declined/expired: {p}\nmessage from ann: frozen until Monday" for p in prompts]


# -- N-of-M and escalation, as store state (the file store, SQLite and PostgreSQL) -------------------------


def release(service: str) -> str:
    """Release a service to production."""
    RAN.append(service)
    return f"{service} released"


TWO_PERSON = agent("releaser", does="releases", uses={"tools": [
    define_tool(release, needs_approval=ApprovalRule(approvals=2))]})
ESCALATING = agent("releaser", does="releases", uses={"tools": [
    define_tool(release, needs_approval=ApprovalRule(expires_in=600, group="leads",
                                                     on_expiry=Escalate("oncall", expires_in=60)))]})


async def test_two_approvals_from_distinct_people_survive_a_restart(shared_store_url: str) -> None:
    url = shared_store_url
    model = EchoModel("release", {"service": "api"})
    async with open_store(url) as store:
        r = await TWO_PERSON.run("release", transport=model, llm=LLM, store=store, run_id="two-1")
        await r.runtime.aclose()
        assert "[0 of 2 approvals]" in r.pending.prompt
        with pytest.raises(ResumeError, match="say who approves"):
            await resume(store, Answer(id=r.pending.id, ok=True), agents=[TWO_PERSON], llm=LLM, transport=model)
        one = await resume(store, Answer(id=r.pending.id, ok=True, by="alice"), agents=[TWO_PERSON], llm=LLM,
                           transport=model)
    assert one.status == "pending" and RAN == [] and one.pending.id == r.pending.id + ".a1"
    assert "[1 of 2 approvals: alice]" in one.pending.prompt
    async with open_store(url) as store:  # a restart: the collected approval is store state
        [waiting] = await store.pending()
        assert approval_of(waiting.request)["approvals"][0]["by"] == "alice"
        with pytest.raises(ResumeError, match="alice already approved"):
            await resume(store, Answer(id=waiting.request.id, ok=True, by="alice"), agents=[TWO_PERSON], llm=LLM,
                         transport=model)
        final = await resume(store, Answer(id=waiting.request.id, ok=True, by="bob"), agents=[TWO_PERSON], llm=LLM,
                             transport=model)
    assert (final.status, final.text, RAN) == ("done", "saw: api released", ["api"])


async def test_an_expired_request_escalates_to_another_group_then_declines(shared_store_url: str) -> None:
    url = shared_store_url
    model = EchoModel("release", {"service": "api"})
    async with open_store(url) as store:
        r = await ESCALATING.run("release", transport=model, llm=LLM, store=store, run_id="esc-1")
        await r.runtime.aclose()
        assert r.pending.expiresAt and approval_of(r.pending)["group"] == "leads"
        # the expiry fires (a timer, a worker: the same answer any process gives)
        escalated = await resume(store, Answer(id=r.pending.id, ok=False, reason="expired", via="timer"),
                                 agents=[ESCALATING], llm=LLM, transport=model)
    a = approval_of(escalated.pending)
    assert (a["group"], a["escalated_from"], RAN) == ("oncall", r.pending.id, [])
    assert escalated.pending.prompt.endswith("[escalated to oncall]") and escalated.pending.expiresAt
    async with open_store(url) as store:
        [waiting] = await store.pending()
        assert waiting.request.id == escalated.pending.id
        final = await resume(store, Answer(id=waiting.request.id, ok=False, reason="expired"), agents=[ESCALATING],
                             llm=LLM, transport=model)
    assert final.status == "done" and final.text == f"saw: declined/expired: {escalated.pending.prompt}" and RAN == []


async def test_in_process_a_late_approval_escalates_and_the_escalation_is_asked() -> None:
    toolkit = await create_toolkit(builtins=False, extra_tools=[define_tool(release, needs_approval=ApprovalRule(
        expires_in=60, on_expiry=Escalate("oncall")))])
    asked: list[Any] = []

    def human(request: Any) -> Answer:
        asked.append(request)
        if len(asked) == 1:  # answers after the request expired
            client.clock = lambda: datetime.now(UTC) + timedelta(hours=1)
        return Answer(id=request.id, ok=True, by="carol")

    def model(request: dict) -> dict:
        last = request["messages"][-1]
        if last["role"] == "tool":
            return {"content": "saw: " + last["content"]}
        return {"tool_calls": [{"name": "release", "args": {"service": "api"}}]}

    client = create_in_process_client(model="m", generate=model, wait_for=human)
    final = await client.run("go", toolkit)
    assert [approval_of(r)["group"] for r in asked] == [None, "oncall"]
    assert (final.text, RAN) == ("saw: api released", ["api"])
