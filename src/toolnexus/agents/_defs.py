"""`AgentDef`: the registry entry that says what an agent is (soul, model, tools, team, limits).

A definition is static configuration shared by every handle spawned from it; the runtime never
mutates it. Everything live (state, counters, inbox) lives on the `Handle`.

Fields beyond the baseline shape, all optional and defaulting to "off" (def over runtime):

- `on_budget(handle, limit)`, called when a limit stops work (a refused spawn, a wake refused by
  the live budget walk, a turn that ends `incomplete`). A pure notification, sync or async; it
  never changes the outcome.
- `on_transition(event)`, called with each structured state-transition event of this def's
  handles (`_trace.py`); failures are reported, never raised.
- `resume_mode`: how a durable suspension of this def's handles is resumed — `"replay"` (the
  baseline: the transcript is rewound and the turn replayed) or `"continue"` (the halted turn is
  kept and continued; see `resume.py`). `None` takes the runtime's `resume_mode`.
- `approvals`: which of this def's tools (its `tools` and its `task` tool) wait for a human's
  approval before they run — an `ApprovalPolicy` or its mapping / list form
  (`toolnexus.approvals`); `None` takes the runtime's. A tool's own `needs_approval` applies anyway.
- `output_type` / `output_retries`: every turn must end with a validated value of this type
  (structured output, `toolnexus.client._structured`); the turn's `TaskResult.output` carries it
  and `TaskResult.text` its JSON. A turn that runs out of retries ends as an `error` result.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Awaitable, Callable, Optional, Union

from ..errors import ToolnexusValueError
from ..types import Answer, Request, Tool
from ._budget import Budget
from ._vocab import ResumeMode

RESUME_REPLAY = ResumeMode.REPLAY
RESUME_CONTINUE = ResumeMode.CONTINUE
RESUME_MODES = tuple(ResumeMode)


def check_resume_mode(mode: Any, where: str) -> Any:
    """`mode` itself when it is None or one of `RESUME_MODES`; a `ValueError` naming `where` otherwise."""
    if mode is not None and mode not in RESUME_MODES:
        raise ToolnexusValueError(
            f"toolnexus.agents: {where}: resume_mode must be one of {', '.join(RESUME_MODES)}, got {mode!r}"
        )
    return mode


def read_soul_file(agent_name: str, path: str) -> str:
    """The text of an agent's `soul_file` (blocking: call it off the event loop); a missing file
    is a `FileNotFoundError` that names the agent."""
    try:
        with open(path, encoding="utf-8") as f:
            return f.read()
    except FileNotFoundError:
        raise FileNotFoundError(
            f"toolnexus.agents: soul_file {path!r} of agent {agent_name!r} does not exist"
        ) from None


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
    on_metric: Optional[Callable[[dict[str, Any]], None]] = None
    completion: Any = None
    on_budget: Optional[Callable[[Any, str], Any]] = None
    on_transition: Optional[Callable[[dict[str, Any]], Any]] = None
    resume_mode: Optional[str] = None
    output_type: Any = None
    output_retries: int = 2
    approvals: Any = None
