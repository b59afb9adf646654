"""Shared pieces for the A2A-serve tests: a scripted in-process model, an agent toolkit, helpers.

The model is the one allowed fake — a plain function behind the client's transport seam
(`create_in_process_client`). It reads the transcript and answers by rule:

- the last message is a tool result → `done: <that result>`;
- the user says `ask ...` → calls `ask_name` (which suspends for input), `login` → `login`
  (suspends for authorization), `block` → `block` (runs until cancelled), `explode` → raises
  (a provider-style error that quotes a secret), `recall` → lists every earlier user message;
- anything else → `echo: <text>`.

Everything else is real: the toolkit, the client loop, our server on loopback, real HTTP.
"""

from __future__ import annotations

import asyncio
import json
from contextlib import asynccontextmanager
from typing import Any, AsyncIterator, Optional

import httpx

from toolnexus import Tool, ToolContext, ToolResult, create_in_process_client, pending
from toolnexus.serve import ServeLimits
from toolnexus.toolkit import Toolkit

__all__ = [
    "SECRET",
    "AgentRecorder",
    "agent_toolkit",
    "agent_toolkit_with_skill",
    "card_of",
    "generate",
    "rpc",
    "served_agent",
    "wait_state",
]

SECRET = "sk-test-SECRET-1234567890"
OBJ = {"type": "object", "properties": {}}


def _text(content: Any) -> str:
    if isinstance(content, str):
        return content
    if isinstance(content, list):
        return "".join(b.get("text", "") for b in content if isinstance(b, dict))
    return ""


def generate(req: dict[str, Any]) -> dict[str, Any]:
    messages = req["messages"]
    last = messages[-1]
    if last.get("role") == "tool":
        return {"content": f"done: {_text(last.get('content'))}"}
    text = _text(last.get("content"))
    call_id = f"call_{len(messages)}"
    for word, tool in (("ask", "ask_name"), ("login", "login"), ("block", "block")):
        if text.startswith(word):
            return {"tool_calls": [{"id": call_id, "name": tool, "args": {}}]}
    if text.startswith("explode"):
        raise RuntimeError(f"provider said 500 for key {SECRET} and Authorization: Bearer abc.def")
    if text.startswith("recall"):
        said = [_text(m.get("content")) for m in messages if m.get("role") == "user"]
        return {"content": "you said: " + " | ".join(said[:-1])}
    return {"content": f"echo: {text}"}


class AgentRecorder:
    """What the agent's tools saw, and events tests can await."""

    def __init__(self) -> None:
        self.answers: list[Any] = []
        self.blocked = asyncio.Event()
        self.block_cancelled = asyncio.Event()


def agent_toolkit(rec: AgentRecorder, *, builtins: Optional[list[Tool]] = None,
                  a2a_config: Optional[dict[str, Any]] = None, skill_source: Any = None,
                  replace: Optional[dict[str, Tool]] = None) -> Toolkit:
    async def ask_name(args: dict[str, Any], ctx: Optional[ToolContext] = None) -> ToolResult:
        if ctx is None or ctx.answer is None:
            return pending(kind="input", prompt="What is your name?")
        rec.answers.append(ctx.answer)
        return ToolResult(f"hello {(ctx.answer.data or {}).get('text')}", False)

    async def login(args: dict[str, Any], ctx: Optional[ToolContext] = None) -> ToolResult:
        if ctx is None or ctx.answer is None:
            return pending(kind="authorization", prompt="Sign in to continue", url="https://auth.example/authorize")
        rec.answers.append(ctx.answer)
        return ToolResult("signed in", False)

    async def block(args: dict[str, Any], ctx: Optional[ToolContext] = None) -> ToolResult:
        rec.blocked.set()
        try:
            await asyncio.Event().wait()
        except asyncio.CancelledError:
            rec.block_cancelled.set()
            raise
        return ToolResult("unreachable", True)

    tools = [
        Tool("ask_name", "Asks the user for a name", OBJ, "native", ask_name),
        Tool("login", "Needs a sign-in", OBJ, "native", login),
        Tool("block", "Runs until cancelled", OBJ, "native", block),
    ]
    tools = [(replace or {}).get(t.name, t) for t in tools]
    return Toolkit(None, skill_source, list(builtins or []), [], tools, a2a_config=a2a_config)


async def agent_toolkit_with_skill(rec: AgentRecorder, *names: str) -> Toolkit:
    """The agent toolkit plus logical SKILL.md skills `names` (so the card lists them)."""
    from toolnexus.skill import SkillDef, aload_skills

    source = await aload_skills(None, skills=[SkillDef(name=n, content=f"The {n} skill.", description=f"{n} skill")
                                              for n in names])
    return agent_toolkit(rec, skill_source=source)


@asynccontextmanager
async def served_agent(toolkit: Optional[Toolkit] = None, addr: str = "127.0.0.1:0", *, model: Any = generate,
                       **options: Any) -> AsyncIterator[Any]:
    """Serve `toolkit` (default: the agent toolkit) with A2A on and the scripted model."""
    toolkit = toolkit if toolkit is not None else agent_toolkit(AgentRecorder())
    options.setdefault("a2a", {})
    options.setdefault("limits", ServeLimits(drain_timeout=0))  # tests leave blocked runs behind: cancel at once
    if "client" not in options:
        options["client"] = create_in_process_client(model="scripted", generate=model)
    handle = await toolkit.serve(addr, **options)
    try:
        yield handle
    finally:
        await handle.stop()


async def rpc(http: httpx.AsyncClient, url: str, method: Optional[str], params: Any = None, *, rid: Any = 1,
              headers: Optional[dict[str, str]] = None) -> dict[str, Any]:
    """One raw JSON-RPC POST; returns the decoded reply (asserting HTTP 200 + JSON)."""
    body: dict[str, Any] = {"jsonrpc": "2.0", "id": rid}
    if method is not None:
        body["method"] = method
    if params is not None:
        body["params"] = params
    resp = await http.post(
        url, content=json.dumps(body), headers={"content-type": "application/json", **(headers or {})}
    )
    assert resp.status_code == 200, resp.text
    assert resp.headers["content-type"] == "application/json"
    return resp.json()


async def card_of(http: httpx.AsyncClient, base: str, **headers: str) -> dict[str, Any]:
    resp = await http.get(base + "/.well-known/agent-card.json", headers=headers)
    assert resp.status_code == 200, resp.text
    return resp.json()


async def wait_state(store: Any, task_id: str, states: set[str], *, limit: float = 10.0) -> dict[str, Any]:
    """Poll the store (bounded) until the task is in one of `states`; returns it."""
    loop = asyncio.get_running_loop()
    deadline = loop.time() + limit
    while True:
        task = await store.get(task_id)
        if task is not None and task["status"]["state"] in states:
            return task
        if loop.time() > deadline:
            raise AssertionError(f"task {task_id} never reached {states}: {task}")
        await asyncio.sleep(0.01)
