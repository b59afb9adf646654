"""What a worker hosts, where its workflows find it: agent definitions, `llm` and options, by
task queue.

A workflow class is static, but the agents it runs are the worker's: `create_worker` registers a
`Hosted` record here under its task queue, and the workflow looks it up by the task queue it
runs on. This module is imported by workflow code through the sandbox's pass-through, so the
record is the worker's own object, not a copy re-imported inside the sandbox.

`gated_registry` applies each definition's approval policy (`toolnexus.approvals`) to its tools
once, for the worker: the gate then runs inside the tool-call activity, where the approval
request is minted (its id in history, never minted again by a replay). `workflow_registry` builds
the definitions a workflow runs: the same `AgentDef`s with each tool replaced by a proxy that
runs it as an activity (`_proxies.py`); a proxy keeps its tool's `needs_approval`, so the
workflow does not gate it a second time. Everything else in a definition
— soul, model, budget, team, `wait_for`, hooks, completion gates — runs inside the workflow and
must be deterministic (no I/O, no clocks, no randomness of its own).
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass
from typing import Any

from ..agents._defs import AgentDef
from ..errors import ToolnexusRuntimeError
from ._options import TemporalOptions


@dataclass
class Hosted:
    """One worker's agents: `registry` (tools proxied), the workflow-visible `llm`, `options`."""

    registry: dict[str, AgentDef]
    llm: dict[str, Any]
    options: TemporalOptions


_HOSTED: dict[str, Hosted] = {}


def host(task_queue: str, hosted: Hosted) -> None:
    _HOSTED[task_queue] = hosted


def unhost(task_queue: str, hosted: Hosted) -> None:
    if _HOSTED.get(task_queue) is hosted:
        del _HOSTED[task_queue]


def hosted_for(task_queue: str) -> Hosted:
    found = _HOSTED.get(task_queue)
    if found is None:
        raise ToolnexusRuntimeError(
            f"toolnexus.temporal: no agents are hosted for task queue {task_queue!r} in this worker "
            f"(hosted: {', '.join(sorted(_HOSTED)) or 'none'}) — start the worker with "
            "toolnexus.temporal.create_worker"
        )
    return found


def gated_registry(registry: dict[str, AgentDef]) -> dict[str, AgentDef]:
    """The definitions with each def's tools gated by their own `needs_approval` or the def's policy."""
    from ..approvals import ApprovalPolicy, enforce

    return {name: dataclasses.replace(defn, tools=[enforce(t, ApprovalPolicy.of(defn.approvals)) for t in defn.tools])
            if defn.tools else defn for name, defn in registry.items()}


def workflow_registry(registry: dict[str, AgentDef], options: TemporalOptions) -> dict[str, AgentDef]:
    """The definitions a workflow runs: each def's tools replaced by activity proxies."""
    from ._proxies import proxy_tool

    return {name: dataclasses.replace(defn, tools=[proxy_tool(name, t, options) for t in defn.tools]
                                      if defn.tools else defn.tools)
            for name, defn in registry.items()}
