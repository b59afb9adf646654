"""The closed vocabularies of agents.md §1: `TaskResult.status` values and canonical `limit` names.

Each constant is named after its value (`LIMIT_MAX_TOOL_CALLS = "maxToolCalls"`). `__all__` is
exactly the part of `toolnexus.agents.__all__` these make up. Mapping the runtime's internal
dimension names onto these is `budget.canonical_limit`; this module holds only the names.
"""

from __future__ import annotations

__all__ = [
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
]

LIMIT_MAX_TURNS = "maxTurns"
LIMIT_MAX_TOKENS = "maxTokens"
LIMIT_MAX_TOOL_CALLS = "maxToolCalls"
LIMIT_MAX_WALL_MS = "maxWallMs"
LIMIT_MAX_CHILDREN = "maxChildren"
LIMIT_MAX_CONCURRENT = "maxConcurrent"
LIMIT_MAX_DEPTH = "maxDepth"
LIMIT_COMPLETION = "completion"
LIMIT_TIMEOUT = "timeout"
LIMITS = (
    LIMIT_MAX_TURNS,
    LIMIT_MAX_TOKENS,
    LIMIT_MAX_TOOL_CALLS,
    LIMIT_MAX_WALL_MS,
    LIMIT_MAX_CHILDREN,
    LIMIT_MAX_CONCURRENT,
    LIMIT_MAX_DEPTH,
    LIMIT_COMPLETION,
    LIMIT_TIMEOUT,
)

TASK_STATUS_DONE = "done"
TASK_STATUS_PENDING = "pending"
TASK_STATUS_INCOMPLETE = "incomplete"
TASK_STATUS_INTERRUPTED = "interrupted"
TASK_STATUS_CLOSED = "closed"
TASK_STATUS_TIMEOUT = "timeout"
TASK_STATUS_ERROR = "error"
TASK_STATUSES = (
    TASK_STATUS_DONE,
    TASK_STATUS_PENDING,
    TASK_STATUS_INCOMPLETE,
    TASK_STATUS_INTERRUPTED,
    TASK_STATUS_CLOSED,
    TASK_STATUS_TIMEOUT,
    TASK_STATUS_ERROR,
)
