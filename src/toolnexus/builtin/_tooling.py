"""How a built-in becomes a `Tool`: the error-wrapping `execute` and the argument readers.

Every built-in reports failure as a `ToolResult` (`"<tool>: <message>"`, `is_error=True`) instead
of raising, so one bad call never ends a run; only task cancellation propagates.
"""

from __future__ import annotations

import asyncio
import copy
import math
from collections.abc import Mapping
from typing import Any, Awaitable, Callable, Optional

from ..errors import ToolnexusError
from ..types import Tool, ToolContext, ToolResult

RunFn = Callable[[Mapping[str, Any], Optional[ToolContext]], Awaitable[ToolResult]]


class ToolError(ToolnexusError):
    """A failure whose text is the whole message after `"<tool>: "`."""


def build_tool(name: str, description: str, schema: dict[str, Any], run: RunFn, *, idempotent: bool = False) -> Tool:
    """A builtin `Tool` whose `execute` turns any escaping exception into an error result.

    `idempotent`: running it twice with the same arguments is harmless (it only reads, or it
    replaces its own state), so a durable run that crashed inside the call simply runs it again
    instead of asking whether it may."""

    async def execute(args: Any = None, ctx: Optional[ToolContext] = None) -> ToolResult:
        args = args or {}
        if not isinstance(args, Mapping):
            return ToolResult(f"{name}: arguments must be a JSON object, got {type(args).__name__}", True)
        try:
            return await run(args, ctx)
        except asyncio.CancelledError:
            raise
        except Exception as exc:  # the wrapper's whole point: report, never raise
            return ToolResult(f"{name}: {str(exc) or type(exc).__name__}", True)

    return Tool(
        name=name,
        description=description,
        input_schema=copy.deepcopy(schema),
        source="builtin",
        execute=execute,
        idempotent=idempotent,
    )


def number_arg(args: Mapping[str, Any], key: str) -> Optional[float]:
    """A numeric argument, or None when absent / a bool / not a finite int or float."""
    value = args.get(key)
    if isinstance(value, bool) or not isinstance(value, (int, float)) or not math.isfinite(value):
        return None
    return value


def positive_number(args: Mapping[str, Any], key: str, default: float) -> float:
    """A numeric argument above zero, else `default` (absent, non-numeric and `<= 0` alike)."""
    value = number_arg(args, key)
    return default if value is None or value <= 0 else value


def required_str(args: Mapping[str, Any], key: str) -> str:
    """A non-empty string argument, else `ToolError("<key> is required")`."""
    value = args.get(key)
    if not isinstance(value, str) or not value:
        raise ToolError(f"{key} is required")
    return value


def optional_str(args: Mapping[str, Any], key: str) -> Optional[str]:
    """A string argument, or None when absent or not a string."""
    value = args.get(key)
    return value if isinstance(value, str) else None


def prop(kind: str, description: str) -> dict[str, Any]:
    """A described schema property (`{"type": kind, "description": description}`)."""
    return {"type": kind, "description": description}


def object_schema(properties: dict[str, Any], required: list[str]) -> dict[str, Any]:
    """The closed object schema every built-in uses (key order as pinned)."""
    return {"type": "object", "properties": properties, "required": required, "additionalProperties": False}
