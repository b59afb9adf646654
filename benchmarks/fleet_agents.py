"""The agents and the scripted model `benchmarks/fleet.py` hands to `toolnexus worker` processes
(`--agents fleet_agents:AGENTS --transport fleet_agents:MODEL`, with `benchmarks/` on PYTHONPATH).

- `gatekeeper`: `gate(tag)` asks for an approval; answered, it returns at once.
- `stepper`: `step(tag)`, idempotent; with `$FLEET_HANG=1` it prints `IN_TOOL <tag>` and never
  returns (the worker to kill); otherwise it returns at once.

The model answers from the transcript alone (any process can serve any step): the first turn
calls the agent's tool with `tag` = the prompt, the next says `done <tag>`.
"""

from __future__ import annotations

import json
import os
import threading
from typing import Any

from toolnexus import ToolResult, define_tool, pending
from toolnexus.agents import agent


async def gate(tag: str, ctx: Any = None) -> ToolResult:
    """Do a gated thing (asks first)."""
    if ctx is None or ctx.answer is None:
        return pending(kind="approval", prompt=f"open the gate for {tag}?")
    return ToolResult(output=f"opened for {tag}", is_error=False)


def step(tag: str) -> str:
    """One step."""
    if os.environ.get("FLEET_HANG") == "1":
        print(f"IN_TOOL {tag}", flush=True)
        threading.Event().wait()
    return f"stepped {tag}"


GATEKEEPER = agent("gatekeeper", does="asks first", model="bench-model", uses={"tools": [define_tool(gate)]})
STEPPER = agent("stepper", does="steps", model="bench-model",
                uses={"tools": [define_tool(step, idempotent=True)]})
AGENTS = [GATEKEEPER, STEPPER]
LLM = {"base_url": "http://mock.local", "style": "openai", "model": "bench-model", "api_key": "unused"}
USAGE = {"prompt_tokens": 5, "completion_tokens": 3, "total_tokens": 8}


class BenchModel:
    def post(self, url: str, headers: dict[str, str], payload: dict[str, Any], timeout: float) -> dict[str, Any]:
        messages = payload["messages"]
        prompt = next((m.get("content") for m in messages if m.get("role") == "user"), "") or ""
        if not any(m.get("role") == "tool" for m in messages):
            name = (payload.get("tools") or [{"function": {"name": "step"}}])[0]["function"]["name"]
            call = {"id": "call_1", "type": "function", "function": {"name": name,
                                                                     "arguments": json.dumps({"tag": prompt})}}
            return {"choices": [{"message": {"role": "assistant", "content": None, "tool_calls": [call]},
                                 "finish_reason": "tool_calls"}], "usage": USAGE}
        return {"choices": [{"message": {"role": "assistant", "content": f"done {prompt}"}, "finish_reason": "stop"}],
                "usage": USAGE}

    def open(self, *args: Any) -> Any:
        raise NotImplementedError


MODEL = BenchModel()
