"""Remote A2A agents as a tool source: the descriptor and config parsing.

The `Agent` descriptor, `agent()` and `parse_agents_config` are complete (a2a-serve-cli.md
§1.1); resolving a card into tools (`agent_tools`) arrives with the A2A issue and until then
raises a clear `NotImplementedError` (the Toolkit reports that per agent and keeps going).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Optional

from .types import Tool

__all__ = ["Agent", "AgentConfig", "AgentsConfig", "agent", "agent_tools", "is_enabled", "parse_agents_config"]

DEFAULT_TIMEOUT = 300_000
DEFAULT_POLL_EVERY = 1_000
TERMINAL = frozenset({"completed", "failed", "canceled"})
AgentConfig = dict[str, Any]
AgentsConfig = dict[str, AgentConfig]


@dataclass
class Agent:
    """An outbound A2A agent: its card URL plus per-agent headers and timings (ms)."""

    card: str
    headers: Optional[dict[str, str]] = None
    timeout: Optional[int] = None
    poll_every: Optional[int] = None


def agent(card: str, *, headers: Optional[dict[str, str]] = None, timeout: Optional[int] = None,
          poll_every: Optional[int] = None) -> Agent:
    return Agent(card=card, headers=headers, timeout=timeout, poll_every=poll_every)


def is_enabled(cfg: AgentConfig) -> bool:
    if cfg.get("disabled") is True:
        return False
    return cfg.get("enabled") is not False


def parse_agents_config(block: Optional[AgentsConfig]) -> list[Agent]:
    """Config `agents` block → descriptors, in order; disabled or card-less entries skipped."""
    out: list[Agent] = []
    for entry in (block or {}).values():
        if not entry or not isinstance(entry, dict) or not isinstance(entry.get("card"), str) or not is_enabled(entry):
            continue
        out.append(Agent(card=entry["card"], headers=entry.get("headers"), timeout=entry.get("timeout"),
                         poll_every=entry.get("pollEvery")))
    return out


async def agent_tools(ag: Agent) -> list[Tool]:
    raise NotImplementedError("A2A agent resolution is not available in this release yet")
