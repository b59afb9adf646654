"""A2A agents end to end through the toolkit: `create_toolkit({"agents": ...})` and `add_agent`."""

from __future__ import annotations

import logging

import httpx
import pytest

from support.a2a_peers import A2APeer, completed
from toolnexus import create_toolkit
from toolnexus.a2a import agent


async def test_config_agents_block_resolves_concurrently_and_tools_run_through_the_toolkit(monkeypatch, caplog):
    caplog.set_level(logging.WARNING, "toolnexus")
    monkeypatch.setenv("A2A_TK_TOKEN", "tk-secret")
    with A2APeer("1.0", name="Writer") as writer, A2APeer("mixed", name="Coder", skills=[{"id": "py"}]) as coder:
        writer.on_send = [completed("a poem")]
        coder.on_send = [completed("print(1)")]
        config = {"agents": {
            "w": {"card": writer.card_url, "headers": {"Authorization": "Bearer ${A2A_TK_TOKEN}"}, "pollEvery": 5},
            "off": {"card": coder.card_url, "disabled": True},
            "broken": {"card": "http://127.0.0.1:9/card"},
        }}
        tk = await create_toolkit(config, agents=[agent(coder.card_url)], builtins=False)
        assert [(t.name, t.source) for t in tk.tools()] == [("Coder_py", "a2a"), ("Writer_search", "a2a")]
        res = await tk.execute("Writer_search", {"task": "write"})
        assert (res.output, res.is_error, res.metadata["agent"]) == ("a poem", False, "Writer")
        assert (await tk.execute("Coder_py", {"task": "code"})).output == "print(1)"
        assert writer.calls[0].headers["authorization"] == "Bearer tk-secret"
    lines = [r.getMessage() for r in caplog.records]
    assert any(line.startswith('[toolnexus] A2A agent "http://127.0.0.1:9/card" failed: ') for line in lines)
    assert not any("tk-secret" in line for line in lines)


async def test_add_agent_by_url_registers_its_skills_and_errors_propagate():
    tk = await create_toolkit(builtins=False)
    with A2APeer("0.3", name="Helper", skills=[{"id": "a"}, {"id": "b"}]) as peer:
        peer.on_send = [completed("from b")]
        assert await tk.add_agent(peer.card_url, poll_every=10) is tk
        assert [t.name for t in tk.tools()] == ["Helper_a", "Helper_b"]
        assert (await tk.execute("Helper_b", {"task": "go"})).output == "from b"
    with A2APeer("1.0", card_status=404, card_body="no card here") as missing:
        with pytest.raises(RuntimeError, match="^HTTP 404: no card here$"):
            await tk.add_agent(missing.card_url)
    with pytest.raises(httpx.ConnectError):
        await tk.add_agent(agent("http://127.0.0.1:9/card"))
