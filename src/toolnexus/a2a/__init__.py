"""Remote A2A agents as a tool source (`source="a2a"`).

`agent_tools(agent)` fetches the agent's card and returns one `Tool` per skill; calling a tool
sends the task to the agent and polls it to an answer (`SendMessage` → `GetTask`), over the
running loop's pooled client (`toolnexus.http.shared_client`), never blocking the event loop.
`create_toolkit(agents=..., {"agents": ...})` and `Toolkit.add_agent` use it.

Protocol: we speak A2A 1.0 (card `supportedInterfaces`, `A2A-Version: 1.0`, 1.0 parts and roles,
`TASK_STATE_*`, `result.task`) and 0.3 (`message/send`, `tasks/get`, `kind` parts, lowercase
states), chosen by what the card declares, and still the existing toolnexus mixed form. States
are normalised to the lowercase names (`completed`, `input-required`, …) used in results.

Choices beyond the pinned baseline (each tested):
- 0.3 names are retried on "method not found" (and the 1.0 "version not supported"); the route
  that worked is remembered per agent.
- `input-required` / `auth-required` become a pending result that the retry with
  `ctx.answer` continues on the same remote task; `rejected` is an error like `failed`.
- An abort sends a best-effort `CancelTask` for the remote task.
- `RemoteAgent(context_id=...)` / config `contextId` is sent on every new task.
- Every RPC is bounded by the *remaining* budget (at least 0.2 s), the poll sleep is clipped to
  it, and the card GET is capped at 30 s.
- `RemoteAgent(blocking=True)` / config `blocking: true` asks for a blocking `SendMessage`: a final
  reply means zero `GetTask` calls (streaming is not implemented).
- Also: a signal already set before the call sends nothing; a completed task without artifact or
  history text answers with its status message's text; a direct Message reply is the answer; a
  card whose interfaces offer no JSON-RPC binding is refused at resolve time; an RPC that times
  out yields the pinned timeout result; the injectable `clock=` of `agent_tools` drives all time.

Modules: `descriptor` (RemoteAgent, config block), `wire` (dialects, reply reader), `peer` (card,
routes, one JSON-RPC call), `call` (one execution: budget, polling, results), `tool` (resolve).

Not here: serving A2A (`toolnexus.serve`), streaming (`message/stream`), push notifications,
gRPC / HTTP+JSON bindings, remote cancel when the asyncio task itself is cancelled.

The descriptor is `RemoteAgent`; its 0.21 name `toolnexus.a2a.Agent` still works and warns
(`DeprecationWarning`), because `toolnexus.agents.Agent` is the agent this library runs. The
top-level `toolnexus.Agent` stays the descriptor without a warning (0.21's surface).
"""

from __future__ import annotations

import warnings
from typing import TYPE_CHECKING

from ._descriptor import (
    DEFAULT_POLL_EVERY,
    DEFAULT_TIMEOUT,
    TERMINAL,
    AgentConfig,
    AgentsConfig,
    RemoteAgent,
    agent,
    is_enabled,
    parse_agents_config,
)
from ._peer import CARD_TIMEOUT_CAP
from ._tool import INPUT_SCHEMA, agent_tools, card_timeout
from ._wire import (
    A2AArtifact,
    A2AMessage,
    A2APart,
    A2ASkill,
    A2ATask,
    A2ATaskState,
    A2ATaskStatus,
    AgentCard,
    normalize_state,
)

__all__ = [
    "DEFAULT_TIMEOUT",
    "DEFAULT_POLL_EVERY",
    "TERMINAL",
    "CARD_TIMEOUT_CAP",
    "INPUT_SCHEMA",
    "RemoteAgent",
    "AgentConfig",
    "AgentsConfig",
    "agent",
    "agent_tools",
    "card_timeout",
    "is_enabled",
    "parse_agents_config",
    "normalize_state",
    "A2APart",
    "A2AMessage",
    "A2AArtifact",
    "A2ATaskStatus",
    "A2ATask",
    "A2ASkill",
    "AgentCard",
    "A2ATaskState",
]

if TYPE_CHECKING:  # the deprecated name, for type checkers (at run time `__getattr__` warns)
    Agent = RemoteAgent
else:

    def __getattr__(name: str) -> object:
        if name == "Agent":
            warnings.warn("toolnexus.a2a.Agent is deprecated: use toolnexus.a2a.RemoteAgent (the A2A agent "
                          "descriptor); toolnexus.agents.Agent is the agent this library runs",
                          DeprecationWarning, stacklevel=2)
            return RemoteAgent
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
