"""Resolving an A2A agent card into tools (a2a-serve-cli.md §1.1–1.2), against real loopback peers."""

from __future__ import annotations

import asyncio
import logging
import warnings

import pytest

from support.a2a_peers import A2APeer, completed
from toolnexus.a2a import (
    CARD_TIMEOUT_CAP,
    DEFAULT_POLL_EVERY,
    DEFAULT_TIMEOUT,
    TERMINAL,
    RemoteAgent,
    agent,
    agent_tools,
    card_timeout,
    is_enabled,
    parse_agents_config,
)

PINNED_SCHEMA = {
    "type": "object",
    "properties": {"task": {"type": "string", "description": "The task to send to the agent, in natural language."}},
    "required": ["task"],
    "additionalProperties": False,
}


def test_public_constants_and_descriptor_defaults():
    assert (DEFAULT_TIMEOUT, DEFAULT_POLL_EVERY) == (300_000, 1_000)
    assert TERMINAL == frozenset({"completed", "failed", "canceled"})
    ag = agent("http://x/card", headers={"A": "b"}, timeout=5, poll_every=7)
    assert ag == RemoteAgent(card="http://x/card", headers={"A": "b"}, timeout=5, poll_every=7)
    assert RemoteAgent("u").budget_ms() == 300_000 and RemoteAgent("u").poll_ms() == 1_000


def test_parse_agents_config_keeps_order_skips_disabled_and_reads_camel_case_keys():
    block = {
        "b": {"card": "http://b/card", "pollEvery": 50, "timeout": 900, "headers": {"X": "1"}},
        "off1": {"card": "http://c/card", "disabled": True},
        "off2": {"card": "http://d/card", "enabled": False},
        "empty": {},
        "nocard": {"card": 42},
        "a": {"card": "http://a/card", "contextId": "conv-1", "blocking": True},
    }
    assert parse_agents_config(block) == [
        RemoteAgent(card="http://b/card", headers={"X": "1"}, timeout=900, poll_every=50),
        RemoteAgent(card="http://a/card", context_id="conv-1", blocking=True),
    ]
    assert parse_agents_config(None) == [] and parse_agents_config({}) == []
    assert is_enabled({"enabled": True, "disabled": False}) and not is_enabled({"disabled": True})


async def test_one_tool_per_skill_with_sanitized_names_fallback_descriptions_and_pinned_schema():
    skills = [
        {"id": "web search", "name": "Web Search", "description": "Searches the web."},
        {"name": "summarise", "description": ""},
        {"id": "bare"},
        "not-an-object",
    ]
    with A2APeer("1.0", name="Research Bot (v2)", skills=skills) as peer:
        tools = await agent_tools(agent(peer.card_url))
    assert [t.name for t in tools] == ["Research_Bot__v2__web_search", "Research_Bot__v2__summarise",
                                       "Research_Bot__v2__bare"]
    assert [t.description for t in tools] == ["Searches the web.", "summarise", "bare"]
    assert all(t.source == "a2a" and t.input_schema == PINNED_SCHEMA for t in tools)
    tools[0].input_schema["required"].append("mutated")
    assert tools[1].input_schema == PINNED_SCHEMA  # each tool owns its schema


async def test_card_without_name_or_skills_gives_agent_prefix_and_no_tools():
    with A2APeer("mixed", card={"name": None}, skills=[{"id": "x"}]) as peer:
        assert [t.name for t in await agent_tools(agent(peer.card_url))] == ["agent_x"]
    with A2APeer("mixed", card={"skills": None}) as peer:
        assert await agent_tools(agent(peer.card_url)) == []


async def test_legacy_card_without_url_posts_to_scheme_and_netloc_of_the_card_url():
    with A2APeer("mixed", card={"url": None}) as peer:
        peer.on_send = [completed("ok")]
        card_url = peer.base_url + "/.well-known/agent-card.json?x=1"
        [tool] = await agent_tools(agent(card_url))
        assert (await tool.execute({"task": "go"})).output == "ok"
        assert [c.path for c in peer.calls] == ["/"]


async def test_legacy_card_url_is_the_endpoint_when_set():
    with A2APeer("mixed", card={"url": None}) as peer:
        peer.card_override = {"url": peer.base_url + "/rpc/here"}
        peer.on_send = [completed("ok")]
        [tool] = await agent_tools(agent(peer.card_url))
        await tool.execute({"task": "go"})
        assert [c.path for c in peer.calls] == ["/rpc/here"]


async def test_v1_card_endpoint_comes_from_supported_interfaces():
    with A2APeer("1.0") as peer:
        peer.on_send = [completed("ok")]
        [tool] = await agent_tools(agent(peer.card_url))
        assert (await tool.execute({"task": "go"})).output == "ok"
        assert [c.path for c in peer.calls] == ["/a2a/v1"]


async def test_env_headers_are_expanded_on_card_and_every_rpc_and_never_logged(monkeypatch, caplog):
    caplog.set_level(logging.DEBUG)
    monkeypatch.setenv("A2A_TEST_TOKEN", "s3cret-value")
    monkeypatch.delenv("A2A_TEST_UNSET", raising=False)
    headers = {"Authorization": "Bearer ${A2A_TEST_TOKEN}", "X-Empty": "[${A2A_TEST_UNSET}]"}
    with A2APeer("1.0") as peer:
        [tool] = await agent_tools(agent(peer.card_url, headers=headers, poll_every=1))
        monkeypatch.setenv("A2A_TEST_TOKEN", "rotated")  # re-expanded per call
        peer.polls = [completed("fine")]
        await tool.execute({"task": "x"})
    assert peer.card_requests[0]["authorization"] == "Bearer s3cret-value"
    assert peer.card_requests[0]["x-empty"] == "[]"
    assert [c.headers["authorization"] for c in peer.calls] == ["Bearer rotated", "Bearer rotated"]
    assert all(c.headers["content-type"] == "application/json" for c in peer.calls)
    assert not any("s3cret" in r.getMessage() or "rotated" in r.getMessage() for r in caplog.records)


async def test_user_headers_win_over_content_type_and_version_header():
    with A2APeer("mixed") as peer:
        peer.on_send = [completed("ok")]
        [tool] = await agent_tools(agent(peer.card_url, headers={"content-type": "application/json; charset=utf-8"}))
        await tool.execute({"task": "x"})
    assert peer.calls[0].headers["content-type"] == "application/json; charset=utf-8"
    assert "a2a-version" not in peer.calls[0].headers  # the mixed form sends no version header


async def test_card_http_error_raises_with_status_and_body():
    with A2APeer("1.0", card_status=503, card_body="down for maintenance") as peer:
        with pytest.raises(RuntimeError, match=r"^HTTP 503: down for maintenance$"):
            await agent_tools(agent(peer.card_url))


async def test_card_bad_json_and_non_object_raise_naming_the_url():
    with A2APeer("1.0", card_body="{not json") as peer:
        with pytest.raises(ValueError, match=r"agent card at .*agent-card\.json is not valid JSON"):
            await agent_tools(agent(peer.card_url))
    with A2APeer("1.0", card_body="[1, 2]") as peer:
        with pytest.raises(ValueError, match=r"is not a JSON object \(got list\)"):
            await agent_tools(agent(peer.card_url))


async def test_card_offering_no_jsonrpc_interface_is_refused_clearly():
    grpc_only = {
        "supportedInterfaces": [
            {"url": "http://h/grpc", "protocolBinding": "GRPC", "protocolVersion": "1.0"},
            {"url": "http://h/rest", "protocolBinding": "HTTP+JSON", "protocolVersion": "1.0"},
        ]
    }
    with A2APeer("1.0", card=grpc_only) as peer:
        with pytest.raises(ValueError, match=r"offers no JSON-RPC interface \(offers: GRPC, HTTP\+JSON\)"):
            await agent_tools(agent(peer.card_url))


def test_card_fetch_timeout_is_the_agent_budget_capped_at_30_seconds():
    assert CARD_TIMEOUT_CAP == 30.0
    assert card_timeout(agent("u")) == 30.0  # default 300 s budget → capped
    assert card_timeout(agent("u", timeout=600_000)) == 30.0
    assert card_timeout(agent("u", timeout=1_500)) == 1.5


async def test_hung_card_is_abandoned_after_the_agent_timeout():
    with A2APeer("1.0", card_hang=True) as peer:
        with pytest.raises(Exception) as err:
            await asyncio.wait_for(agent_tools(agent(peer.card_url, timeout=200)), 10)
        assert type(err.value).__name__ == "ReadTimeout"
        assert await asyncio.to_thread(peer.client_left.wait, 5)  # the connection was closed by us


def test_every_public_name_is_importable_from_toolnexus_a2a_and_the_top_level():
    import toolnexus
    import toolnexus.a2a as a2a

    for name in ("DEFAULT_TIMEOUT", "DEFAULT_POLL_EVERY", "TERMINAL", "is_enabled", "RemoteAgent", "AgentConfig",
                 "AgentsConfig", "agent", "agent_tools", "parse_agents_config", "A2APart", "A2AMessage",
                 "A2AArtifact", "A2ATaskStatus", "A2ATask", "A2ASkill", "AgentCard", "A2ATaskState"):
        assert name in a2a.__all__ and hasattr(a2a, name), name
    assert toolnexus.agent_tools is a2a.agent_tools and toolnexus.Agent is a2a.RemoteAgent


def test_the_0_21_name_a2a_agent_still_works_and_warns_toward_remote_agent():
    import toolnexus
    import toolnexus.a2a as a2a

    warned = r"toolnexus\.a2a\.Agent is deprecated: use toolnexus\.a2a\.RemoteAgent"
    with pytest.warns(DeprecationWarning, match=warned):
        old = a2a.Agent
    assert old is a2a.RemoteAgent
    with pytest.warns(DeprecationWarning, match="RemoteAgent"):
        from toolnexus.a2a import Agent  # noqa: F401 - the import is what warns
    assert "Agent" not in a2a.__all__  # `from toolnexus.a2a import *` neither warns nor brings the old name
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # the top-level name is 0.21's surface: no warning there
        assert toolnexus.Agent is a2a.RemoteAgent
    with pytest.raises(AttributeError, match="has no attribute 'Agnet'"):
        a2a.Agnet  # noqa: B018 - a typo is still an AttributeError
