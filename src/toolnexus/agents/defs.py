"""`AgentDef`: the registry entry that says what an agent is (soul, model, tools, team, limits).

A definition is static configuration shared by every handle spawned from it; the runtime never
mutates it. Everything live (state, counters, inbox) lives on the `Handle`.

One field goes beyond the spec's baseline shape, optional and defaulting to "off":
`on_budget(handle, limit)`, called when a limit stops work (a refused spawn, a wake refused by
the live budget walk, a turn that ends `incomplete`). The baseline has no such hook; ours is a
pure notification, sync or async, and never changes the outcome.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Awaitable, Callable, Optional, Union

from ..types import Answer, Request, Tool
from .budget import Budget

__all__ = ["AgentDef"]


@dataclass
class AgentDef:
    """One agent kind. `model == "inherit"` takes the runtime `llm["model"]`."""

    name: str
    description: str
    system_prompt: str
    model: str
    budget: Optional[Budget] = None
    tools: Optional[list[Tool]] = None
    wait_for: Optional[Callable[[Request], Union[Answer, Awaitable[Answer], None]]] = None
    on_spawn: Optional[Callable[[Any], Any]] = None
    on_close: Optional[Callable[[Any, str], Any]] = None
    task_targets: Optional[list[str]] = None
    hooks: Any = None
    on_metric: Optional[Callable[[dict], None]] = None
    completion: Any = None
    on_budget: Optional[Callable[[Any, str], Any]] = None
