"""Agents, a scripted model and tools for the fleet tests (`toolnexus worker --store` processes
and in-process `Worker`s).

- `alpha`, `beta`: one tool, `work(tag)`, idempotent, that appends `{"event": "enter"|"exit", "tag",
  "agent", "pid", "t"}` lines (`t` = `time.monotonic()`, one clock for every process of the
  machine) to `$FLEET_EFFECTS`; with `$FLEET_HANG=1` it prints `IN_TOOL <tag>` on stdout and
  never returns (a worker to SIGKILL or SIGTERM mid-run); `$FLEET_WORK_MS` makes it take that long.
- `gatekeeper`: `gate(tag)` asks for approval (its request expires `$FLEET_EXPIRES_S` seconds
  after it is made, default never); answered ok it records `enter`, then (with `$FLEET_HANG=1`
  it prints `IN_TOOL <tag>` and waits until interrupted) `opened`. Not idempotent.
- `sleeper`: `nap(tag)` asks for a timer of `$FLEET_TIMER_S` seconds (default 0) and records
  `woke` when it fires.

`MODEL` answers every agent statelessly, from the transcript: the first turn calls the agent's
tool with `tag` = the user's prompt, the next one says `done <tag>: <the tool's result>`.
"""

from __future__ import annotations

import asyncio
import json
import os
import threading
import time
from datetime import UTC, datetime, timedelta
from typing import Any

from toolnexus import ToolResult, define_tool, pending
from toolnexus.agents import agent, timer

TOOL_OF = {"alpha": "work", "beta": "work", "gatekeeper": "gate", "sleeper": "nap"}


def _record(event: str, tag: str, agent_name: str) -> None:
    path = os.environ.get("FLEET_EFFECTS")
    if not path:
        return
    line = json.dumps({"event": event, "tag": tag, "agent": agent_name, "pid": os.getpid(), "t": time.monotonic()})
    with open(path, "a", encoding="utf-8") as fh:
        fh.write(line + "\n")
        fh.flush()


def _work_tool(agent_name: str) -> Any:
    def work(tag: str) -> str:
        """Do one piece of work."""
        _record("enter", tag, agent_name)
        if os.environ.get("FLEET_HANG") == "1":
            print(f"IN_TOOL {tag}", flush=True)
            threading.Event().wait()  # until the process is killed or stopped
        ms = float(os.environ.get("FLEET_WORK_MS") or 0)
        if ms:
            time.sleep(ms / 1000)
        _record("exit", tag, agent_name)
        return f"worked on {tag}"

    return define_tool(work, name="work", idempotent=True)


async def gate(tag: str, ctx: Any = None) -> ToolResult:
    """Do a gated thing (asks for approval first)."""
    if ctx is None or ctx.answer is None:
        seconds = os.environ.get("FLEET_EXPIRES_S")
        expires = None
        if seconds is not None:
            when = datetime.now(UTC) + timedelta(seconds=float(seconds))
            expires = when.isoformat().replace("+00:00", "Z")
        return pending(kind="approval", prompt=f"open the gate for {tag}?", expiresAt=expires)
    _record("enter", tag, "gatekeeper")
    if os.environ.get("FLEET_HANG") == "1":
        print(f"IN_TOOL {tag}", flush=True)
        await asyncio.Event().wait()  # until the process is interrupted or killed
    _record("opened", tag, "gatekeeper")
    return ToolResult(output=f"opened for {tag}", is_error=False)


async def nap(tag: str, ctx: Any = None) -> ToolResult:
    """Wait a while, durably."""
    if ctx is None or ctx.answer is None:
        return timer(seconds=float(os.environ.get("FLEET_TIMER_S") or 0), prompt=f"nap for {tag}")
    _record("woke", tag, "sleeper")
    return ToolResult(output=f"woke for {tag} ({ctx.answer.data})", is_error=False)


ALPHA = agent("alpha", does="works", model="fleet-model", uses={"tools": [_work_tool("alpha")]})
BETA = agent("beta", does="works too", model="fleet-model", uses={"tools": [_work_tool("beta")]})
GATEKEEPER = agent("gatekeeper", does="asks first", model="fleet-model", uses={"tools": [define_tool(gate)]})
SLEEPER = agent("sleeper", does="naps", model="fleet-model", uses={"tools": [define_tool(nap)]})
AGENTS = [ALPHA, BETA, GATEKEEPER, SLEEPER]


class FleetModel:
    """The scripted model (an `HttpTransport`): stateless, the transcript decides."""

    def post(self, url: str, headers: dict[str, str], payload: dict[str, Any], timeout: float) -> dict[str, Any]:
        messages = payload["messages"]
        system = next((m.get("content") or "" for m in messages if m.get("role") == "system"), "")
        prompt = next((m.get("content") for m in messages if m.get("role") == "user"), "") or ""
        tools = [t["function"]["name"] for t in payload.get("tools") or []]
        results = [m for m in messages if m.get("role") == "tool"]
        usage = {"prompt_tokens": 5, "completion_tokens": 3, "total_tokens": 8}
        if not results:
            name = next((t for t in tools if t in ("work", "gate", "nap")), tools[0] if tools else "work")
            call = {"id": "call_1", "type": "function",
                    "function": {"name": name, "arguments": json.dumps({"tag": str(prompt)})}}
            return {"choices": [{"message": {"role": "assistant", "content": None, "tool_calls": [call]},
                                 "finish_reason": "tool_calls"}], "usage": usage}
        del system
        text = f"done {prompt}: {results[-1].get('content')}"
        return {"choices": [{"message": {"role": "assistant", "content": text}, "finish_reason": "stop"}],
                "usage": usage}

    def open(self, *args: Any) -> Any:
        raise NotImplementedError


MODEL = FleetModel()
LLM = {"base_url": "http://mock.local", "style": "openai", "model": "fleet-model", "api_key": "unused"}


def effects(path: Any) -> list[dict[str, Any]]:
    try:
        with open(path, encoding="utf-8") as fh:
            return [json.loads(line) for line in fh if line.strip()]
    except FileNotFoundError:
        return []


def max_overlap(lines: list[dict[str, Any]], agent_name: str) -> int:
    """The most `work` calls of `agent_name` that were inside the tool at once (enter/exit pairs)."""
    events = sorted((e["t"], 1 if e["event"] == "enter" else -1) for e in lines
                    if e["agent"] == agent_name and e["event"] in ("enter", "exit"))
    now = peak = 0
    for _, step in sorted(events, key=lambda x: (x[0], x[1])):
        now += step
        peak = max(peak, now)
    return peak
