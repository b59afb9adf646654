"""`toolnexus.agents`: the agent runtime, personas, compaction and the harness loop.

An Agent is a Tool: a soul, a filtered toolkit and the client loop. `agent(...)` declares one,
`Agent.run` runs it under a fresh `AgentRuntime`, and the runtime's verbs (`spawn`, `post`,
`wake`, `wait`, `interrupt`, `close`, `resume`) drive a tree of them. Not to be confused with
`toolnexus.agent`, the outbound A2A descriptor.

With a durable store (`toolnexus.stores.open_store`) a run survives its process:
`Agent.run(..., store=store)` parks it in the store, `AgentRuntime.restore(store, run_id,
agents=[...])` brings it back anywhere, and `resume(store, answer, agents=[...])` answers one
pending request exactly once from any process.

Modules: `runtime` (the public face), `core` (state and verbs), `turn` (one turn, admission to
settle), `answering` (routing an Answer, replay / continue, the cascade), `suspension` (what a
parked handle holds), `durable` (commits, lease, journal), `restore` (a run back from its store),
`handle` / `defs` / `budget` / `clock` (plain state), `vocab` (the closed vocabularies), `inbox`,
`gate` (turn gate and spend meter), `escalation`, `task_tool`, `snapshot` (the runtime as plain
JSON and back), `trace` (bounded trace ring and transition events), `surface` (level 1),
`persona` (soul and memory) and `launch` (an agent from a folder, on a heartbeat), `compaction`,
`loop`, `resumption` (the host verb `resume`), `lifecycle` (start a submitted run, continue
an interrupted or crashed one — `resume_run` —, fire an expiry, hand a run back), `timers` (a
tool's durable timer, `timer(...)`).

The modules are internal (`_`-named) except `compaction` and `clock` (the clocks a host or a test
injects); `__all__` is the pinned public list, by group.
"""

from __future__ import annotations

from ._budget import Budget
from ._defs import AgentDef
from ._handle import Handle, HandleView, InboxItem, PostResult, SpawnError, TaskResult
from ._launch import (
    StartedAgent,
    agent_from_dir,
    start_agent,
)
from ._lifecycle import resume_run
from ._loop import (
    Completion,
    Loop,
    Outcome,
    Verdict,
    all_todos_done,
    guarded_hooks,
    harness,
    loop_unsupported,
    run_gated,
)
from ._persona import (
    BOOTSTRAP_ORDER,
    HEARTBEAT_OK,
    compose_soul,
    memory_tool,
)
from ._resumption import resume
from ._runtime import AgentRuntime
from ._surface import Agent, agent
from ._timers import timer
from ._vocab import (
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
    TASK_STATUS_CLOSED,
    TASK_STATUS_DONE,
    TASK_STATUS_ERROR,
    TASK_STATUS_INCOMPLETE,
    TASK_STATUS_INTERRUPTED,
    TASK_STATUS_PENDING,
    TASK_STATUS_TIMEOUT,
    TASK_STATUSES,
)
from .clock import AsyncioClock, Clock
from .compaction import compactor, estimate_tokens

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
    "agent",
    "BOOTSTRAP_ORDER",
    "HEARTBEAT_OK",
    "StartedAgent",
    "agent_from_dir",
    "compose_soul",
    "memory_tool",
    "start_agent",
    # compaction
    "compactor",
    "estimate_tokens",
    # durable runs
    "resume",
    "resume_run",
    "timer",
]
