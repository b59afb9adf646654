"""What the official A2A TCK checks of a served agent, held here so CI keeps it (see docs/conformance.md).

One test per class of TCK failure we had: the JSON-RPC 2.0 envelope (-32600, never a result), the
card's required fields, message validation, `historyLength` and task history, `ListTasks` (shape,
filters, pages, errors), messages on a working task, cancelling one, and the errors A2A prescribes
for capabilities the card does not declare. Real server on loopback, real HTTP, the scripted model.
"""

from __future__ import annotations

import json
from datetime import UTC, datetime, timedelta
from typing import Any

import httpx
import pytest

from support.serve_kit import AgentRecorder, agent_toolkit_with_skill, card_of, rpc, served_agent, wait_state

V1 = {"A2A-Version": "1.0"}
PROFILE = {"description": "answers and blocks", "blocking_timeout": 0.05}


def _message(text: str, n: Any = 1, **extra: Any) -> dict[str, Any]:
    return {"message": {"messageId": f"m-{n}", "role": "ROLE_USER", "parts": [{"text": text}], **extra},
            "configuration": {"returnImmediately": True}}


async def _raw(http: httpx.AsyncClient, url: str, body: Any) -> dict[str, Any]:
    resp = await http.post(url + "/", content=body if isinstance(body, bytes) else json.dumps(body), headers=V1)
    assert resp.status_code == 200
    return resp.json()


async def test_an_invalid_json_rpc_request_is_refused_with_32600_and_never_runs() -> None:
    async with served_agent(a2a=dict(PROFILE)) as h, httpx.AsyncClient() as http:
        send = {"method": "SendMessage", "params": _message("hello")}
        version = await _raw(http, h.url, {"jsonrpc": "1.0", "id": 1, **send})
        aaa = await _raw(http, h.url, {"jsonrpc": "aaa", **send})
        no_version = await _raw(http, h.url, {"id": 2, **send})
        no_method = await _raw(http, h.url, {"jsonrpc": "2.0", "id": 3, "params": _message("hello")})
        object_id = await _raw(http, h.url, {"jsonrpc": "2.0", "id": {"bad": "type"}, **send})
        bool_id = await _raw(http, h.url, {"jsonrpc": "2.0", "id": True, **send})
        batch = await _raw(http, h.url, [{"jsonrpc": "2.0", "id": 4, **send}])
        parse = await _raw(http, h.url, b'{"jsonrpc": "2.0", "method": "SendMessage"')
        array_params = await _raw(http, h.url, {"jsonrpc": "2.0", "id": 5, "method": "SendMessage", "params": [1]})
        unknown = await _raw(http, h.url, {"jsonrpc": "2.0", "id": "6", "method": "SendMessageXXX", "params": {}})
        listed = (await rpc(http, h.url, "ListTasks", {}, headers=V1))["result"]
    for reply, rid in ((version, 1), (aaa, None), (no_version, 2), (no_method, 3), (object_id, None),
                       (bool_id, None), (batch, None)):
        assert "result" not in reply and reply["error"]["code"] == -32600 and reply["id"] == rid, reply
    assert '"jsonrpc" must be exactly "2.0"' in version["error"]["message"]
    assert '"method"' in no_method["error"]["message"] and '"id"' in object_id["error"]["message"]
    assert parse == {"jsonrpc": "2.0", "id": None, "error": {"code": -32700, "message": "Parse error"}}
    assert array_params["error"]["code"] == -32602 and unknown["error"]["code"] == -32601
    assert listed["tasks"] == []  # none of the refused requests made a task


async def test_the_card_has_what_a2a_requires_and_preferred_transport_for_03_readers() -> None:
    async with served_agent(await agent_toolkit_with_skill(AgentRecorder(), "triage"), a2a=dict(PROFILE)) as h, \
            httpx.AsyncClient() as http:
        card = await card_of(http, h.url)
    assert card["skills"] == [{"id": "triage", "name": "triage", "description": "triage skill", "tags": ["triage"]}]
    assert card["description"] == "answers and blocks" and card["name"] and card["version"]
    assert card["preferredTransport"] == "JSONRPC" and card["url"] == h.url + "/"
    assert card["defaultInputModes"] == card["defaultOutputModes"] == ["text"]


async def test_a_message_without_id_role_or_parts_is_invalid_params() -> None:
    async with served_agent(a2a=dict(PROFILE)) as h, httpx.AsyncClient() as http:
        def without(key: str) -> dict[str, Any]:
            params = _message("hello")
            del params["message"][key]
            return params

        no_id = await rpc(http, h.url, "SendMessage", without("messageId"), headers=V1)
        no_role = await rpc(http, h.url, "SendMessage", without("role"), headers=V1)
        agent_role = await rpc(http, h.url, "SendMessage",
                               {"message": {**_message("x")["message"], "role": "ROLE_AGENT"}}, headers=V1)
        bad_parts = await rpc(http, h.url, "SendMessage", {"message": {"messageId": "m", "role": "ROLE_USER",
                                                                       "parts": "invalid"}}, headers=V1)
        no_message = await rpc(http, h.url, "SendMessage", {"": "not_a_dict"}, headers=V1)
        bad_history = await rpc(http, h.url, "SendMessage", {**_message("x"), "configuration": {"historyLength": -1}},
                                headers=V1)
        listed = (await rpc(http, h.url, "ListTasks", {}, headers=V1))["result"]
    for reply in (no_id, no_role, agent_role, bad_parts, no_message, bad_history):
        assert reply["error"]["code"] == -32602 and reply["error"]["message"].startswith("Invalid params: "), reply
    assert "messageId" in no_id["error"]["message"] and "role" in no_role["error"]["message"]
    assert "historyLength" in bad_history["error"]["message"] and listed["totalSize"] == 0


async def test_get_task_keeps_the_history_and_cuts_it_to_history_length() -> None:
    async with served_agent(a2a=dict(PROFILE)) as h, httpx.AsyncClient() as http:
        task = (await rpc(http, h.url, "SendMessage", _message("block now", 0), headers=V1))["result"]["task"]
        await wait_state(h.store, task["id"], {"working"})
        for n in (1, 2, 3):  # messages on a working task: kept in its history, queued for its next turns
            more = await rpc(http, h.url, "SendMessage", _message(f"and {n}", n, taskId=task["id"]), headers=V1)
            assert more["result"]["task"]["status"]["state"] == "TASK_STATE_WORKING"

        async def get(**params: Any) -> dict[str, Any]:
            return await rpc(http, h.url, "GetTask", {"id": task["id"], **params}, headers=V1)

        full, two, none, negative = await get(), await get(historyLength=2), await get(historyLength=0), \
            await get(historyLength=-1)
        v03 = (await rpc(http, h.url, "tasks/get", {"id": task["id"], "historyLength": 1}))["result"]
    history = full["result"]["history"]
    assert [m["messageId"] for m in history] == ["m-0", "m-1", "m-2", "m-3"]
    assert history[0] == {"messageId": "m-0", "role": "ROLE_USER", "parts": [{"text": "block now"}],
                          "taskId": task["id"], "contextId": task["contextId"]}
    assert [m["messageId"] for m in two["result"]["history"]] == ["m-2", "m-3"]
    assert "history" not in none["result"]
    assert negative["error"]["code"] == -32602 and "historyLength" in negative["error"]["message"]
    assert v03["history"] == [{"messageId": "m-3", "kind": "message", "role": "user",
                               "parts": [{"kind": "text", "text": "and 3"}], "taskId": task["id"],
                               "contextId": task["contextId"]}]
    stamp = datetime.fromisoformat(full["result"]["status"]["timestamp"])
    assert stamp.tzinfo is not None and abs(stamp - datetime.now(UTC)) < timedelta(minutes=5)


async def test_list_tasks_filters_pages_and_refuses_bad_params() -> None:
    async with served_agent(a2a=dict(PROFILE)) as h, httpx.AsyncClient() as http:
        async def send(text: str, n: int, **extra: Any) -> dict[str, Any]:
            return (await rpc(http, h.url, "SendMessage", _message(text, n, **extra), headers=V1))["result"]["task"]

        async def listing(**params: Any) -> dict[str, Any]:
            return await rpc(http, h.url, "ListTasks", params, headers=V1)

        before = datetime.now(UTC).isoformat()
        answered = await send("hello", 0, contextId="ctx-a")
        await wait_state(h.store, answered["id"], {"completed"})
        working = [await send(f"block {n}", n, contextId="ctx-b") for n in range(1, 6)]
        every = (await listing())["result"]
        page1 = (await listing(contextId="ctx-b", pageSize=2))["result"]
        page2 = (await listing(contextId="ctx-b", pageSize=2, pageToken=page1["nextPageToken"]))["result"]
        page3 = (await listing(contextId="ctx-b", pageSize=2, pageToken=page2["nextPageToken"]))["result"]
        done = (await listing(status="TASK_STATE_COMPLETED", includeArtifacts=True))["result"]
        recent = (await listing(statusTimestampAfter=before, historyLength=0))["result"]
        nothing = (await listing(contextId="no-such-context"))["result"]
        errors = [await listing(**bad) for bad in ({"pageSize": 0}, {"pageSize": -1}, {"pageSize": 101},
                                                   {"status": "INVALID_STATUS"}, {"historyLength": -1},
                                                   {"statusTimestampAfter": "-1"}, {"pageToken": "invalid-token-xyz"})]
    assert set(every) == {"tasks", "nextPageToken", "pageSize", "totalSize"}
    assert every["totalSize"] == every["pageSize"] == 6 and every["nextPageToken"] == ""
    assert all("artifacts" not in t for t in every["tasks"])  # left out unless asked for
    newest_first = [t["id"] for t in every["tasks"]]
    assert newest_first == [t["id"] for t in reversed(working)] + [answered["id"]]
    assert (page1["totalSize"], page1["pageSize"], page3["pageSize"], page3["nextPageToken"]) == (5, 2, 1, "")
    paged = [t["id"] for p in (page1, page2, page3) for t in p["tasks"]]
    assert paged == newest_first[:5] and len(set(paged)) == 5
    assert [t["id"] for t in done["tasks"]] == [answered["id"]]
    assert done["tasks"][0]["artifacts"][0]["parts"] == [{"text": "echo: hello"}]
    assert recent["totalSize"] == 6 and all("history" not in t for t in recent["tasks"])
    assert nothing == {"tasks": [], "nextPageToken": "", "pageSize": 0, "totalSize": 0}
    for reply in errors:
        assert reply["error"]["code"] == -32602, reply


async def test_messages_on_a_working_task_are_its_next_turns_and_a_wrong_context_is_refused() -> None:
    async with served_agent(a2a=dict(PROFILE)) as h, httpx.AsyncClient() as http:
        task = (await rpc(http, h.url, "SendMessage", _message("block first", 0), headers=V1))["result"]["task"]
        await wait_state(h.store, task["id"], {"working"})
        same = await rpc(http, h.url, "SendMessage", _message("hello", 1, taskId=task["id"],
                                                              contextId=task["contextId"]), headers=V1)
        other = await rpc(http, h.url, "SendMessage", _message("hello", 2, taskId=task["id"], contextId="elsewhere"),
                          headers=V1)
        canceled = (await rpc(http, h.url, "CancelTask", {"id": task["id"]}, headers=V1))["result"]
        again = await rpc(http, h.url, "CancelTask", {"id": task["id"]}, headers=V1)
        stored = await h.store.get(task["id"])
    assert same["result"]["task"]["id"] == task["id"]
    assert same["result"]["task"]["status"]["state"] == "TASK_STATE_WORKING"
    assert other["error"]["code"] == -32602 and "contextId" in other["error"]["message"]
    assert canceled["status"]["state"] == "TASK_STATE_CANCELED" and canceled["id"] == task["id"]
    assert again["error"]["code"] == -32002
    assert "_queue" not in stored and [m["messageId"] for m in stored["history"]] == ["m-0", "m-1"]


async def test_a_queued_message_runs_after_the_turn_before_it_in_the_same_task() -> None:
    import asyncio
    from types import SimpleNamespace

    from toolnexus.serve._fulfil import Fulfiller
    from toolnexus.serve._tasks import InMemoryTaskStore

    first_turn, prompts = asyncio.Event(), []

    async def run_task(text: str, context: object) -> object:
        prompts.append(text)
        if len(prompts) == 1:
            await first_turn.wait()
        return SimpleNamespace(status="done", text=f"answer to {text}")

    fulfiller = Fulfiller(InMemoryTaskStore(), run_task)
    task = await fulfiller.submit("first", None)
    queued = await fulfiller.follow_up(task["id"], "second")
    first_turn.set()
    await fulfiller.wait_settled(task["id"], 10)
    done = await fulfiller.store.get(task["id"])
    assert queued["status"]["state"] in ("submitted", "working") and prompts == ["first", "second"]
    assert done["status"]["state"] == "completed" and "_queue" not in done and "_run" not in done
    assert [a["parts"][0]["text"] for a in done["artifacts"]] == ["answer to first", "answer to second"]
    assert [m["parts"][0]["text"] for m in done["history"]] == ["first", "second"]


async def test_undeclared_capabilities_get_the_errors_a2a_prescribes() -> None:
    async with served_agent(a2a=dict(PROFILE)) as h, httpx.AsyncClient() as http:
        replies = {m: await rpc(http, h.url, m, {}, headers=V1) for m in (
            "SendStreamingMessage", "SubscribeToTask", "GetExtendedAgentCard", "message/stream",
            "CreateTaskPushNotificationConfig", "ListTaskPushNotificationConfigs", "tasks/pushNotificationConfig/set")}
    codes = {m: r["error"]["code"] for m, r in replies.items()}
    assert codes == {"SendStreamingMessage": -32004, "SubscribeToTask": -32004, "GetExtendedAgentCard": -32004,
                     "message/stream": -32004, "CreateTaskPushNotificationConfig": -32003,
                     "ListTaskPushNotificationConfigs": -32003, "tasks/pushNotificationConfig/set": -32003}
    assert "streaming" in replies["SendStreamingMessage"]["error"]["message"]


async def test_listing_can_be_turned_off_and_what_a_task_keeps_is_bounded() -> None:
    from toolnexus.mcp_serve.errors import ServeTypeError
    from toolnexus.serve._fulfil import HISTORY_BYTES, QUEUE_BYTES

    big = "x" * (HISTORY_BYTES // 4)
    assert QUEUE_BYTES == HISTORY_BYTES
    async with served_agent(a2a={**PROFILE, "list_tasks": False}) as h, httpx.AsyncClient() as http:
        refused = await rpc(http, h.url, "ListTasks", {}, headers=V1)
        task = (await rpc(http, h.url, "SendMessage", _message("block " + big, 0), headers=V1))["result"]["task"]
        await wait_state(h.store, task["id"], {"working"})
        queued = [await rpc(http, h.url, "SendMessage", _message(big, n, taskId=task["id"]), headers=V1)
                  for n in range(1, 6)]
        kept = [m["messageId"] for m in (await h.store.get(task["id"]))["history"]]
    assert refused["error"]["code"] == -32004 and "list_tasks" in refused["error"]["message"]
    assert ["result" in r for r in queued] == [True, True, True, True, False]  # 1 MiB of queued text at most
    assert queued[-1]["error"]["code"] == -32004 and "waiting" in queued[-1]["error"]["message"]
    assert kept == ["m-2", "m-3", "m-4"]  # the oldest went first, under the 1 MiB bound
    with pytest.raises(ServeTypeError, match="list_tasks"):
        async with served_agent(a2a={"list_tasks": "no"}):
            pass
