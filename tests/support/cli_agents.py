"""Agent definitions for the CLI inbox tests, loaded by the installed `toolnexus answer --agents cli_agents:PAYER`.

`payer` refunds an order after a human approves it; the approval's data must carry a numeric
`amount` (a schema), and the refund is recorded in the file `CLI_EFFECTS` names. `asker` asks
twice: a name, then a confirmation. `releaser` releases a service under a two-person rule (two
approvals from different people), recording it in `CLI_EFFECTS`; `GROUP_RELEASER` the same for
one member of the group `releasers`.
"""

from __future__ import annotations

import json
import os
from typing import Any

from toolnexus import ApprovalRule, ToolResult, define_tool, pending
from toolnexus.agents import agent

AMOUNT = {"type": "object", "properties": {"amount": {"type": "number"}}, "required": ["amount"]}


async def refund(order: str, ctx: Any = None) -> ToolResult:
    """Refund an order once a human approved the amount."""
    answer = getattr(ctx, "answer", None)
    if answer is None:
        return pending(kind="approval", prompt=f"Refund order {order}? Say how much.", data={"schema": AMOUNT})
    if not answer.ok:
        return ToolResult("refund declined", True)
    with open(os.environ.get("CLI_EFFECTS", os.devnull), "a", encoding="utf-8") as fh:
        fh.write(json.dumps({"order": order, "amount": answer.data["amount"]}) + "\n")
    return ToolResult(f"refunded {answer.data['amount']} on {order}", False)


async def confirm(step: str, ctx: Any = None) -> ToolResult:
    """Ask a human to confirm a step."""
    if getattr(ctx, "answer", None) is None:
        return pending(kind="approval", prompt=f"Confirm {step}?")
    return ToolResult(f"{step} confirmed", False)


PAYER = agent("payer", does="issues refunds", uses={"tools": [define_tool(refund)]})
ASKER = agent("asker", does="asks twice", uses={"tools": [define_tool(confirm)]})


def release(service: str) -> str:
    """Release a service to production."""
    with open(os.environ.get("CLI_EFFECTS", os.devnull), "a", encoding="utf-8") as fh:
        fh.write(json.dumps({"released": service}) + "\n")
    return f"{service} released"


RELEASER = agent("releaser", does="releases services",
                 uses={"tools": [define_tool(release, needs_approval=ApprovalRule(approvals=2))]})
GROUP_RELEASER = agent("releaser", does="releases services",
                       uses={"tools": [define_tool(release, needs_approval=ApprovalRule(group="releasers"))]})
