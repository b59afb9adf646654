"""What goes over the wire to each peer generation, and the protocol extras (beyond #3 #4 #6 #8).

The peers are strict like real servers: the 1.0 peer refuses `kind` parts, 0.3 roles, unknown
configuration fields and a missing `A2A-Version` header; the 0.3 peer knows only `message/send`;
the mixed-form peer (existing toolnexus) knows only `SendMessage`/`GetTask`.
"""

from __future__ import annotations

import pytest

from support.a2a_peers import A2APeer, JumpClock, Step, completed, working
from toolnexus import ToolContext, answer_output, pending_of
from toolnexus.a2a import agent, agent_tools, normalize_state
from toolnexus.types import Answer


async def tool_of(peer, **kw):
    kw.setdefault("poll_every", 100)
    [tool] = await agent_tools(agent(peer.card_url, **kw), clock=JumpClock())
    return tool


@pytest.mark.parametrize("raw, state", [
    ("TASK_STATE_INPUT_REQUIRED", "input-required"), ("TASK_STATE_CANCELED", "canceled"),
    ("TASK_STATE_CANCELLED", "canceled"), ("cancelled", "canceled"), ("input-required", "input-required"),
    ("auth_required", "auth-required"), ("COMPLETED", "completed"), ("TASK_STATE_UNSPECIFIED", None),
    ("", None), (None, None), (3, None)])
def test_states_normalise_to_the_lowercase_names(raw, state):
    assert normalize_state(raw) == state


async def test_v1_peer_gets_1_0_methods_header_roles_parts_and_return_immediately():
    with A2APeer("1.0") as peer:
        peer.polls = [completed("ok")]
        res = await (await tool_of(peer)).execute({"task": "plan a trip"})
        assert (res.output, res.is_error) == ("ok", False)
        send, get = peer.calls
    assert (send.method, get.method) == ("SendMessage", "GetTask")
    assert send.headers["a2a-version"] == get.headers["a2a-version"] == "1.0"
    message = send.params["message"]
    assert message["role"] == "ROLE_USER" and message["parts"] == [{"text": "plan a trip"}]
    assert "contextId" not in message and "taskId" not in message
    assert send.params["configuration"] == {"returnImmediately": True}
    assert get.params == {"id": "t1"}


async def test_v1_interface_tenant_is_sent_with_every_call():
    with A2APeer("1.0") as peer:
        peer.card_override = {
            "supportedInterfaces": [
                {
                    "url": peer.base_url + "/a2a/v1",
                    "protocolBinding": "JSONRPC",
                    "protocolVersion": "1.0",
                    "tenant": "acme",
                }
            ]
        }
        peer.polls = [completed("ok")]
        await (await tool_of(peer)).execute({"task": "x"})
    assert [c.params.get("tenant") for c in peer.calls] == ["acme", "acme"]


async def test_v1_card_prefers_its_first_jsonrpc_interface_and_speaks_0_3_when_that_one_is_0_3():
    with A2APeer("0.3") as peer:
        peer.card_override = {"url": None, "protocolVersion": None, "supportedInterfaces": [
            {"url": "http://127.0.0.1:9/grpc", "protocolBinding": "GRPC", "protocolVersion": "1.0"},
            {"url": peer.base_url + "/a2a/jsonrpc", "protocolBinding": "JSONRPC", "protocolVersion": "0.3"}]}
        peer.on_send = [completed("compat")]
        res = await (await tool_of(peer)).execute({"task": "x"})
    assert res.output == "compat" and peer.methods() == ["message/send"]


async def test_v1_direct_message_reply_is_the_answer():
    with A2APeer("1.0", name="Bot") as peer:
        peer.on_send = [Step(reply_message="hello there")]
        res = await (await tool_of(peer)).execute({"task": "hi"})
    assert (res.output, res.is_error) == ("hello there", False)
    assert res.metadata == {"agent": "Bot", "taskId": "t1", "state": "completed", "polls": 0, "ms": 0}


async def test_mixed_peer_gets_the_existing_request_byte_for_byte():
    with A2APeer("mixed") as peer:
        peer.on_send = [completed("ok")]
        await (await tool_of(peer)).execute({"task": "sum 2+2"})
        [send] = peer.calls
    assert set(send.params) == {"message", "configuration"}
    assert list(send.params["message"]) == ["role", "messageId", "parts"]
    assert send.params["message"]["role"] == "user"
    assert send.params["message"]["parts"] == [{"kind": "text", "text": "sum 2+2"}]
    assert send.params["configuration"] == {"blocking": False}
    assert "a2a-version" not in send.headers


async def test_0_3_peer_is_retried_with_0_3_names_on_method_not_found_and_the_route_is_remembered():
    with A2APeer("0.3") as peer:
        peer.polls = [completed("first")]
        tool = await tool_of(peer)
        assert (await tool.execute({"task": "a"})).output == "first"
        assert peer.methods() == ["SendMessage", "message/send", "tasks/get"]
        retry = peer.calls[1].params["message"]
        assert retry["kind"] == "message" and retry["role"] == "user"
        assert retry["parts"] == [{"kind": "text", "text": "a"}]
        assert peer.calls[1].params["configuration"] == {"blocking": False}
        # the next call (any skill of the agent) goes straight to the 0.3 names
        assert (await tool.execute({"task": "b"})).output == "first"
        assert peer.methods()[3:] == ["message/send", "tasks/get"]


async def test_method_not_found_without_another_route_is_the_error_result():
    with A2APeer("1.0") as peer:
        peer.card_override = {"supportedInterfaces": [
            {"url": peer.base_url + "/a2a/v1", "protocolBinding": "JSONRPC", "protocolVersion": "1.0"}]}
        peer.on_send = [Step(rpc_error={"code": -32601, "message": "Method not found: SendMessage"})]
        res = await (await tool_of(peer)).execute({"task": "x"})
    assert (res.output, res.is_error) == ("Method not found: SendMessage", True)


@pytest.mark.parametrize("dialect", ["1.0", "0.3", "mixed"])
async def test_input_required_is_a_pending_result_and_the_answer_continues_the_same_task(dialect):
    with A2APeer(dialect, name="Travel Agent") as peer:
        peer.on_send = [working(), completed("booked for Tuesday")]
        peer.polls = [Step("input-required", message="Which day?")]
        tool = await tool_of(peer)
        first = await tool.execute({"task": "book a flight"})
        request = pending_of(first)
        assert request is not None and request.kind == "input" and request.prompt == "Which day?"
        assert (first.output, first.is_error) == ("Which day?", True)
        assert request.data == {
            "agent": "Travel Agent",
            "taskId": "t1",
            "contextId": "ctx-1",
            "state": "input-required",
        }
        assert {k: first.metadata[k] for k in ("agent", "taskId", "state", "polls")} == {
            "agent": "Travel Agent", "taskId": "t1", "state": "input-required", "polls": 1}
        # the loop's retry: same args, ctx.answer only (a fresh process would do the same)
        answer = Answer.from_dict({"id": request.id, "ok": True, "data": {"output": "Tuesday"}})
        second = await tool.execute({"task": "book a flight"}, ToolContext(answer=answer))
        assert (second.output, second.is_error) == ("booked for Tuesday", False)
        follow_up = peer.calls_of(peer.calls[-1].method)[-1].params["message"]
    assert follow_up["taskId"] == "t1" and follow_up["contextId"] == "ctx-1"
    assert [p["text"] for p in follow_up["parts"]] == ["Tuesday"]


async def test_auth_required_is_an_authorization_pending_and_an_empty_answer_resumes_polling():
    with A2APeer("1.0") as peer:
        peer.polls = [Step("auth-required", message="Sign in first", message_parts=({"url": "https://idp/authorize"},)),
                      working(), completed("signed in and done")]
        tool = await tool_of(peer)
        first = await tool.execute({"task": "read my mail"})
        request = pending_of(first)
        assert request.kind == "authorization" and request.url == "https://idp/authorize"
        assert first.output == "Sign in first\nhttps://idp/authorize"
        second = await tool.execute({"task": "read my mail"}, ToolContext(answer=Answer(id=request.id, ok=True)))
        assert second.output == "signed in and done"
        assert peer.methods() == ["SendMessage", "GetTask", "GetTask", "GetTask"]  # no second SendMessage
        assert [c.params["id"] for c in peer.calls_of("GetTask")] == ["t1", "t1", "t1"]


async def test_unrelated_answer_sends_a_fresh_task():
    with A2APeer("1.0") as peer:
        peer.on_send = [completed("fresh")]
        tool = await tool_of(peer)
        res = await tool.execute({"task": "new"}, ToolContext(answer=answer_output("pnd-1-2", "x")))
        assert res.output == "fresh"
        assert peer.calls[0].params["message"]["parts"] == [{"text": "new"}]


async def test_context_id_of_the_agent_is_sent_on_every_new_task():
    with A2APeer("mixed") as peer:
        peer.on_send = [completed("one"), completed("two")]
        tool = await tool_of(peer, context_id="conversation-7")
        await tool.execute({"task": "a"})
        await tool.execute({"task": "b"})
    assert [c.params["message"]["contextId"] for c in peer.calls] == ["conversation-7", "conversation-7"]


@pytest.mark.parametrize("dialect, config", [("1.0", {"returnImmediately": False}), ("0.3", {"blocking": True}),
                                             ("mixed", {"blocking": True})])
async def test_blocking_mode_asks_for_a_final_reply_and_makes_no_get_task_call(dialect, config):
    with A2APeer(dialect) as peer:
        peer.on_send = [completed("finished while you waited")]
        res = await (await tool_of(peer, blocking=True)).execute({"task": "x"})
        sends = [c for c in peer.calls if c.method in ("SendMessage", "message/send")]
    assert res.output == "finished while you waited" and res.metadata["polls"] == 0
    assert sends[-1].params["configuration"] == config
    assert not {"GetTask", "tasks/get"} & set(peer.methods())


async def test_blocking_mode_still_polls_when_the_peer_answers_early():
    with A2APeer("mixed") as peer:
        peer.on_send = [working()]
        peer.polls = [completed("late")]
        res = await (await tool_of(peer, blocking=True)).execute({"task": "x"})
    assert (res.output, res.metadata["polls"]) == ("late", 1)


async def test_legacy_card_claiming_1_x_is_spoken_to_in_1_0_first():
    with A2APeer("1.0") as peer:
        peer.card_override = {"supportedInterfaces": None, "protocolVersion": "1.0.0", "url": peer.base_url + "/a2a/v1"}
        peer.on_send = [completed("v1 ok")]
        res = await (await tool_of(peer)).execute({"task": "x"})
    assert res.output == "v1 ok" and peer.calls[0].headers["a2a-version"] == "1.0"
