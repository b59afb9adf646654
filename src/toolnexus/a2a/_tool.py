"""Resolve an agent into tools: fetch its card, plan its routes, one `Tool` per skill.

Tool names are `sanitize(<card name or "agent">) + "_" + sanitize(<skill id or name>)`; the input
schema is pinned (one required `task` string). All of an agent's tools share one `Peer`, so the
route that worked for one call is used first by the next, whichever skill is called. Skill
entries that are not JSON objects are skipped (nothing to name a tool after).
"""

from __future__ import annotations

import copy
from typing import Any, Optional

from .._clock import AsyncioClock, Timer
from .._env import expand_headers
from ..types import Tool, ToolResult, sanitize
from ._call import TaskCall
from ._descriptor import RemoteAgent
from ._peer import CARD_TIMEOUT_CAP, Peer, fetch_card, plan_routes

INPUT_SCHEMA: dict[str, Any] = {
    "type": "object",
    "properties": {"task": {"type": "string", "description": "The task to send to the agent, in natural language."}},
    "required": ["task"],
    "additionalProperties": False,
}


def card_timeout(ag: RemoteAgent) -> float:
    """Seconds allowed for the card GET: the agent's budget, capped at `CARD_TIMEOUT_CAP`."""
    return min(ag.budget_ms() / 1000.0, CARD_TIMEOUT_CAP)


async def agent_tools(ag: RemoteAgent, *, clock: Optional[Timer] = None) -> list[Tool]:
    """Fetch `ag.card` and return one tool per skill. Errors (HTTP, JSON, no usable interface) raise.

    `clock` (optional) measures budgets and drives poll sleeps; tests pass a virtual one.
    """
    card = await fetch_card(ag.card, expand_headers(ag.headers), card_timeout(ag))
    name = card.get("name") or "agent"
    peer = Peer(name=name, routes=plan_routes(card, ag.card))
    ticking = clock or AsyncioClock()

    async def execute(args: Optional[dict[str, Any]] = None, ctx: Any = None) -> ToolResult:
        return await TaskCall(ag, peer, ticking, args, ctx).run()

    tools: list[Tool] = []
    for skill in card.get("skills") or []:
        if not isinstance(skill, dict):
            continue
        skill_id = skill.get("id") or skill.get("name") or ""
        tools.append(Tool(
            name=sanitize(str(name)) + "_" + sanitize(str(skill_id)),
            description=str(skill.get("description") or skill.get("name") or skill_id),
            input_schema=copy.deepcopy(INPUT_SCHEMA),
            source="a2a",
            execute=execute,
            origin=f"{name}/{skill_id}",  # approval policies match a2a:<agent>/<skill>
        ))
    return tools
