"""The agent runtime's closed vocabularies, each defined once, as `StrEnum`s.

- `HandleState`: a handle's place in the state machine (`idle`, `running`, `suspended`,
  `closed`). `suspended` covers two situations the code names apart: *waiting inline* (a
  `wait_for` up the chain is answering while the turn stays live) and *parked* (the handle holds a
  `Suspension` and no live turn — `handle.is_parked`).
- `TaskStatus`: `TaskResult.status`.
- `Limit`: canonical `TaskResult.limit` names (the three the client shares — `maxTurns`,
  `completion`, `timeout` — are the client's own constants).
- `ResumeMode`: how a parked handle resumes (`replay` or `continue`).

Members are `str`s equal to today's values, so they compare, hash, format and serialise exactly
as the plain strings did. The pinned module-level names (`TASK_STATUS_DONE`, `LIMIT_MAX_TOOL_CALLS`,
`TASK_STATUSES`, `LIMITS`, ...) are these members, re-exported by `toolnexus.agents`. Mapping
internal dimension names onto `Limit` is `budget.canonical_limit`.
"""

from __future__ import annotations

from enum import StrEnum

from ..client._result import LIMIT_COMPLETION as _COMPLETION, LIMIT_MAX_TURNS as _MAX_TURNS, LIMIT_TIMEOUT as _TIMEOUT


class HandleState(StrEnum):
    IDLE = "idle"
    RUNNING = "running"
    SUSPENDED = "suspended"
    CLOSED = "closed"


class TaskStatus(StrEnum):
    DONE = "done"
    PENDING = "pending"
    INCOMPLETE = "incomplete"
    INTERRUPTED = "interrupted"
    CLOSED = "closed"
    TIMEOUT = "timeout"
    ERROR = "error"


class Limit(StrEnum):
    MAX_TURNS = _MAX_TURNS
    MAX_TOKENS = "maxTokens"
    MAX_TOOL_CALLS = "maxToolCalls"
    MAX_WALL_MS = "maxWallMs"
    MAX_CHILDREN = "maxChildren"
    MAX_CONCURRENT = "maxConcurrent"
    MAX_DEPTH = "maxDepth"
    COMPLETION = _COMPLETION
    TIMEOUT = _TIMEOUT


class ResumeMode(StrEnum):
    REPLAY = "replay"
    CONTINUE = "continue"

LIMIT_MAX_TURNS = Limit.MAX_TURNS
LIMIT_MAX_TOKENS = Limit.MAX_TOKENS
LIMIT_MAX_TOOL_CALLS = Limit.MAX_TOOL_CALLS
LIMIT_MAX_WALL_MS = Limit.MAX_WALL_MS
LIMIT_MAX_CHILDREN = Limit.MAX_CHILDREN
LIMIT_MAX_CONCURRENT = Limit.MAX_CONCURRENT
LIMIT_MAX_DEPTH = Limit.MAX_DEPTH
LIMIT_COMPLETION = Limit.COMPLETION
LIMIT_TIMEOUT = Limit.TIMEOUT
LIMITS = tuple(Limit)

TASK_STATUS_DONE = TaskStatus.DONE
TASK_STATUS_PENDING = TaskStatus.PENDING
TASK_STATUS_INCOMPLETE = TaskStatus.INCOMPLETE
TASK_STATUS_INTERRUPTED = TaskStatus.INTERRUPTED
TASK_STATUS_CLOSED = TaskStatus.CLOSED
TASK_STATUS_TIMEOUT = TaskStatus.TIMEOUT
TASK_STATUS_ERROR = TaskStatus.ERROR
TASK_STATUSES = tuple(TaskStatus)
