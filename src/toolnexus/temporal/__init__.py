"""Agent runs as Temporal workflows: the same agent definitions, unchanged, on a fleet of workers.

`pip install 'toolnexus[temporal]'`. A worker hosts the agents::

    from toolnexus.temporal import run_worker
    await run_worker("temporal.internal:7233", agents=[support], llm=LLM, task_queue="agents")

(or `toolnexus worker --temporal temporal.internal:7233 --agents myapp.agents:support ...`), and
any process with a Temporal client drives runs::

    from toolnexus.temporal import TemporalHost
    host = await TemporalHost.connect("temporal.internal:7233", task_queue="agents")
    r = await host.start("support", "refund order A-17", run_id="ticket-4711", wait=True)
    for item in await host.pending():                      # across the fleet
        final = await host.answer(Answer(id=item.request.id, ok=True))

Each LLM call and each tool call is an activity; the run itself is the toolnexus `AgentRuntime`
on the workflow's deterministic event loop (`workflow.py`), so a worker that dies mid-turn is
replaced by another without anyone restoring anything, a parked request waits durably, its
`expiresAt` is a durable timer, and answers are validated and applied exactly once. See
docs/temporal.md for when to choose this over a durable store.

Importing this package needs `temporalio`; without it the import fails with the install hint.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from ._errors import (
    AnswerRejected,
    LLMCallFailed,
    PayloadTooLarge,
    TemporalNotInstalled,
    TemporalRunError,
    TemporalUnavailable,
)

try:
    import temporalio  # noqa: F401
except ImportError as _missing:  # pragma: no cover - exercised without the extra
    raise TemporalNotInstalled(_missing) from None

from ._names import DEFAULT_TASK_QUEUE, SEARCH_ATTRIBUTES
from ._options import TemporalOptions
from ._spec import RunSpec

__all__ = [
    "TemporalHost", "AgentWorker", "create_worker", "run_worker", "connect", "ensure_search_attributes",
    "AgentWorkflow", "AgentActivities", "WorkflowClock", "TemporalOptions", "RunSpec", "ExternalPayloadCodec",
    "TemporalRunError", "TemporalUnavailable", "TemporalNotInstalled", "AnswerRejected", "PayloadTooLarge",
    "LLMCallFailed", "DEFAULT_TASK_QUEUE", "SEARCH_ATTRIBUTES",
]

if TYPE_CHECKING:  # what `_LAZY` resolves to, spelled out for type checkers and the API reference
    from ._activities import AgentActivities as AgentActivities
    from ._clock import WorkflowClock as WorkflowClock
    from ._host import TemporalHost as TemporalHost
    from ._payloads import ExternalPayloadCodec as ExternalPayloadCodec
    from ._worker import (
        AgentWorker as AgentWorker,
        connect as connect,
        create_worker as create_worker,
        ensure_search_attributes as ensure_search_attributes,
        run_worker as run_worker,
    )
    from .workflow import AgentWorkflow as AgentWorkflow

_LAZY = {
    "TemporalHost": "._host", "AgentWorker": "._worker", "create_worker": "._worker", "run_worker": "._worker",
    "connect": "._worker", "ensure_search_attributes": "._worker", "AgentWorkflow": ".workflow",
    "AgentActivities": "._activities", "WorkflowClock": "._clock", "ExternalPayloadCodec": "._payloads",
}


def __getattr__(name: str) -> Any:
    module = _LAZY.get(name)
    if module is None:
        raise AttributeError(f"module 'toolnexus.temporal' has no attribute {name!r}")
    import importlib

    value = getattr(importlib.import_module(module, __name__), name)
    globals()[name] = value
    return value
