"""A refund tool for the served-A2A race tests, loaded with `--tools-from refund_tools:TOOLS`.

`refund` suspends for input (how much to refund); once answered it appends one line to the file
named by `TOOLNEXUS_TEST_REFUND_LOG` (so every process serving it writes to one place) and says so.
"""

from __future__ import annotations

import os
from typing import Any, Optional

from toolnexus import Tool, ToolContext, ToolResult, pending


async def _refund(args: dict[str, Any], ctx: Optional[ToolContext] = None) -> ToolResult:
    if ctx is None or ctx.answer is None:
        return pending(kind="input", prompt="How much should I refund?")
    amount = (ctx.answer.data or {}).get("text")
    with open(os.environ["TOOLNEXUS_TEST_REFUND_LOG"], "a", encoding="utf-8") as log:
        log.write(f"refunded {amount} by {os.getpid()}\n")
    return ToolResult(f"refunded {amount}", False)


TOOLS = [Tool("refund", "Refunds an order", {"type": "object", "properties": {}}, "native", _refund)]
