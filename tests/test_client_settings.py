"""A client's settings are one frozen value built once; each keyword is also an attribute whose
assignment replaces that value with a copy (0.21 code assigns them); the three settings that used
to exist only as attributes (`call_timeout_ms`, `max_response_bytes`, `clock`) are keywords too.
Against a real loopback server where the setting acts on the wire."""

from __future__ import annotations

import dataclasses
import inspect
from datetime import UTC, datetime, timedelta

import pytest

from support.llm_server import Hang, Json, LlmServer
from toolnexus import Answer, Request, ToolResult, define_tool
from toolnexus.client import (
    DEFAULT_CALL_TIMEOUT_MS,
    MAX_RESPONSE_BYTES,
    Client,
    ClientSettings,
    Endpoint,
    Limits,
    LoopSettings,
    ResponseTooLarge,
    RetryPolicy,
    RunTimeout,
    create_client,
    create_in_process_client,
)
from toolnexus.errors import ToolnexusTypeError
from toolnexus.toolkit import create_toolkit

KEY = "sk-test-0123456789abcdefghij"


@pytest.fixture
def server():
    with LlmServer() as s:
        yield s


def test_the_three_attribute_only_settings_are_keywords_with_their_old_defaults():
    params = inspect.signature(create_client).parameters
    assert params["call_timeout_ms"].default == DEFAULT_CALL_TIMEOUT_MS
    assert params["max_response_bytes"].default == MAX_RESPONSE_BYTES
    assert params["clock"].default is None
    c = create_client(base_url="http://127.0.0.1:9", style="openai", model="m")
    assert (c.call_timeout_ms, c.max_response_bytes) == (DEFAULT_CALL_TIMEOUT_MS, MAX_RESPONSE_BYTES)
    assert c.clock().tzinfo is not None  # aware UTC now


def test_settings_are_grouped_frozen_values_and_assignment_replaces_them_with_a_copy():
    hooks = {"before_llm": lambda e: None}
    c = create_client(base_url="http://x.test/v1", style="anthropic", model="m", retries=5, max_turns=3,
                      retryable_statuses=[409], hooks=hooks, race_tools=True)
    s = c.settings
    assert isinstance(s, ClientSettings)
    assert s.endpoint == Endpoint(base_url="http://x.test/v1", style="anthropic", model="m")
    assert s.retry == RetryPolicy(retries=5, retryable_statuses=frozenset({409}))
    assert s.limits == Limits(max_turns=3)
    assert s.loop.race_tools is True and isinstance(s.loop, LoopSettings) and s.hooks is hooks
    with pytest.raises(dataclasses.FrozenInstanceError):
        s.limits.max_turns = 9  # type: ignore[misc]

    c.max_turns = 7
    c.model = "other"
    c.retryable_statuses = [418]
    assert (c.max_turns, c.model, c.retryable_statuses) == (7, "other", frozenset({418}))
    assert c.settings is not s and c.provider.settings is c.settings
    assert (s.limits.max_turns, s.endpoint.model) == (3, "m")  # the old value is untouched
    assert c.settings.retry.retries == 5 and c.settings.loop.race_tools is True  # the rest carried over


def test_a_name_that_is_not_a_setting_is_refused_by_name():
    c = create_client(base_url="http://x.test", style="openai", model="m")
    with pytest.raises(ToolnexusTypeError, match="'max_turn' is not a client setting"):
        c.settings.changed(max_turn=3)


def test_store_and_approvals_stay_plain_attributes_on_the_keeper():
    from toolnexus.client import InMemoryConversationStore

    c = create_client(base_url="http://x.test", style="openai", model="m")
    store = InMemoryConversationStore()
    c.store = store
    assert c.store is store and c.conversation_store is store and c.keeper.store is store


async def test_max_response_bytes_as_a_keyword_caps_the_default_transport(server):
    big = b'{"choices": [{"message": {"content": "' + b"x" * 300_000 + b'"}}]}'
    server.add(Json(big))
    async with create_client(base_url=server.base_url, style="openai", model="m", api_key=KEY,
                             max_response_bytes=100_000) as c:
        with pytest.raises(ResponseTooLarge, match="max_response_bytes \\(100000 bytes\\)"):
            await c.run("go")


async def test_call_timeout_ms_as_a_keyword_bounds_a_hung_call(server):
    server.add(Hang(), Hang(), Hang())
    async with create_client(base_url=server.base_url, style="openai", model="m", api_key=KEY, retry_base_ms=1,
                             call_timeout_ms=300) as c:
        with pytest.raises(RunTimeout, match="300ms"):
            await c.run("go")


async def test_clock_as_a_keyword_judges_an_answers_expiry():
    ran: list[str] = []

    async def release(args=None, ctx=None):
        if ctx is None or ctx.answer is None:
            expires = (datetime(2030, 1, 1, 12, 0, tzinfo=UTC)).isoformat()
            return ToolResult("", False, {"pending": Request(id="r1", kind="input", prompt="go?", expiresAt=expires)})
        ran.append("ran")
        return ToolResult("released", False)

    toolkit = await create_toolkit(builtins=False, extra_tools=[define_tool(release, name="release")])

    def model(request: dict) -> dict:
        last = request["messages"][-1]
        if last["role"] == "tool":
            return {"content": "saw: " + last["content"]}
        return {"tool_calls": [{"name": "release", "args": {}}]}

    def late():  # an hour after the request expired
        return datetime(2030, 1, 1, 13, 0, tzinfo=UTC)

    c = create_in_process_client(model="m", generate=model, clock=late,
                                 wait_for=lambda r: Answer(id=r.id, ok=True))
    result = await c.run("go", toolkit)
    assert result.text == "saw: declined/expired: go?" and ran == []
    c.clock = lambda: late() - timedelta(hours=2)  # before the expiry: the same answer now runs it
    assert (await c.run("go", toolkit)).text == "saw: released" and ran == ["ran"]


def test_a_client_is_still_built_from_the_plain_keywords_only():
    c = Client(base_url="http://x.test", style="openai", model="m", system_prompt="be brief", max_turns=2)
    assert (c.system_prompt, c.max_turns, c.headers, c.retryable_statuses) == ("be brief", 2, {}, None)
