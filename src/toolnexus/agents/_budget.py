"""Hierarchical budgets: the `Budget` shape, canonical limit names, carving and effective limits.

A child's token and tool-call pools are *carved* from its parent's remaining pool at spawn
(`min(own, parent)`); the live ancestor walk (`first_exhausted`, run by the runtime over the
handle's lineage) then re-checks every ancestor before each turn and spawn, because carving alone
misses what siblings spend afterwards.

This module is pure arithmetic on plain data: it is handed the time, never reads the clock, and
never writes a handle.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, fields
from typing import Any, Iterable, Optional

from ._vocab import (
    LIMIT_MAX_CHILDREN,
    LIMIT_MAX_CONCURRENT,
    LIMIT_MAX_DEPTH,
    LIMIT_MAX_TOKENS,
    LIMIT_MAX_TOOL_CALLS,
    LIMIT_MAX_TURNS,
    LIMIT_MAX_WALL_MS,
)

DEFAULT_MAX_TURNS = 6
DEFAULT_MAX_CONCURRENT = 8
DEFAULT_MAX_DEPTH = 3

# Internal dimension names (as the live walk and the trace print them) → canonical limit names.
_CANONICAL = {
    "tokens": LIMIT_MAX_TOKENS,
    "toolCalls": LIMIT_MAX_TOOL_CALLS,
    "wallMs": LIMIT_MAX_WALL_MS,
    "turns": LIMIT_MAX_TURNS,
    "children": LIMIT_MAX_CHILDREN,
    "concurrent": LIMIT_MAX_CONCURRENT,
    "depth": LIMIT_MAX_DEPTH,
}


def canonical_limit(name: str) -> str:
    """Map an internal dimension (`tokens`) to its canonical limit (`maxTokens`); others pass through."""
    return _CANONICAL.get(name, name)


@dataclass
class Budget:
    """Per-agent limits; `None` means "inherit / default". There is no money dimension."""

    max_turns: Optional[int] = None
    max_tokens: Optional[float] = None
    max_tool_calls: Optional[float] = None
    max_wall_ms: Optional[float] = None
    max_children: Optional[float] = None
    max_concurrent: Optional[int] = None
    max_depth: Optional[int] = None


@dataclass
class Pool:
    """What is left to spend: tokens and tool calls are carved from the parent, children are not."""

    tokens: float = math.inf
    tool_calls: float = math.inf
    children: float = math.inf


def merge_budgets(base: Optional[Budget], override: Optional[Budget]) -> Budget:
    """`override` over `base`, field by field; a non-`None` value wins."""
    merged = Budget()
    for f in fields(Budget):
        over = getattr(override, f.name) if override is not None else None
        under = getattr(base, f.name) if base is not None else None
        setattr(merged, f.name, over if over is not None else under)
    return merged


def carve_pool(own: Budget, parent_pool: Pool) -> Pool:
    """The child's pools: `min(own ?? parent, parent)` for tokens and tool calls; children uncarved."""
    tokens = own.max_tokens if own.max_tokens is not None else parent_pool.tokens
    calls = own.max_tool_calls if own.max_tool_calls is not None else parent_pool.tool_calls
    return Pool(
        tokens=min(tokens, parent_pool.tokens),
        tool_calls=min(calls, parent_pool.tool_calls),
        children=own.max_children if own.max_children is not None else math.inf,
    )


def effective_limits(own: Budget) -> dict[str, Any]:
    """The handle's own effective limits; `max_turns` is the per-Run cap and is never inherited."""
    return {
        "max_turns": own.max_turns if own.max_turns is not None else DEFAULT_MAX_TURNS,
        "max_concurrent": own.max_concurrent if own.max_concurrent is not None else DEFAULT_MAX_CONCURRENT,
        "max_depth": own.max_depth if own.max_depth is not None else DEFAULT_MAX_DEPTH,
        "max_wall_ms": own.max_wall_ms,
        "max_tokens": own.max_tokens,
        "max_children": own.max_children,
    }


def first_exhausted(nodes: Iterable[Any], now: float) -> Optional[str]:
    """The live walk over `nodes` (a handle up to root): the first exhausted dimension, or None.

    At each node, in order: `tokens`, `toolCalls`, then `wallMs` measured from its `spawned_at`.
    """
    for node in nodes:
        if node.pool.tokens <= 0:
            return "tokens"
        if node.pool.tool_calls <= 0:
            return "toolCalls"
        wall = node.eff.get("max_wall_ms")
        if wall is not None and (now - node.spawned_at) * 1000 >= wall:
            return "wallMs"
    return None
