"""`toolnexus.agents`: the agent runtime (§7D), personas (§7E), compaction (§7F) and the harness loop.

An Agent is a Tool: a soul, a filtered toolkit and the §8 loop. `agent(...)` declares one,
`Agent.run` runs it under a fresh `AgentRuntime`, and the runtime's verbs (`spawn`, `post`,
`wake`, `wait`, `interrupt`, `close`, `resume`) drive a tree of them. Not to be confused with
`toolnexus.agent`, the outbound A2A descriptor.

Modules: `runtime` (the verbs), `turn` (one turn's body), `resume` (durable resume routing,
replay and continue), `handle` / `defs` / `budget` / `clock` (plain state), `inbox`, `gate` (turn
gate and spend meter), `escalation`, `task_tool`, `snapshot` (the runtime as plain JSON and back),
`trace` (bounded trace ring and transition events), `surface` (level 1), `persona`, `compaction`,
`loop`.
"""

from __future__ import annotations

from .budget import (
    LIMIT_COMPLETION,
    LIMIT_MAX_CHILDREN,
    LIMIT_MAX_CONCURRENT,
    LIMIT_MAX_DEPTH,
    LIMIT_MAX_TOKENS,
    LIMIT_MAX_TOOL_CALLS,
    LIMIT_MAX_TURNS,
    LIMIT_MAX_WALL_MS,
    LIMIT_TIMEOUT,
    LIMITS,
    Budget,
)
from .clock import AsyncioClock, Clock
from .compaction import compactor, estimate_tokens
from .defs import AgentDef
from .handle import (
    TASK_STATUS_CLOSED,
    TASK_STATUS_DONE,
    TASK_STATUS_ERROR,
    TASK_STATUS_INCOMPLETE,
    TASK_STATUS_INTERRUPTED,
    TASK_STATUS_PENDING,
    TASK_STATUS_TIMEOUT,
    TASK_STATUSES,
    Handle,
    HandleView,
    InboxItem,
    PostResult,
    SpawnError,
    TaskResult,
)
from .loop import Completion, Loop, Outcome, Verdict, all_todos_done, guarded_hooks, harness, loop_unsupported, run_gated
from .runtime import AgentRuntime
from .surface import (
    BOOTSTRAP_ORDER,
    HEARTBEAT_OK,
    Agent,
    StartedAgent,
    agent,
    agent_from_dir,
    compose_soul,
    memory_tool,
    start_agent,
)

__all__ = [
    # runtime
    "AgentDef",
    "AgentRuntime",
    "AsyncioClock",
    "Budget",
    "Clock",
    "Handle",
    "HandleView",
    "InboxItem",
    "PostResult",
    "SpawnError",
    "TaskResult",
    "LIMITS",
    "LIMIT_MAX_TURNS",
    "LIMIT_MAX_TOKENS",
    "LIMIT_MAX_TOOL_CALLS",
    "LIMIT_MAX_WALL_MS",
    "LIMIT_MAX_CHILDREN",
    "LIMIT_MAX_CONCURRENT",
    "LIMIT_MAX_DEPTH",
    "LIMIT_COMPLETION",
    "LIMIT_TIMEOUT",
    "TASK_STATUSES",
    "TASK_STATUS_DONE",
    "TASK_STATUS_PENDING",
    "TASK_STATUS_INCOMPLETE",
    "TASK_STATUS_INTERRUPTED",
    "TASK_STATUS_CLOSED",
    "TASK_STATUS_TIMEOUT",
    "TASK_STATUS_ERROR",
    # loop
    "Completion",
    "Loop",
    "Outcome",
    "Verdict",
    "all_todos_done",
    "guarded_hooks",
    "harness",
    "loop_unsupported",
    "run_gated",
    # surface
    "Agent",
    "StartedAgent",
    "agent",
    "agent_from_dir",
    "compose_soul",
    "memory_tool",
    "start_agent",
    "BOOTSTRAP_ORDER",
    "HEARTBEAT_OK",
    # compaction
    "compactor",
    "estimate_tokens",
]
