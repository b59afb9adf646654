"""A2A inbound on the served app: the card, the JSON-RPC contract and its errors, async fulfilment.

Raw httpx against our real server on loopback; the agent's model is the scripted in-process one.
"""

from __future__ import annotations

import asyncio
import json

import httpx
import pytest

from support.serve_kit import SECRET, AgentRecorder, agent_toolkit, card_of, rpc, served_agent, wait_state
from toolnexus import ToolResult
from toolnexus.serve import CARD_PATH, InMemoryTaskStore, build_agent_card, start_a2a_server
from toolnexus.skill import SkillInfo
from toolnexus.toolkit import Toolkit


def _send(text: str, **message: object) -> dict:
    return {"message": {"role": "user", "messageId": "m-1", "parts": [{"kind": "text", "text": text}], **message},
            "configuration": {"blocking": False}}


async def test_card_has_the_pinned_keys_in_order_plus_supported_interfaces() -> None:
    async with served_agent(a2a={"name": "Helper", "description": "", "provider": {"organization": "Acme"}}) as h, \
            httpx.AsyncClient() as http:
        card = await card_of(http, h.url)
    assert list(card) == ["name", "description", "version", "protocolVersion", "capabilities", "defaultInputModes",
                          "defaultOutputModes", "skills", "url", "preferredTransport", "supportedInterfaces",
                          "provider"]
    assert card["name"] == "Helper" and card["description"] == "" and card["version"] == "0.1.0"
    assert card["protocolVersion"] == "0.3.0"
    assert card["capabilities"] == {"streaming": False, "pushNotifications": False}
    assert card["url"] == h.url + "/" and card["preferredTransport"] == "JSONRPC"  # what 0.3 readers need
    assert card["supportedInterfaces"] == [
        {"url": h.url + "/", "protocolBinding": "JSONRPC", "protocolVersion": "1.0"},
        {"url": h.url + "/", "protocolBinding": "JSONRPC", "protocolVersion": "0.3"},
    ]
    assert card["provider"] == {"organization": "Acme"}


def test_card_skills_are_skill_md_skills_filtered_and_defaults_apply_only_to_none() -> None:
    skills = [SkillInfo(name="triage", location="/s/triage", content="", description="Sort tickets"),
              SkillInfo(name="plain", location="/s/plain", content="")]
    card = build_agent_card({"skills": ["plain", "nope"], "version": ""}, skills, "http://x/")
    assert card["skills"] == [{"id": "plain", "name": "plain", "description": "", "tags": ["plain"]}]
    assert card["version"] == "" and "provider" not in card
    every = build_agent_card({}, skills, "http://x/")["skills"]
    assert [s["id"] for s in every] == ["triage", "plain"] and every[0]["description"] == "Sort tickets"
    assert build_agent_card({"skills": []}, skills, "http://x/")["skills"] == []


async def test_public_url_is_advertised_and_a_wildcard_bind_uses_the_callers_host() -> None:
    async with served_agent(a2a={"public_url": "https://agents.example/team/"}) as h, httpx.AsyncClient() as http:
        assert (await card_of(http, h.url))["url"] == "https://agents.example/team/"
    async with served_agent(addr="0.0.0.0:0", a2a={"allowed_hosts": ["agent.lan"]}) as h, \
            httpx.AsyncClient() as http:
        card = await card_of(http, h.url, host=f"agent.lan:{h.port}")
    assert card["url"] == f"http://agent.lan:{h.port}/"
    assert all("127.0.0.1" not in i["url"] for i in card["supportedInterfaces"])


async def test_existing_form_send_returns_the_submitted_task_and_get_follows_it_to_completed() -> None:
    events: list[dict] = []
    async with served_agent(on_task=events.append) as h, httpx.AsyncClient() as http:
        sent = await rpc(http, h.url + "/", "SendMessage", _send("hello"), rid="r-1")
        task = sent["result"]
        assert sent["id"] == "r-1"
        assert task["status"] == {"state": "submitted"} and set(task) == {"id", "contextId", "status"}
        done = await wait_state(h.store, task["id"], {"completed"})
        got = (await rpc(http, h.url + "/anything", "GetTask", {"id": task["id"]}))["result"]
    # the existing form is the stored task less what earlier peers never read (its history, the status time)
    assert got == {**{k: v for k, v in done.items() if k != "history"}, "status": {"state": "completed"}}
    assert got["artifacts"][0]["parts"] == [{"kind": "text", "text": "echo: hello"}]
    assert got["contextId"] == task["contextId"]
    assert [(e["id"], e["state"]) for e in events] == [(task["id"], "completed")]
    assert events[0]["task"] == done and events[0]["result"].text == "echo: hello"


async def test_a_context_id_carries_the_conversation_across_tasks() -> None:
    async with served_agent() as h, httpx.AsyncClient() as http:
        first = (await rpc(http, h.url, "SendMessage", _send("remember the blue door")))["result"]
        await wait_state(h.store, first["id"], {"completed"})
        second = (await rpc(http, h.url, "SendMessage", _send("recall", contextId=first["contextId"])))["result"]
        done = await wait_state(h.store, second["id"], {"completed"})
        other = (await rpc(http, h.url, "SendMessage", _send("recall")))["result"]
        fresh = await wait_state(h.store, other["id"], {"completed"})
    assert done["artifacts"][0]["parts"][0]["text"] == "you said: remember the blue door"
    assert fresh["artifacts"][0]["parts"][0]["text"] == "you said: "
    assert second["contextId"] == first["contextId"] != other["contextId"]


async def test_jsonrpc_errors_are_http_200_with_the_pinned_messages() -> None:
    async with served_agent() as h, httpx.AsyncClient() as http:
        url = h.url + "/"
        empty = await http.post(url, content=b"")
        bad = await http.post(url, content=b"{nope")
        unknown = await rpc(http, url, "tasks/list", {}, rid=7)
        missing = await rpc(http, url, None, {}, rid=8)
        not_found = await rpc(http, url, "GetTask", {"id": "t-404"})
        no_text = await rpc(http, url, "SendMessage", _send("   "))
        no_message = await rpc(http, url, "SendMessage", {})
        version = await rpc(http, url, "SendMessage", _send("x"), headers={"A2A-Version": "2.0"})
        batch = await http.post(url, content=b"[]")
    for resp in (empty, bad):
        assert resp.status_code == 200 and resp.headers["content-type"] == "application/json"
        assert resp.json() == {"jsonrpc": "2.0", "id": None, "error": {"code": -32700, "message": "Parse error"}}
    assert unknown == {"jsonrpc": "2.0", "id": 7, "error": {"code": -32601, "message": "Method not found: tasks/list"}}
    assert missing == {"jsonrpc": "2.0", "id": 8,  # JSON-RPC 2.0: a request without a method is invalid
                       "error": {"code": -32600, "message": 'Invalid Request: "method" must be a non-empty string'}}
    assert not_found["error"] == {"code": -32001, "message": "Task not found: t-404"}
    assert no_text["error"]["code"] == -32602 and "no text" in no_text["error"]["message"]
    assert no_message["error"]["code"] == -32602
    assert version["error"]["code"] == -32009 and "2.0" in version["error"]["message"]
    assert batch.json()["error"]["code"] == -32600


async def test_http_limits_get_404_other_methods_405_and_a_big_body_413() -> None:
    async with served_agent(a2a={"max_body_bytes": 2048}) as h, httpx.AsyncClient() as http:
        other_get = await http.get(h.url + "/tasks")
        put = await http.put(h.url + "/", content=b"{}")
        delete = await http.delete(h.url + CARD_PATH)
        big = await http.post(h.url + "/", content=b" " * 4096)
        ok = await http.post(h.url + "/", content=json.dumps({"jsonrpc": "2.0", "id": 1, "method": "GetTask",
                                                               "params": {"id": "x"}}))
    assert (other_get.status_code, other_get.text) == (404, "not found")
    assert (put.status_code, put.headers["allow"]) == (405, "GET, POST")
    assert delete.status_code == 405
    assert (big.status_code, big.text) == (413, "request body too large")
    assert ok.json()["error"]["code"] == -32001


async def test_the_default_body_cap_is_one_mebibyte() -> None:
    async with served_agent() as h, httpx.AsyncClient() as http:
        over = await http.post(h.url + "/", content=b" " * (1024 * 1024 + 1))
        under = await http.post(h.url + "/", content=b" " * (1024 * 1024 - 10) + b"[]")
    assert over.status_code == 413
    assert under.status_code == 200


async def test_chunked_send_message_works() -> None:
    body = json.dumps({"jsonrpc": "2.0", "id": 1, "method": "SendMessage", "params": _send("chunks")}).encode()

    async def pieces():
        for i in range(0, len(body), 16):
            yield body[i:i + 16]

    async with served_agent() as h, httpx.AsyncClient() as http:
        resp = await http.post(h.url + "/", content=pieces())
        task = resp.json()["result"]
        done = await wait_state(h.store, task["id"], {"completed"})
    assert "content-length" not in resp.request.headers
    assert done["artifacts"][0]["parts"][0]["text"] == "echo: chunks"


async def test_the_card_answers_while_the_serving_loop_runs_a_task() -> None:
    rec = AgentRecorder()
    async with served_agent(agent_toolkit(rec)) as h, httpx.AsyncClient() as http:
        task = (await rpc(http, h.url, "SendMessage", _send("block")))["result"]
        await rec.blocked.wait()
        card = await card_of(http, h.url)
        state = (await rpc(http, h.url, "GetTask", {"id": task["id"]}))["result"]["status"]["state"]
    assert card["name"] == "toolnexus-agent" and state == "working"


async def test_a_failed_run_is_a_failed_task_with_redacted_text() -> None:
    events: list[dict] = []
    async with served_agent(on_task=events.append) as h, httpx.AsyncClient() as http:
        task = (await rpc(http, h.url, "SendMessage", _send("explode")))["result"]
        failed = await wait_state(h.store, task["id"], {"failed"})
    text = failed["status"]["message"]["parts"][0]["text"]
    assert failed["status"]["message"]["role"] == "agent"
    assert "provider said 500" in text and SECRET not in text and "abc.def" not in text
    assert "«redacted»" in text
    assert events[0]["state"] == "failed" and events[0]["result"] is None


async def test_a_redaction_hook_shapes_failed_text_but_our_secrets_still_never_leave(monkeypatch) -> None:
    monkeypatch.setenv("OPENAI_API_KEY", "env-KEY-777")
    seen: list[str] = []

    def redact(text: str) -> str:
        seen.append(text)
        return "upstream: " + text + " (key env-KEY-777, token tok-SERVER-9)"

    async with served_agent(a2a={"redact": redact, "auth_token": "tok-SERVER-9"}) as h, httpx.AsyncClient() as http:
        hdr = {"authorization": "Bearer tok-SERVER-9"}
        task = (await rpc(http, h.url, "SendMessage", _send("explode"), headers=hdr))["result"]
        failed = await wait_state(h.store, task["id"], {"failed"})
    text = failed["status"]["message"]["parts"][0]["text"]
    assert len(seen) == 1 and text.startswith("upstream: provider said 500")
    assert SECRET in text  # the user's hook decides what else to keep
    assert "env-KEY-777" not in text and "tok-SERVER-9" not in text and text.count("«redacted»") == 2


async def test_no_client_means_failed_tasks_not_a_crash(caplog) -> None:
    toolkit = Toolkit(None, None, [], [], [])
    handle = await toolkit.serve("127.0.0.1:0", a2a={})
    try:
        async with httpx.AsyncClient() as http:
            task = (await rpc(http, handle.url, "SendMessage", _send("hi")))["result"]
            failed = await wait_state(handle.store, task["id"], {"failed"})
            assert (await card_of(http, handle.url))["name"] == "toolnexus-agent"
    finally:
        await handle.stop()
    assert "no client" in failed["status"]["message"]["parts"][0]["text"]
    assert any("no client= was given" in r.getMessage() for r in caplog.records)


async def test_without_a_profile_every_route_is_404_and_mcp_without_mcp_profile_is_404_at_once() -> None:
    toolkit = Toolkit(None, None, [], [], [])
    handle = await toolkit.serve("127.0.0.1:0")
    try:
        async with httpx.AsyncClient(timeout=5) as http:
            card = await http.get(handle.url + CARD_PATH)
            post = await http.post(handle.url + "/", content=b"{}")
            mcp = await http.post(handle.url + "/mcp", json={"jsonrpc": "2.0", "id": 1, "method": "initialize"},
                                  headers={"accept": "application/json, text/event-stream"})
    finally:
        await handle.stop()
    assert [(r.status_code, r.text) for r in (card, post, mcp)] == [(404, "not found")] * 3


async def test_an_a2a_only_server_answers_mcp_clients_404_at_once() -> None:
    from mcp.client.client import Client as McpClient

    async with served_agent() as h, httpx.AsyncClient(timeout=5) as http:
        post = await http.post(h.url + "/mcp", json={"jsonrpc": "2.0", "id": 1, "method": "initialize"},
                               headers={"accept": "application/json, text/event-stream"})
        stream = await http.get(h.url + "/mcp", headers={"accept": "text/event-stream"})
        with pytest.raises(BaseException) as err:  # the official client fails fast instead of hanging
            async with asyncio.timeout(10):
                async with McpClient(h.url + "/mcp") as client:
                    await client.list_tools()
    assert (post.status_code, post.text) == (404, "not found")
    assert (stream.status_code, stream.text) == (404, "not found")
    assert not isinstance(err.value, TimeoutError)


async def test_bearer_auth_covers_the_card_jsonrpc_and_mcp() -> None:
    toolkit = agent_toolkit(AgentRecorder())
    async with served_agent(toolkit, a2a={"auth_token": "a2a-tok"}, mcp={"auth_token": "mcp-tok"}) as h, \
            httpx.AsyncClient() as http:
        card_none = await http.get(h.url + CARD_PATH)
        card_wrong = await http.get(h.url + CARD_PATH, headers={"authorization": "Bearer mcp-tok"})
        rpc_none = await http.post(h.url + "/", content=b"{}")
        mcp_none = await http.post(h.url + "/mcp", content=b"{}")
        card_ok = await http.get(h.url + CARD_PATH, headers={"authorization": "Bearer a2a-tok"})
        sent = await rpc(http, h.url, "SendMessage", _send("hi"), headers={"authorization": "Bearer a2a-tok"})
    for resp in (card_none, card_wrong, rpc_none, mcp_none):
        assert (resp.status_code, resp.headers["www-authenticate"]) == (401, "Bearer")
    assert card_ok.status_code == 200 and "result" in sent


async def test_start_a2a_server_serves_a_plain_run_task_and_its_store_is_used() -> None:
    class Result:
        status = "done"

        def __init__(self, text: str) -> None:
            self.text = text

    store = InMemoryTaskStore()
    seen: list[tuple] = []

    async def run_task(text: str, context_id: str | None) -> Result:
        seen.append((text, context_id))
        return Result(text.upper())

    handle = await start_a2a_server("127.0.0.1:0", {"store": store}, [], run_task,
                                    mcp={}, mcp_tools=[agent_toolkit(AgentRecorder()).tools()[0]])
    try:
        async with httpx.AsyncClient() as http:
            task = (await rpc(http, handle.url, "SendMessage", _send("shout", contextId="ctx-1")))["result"]
            done = await wait_state(store, task["id"], {"completed"})
    finally:
        await handle.stop()
    assert seen == [("shout", "ctx-1")] and done["contextId"] == "ctx-1"
    assert done["artifacts"][0]["parts"][0]["text"] == "SHOUT"
    assert handle.store is store


async def test_a_duck_typed_result_without_status_counts_as_done() -> None:
    async def run_task(text: str, context_id: str | None) -> ToolResult:
        return ToolResult("x", False)  # no .status, no .text: an empty completed answer

    handle = await start_a2a_server("127.0.0.1:0", {}, [], run_task)
    try:
        async with httpx.AsyncClient() as http:
            task = (await rpc(http, handle.url, "SendMessage", _send("go")))["result"]
            done = await wait_state(handle.store, task["id"], {"completed"})
    finally:
        await handle.stop()
    assert done["artifacts"][0]["parts"] == [{"kind": "text", "text": ""}]


async def test_a_bad_profile_fails_serve_before_binding() -> None:
    toolkit = Toolkit(None, None, [], [], [])
    with pytest.raises(TypeError, match='a2a "skills" must be a list of strings'):
        await toolkit.serve("127.0.0.1:0", a2a={"skills": "triage"})
    with pytest.raises(ValueError, match='a2a "public_url" must be an http'):
        await toolkit.serve("127.0.0.1:0", a2a={"public_url": "agents.example"})
    with pytest.raises(ValueError, match='Unknown A2A store: "redis:x"'):
        await toolkit.serve("127.0.0.1:0", a2a={"store": "redis:x"})


async def test_blocking_and_immediate_replies_per_generation() -> None:
    v1 = {"A2A-Version": "1.0"}
    v1_message = {"role": "ROLE_USER", "messageId": "a", "parts": [{"text": "now"}]}
    async with served_agent() as h, httpx.AsyncClient() as http:
        blocking = (await rpc(http, h.url, "SendMessage", {**_send("wait for it"),
                                                           "configuration": {"blocking": True}}))["result"]
        immediate = (await rpc(http, h.url, "SendMessage", {"message": v1_message,
                                                            "configuration": {"returnImmediately": True}},
                               headers=v1))["result"]
        await wait_state(h.store, immediate["task"]["id"], {"completed"})
        v03 = (
            await rpc(
                http,
                h.url,
                "message/send",
                {
                    "message": {
                        "kind": "message",
                        "role": "user",
                        "messageId": "b",
                        "parts": [{"kind": "text", "text": "old"}],
                    }
                },
            )
        )["result"]
    assert blocking["status"] == {"state": "completed"}  # the existing form, asked to block: zero polls needed
    assert blocking["artifacts"][0]["parts"] == [{"kind": "text", "text": "echo: wait for it"}]
    assert set(immediate) == {"task"} and immediate["task"]["status"]["state"] == "TASK_STATE_SUBMITTED"
    assert v03["kind"] == "task" and v03["status"]["state"] == "completed"  # 0.3 blocks unless told otherwise
    assert v03["artifacts"][0]["parts"] == [{"kind": "text", "text": "echo: old"}] and v03["contextId"]
