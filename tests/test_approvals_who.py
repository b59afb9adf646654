"""Who answered, on every path, as `toolnexus show RUN` prints it; and who may answer a group's request.

Each path answers a run parked in a real SQLite store and `toolnexus show` (the CLI, in this
process) reads the answer back from the store: the API (`resume(store, Answer(by=...))`), a
served A2A task (a real loopback server whose bearer token stands for `auth_identity`), a served
MCP endpoint over HTTP (an agent served as a tool, its run in the store, answered through the
caller's elicitation form) — and MCP without HTTP (what stdio serves), where nobody is known.
Then the groups: a request made for a group (`ApprovalRule(group=...)`)
is refused over A2A and MCP from an identity not in the group, from a caller the server does not
know (no token), and over the API without a `by`; the member's answer goes through. The signed
link and the inbox are in test_inbox_app, the CLI's `--by` in test_approvals_cli.
"""

from __future__ import annotations

import asyncio
import re
from pathlib import Path
from typing import Any

import httpx
import httpx2
import mcp_types as mtypes
import pytest
from mcp.client.client import Client as McpClient
from mcp.client.streamable_http import streamable_http_client

from support.serve_kit import rpc, wait_state
from test_approvals_paths import deploy_then_echo
from toolnexus import (
    Answer,
    ApprovalRule,
    Tool,
    ToolResult,
    create_in_process_client,
    create_toolkit,
    define_tool,
    pending,
)
from toolnexus.agents import agent, resume
from toolnexus.approvals import Answerers
from toolnexus.cli import main
from toolnexus.client import ResumeError
from toolnexus.mcp_serve import build_mcp_server
from toolnexus.stores import open_store

TOKEN = "a2a-token-0123456789"
LLM = {"base_url": "http://mock.local", "style": "openai", "model": "stub-model", "api_key": "unused"}
RAN: list[str] = []


def deploy(service: str) -> str:
    """Deploy a service."""
    RAN.append(service)
    return f"{service} deployed"


DEPLOY = define_tool(deploy, needs_approval=True)
DEPLOY_FINANCE = define_tool(deploy, needs_approval=ApprovalRule(group="finance"))
DEPLOYER = agent("deployer", does="deploys", uses={"tools": [DEPLOY]})
FINANCE = agent("deployer", does="deploys", uses={"tools": [DEPLOY_FINANCE]})


@pytest.fixture(autouse=True)
def _fresh() -> None:
    RAN.clear()


@pytest.fixture
async def store(tmp_path: Path) -> Any:
    async with open_store(f"sqlite:///{tmp_path / 'runs.db'}") as s:
        yield s


class EchoModel:
    """Calls `deploy(service=billing)` once, then says `saw: <the tool result>` (an `HttpTransport`)."""

    def post(self, url: str, headers: dict[str, str], payload: dict[str, Any], timeout: float) -> dict[str, Any]:
        results = [m for m in payload["messages"] if m.get("role") == "tool"]
        usage = {"prompt_tokens": 2, "completion_tokens": 1, "total_tokens": 3}
        if not results:
            call = {"id": "c0", "type": "function",
                    "function": {"name": "deploy", "arguments": '{"service": "billing"}'}}
            return {"choices": [{"message": {"role": "assistant", "content": None, "tool_calls": [call]},
                                 "finish_reason": "tool_calls"}], "usage": usage}
        return {"choices": [{"message": {"role": "assistant", "content": "saw: " + results[-1]["content"]},
                             "finish_reason": "stop"}], "usage": usage}

    def open(self, *args: Any) -> Any:
        raise NotImplementedError


async def show(store: Any, run_id: str) -> dict[str, str]:
    """`toolnexus show RUN --store URL`, in this process: each answered request's line, by request id."""
    from contextlib import redirect_stdout
    from io import StringIO

    out = StringIO()
    with redirect_stdout(out):
        code = await asyncio.to_thread(main, ["show", run_id, "--store", store.url])
    assert code == 0, out.getvalue()
    section = out.getvalue().split("\nrequests:\n", 1)[1].split("\n\n", 1)[0]
    return {line.split()[0]: line for line in section.splitlines() if " → " in line}


WHEN = r" at \d{4}-\d\d-\d\dT\d\d:\d\d"


# -- the API ------------------------------------------------------------------------------------------------


async def test_an_api_answer_is_shown_with_who_and_through_what(store: Any) -> None:
    r = await DEPLOYER.run("ship it", transport=EchoModel(), llm=LLM, store=store, run_id="api-1")
    await r.runtime.aclose()
    final = await resume(store, Answer(id=r.pending.id, ok=True, by="ann", via="api"), agents=[DEPLOYER], llm=LLM,
                         transport=EchoModel())
    assert (final.status, RAN) == ("done", ["billing"])
    line = (await show(store, "api-1"))[r.pending.id]
    assert re.search(r"→ ok \(by ann via api" + WHEN, line), line


async def test_a_groups_request_is_refused_over_the_api_without_a_by_and_taken_with_one(store: Any) -> None:
    r = await FINANCE.run("ship it", transport=EchoModel(), llm=LLM, store=store, run_id="api-group")
    await r.runtime.aclose()
    for nobody in (Answer(id=r.pending.id, ok=True), Answer(id=r.pending.id, ok=False, message="no")):
        with pytest.raises(ResumeError, match="for the group 'finance': only its members may answer it, and this "
                                              "answer does not say who gives it"):
            await resume(store, nobody, agents=[FINANCE], llm=LLM, transport=EchoModel())
    assert [p.request.id for p in await store.pending()] == [r.pending.id] and RAN == []  # nothing changed
    final = await resume(store, Answer(id=r.pending.id, ok=True, by="fay", via="api"), agents=[FINANCE], llm=LLM,
                         transport=EchoModel())
    assert (final.status, RAN) == ("done", ["billing"])
    assert "(by fay via api at " in (await show(store, "api-group"))[r.pending.id]


# -- A2A: a served task, its bearer token standing for an identity --------------------------------------------


def _send(text: str, **message: Any) -> dict:
    return {"message": {"role": "user", "messageId": f"m-{text[:8]}", "parts": [{"kind": "text", "text": text}],
                        **message}, "configuration": {"blocking": False}}


async def _a2a(store: Any, tool: Any, a2a: dict[str, Any], replies: list[str], exits: Any) -> tuple[dict, list]:
    """Serve a toolkit of `tool` over A2A (the client keeps its conversations in `store`), start a task,
    wait for its question, send each of `replies` in turn; the task as last seen, and the JSON-RPC replies."""
    toolkit = await create_toolkit(builtins=False, extra_tools=[tool])
    exits.push_async_callback(toolkit.close)
    client = create_in_process_client(model="m", generate=deploy_then_echo, store=store)
    handle = await toolkit.serve("127.0.0.1:0", client=client, a2a=a2a)
    exits.push_async_callback(handle.stop)
    headers = {"authorization": f"Bearer {TOKEN}"} if a2a.get("auth_token") else {}
    answered = []
    async with httpx.AsyncClient() as http:
        task = (await rpc(http, handle.url, "SendMessage", _send("ship it"), headers=headers))["result"]
        task = await wait_state(handle.store, task["id"], {"input-required"})
        for reply in replies:
            answered.append(await rpc(http, handle.url, "SendMessage", _send(reply, taskId=task["id"]),
                                      headers=headers))
            task = await wait_state(handle.store, task["id"], {"input-required", "completed", "failed"})
    return task, answered


async def test_an_a2a_answer_records_the_identity_its_token_stands_for(store: Any, exits: Any) -> None:
    a2a = {"auth_token": TOKEN, "auth_identity": "ops-bot"}
    # the message claims to be someone else: the server knows whom it let in
    task, [reply] = await _a2a(store, DEPLOY, a2a, ['{"approve": true, "by": "mallory"}'], exits)
    assert "result" in reply and task["status"]["state"] == "completed" and RAN == ["billing"]
    [run] = [s.run_id for s in await store.runs()]
    [line] = (await show(store, run)).values()
    assert run == "conversation:" + task["contextId"]
    assert re.search(r"→ ok \(by ops-bot via a2a" + WHEN, line), line
    assert TOKEN not in line


async def test_a2a_without_an_identity_of_its_own_records_the_token_holder(store: Any, exits: Any) -> None:
    task, _ = await _a2a(store, DEPLOY, {"auth_token": TOKEN}, ["reject: not today"], exits)
    assert task["status"]["state"] == "completed" and RAN == []
    [line] = (await show(store, "conversation:" + task["contextId"])).values()
    assert "→ declined (declined): not today (by token-holder via a2a at " in line


async def test_a2a_refuses_a_groups_request_from_outside_the_group_and_the_task_waits(store: Any,
                                                                                    exits: Any) -> None:
    a2a = {"auth_token": TOKEN, "auth_identity": "mallory", "answerers": {"finance": ["fay"]}}
    task, [approve, reject] = await _a2a(store, DEPLOY_FINANCE, a2a,
                                         ["approve", '{"approve": false, "by": "fay"}'], exits)
    for reply in (approve, reject):
        assert reply["error"]["code"] == -32602, reply
        assert reply["error"]["message"].startswith("Invalid params: message: the answer to ")
        assert "is for the group 'finance', and mallory is not in it" in reply["error"]["message"]
    assert task["status"]["state"] == "input-required" and RAN == []  # the task still waits for its answer
    [waiting] = await store.pending()
    assert waiting.status == "open"


async def test_a2a_takes_a_groups_request_from_a_member_and_refuses_it_from_a_caller_it_does_not_know(
        store: Any, exits: Any) -> None:
    task, [reply] = await _a2a(store, DEPLOY_FINANCE, {}, ["approve"], exits)
    assert "this A2A connection does not say who is answering (no auth_token)" in reply["error"]["message"]
    assert task["status"]["state"] == "input-required" and RAN == []
    member = {"auth_token": TOKEN, "auth_identity": "fay", "answerers": Answerers({"finance": ["fay"]})}
    task, [reply] = await _a2a(store, DEPLOY_FINANCE, member, ["approve"], exits)
    assert "result" in reply and task["status"]["state"] == "completed" and RAN == ["billing"]
    [line] = (await show(store, "conversation:" + task["contextId"])).values()
    assert "→ ok (by fay via a2a at " in line


# -- MCP over HTTP: an agent served as a tool, its run in the store --------------------------------------------


async def _mcp(store: Any, who: Any, mcp: dict[str, Any], content: dict[str, Any], exits: Any) -> Any:
    """Serve `who.as_tool(store=store)` over MCP; call it with the token (if any), answering the approval
    form with `content`; the call's result."""
    toolkit = await create_toolkit(builtins=False, extra_tools=[who.as_tool(store=store, transport=EchoModel(),
                                                                            llm=LLM)])
    exits.push_async_callback(toolkit.close)
    handle = await toolkit.serve("127.0.0.1:0", mcp=mcp)
    exits.push_async_callback(handle.stop)
    asked: list[Any] = []

    async def callback(ctx: Any, params: Any) -> mtypes.ElicitResult:
        asked.append(params)
        return mtypes.ElicitResult(action="accept", content=content)

    headers = {"Authorization": f"Bearer {TOKEN}"} if mcp.get("auth_token") else {}
    async with httpx2.AsyncClient(headers=headers) as http:
        async with McpClient(streamable_http_client(handle.url + "/mcp", http_client=http),
                             elicitation_callback=callback) as client:
            result = await client.call_tool("deployer", {"prompt": "ship it"})
    assert len(asked) == 1 and asked[0].message.startswith("Approve deploy ")
    return result


async def test_an_mcp_answer_over_http_is_kept_with_the_run_and_shown(store: Any, exits: Any) -> None:
    result = await _mcp(store, DEPLOYER, {"auth_token": TOKEN, "auth_identity": "ci-bot"},
                        {"decision": "approve", "message": "go"}, exits)
    assert (result.is_error, result.content[0].text, RAN) == (False, "saw: billing deployed", ["billing"])
    [run] = [s.run_id for s in await store.runs()]
    [line] = (await show(store, run)).values()
    assert re.search(r"→ ok: go \(by ci-bot via mcp" + WHEN, line), line


async def test_mcp_refuses_a_groups_request_from_outside_the_group_and_from_nobody_known(store: Any,
                                                                                       exits: Any) -> None:
    outside = await _mcp(store, FINANCE, {"auth_token": TOKEN, "auth_identity": "mallory",
                                          "answerers": {"finance": ["fay"]}}, {"decision": "approve"}, exits)
    assert outside.is_error and "is for the group 'finance', and mallory is not in it" in outside.content[0].text
    anonymous = await _mcp(store, FINANCE, {}, {"decision": "approve"}, exits)
    assert anonymous.is_error and "this MCP connection does not say who is answering (stdio, or HTTP without an " \
                                  "auth_token)" in anonymous.content[0].text
    assert RAN == [] and all(p.status == "open" for p in await store.pending())
    member = await _mcp(store, FINANCE, {"auth_token": TOKEN, "auth_identity": "fay",
                                         "answerers": {"finance": ["fay"]}}, {"decision": "approve"}, exits)
    assert (member.is_error, RAN) == (False, ["billing"])


async def test_mcp_without_http_knows_nobody_so_a_groups_request_is_refused() -> None:
    """The server stdio serves (`build_mcp_server`), over a back channel: the answer says `via="mcp"`
    and no `by`; a group's request is refused, whatever its `answerers` say."""
    got: list[Answer] = []

    async def ask(args: dict, ctx: Any = None) -> Any:
        if ctx is None or ctx.answer is None:
            return pending(kind="input", prompt="Your name?")
        got.append(ctx.answer)
        return ToolResult("thanks", False)

    async def callback(ctx: Any, params: Any) -> mtypes.ElicitResult:
        content = {} if params.message == "Your name?" else {"decision": "approve"}
        return mtypes.ElicitResult(action="accept", content=content)

    server = build_mcp_server([Tool("ask", "asks", {"type": "object"}, "native", ask), DEPLOY_FINANCE],
                              {"answerers": {"finance": ["fay"]}})
    async with McpClient(server, mode="legacy", elicitation_callback=callback) as client:
        asked = await client.call_tool("ask", {})
        gated = await client.call_tool("deploy", {"service": "billing"})
    assert (asked.is_error, [(a.ok, a.by, a.via) for a in got]) == (False, [(True, None, "mcp")]), asked
    assert gated.is_error and "this MCP connection does not say who is answering" in gated.content[0].text
    assert RAN == []


def test_a_profile_that_names_an_identity_without_a_token_is_refused() -> None:
    from toolnexus.mcp_serve._config import check_config
    from toolnexus.mcp_serve.errors import ServeConfigError, ServeTypeError
    from toolnexus.serve._a2a_profile import check_a2a_config

    for check in (check_config, check_a2a_config):
        with pytest.raises(ServeConfigError, match='"auth_identity" names who holds "auth_token"'):
            check({"auth_identity": "ops"}, where="p")
        with pytest.raises(ServeTypeError, match='"answerers": Answerers group \'ops\' must list identities'):
            check({"answerers": {"ops": "ann"}}, where="p")
        with pytest.raises(ServeTypeError, match='"answerers" must be an Answerers'):
            check({"answerers": ["ann"]}, where="p")
