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

`__all__` is the pinned public list, composed from the `__all__` of the modules that hold exactly
one of its groups (`vocab`, `loop`, `persona` with `launch`, `compaction`) plus the classes named
here.
"""

from __future__ import annotations

from . import compaction as _compaction, launch as _launch, loop as _loop, persona as _persona, vocab as _vocab  # for their __all__
from .budget import Budget
from .clock import AsyncioClock, Clock
from .compaction import *  # noqa: F403 - its __all__ is the compaction group
from .defs import AgentDef
from .handle import Handle, HandleView, InboxItem, PostResult, SpawnError, TaskResult
from .loop import *  # noqa: F403 - its __all__ is the loop group
from .launch import *  # noqa: F403 - with persona's, the surface group, bar Agent / agent
from .persona import *  # noqa: F403 - with launch's, the surface group, bar Agent / agent
from .lifecycle import resume_run
from .resumption import resume
from .timers import timer
from .runtime import AgentRuntime
from .surface import Agent, agent
from .vocab import *  # noqa: F403 - its __all__ is the runtime group's LIMIT*/TASK_STATUS* names

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
    *_vocab.__all__,
    # loop
    *_loop.__all__,
    # surface
    "Agent",
    "agent",
    *sorted([*_persona.__all__, *_launch.__all__]),
    # compaction
    *_compaction.__all__,
    # durable runs
    "resume",
    "resume_run",
    "timer",
]
