"""toolnexus.acp against a small ACP agent process (tests/support/acp_agent.py): real subprocess, stdio JSON-RPC."""

from __future__ import annotations

import dataclasses
import json
import os
import pathlib
import sys

import pytest

import toolnexus
from toolnexus import acp
from toolnexus.acp import ACPClient, ACPError, ACPOptions, ACPPermissionTimeoutError, load_acp, prompt_text
from toolnexus.client import create_in_process_client
from toolnexus.errors import ToolnexusError
from toolnexus.toolkit import Toolkit
from toolnexus.types import Tool, ToolResult

AGENT = str(pathlib.Path(__file__).parent / "support" / "acp_agent.py")


@pytest.fixture
def wire_log(tmp_path):
    path = tmp_path / "acp-wire.jsonl"

    def read():
        return [json.loads(line) for line in path.read_text().splitlines()] if path.exists() else []

    read.path = str(path)
    return read


@pytest.fixture
def agent(wire_log):
    started = []

    def start(**kw):
        env = {"ACP_LOG": wire_log.path, **kw.pop("env", {})}
        client = load_acp(ACPOptions(sys.executable, [AGENT], env=env, **kw))
        started.append(client)
        return client

    yield start
    for client in started:
        client.close()
        assert client._process.returncode is not None  # reaped


def user(text):
    return {"messages": [{"role": "user", "content": text}]}


# -- surface and prompt text -----------------------------------------------------------------------------


def test_public_names_and_options():
    for name in ("ACPClient", "ACPError", "ACPOptions", "ACPPermissionTimeoutError", "load_acp"):
        assert name in acp.__all__ and getattr(toolnexus, name) is getattr(acp, name)
    assert [
        (f.name, f.default if f.default is not dataclasses.MISSING else f.default_factory())
        for f in dataclasses.fields(ACPOptions)
        if f.name != "command"
    ] == [
        ("args", []),
        ("cwd", None),
        ("env", None),
        ("protocol_version", 1),
        ("permission_timeout", 5.0),
        ("mode", None),
    ]
    assert issubclass(ACPPermissionTimeoutError, ACPError) and issubclass(ACPError, RuntimeError)
    assert issubclass(ACPError, ToolnexusError)


def test_prompt_text_rules():
    assert prompt_text([{"role": "assistant", "content": "a"}, {"role": "tool", "content": "t"}]) == (
        "assistant: a\ntool: t\nSUPERSEDES-ALL-PRIOR: tool: t")
    assert prompt_text([]) == "SUPERSEDES-ALL-PRIOR: "
    messages = ["skip me", {"role": "system", "content": "be terse"}, {"content": "no role"},
                {"role": "user", "content": ["a", {"text": 1}, {"type": "text", "value": "v"}, {"type": "image"}]},
                {"role": "assistant", "content": None}, {"role": "assistant", "content": 42},
                {"role": "user", "content": ""}]
    assert prompt_text(messages) == ("system: be terse\n: no role\nuser: a1v\nassistant: 42\n"
                                     "SUPERSEDES-ALL-PRIOR: a1v")


# -- against the agent process ----------------------------------------------------------------------------------


def test_handshake_wire(agent, wire_log, tmp_path):
    client = agent(mode="architect", cwd=str(tmp_path))
    sent = wire_log()
    assert [(m["id"], m["method"]) for m in sent] == [("c-1", "initialize"), ("c-2", "session/new"),
                                                      ("c-3", "session/set_mode")]
    assert sent[0]["params"] == {"protocolVersion": 1,
                                 "clientCapabilities": {"fs": {"readTextFile": False, "writeTextFile": False}}}
    assert sent[1]["params"] == {"cwd": str(tmp_path), "mcpServers": []}
    assert sent[2]["params"] == {"sessionId": "sess-1", "modeId": "architect"}
    assert client.session_id == "sess-1" and client.is_alive()


def test_generate_returns_exactly_the_streamed_chunks(agent, wire_log):
    client = agent()
    messages = [{"role": "system", "content": "sys"}, {"role": "user", "content": "echo hello"}]
    text = prompt_text(messages)
    assert client.generate({"messages": messages, "tools": [{"x": 1}], "model": "m"}) == {"content": text}
    prompt = wire_log()[-1]
    assert prompt["id"] == "c-3" and prompt["method"] == "session/prompt"
    assert prompt["params"] == {"sessionId": "sess-1", "prompt": [{"type": "text", "text": text}]}


async def test_an_in_process_client_run_ends_on_the_agents_reply_with_zero_usage(agent, wire_log):
    client = agent()
    called = []

    async def execute(args=None, ctx=None):
        called.append(args)
        return ToolResult("never", False)

    toolkit = Toolkit(None, None, [], [], [Tool("secret_tool", "x", {"type": "object"}, "native", execute)])
    llm = create_in_process_client(model="acp-agent", generate=client.generate)
    result = await llm.run("echo over the client", toolkit)
    assert result.text.endswith("SUPERSEDES-ALL-PRIOR: echo over the client") and result.turns == 1
    assert result.usage == {"prompt_tokens": 0, "completion_tokens": 0, "total_tokens": 0} and called == []
    assert "secret_tool" not in json.dumps(wire_log())  # toolkit tools are never offered to the agent


@pytest.mark.parametrize("options,outcome", [
    ([{"optionId": "no", "kind": "reject_once"}, {"optionId": "yes", "kind": "allow_once"},
      {"optionId": "always", "kind": "allow_always"}], {"outcome": {"outcome": "selected", "optionId": "yes"}}),
    ([{"optionId": "no", "kind": "reject_once"}], {"outcome": {"outcome": "cancelled"}}),
])
def test_permission_requests_pick_the_first_allow_option(agent, options, outcome):
    client = agent(env={"ACP_OPTIONS": json.dumps(options)})
    assert json.loads(client.generate(user("permission please"))["content"]) == outcome


def test_other_agent_requests_get_an_empty_result(agent):
    assert json.loads(agent().generate(user("callback"))["content"]) == {}


def test_error_replies_and_child_exit(agent):
    client = agent()
    with pytest.raises(ACPError) as e:
        client.generate(user("error"))
    assert str(e.value) == "acp error 42: bad prompt" and e.value.code == 42
    with pytest.raises(ACPError) as e:
        client.generate(user("exit"))
    assert str(e.value) == "acp error -1: acp: child process closed the connection"
    client._process.wait(10)
    assert not client.is_alive()


def test_cwd_is_absolute_and_env_is_merged(agent, tmp_path, monkeypatch):
    (tmp_path / "work").mkdir()
    monkeypatch.chdir(tmp_path)
    client = agent(cwd="work", env={"ACP_MARK": "marked"})
    assert client.generate(user("cwd"))["content"] == f"{tmp_path / 'work'}|marked"


def test_close_is_idempotent_and_reaps_the_child(agent):
    client = agent()
    client.close()
    client.close()
    assert client._process.returncode is not None and not client.is_alive()
    assert not client._reader.is_alive()


def test_spawn_errors_propagate_as_they_are(tmp_path):
    with pytest.raises(FileNotFoundError):
        load_acp(ACPOptions(str(tmp_path / "no-such-agent")))


def test_handshake_timeout_closes_the_child(monkeypatch, wire_log):
    monkeypatch.setattr(acp, "HANDSHAKE_TIMEOUT", 0.3)
    closed = []
    real_close = ACPClient.close

    def spy(self):
        real_close(self)
        closed.append(self._process.returncode)

    monkeypatch.setattr(ACPClient, "close", spy)
    with pytest.raises(ACPError) as e:
        load_acp(ACPOptions(sys.executable, [AGENT], env={"ACP_SILENT_INIT": "1", "ACP_LOG": wire_log.path}))
    assert str(e.value) == "acp: initialize timed out after 0.3s"
    assert len(closed) == 1 and closed[0] is not None


# -- beyond 0.21 -----------------------------------------------------------------------------------------------------


def test_a_timed_out_turn_is_cancelled_and_its_late_output_never_leaks(agent, wire_log):
    """A timed-out turn is now cancelled with session/cancel, and chunks are dropped until the old turn's reply,
    so its late output does not leak into the next reply."""
    client = agent(permission_timeout=0.3)
    with pytest.raises(ACPPermissionTimeoutError) as e:
        client.generate(user("hang"))
    assert str(e.value) == ("acp: turn hung waiting on a reply (possibly an unanswered session/request_permission) "
                            "after 0.3s")
    client.opts.permission_timeout = 10.0
    reply = client.generate(user("echo after the hang"))
    assert "LATE" not in reply["content"] and reply["content"].endswith("SUPERSEDES-ALL-PRIOR: echo after the hang")
    methods = [m.get("method") for m in wire_log()]
    assert methods.count("session/cancel") == 1
    cancel = next(m for m in wire_log() if m.get("method") == "session/cancel")
    assert cancel == {"jsonrpc": "2.0", "method": "session/cancel", "params": {"sessionId": "sess-1"}}


def test_a_missing_session_id_fails_load_and_use_after_close_is_a_clear_error(agent, monkeypatch, wire_log):
    """load_acp now refuses a session/new reply without a sessionId (the child is closed), and generate after
    close() raises ACPError("acp: client closed") instead of a pipe error."""
    closed = []
    real_close = ACPClient.close

    def spy(self):
        real_close(self)
        closed.append(self._process.returncode)

    monkeypatch.setattr(ACPClient, "close", spy)
    with pytest.raises(ACPError, match="session/new returned no sessionId"):
        load_acp(ACPOptions(sys.executable, [AGENT], env={"ACP_NO_SESSION": "1", "ACP_LOG": wire_log.path}))
    assert len(closed) == 1 and closed[0] is not None
    client = agent()
    client.close()
    with pytest.raises(ACPError) as e:
        client.generate(user("echo"))
    assert str(e.value) == "acp: client closed"
    assert os.path.exists(wire_log.path)
