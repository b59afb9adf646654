"""A small host program for the durable-run process tests: one process per step, sharing a store.

Run as `python -m support.durable_app COMMAND --store URL ...` from the `tests` folder. Every
command prints one JSON line on stdout (the last line) and exits 0, or 3 when the store refused
the answer (`AnswerAlreadyApplied`), 4 for `RunInProgress`, 5 for another toolnexus error.

The teams and their scripted models (stateless: the transcript decides the reply, so any process
can serve any step):

- `worker` — the founding example 3: one `gate` tool that asks for approval; replies 8 tokens for
  a tool call, 4 for the final text. `--kill-store-app NAME` has the resumed gate terminate, right
  after its side effect, every PostgreSQL backend whose `application_name` is NAME (this process's
  store connections, when its `--store` URL sets `application_name=NAME`), as a failover would.
- `top` → `mid` → `leaf` — three levels; the leaf's `check_secret` asks for approval.
- `fan` — delegates to `left` and `right` in one turn; each child's `gate` asks for approval.
- `payer` — one `refund` tool with a side effect (a line appended to `--effects`), which can
  block forever once it has written it (`--hang-in-tool`, for SIGKILL tests); `--idempotent`
  declares it idempotent; `--plain-function` makes it a plain function, run on a worker thread
  (which writes the call's start itself on SQLite).
- `chatter` — talks to a real loopback LLM server (`--base-url`), for a SIGKILL during an LLM call.
"""

from __future__ import annotations

import argparse
import asyncio
import dataclasses
import json
import os
import sys
import threading
from typing import Any

from toolnexus import Answer, ToolResult, define_tool, pending
from toolnexus.agents import AgentRuntime, agent, resume
from toolnexus.durable import AnswerAlreadyApplied, RunInProgress
from toolnexus.errors import ToolnexusError
from toolnexus.stores import open_store

from .agent_fixture import fixture_tools
from .agent_kit import calls, delegate
from .mock_llm import MockLLM

LLM = {"base_url": "http://mock.local", "style": "openai", "model": "stub-model", "api_key": "unused"}


class SeedModel:
    """The founding page's replies, chosen by the transcript instead of popped from a list."""

    def post(self, url: str, headers: dict[str, str], payload: dict[str, Any], timeout: float) -> dict[str, Any]:
        messages = payload["messages"]
        if not any(m.get("role") == "tool" for m in messages):
            return {"choices": [{"message": {"role": "assistant", "content": None, "tool_calls": [
                {"id": "c1", "type": "function", "function": {"name": "gate", "arguments": "{}"}}]},
                "finish_reason": "tool_calls"}],
                "usage": {"prompt_tokens": 6, "completion_tokens": 2, "total_tokens": 8}}
        return {"choices": [{"message": {"role": "assistant", "content": "done."}}],
                "usage": {"prompt_tokens": 3, "completion_tokens": 1, "total_tokens": 4}}

    def open(self, *args: Any) -> Any:
        raise NotImplementedError


EFFECTS = {"path": os.devnull}  # where the resumed gate records that it ran (`--effects`)
KILL = {"app": "", "server": ""}  # `--kill-store-app`: whose store connections the resumed gate terminates


def kill_backends() -> None:
    """Terminate this process's store connections and wait until the server has ended them."""
    import time

    import psycopg

    mine = "FROM pg_stat_activity WHERE application_name = %s AND pid <> pg_backend_pid()"
    with psycopg.connect(KILL["server"], autocommit=True) as conn:
        conn.execute(f"SELECT pg_terminate_backend(pid) {mine}", (KILL["app"],))
        deadline = time.monotonic() + 10
        while conn.execute(f"SELECT count(*) {mine}", (KILL["app"],)).fetchone()[0] and time.monotonic() < deadline:
            time.sleep(0.01)


async def gate(args: Any = None, ctx: Any = None) -> ToolResult:
    if ctx is not None and ctx.answer is not None and ctx.answer.ok:
        with open(EFFECTS["path"], "a", encoding="utf-8") as fh:
            fh.write(json.dumps({"pid": os.getpid(), "gate": "opened"}) + "\n")
        if KILL["app"]:
            await asyncio.to_thread(kill_backends)
        return ToolResult(output="through the gate", is_error=False)
    return pending(kind="approval", prompt="let it through?")


def _gate_tool(name: str = "gate") -> Any:
    return define_tool(gate, name=name, description="Gated action.")


WORKER = agent("worker", does="does gated work", uses={"tools": [_gate_tool()]})

SECRET = fixture_tools({"check_secret": {"inputSchema": {"type": "object", "properties": {}}}})["check_secret"]
LEAF = agent("leaf", does="asks for approval", model="m-leaf", uses={"tools": [SECRET]})
MID = agent("mid", does="middle", model="m-mid", team=[LEAF])
TOP = agent("top", does="top level", model="m-top", team=[MID])

LEFT = agent("left", does="left half", model="m-child", uses={"tools": [_gate_tool()]})
RIGHT = agent("right", does="right half", model="m-child", uses={"tools": [_gate_tool()]})
FAN = agent("fan", does="fans out", model="m-fan", team=[LEFT, RIGHT])

TEAM_MODEL = {
    "m-top": delegate("mid", "delegate", "top: <last tool msg content>"),
    "m-mid": delegate("leaf", "dig", "mid: <last tool msg content>"),
    "m-leaf": [
        {"whenNoToolMsgContains": "secret-token", "toolCalls": calls(("check_secret", {}))},
        {"whenToolMsgContains": "secret-token", "text": "leaf: secret-token"},
    ],
    "m-fan": [
        {"whenToolMsgs": 0, "toolCalls": calls(("task", {"agent": "left", "prompt": "l"}),
                                               ("task", {"agent": "right", "prompt": "r"}))},
        {"whenToolMsgs": ">=1", "text": "fan: <join all tool msg contents with ' + '>"},
    ],
    "m-child": [
        {"whenToolMsgs": 0, "toolCalls": calls(("gate", {}))},
        {"whenToolMsgs": ">=1", "text": "child: <last tool msg content>"},
    ],
    "m-pay": [
        {"whenToolMsgs": 0, "toolCalls": calls(("refund", {"order": "A-17", "amount": 40}))},
        {"whenToolMsgs": ">=1", "text": "paid: <last tool msg content>"},
    ],
}


def team_model() -> MockLLM:
    return MockLLM({"style": "openai", "usagePerCall": {"prompt_tokens": 30, "completion_tokens": 10,
                                                        "total_tokens": 40}, "scripts": TEAM_MODEL})


def payer(effects: str, hang: bool, idempotent: bool, plain: bool = False) -> Any:
    def record(order: str, amount: float) -> None:
        with open(effects, "a", encoding="utf-8") as fh:
            fh.write(json.dumps({"pid": os.getpid(), "order": order, "amount": amount}) + "\n")
            fh.flush()
            os.fsync(fh.fileno())
        if hang:
            print("IN_TOOL", flush=True)

    async def refund(order: str, amount: float) -> str:
        """Refund an order."""
        record(order, amount)
        if hang:
            await asyncio.Event().wait()  # until SIGKILLed
        return f"refunded {order}"

    def refund_plain(order: str, amount: float) -> str:
        """Refund an order."""
        record(order, amount)
        if hang:
            threading.Event().wait()  # until SIGKILLed (on the tool's worker thread)
        return f"refunded {order}"

    tool = define_tool(refund_plain if plain else refund, name="refund", idempotent=idempotent)
    return agent("payer", does="issues refunds", model="m-pay", uses={"tools": [tool]})


def chatter() -> Any:
    return agent("chatter", does="talks", model="chat-model")


def setup(opts: argparse.Namespace) -> tuple[Any, Any, dict[str, Any]]:
    """The agent, its transport and its `llm` for the team named by `--team`."""
    if opts.team == "worker":
        return WORKER, SeedModel(), LLM
    if opts.team == "top":
        return TOP, team_model(), LLM
    if opts.team == "fan":
        return FAN, team_model(), LLM
    if opts.team == "payer":
        return payer(opts.effects, opts.hang_in_tool, opts.idempotent, opts.plain_function), team_model(), LLM
    if opts.team == "chatter":
        return chatter(), None, {"base_url": opts.base_url, "style": "openai", "model": "chat-model", "api_key": "k"}
    raise SystemExit(f"unknown team {opts.team}")


def summary(result: Any) -> dict[str, Any]:
    return {"status": result.status, "text": result.text, "turns": result.turns, "total_tokens": result.total_tokens,
            "run_id": result.run_id, "pending": dataclasses.asdict(result.pending) if result.pending else None}


def tree(rt: AgentRuntime) -> list[str]:
    out: list[str] = []
    stack = list(reversed(rt.root.children))
    while stack:
        h = stack.pop()
        out.append(h.id)
        stack.extend(reversed(h.children))
    return out


async def main(opts: argparse.Namespace) -> dict[str, Any]:
    EFFECTS["path"] = opts.effects
    KILL.update(app=opts.kill_store_app, server=opts.store.split("?", 1)[0])
    team, transport, llm = setup(opts)
    options: dict[str, Any] = {"llm": llm}
    if transport is not None:
        options["transport"] = transport
    if opts.mode:
        options["resume_mode"] = opts.mode
    async with open_store(opts.store) as store:
        if opts.command == "start":
            r = await team.run(opts.prompt, store=store, run_id=opts.run_id, **options)
            out = summary(r)
            out["tree"] = tree(r.runtime)
            await r.runtime.aclose()
            return out
        if opts.command == "answer":
            data = json.loads(opts.data) if opts.data else None
            final = await resume(store, Answer(id=opts.id, ok=not opts.decline, data=data), agents=[team], **options)
            return summary(final)
        if opts.command == "restore":
            rt = await AgentRuntime.restore(store, opts.run_id, agents=[team], takeover=opts.takeover, **options)
            entry = rt.entry
            assert entry is not None
            result = await rt.wait(entry)
            out = summary(result)
            out["tree"] = tree(rt)
            out["trace"] = list(rt.trace)
            if result.status == "pending":
                await rt.aclose()
            else:
                await rt.close(rt.root)
            return out
        if opts.command == "inbox":
            return {"pending": [{"run_id": p.run_id, "id": p.request.id, "kind": p.request.kind,
                                 "prompt": p.request.prompt, "path": p.path} for p in await store.pending()],
                    "runs": [{"run_id": s.run_id, "status": s.status} for s in await store.runs()]}
    raise SystemExit(f"unknown command {opts.command}")


def parse(argv: list[str]) -> argparse.Namespace:
    p = argparse.ArgumentParser()
    p.add_argument("command", choices=["start", "answer", "restore", "inbox"])
    p.add_argument("--store", required=True)
    p.add_argument("--team", default="worker")
    p.add_argument("--run-id")
    p.add_argument("--prompt", default="go")
    p.add_argument("--id")
    p.add_argument("--data")
    p.add_argument("--decline", action="store_true")
    p.add_argument("--mode", choices=["replay", "continue"])
    p.add_argument("--takeover", action="store_true")
    p.add_argument("--effects", default=os.devnull)
    p.add_argument("--hang-in-tool", action="store_true")
    p.add_argument("--idempotent", action="store_true")
    p.add_argument("--plain-function", action="store_true")  # the payer's tool is a plain function (a thread)
    p.add_argument("--base-url", default="http://127.0.0.1:9")
    p.add_argument("--kill-store-app", default="")
    return p.parse_args(argv)


if __name__ == "__main__":
    opts = parse(sys.argv[1:])
    try:
        print(json.dumps(asyncio.run(main(opts))), flush=True)
    except AnswerAlreadyApplied as exc:
        print(json.dumps({"error": "AnswerAlreadyApplied", "message": str(exc), "run_id": exc.run_id}), flush=True)
        sys.exit(3)
    except RunInProgress as exc:
        print(json.dumps({"error": "RunInProgress", "message": str(exc)}), flush=True)
        sys.exit(4)
    except ToolnexusError as exc:
        print(json.dumps({"error": type(exc).__name__, "message": str(exc)}), flush=True)
        sys.exit(5)
