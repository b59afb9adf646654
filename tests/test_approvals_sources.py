"""Approvals on every source kind: native, MCP over stdio and streamable HTTP (real subprocess
servers), a built-in, an HTTP endpoint (loopback), a remote A2A agent (loopback peer) and a
sub-agent's `task` tool.

For each kind one toolkit (or agent team) and six decisions, each checked on the tool's side
effect and on what the model received next: approve, approve with edited arguments, an edit
the tool's schema refuses, reject with a message, and approve or reject `always` (the second call
is not asked: it runs, or is refused with the same message). In every case the body has not run when the human is asked.
"""

from __future__ import annotations

import json
import subprocess
import sys
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, AsyncIterator, Callable, Iterator, Optional

import pytest

from support.a2a_peers import A2APeer, completed
from support.http_fixtures import close_pool, server  # noqa: F401 - fixtures
from support.http_server import LoopbackServer, Reply
from toolnexus import Answer, Request, create_in_process_client, create_toolkit, define_tool
from toolnexus.agents import agent
from toolnexus.approvals import approval_of
from toolnexus.http import http_tool

LEDGER_SERVER = str(Path(__file__).resolve().parent / "support" / "mcp_servers" / "ledger.py")


@dataclass
class Kind:
    """One source kind under test: the tool as the model calls it and how to see what ran."""

    tool: str
    args: list[dict[str, Any]]  # the calls the model makes (the second only in the `always` case)
    edited: dict[str, Any]
    invalid: dict[str, Any]
    effects: Callable[[], list[Any]]  # what the tool's body did so far, in order
    effect_of: Callable[[dict[str, Any]], Any]  # the effect one call with these arguments has
    source: str = ""
    toolkit: Any = None
    cleanup: list[Any] = field(default_factory=list)


def scripted(tool: str, calls: list[dict[str, Any]], seen: list[str]) -> Callable[[dict], dict]:
    """A model that makes `calls` one turn at a time, recording each tool result it is sent."""
    made = iter(calls)

    def generate(request: dict) -> dict:
        last = request["messages"][-1]
        if last["role"] == "tool":
            seen.append(last["content"])
        nxt = next(made, None)
        return {"tool_calls": [{"name": tool, "args": nxt}]} if nxt is not None else {"content": "done"}

    return generate


class Human:
    """The `wait_for`: answers with `decide(request)`, noting what had run when it was asked."""

    def __init__(self, kind: Kind, decide: Callable[[Request], Answer]) -> None:
        self.kind, self.decide = kind, decide
        self.asked: list[Request] = []
        self.effects_when_asked: list[list[Any]] = []

    async def __call__(self, request: Request) -> Answer:
        self.asked.append(request)
        self.effects_when_asked.append(list(self.kind.effects()))
        return self.decide(request)


async def run_client(kind: Kind, calls: list[dict[str, Any]], decide: Callable[[Request], Answer]) -> tuple[
        Human, list[str]]:
    seen: list[str] = []
    human = Human(kind, decide)
    client = create_in_process_client(model="m", generate=scripted(kind.tool, calls, seen), wait_for=human)
    result = await client.run("go", kind.toolkit)
    assert result.status == "done"
    return human, seen


# -- the kinds ------------------------------------------------------------------------------------------


def _lines(path: Path) -> list[str]:
    return path.read_text().splitlines() if path.exists() else []


async def native_kind(tmp_path: Path) -> Kind:
    ran: list[str] = []

    def deploy(service: str) -> str:
        """Deploy a service."""
        ran.append(service)
        return f"{service} deployed"

    kind = Kind("deploy", [{"service": "billing"}, {"service": "web"}], {"service": "billing-canary"},
                {"service": 7}, lambda: ran, lambda a: a["service"], "native")
    kind.toolkit = await create_toolkit(builtins=False, extra_tools=[define_tool(deploy, needs_approval=True)])
    return kind


async def builtin_kind(tmp_path: Path) -> Kind:
    one, two, three = (str(tmp_path / f"{n}.txt") for n in ("one", "two", "three"))
    seen: dict[tuple[str, int, int], tuple[str, str]] = {}  # every (file, version) written so far, in order

    def written() -> list[Any]:
        for p in sorted(tmp_path.glob("*.txt"), key=lambda p: p.stat().st_mtime_ns):
            st = p.stat()  # a write replaces the file (a new inode, a new mtime)
            seen.setdefault((p.name, st.st_ino, st.st_mtime_ns), (p.name, p.read_text()))
        return list(seen.values())

    kind = Kind("write", [{"path": one, "content": "first"}, {"path": two, "content": "second"}],
                {"path": three, "content": "edited"}, {"content": "no path"}, written,
                lambda a: (Path(a["path"]).name, a["content"]), "builtin")
    kind.toolkit = await create_toolkit(builtins={"tools": {"bash": False}}, approvals=["write"])
    return kind


async def mcp_stdio_kind(tmp_path: Path) -> Kind:
    ledger = tmp_path / "stdio-ledger.txt"
    config = {"mcpServers": {"books": {"command": [sys.executable, LEDGER_SERVER, "--ledger", str(ledger)],
                                       "requireApproval": "always"}}}
    kind = Kind("books_record", [{"text": "alpha"}, {"text": "beta"}], {"text": "gamma"}, {"text": 5},
                lambda: _lines(ledger), lambda a: a["text"], "mcp:books/record")
    kind.toolkit = await create_toolkit(config, builtins=False)
    return kind


@pytest.fixture(scope="module")
def mcp_http_server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[str, Path]]:
    """The ledger server over streamable HTTP, as a real subprocess: (its /mcp URL, its ledger)."""
    ledger = tmp_path_factory.mktemp("mcp-http") / "ledger.txt"
    proc = subprocess.Popen([sys.executable, LEDGER_SERVER, "--ledger", str(ledger), "--http"],
                            stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True)
    try:
        assert proc.stdout is not None
        url = proc.stdout.readline().strip()
        assert url.startswith("http://127.0.0.1:"), url
        yield url, ledger
    finally:
        assert proc.stdin is not None
        proc.stdin.close()
        try:
            proc.wait(10)
        finally:
            proc.kill()


async def mcp_http_kind(tmp_path: Path, served: tuple[str, Path]) -> Kind:
    url, ledger = served
    start = len(_lines(ledger))
    config = {"mcpServers": {"remote": {"url": url, "requireApproval": {"record": "always"}}}}
    kind = Kind("remote_record", [{"text": "one"}, {"text": "two"}], {"text": "three"}, {"text": []},
                lambda: _lines(ledger)[start:], lambda a: a["text"], "mcp:remote/record")
    kind.toolkit = await create_toolkit(config, builtins=False)
    return kind


async def http_kind(tmp_path: Path, srv: LoopbackServer) -> Kind:
    srv.routes["/orders"] = Reply(body='{"ok": true}', content_type="application/json")
    schema = {"type": "object", "properties": {"item": {"type": "string"}}, "required": ["item"],
              "additionalProperties": False}
    tool = http_tool(name="order", description="Place an order.", method="POST", url=srv.url + "/orders",
                     input_schema=schema)

    def posted() -> list[Any]:
        return [json.loads(r.body)["item"] for r in srv.received if r.path == "/orders"]

    kind = Kind("order", [{"item": "tea"}, {"item": "cake"}], {"item": "coffee"}, {"item": None}, posted,
                lambda a: a["item"], "http")
    kind.toolkit = await create_toolkit(builtins=False, extra_tools=[tool], approvals={"http:*": True})
    return kind


async def a2a_kind(tmp_path: Path, peer: A2APeer) -> Kind:
    peer.on_send = [completed("sent")]

    def sent() -> list[Any]:
        texts = []
        for call in peer.calls:
            if call.method == "SendMessage":
                parts = call.params["message"]["parts"]
                texts.append(" ".join(p.get("text", "") for p in parts))
        return texts

    kind = Kind("Mailer_send", [{"task": "mail alice"}, {"task": "mail bob"}], {"task": "mail carol"},
                {"task": 3}, sent, lambda a: a["task"], "a2a:Mailer/send")
    kind.toolkit = await create_toolkit(builtins=False, approvals=["a2a:Mailer/*"])
    await kind.toolkit.add_agent(peer.card_url, poll_every=10)
    return kind


KINDS = ["native", "builtin", "mcp-stdio", "mcp-http", "http", "a2a"]


@pytest.fixture
async def kind(request: pytest.FixtureRequest, tmp_path: Path) -> AsyncIterator[Kind]:
    name = request.param
    peer: Optional[A2APeer] = None
    loop_server: Optional[LoopbackServer] = None
    if name == "native":
        made = await native_kind(tmp_path)
    elif name == "builtin":
        made = await builtin_kind(tmp_path)
    elif name == "mcp-stdio":
        made = await mcp_stdio_kind(tmp_path)
    elif name == "mcp-http":
        made = await mcp_http_kind(tmp_path, request.getfixturevalue("mcp_http_server"))
    elif name == "http":
        loop_server = LoopbackServer().__enter__()
        made = await http_kind(tmp_path, loop_server)
    else:
        peer = A2APeer("1.0", name="Mailer", skills=[{"id": "send", "description": "Send mail."}]).__enter__()
        made = await a2a_kind(tmp_path, peer)
    try:
        yield made
    finally:
        await made.toolkit.close()
        if peer is not None:
            peer.__exit__(None, None, None)
        if loop_server is not None:
            loop_server.__exit__(None, None, None)


# -- the six decisions, per kind -------------------------------------------------------------------------


@pytest.mark.parametrize("kind", KINDS, indirect=True)
async def test_every_decision_on_every_source_kind(kind: Kind) -> None:
    first, second = kind.args
    effect = kind.effect_of

    # approve: asked once, with nothing run yet; then it runs, as the model asked
    before = list(kind.effects())
    human, seen = await run_client(kind, [first], lambda r: Answer(id=r.id, ok=True, by="ann", via="api"))
    assert human.effects_when_asked == [before]
    [asked] = human.asked
    a = approval_of(asked)
    assert a is not None and a["tool"] == kind.tool and a["call_id"] and a["input_schema"]
    assert asked.prompt.startswith(f"Approve {kind.tool} ") and "\n" not in asked.prompt
    assert kind.source in asked.prompt or kind.source == a["source"]
    assert kind.effects()[len(before):] == [effect(first)]
    assert not seen[0].startswith(("declined", "invalid", "note:"))

    # approve with edited arguments: it runs with them, and the model is told a human changed them
    before = list(kind.effects())
    human, seen = await run_client(kind, [first], lambda r: Answer(id=r.id, ok=True, arguments=kind.edited))
    assert human.effects_when_asked == [before]
    assert kind.effects()[len(before):] == [effect(kind.edited)]
    assert seen[0].startswith("note: a human changed this call's arguments before approving it; it ran with ")

    # an edit the schema refuses: nothing runs, the model hears why
    before = list(kind.effects())
    human, seen = await run_client(kind, [first], lambda r: Answer(id=r.id, ok=True, arguments=kind.invalid))
    assert kind.effects() == before
    assert seen[0].startswith("invalid answer for Approve ") and "the edited arguments do not match" in seen[0]

    # reject with a message: nothing runs, the model receives the pinned text then the message
    human, seen = await run_client(kind, [first], lambda r: Answer(id=r.id, ok=False, reason="declined",
                                                                   message="too risky today", by="bob"))
    assert kind.effects() == before
    assert seen == [f"declined/expired: {human.asked[0].prompt}\nmessage from bob: too risky today"]

    # always: the first answer covers the second call of the same tool in this run
    human, seen = await run_client(kind, [first, second], lambda r: Answer(id=r.id, ok=True, always=True))
    assert len(human.asked) == 1
    assert kind.effects()[len(before):] == [effect(first), effect(second)]
    assert len(seen) == 2 and not any(s.startswith(("declined", "invalid")) for s in seen)

    # reject always: the second call of the tool is refused without asking, and neither body runs
    before = list(kind.effects())
    human, seen = await run_client(kind, [first, second], lambda r: Answer(id=r.id, ok=False, always=True,
                                                                           message="not this week", by="bob"))
    assert len(human.asked) == 1 and kind.effects() == before
    prompt = human.asked[0].prompt
    again = prompt.replace(*(json.dumps(a, ensure_ascii=False, sort_keys=True) for a in (first, second)))
    assert again != prompt  # the second call's own prompt: its arguments
    assert seen == [f"declined/expired: {p}\nmessage from bob: not this week" for p in (prompt, again)]


# -- a sub-agent's task ---------------------------------------------------------------------------------


class TeamModel:
    """The parent delegates (`task`) as scripted; the child answers with the prompt it got."""

    def __init__(self, calls: list[dict[str, Any]]) -> None:
        self.calls = iter(calls)
        self.child_prompts: list[str] = []
        self.parent_saw: list[str] = []

    def __call__(self, request: dict) -> dict:
        messages = request["messages"]
        system = messages[0]["content"] if messages and messages[0]["role"] == "system" else ""
        last = messages[-1]
        if system.startswith("child"):
            self.child_prompts.append(last["content"])
            return {"content": f"child did: {last['content']}"}
        if last["role"] == "tool":
            self.parent_saw.append(last["content"])
        nxt = next(self.calls, None)
        return {"content": "parent done"} if nxt is None else {"tool_calls": [{"name": "task", "args": nxt}]}


async def _team(calls: list[dict[str, Any]], decide: Callable[[Request], Answer]) -> tuple[TeamModel, list[Any]]:
    model = TeamModel(calls)
    asked: list[Any] = []

    def human(request: Request) -> Answer:
        asked.append((request, list(model.child_prompts)))
        return decide(request)

    child = agent("child", does="does the work", soul="child agent")
    parent = agent("parent", does="delegates", soul="parent agent", team=[child], wait_for=human,
                   approvals={"task": True})
    result = await parent.run("go", in_process=model)
    await result.runtime.close(result.runtime.root)
    assert result.status == "done", result
    return model, asked


async def test_every_decision_on_a_sub_agents_task() -> None:
    first, second = {"agent": "child", "prompt": "first job"}, {"agent": "child", "prompt": "second job"}

    model, asked = await _team([first], lambda r: Answer(id=r.id, ok=True))
    [(request, children_then)] = asked
    assert children_then == [] and model.child_prompts == ["first job"]  # no child before the approval
    a = approval_of(request)
    assert a["tool"] == "task" and a["agent_path"] == ["root", "parent.1"] and "agent root/parent.1" in request.prompt
    assert model.parent_saw == ["child did: first job"]

    model, _ = await _team([first], lambda r: Answer(id=r.id, ok=True, arguments={**first, "prompt": "edited job"}))
    assert model.child_prompts == ["edited job"] and model.parent_saw[0].startswith("note: a human changed")

    model, _ = await _team([first], lambda r: Answer(id=r.id, ok=True, arguments={"agent": 1, "prompt": "x"}))
    assert model.child_prompts == [] and "the edited arguments do not match" in model.parent_saw[0]

    model, asked = await _team([first], lambda r: Answer(id=r.id, ok=False, message="not now"))
    assert model.child_prompts == []
    assert model.parent_saw == [f"declined/expired: {asked[0][0].prompt}\nmessage: not now"]

    model, asked = await _team([first, second], lambda r: Answer(id=r.id, ok=True, always=True))
    assert len(asked) == 1 and model.child_prompts == ["first job", "second job"]

    model, asked = await _team([first, second], lambda r: Answer(id=r.id, ok=False, always=True, message="no"))
    prompt = asked[0][0].prompt
    again = prompt.replace(*(json.dumps(a, ensure_ascii=False, sort_keys=True) for a in (first, second)))
    assert len(asked) == 1 and model.child_prompts == [] and again != prompt
    assert model.parent_saw == [f"declined/expired: {p}\nmessage: no" for p in (prompt, again)]
