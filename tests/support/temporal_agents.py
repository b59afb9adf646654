"""Agent definitions and scripted models for the Temporal tests, importable by worker processes.

A worker subprocess runs `toolnexus worker --agents support.temporal_agents:AGENTS --transport
support.temporal_agents:transport` with `tests/` on `PYTHONPATH`. Behaviour that a test must
steer in a subprocess comes from the environment:

- `TN_EFFECTS`: the file each side effect of `refund` appends one JSON line to;
- `TN_MARKER`: the file a step appends a line to when it is reached (`llm-2`, `in-refund`) — what
  a test waits on before it SIGKILLs the worker;
- `TN_HANG`: `llm` — block forever in the LLM call that follows the refund; `tool` — block forever
  inside `refund` after its side effect (in this process only: the next worker does not hang).

The team (`top` → `mid` → `leaf`, the leaf asking for approval) and the founding example's
`worker` are the durable-run tests' own (`support.durable_app`), so workflow runs can be compared
with in-process runs of exactly the same definitions and models.
"""

from __future__ import annotations

import asyncio
import json
import os
from datetime import UTC
from typing import Any

from toolnexus import ToolResult, define_tool, pending
from toolnexus.agents import agent

from .durable_app import TOP, WORKER, SeedModel, team_model

USAGE = {"prompt_tokens": 10, "completion_tokens": 5, "total_tokens": 15}


def _mark(step: str) -> None:
    path = os.environ.get("TN_MARKER")
    if path:
        with open(path, "a", encoding="utf-8") as fh:
            fh.write(step + "\n")


def _effect(record: dict[str, Any]) -> None:
    path = os.environ.get("TN_EFFECTS")
    if path:
        with open(path, "a", encoding="utf-8") as fh:
            fh.write(json.dumps({"pid": os.getpid(), **record}) + "\n")
            fh.flush()
            os.fsync(fh.fileno())


def _refund_tool(idempotent: bool) -> Any:
    async def refund(order: str, amount: float) -> str:
        """Refund an order (a side effect: one line in TN_EFFECTS)."""
        _effect({"order": order, "amount": amount})
        if os.environ.get("TN_HANG") == "tool":
            _mark("in-refund")
            await asyncio.Event().wait()  # until this worker is SIGKILLed
        return f"refunded {order}"

    return define_tool(refund, name="refund", idempotent=idempotent)


PAYER = agent("payer", does="issues refunds", model="m-pay", uses={"tools": [_refund_tool(False)]})
CAREFUL = agent("careful", does="issues refunds, idempotently", model="m-pay", uses={"tools": [_refund_tool(True)]})

AGENTS = [TOP, WORKER, PAYER, CAREFUL]


def pay_reply(payload: dict[str, Any]) -> dict[str, Any]:
    """m-pay: ask for one refund, then report the last tool result."""
    tools = [m for m in payload["messages"] if m.get("role") == "tool"]
    if not tools:
        call = {"id": "r1", "type": "function",
                "function": {"name": "refund", "arguments": json.dumps({"order": "A-17", "amount": 40})}}
        return {"choices": [{"message": {"role": "assistant", "content": None, "tool_calls": [call]},
                             "finish_reason": "tool_calls"}], "usage": USAGE}
    return {"choices": [{"message": {"role": "assistant", "content": f"paid: {tools[-1]['content']}"}}],
            "usage": USAGE}


class FleetModel:
    """One stateless model for every agent above, picked by `payload["model"]`."""

    def __init__(self) -> None:
        self.team = team_model()
        self.seed = SeedModel()

    async def post(self, url: str, headers: dict[str, str], payload: dict[str, Any], timeout: float) -> Any:
        model = payload.get("model")
        if model == "m-pay":
            if any(m.get("role") == "tool" for m in payload["messages"]):
                _mark("llm-2")
                if os.environ.get("TN_HANG") == "llm":
                    await asyncio.Event().wait()  # until this worker is SIGKILLed
            return pay_reply(payload)
        if model in ("m-top", "m-mid", "m-leaf"):
            return await asyncio.to_thread(self.team.post, url, headers, payload, timeout)
        return self.seed.post(url, headers, payload, timeout)

    def open(self, *args: Any) -> Any:
        raise NotImplementedError


def transport() -> FleetModel:
    """The `--transport` factory."""
    return FleetModel()


def expiring_gate(seconds: float) -> Any:
    """An agent whose `gate` asks for approval with an `expiresAt` `seconds` from now (wall time)."""
    from datetime import datetime, timedelta

    async def gate(args: Any = None, ctx: Any = None) -> ToolResult:
        if ctx is not None and ctx.answer is not None and ctx.answer.ok:
            return ToolResult("through the gate", False)
        when = (datetime.now(UTC) + timedelta(seconds=seconds)).isoformat().replace("+00:00", "Z")
        return pending(kind="approval", prompt="let it through?", expiresAt=when)

    return agent("worker", does="does gated work", uses={"tools": [define_tool(gate, name="gate",
                                                                                 description="Gated action.")]})
