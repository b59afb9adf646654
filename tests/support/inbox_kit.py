"""An agent whose tool waits for approval, a scripted model, and helpers for the inbox tests
(`test_inbox_app.py`, `test_inbox_notify.py`, the browser tests in `browser/`).

- `refunder`: one tool, `refund(order, amount, note="")`, gated by `needs_approval=True`
  (`finance`: the same for the group "finance"; `two_people`: two approvals); when it runs it appends `{"order",
  "amount", "note"}` to `$INBOX_EFFECTS` (if set). The model calls it once with the user's prompt read as JSON
  arguments, then answers `done: <the tool's result>`.
- `python -m support.inbox_kit park STORE_URL RUN_ID PROMPT_JSON` parks one run from another
  process and prints `PARKED <request id>`.
"""

from __future__ import annotations

import asyncio
import json
import os
import sys
from typing import Any

from toolnexus import ApprovalRule, define_tool
from toolnexus.agents import agent


def refund(order: str, amount: float, note: str = "") -> str:
    """Refund an order."""
    path = os.environ.get("INBOX_EFFECTS")
    if path:
        with open(path, "a", encoding="utf-8") as fh:
            fh.write(json.dumps({"order": order, "amount": amount, "note": note}) + "\n")
    return f"refunded {amount:g} on {order}"


def refunder(name: str = "refunder", **rule: Any) -> Any:
    """The agent, its tool gated by `ApprovalRule(**rule)` (a group, a two-person rule, ...)."""
    return agent(name, does="refunds orders", model="inbox-model",
                 uses={"tools": [define_tool(refund, needs_approval=ApprovalRule(**rule))]})


REFUNDER = refunder()
FINANCE = refunder("finance", group="finance")
TWO_PEOPLE = refunder("two_people", approvals=2)
AGENTS = [REFUNDER, FINANCE, TWO_PEOPLE]


class InboxModel:
    """The scripted model (an `HttpTransport`): the user's prompt is the tool call's arguments."""

    def post(self, url: str, headers: dict[str, str], payload: dict[str, Any], timeout: float) -> dict[str, Any]:
        messages = payload["messages"]
        prompt = next((m.get("content") for m in messages if m.get("role") == "user"), "") or "{}"
        results = [m for m in messages if m.get("role") == "tool"]
        usage = {"prompt_tokens": 5, "completion_tokens": 3, "total_tokens": 8}
        if not results:
            call = {"id": "call_1", "type": "function", "function": {"name": "refund", "arguments": prompt}}
            return {"choices": [{"message": {"role": "assistant", "content": None, "tool_calls": [call]},
                                 "finish_reason": "tool_calls"}], "usage": usage}
        return {"choices": [{"message": {"role": "assistant", "content": f"done: {results[-1].get('content')}"},
                             "finish_reason": "stop"}], "usage": usage}

    def open(self, *args: Any) -> Any:
        raise NotImplementedError


MODEL = InboxModel()
LLM = {"base_url": "http://mock.local", "style": "openai", "model": "inbox-model", "api_key": "unused"}


def effects(path: Any) -> list[dict[str, Any]]:
    try:
        with open(path, encoding="utf-8") as fh:
            return [json.loads(line) for line in fh if line.strip()]
    except FileNotFoundError:
        return []


async def park(store: Any, args: dict[str, Any], run_id: str, *, who: Any = None, **options: Any) -> Any:
    """Run `refunder` (or `who`) until it parks on its approval; the result (`.pending` is the request)."""
    r = await (who or REFUNDER).run(json.dumps(args), store=store, run_id=run_id, llm=LLM, transport=MODEL, **options)
    await r.runtime.aclose()
    return r


async def _main(url: str, run_id: str, prompt: str) -> None:
    from toolnexus.stores import open_store

    async with open_store(url) as store:
        r = await park(store, json.loads(prompt), run_id)
        print(f"PARKED {r.pending.id}", flush=True)


if __name__ == "__main__":
    if len(sys.argv) != 5 or sys.argv[1] != "park":
        sys.exit("usage: python -m support.inbox_kit park STORE_URL RUN_ID PROMPT_JSON")
    asyncio.run(_main(sys.argv[2], sys.argv[3], sys.argv[4]))
