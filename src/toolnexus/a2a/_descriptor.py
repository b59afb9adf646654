"""The outbound A2A agent descriptor, its config block and the budget rules.

`RemoteAgent` names a remote agent by its card URL plus per-agent headers and timings (milliseconds).
Two optional fields go beyond the baseline: `context_id` (sent on every new task so calls share
one remote conversation) and `blocking` (ask the peer to answer `SendMessage` only when the task
is done, so no `GetTask` polling is needed). Nothing here touches the network.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Optional

DEFAULT_TIMEOUT = 300_000  # ms
DEFAULT_POLL_EVERY = 1_000  # ms
TERMINAL = frozenset({"completed", "failed", "canceled"})

AgentConfig = dict[str, Any]
AgentsConfig = dict[str, AgentConfig]


@dataclass
class RemoteAgent:
    """An outbound A2A agent: its card URL plus per-agent headers and timings (ms).

    `headers` values may hold `${ENV}` references, expanded at every request and never logged.
    `context_id` (optional) is sent as the message `contextId` of every new task. `blocking`
    asks the peer to reply to `SendMessage` only once the task is final; a peer that answers
    early anyway is polled as usual.
    """

    card: str
    headers: Optional[dict[str, str]] = None
    timeout: Optional[int] = None
    poll_every: Optional[int] = None
    context_id: Optional[str] = None
    blocking: bool = False

    def budget_ms(self) -> float:
        """The whole-call budget in ms: `timeout`, or `DEFAULT_TIMEOUT` when unset."""
        return float(DEFAULT_TIMEOUT if self.timeout is None else self.timeout)

    def poll_ms(self) -> float:
        """The pause between two `GetTask` calls in ms."""
        return float(DEFAULT_POLL_EVERY if self.poll_every is None else self.poll_every)


def agent(card: str, *, headers: Optional[dict[str, str]] = None, timeout: Optional[int] = None,
          poll_every: Optional[int] = None, context_id: Optional[str] = None, blocking: bool = False) -> RemoteAgent:
    """Build a `RemoteAgent` descriptor (keyword-only options, as in the config block)."""
    return RemoteAgent(card=card, headers=headers, timeout=timeout, poll_every=poll_every, context_id=context_id,
                 blocking=blocking)


def is_enabled(cfg: AgentConfig) -> bool:
    """`disabled: true` or `enabled: false` turn an entry off; anything else leaves it on."""
    if cfg.get("disabled") is True:
        return False
    return cfg.get("enabled") is not False


def parse_agents_config(block: Optional[AgentsConfig]) -> list[RemoteAgent]:
    """Config `agents` block → descriptors, in order; disabled or card-less entries skipped.

    Keys are the camelCase wire names (`pollEvery`, `contextId`); the dict key is only a label.
    """
    out: list[RemoteAgent] = []
    for entry in (block or {}).values():
        if not entry or not isinstance(entry, dict) or not isinstance(entry.get("card"), str) or not is_enabled(entry):
            continue
        context_id = entry.get("contextId")
        out.append(RemoteAgent(card=entry["card"], headers=entry.get("headers"), timeout=entry.get("timeout"),
                         poll_every=entry.get("pollEvery"),
                         context_id=context_id if isinstance(context_id, str) else None,
                         blocking=entry.get("blocking") is True))
    return out

