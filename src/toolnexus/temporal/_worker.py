"""The worker entry point: `create_worker(client, agents=..., llm=..., transport=...)` and
`run_worker(address, ...)`.

A worker hosts one task queue: the `AgentWorkflow` (the runtime, on the workflow's event loop)
and the two activities (`AgentActivities`: the LLM call through `transport`, the tool call
through the definitions' tools). Every worker of a task queue must be given the same agent
definitions; the `llm` endpoint, API key and transport are each worker's own. The API key stays
in the worker process: workflows see a placeholder (`names.KEY_PLACEHOLDER`).

Workflows run in Temporal's sandbox with `toolnexus` (and any `passthrough` modules you name —
those your definitions live in, and anything their hooks import lazily) passed through, so the
definitions are this process's objects. `register_search_attributes` (default on) adds the `Toolnexus*` search
attributes to the namespace when they are missing — the dev server and a self-hosted cluster allow that; on a cluster
that does not (Temporal Cloud), create them once with your tooling and pass False.

Choices: the default transport is the client's pooled default transport, closed when the worker
stops; a transport you pass is yours to close. `llm` takes the runtime's keys (`base_url`,
`style`, `model`, `api_key`, `request_params`); anything else is an error, as with `AgentRuntime`.
"""

from __future__ import annotations

import asyncio
from typing import Any, Optional, Sequence

from temporalio.client import Client
from temporalio.worker import Worker
from temporalio.worker.workflow_sandbox import SandboxedWorkflowRunner, SandboxRestrictions

from .._diag import warn
from ..agents._restore import registry_of
from ..agents._runtime import LLM_KEYS
from ..errors import ToolnexusTypeError, ToolnexusValueError
from ._activities import AgentActivities
from ._hosting import Hosted, gated_registry, host, unhost, workflow_registry
from ._names import DEFAULT_TASK_QUEUE, KEY_PLACEHOLDER, SEARCH_ATTRIBUTES
from ._options import TemporalOptions
from .workflow import AgentWorkflow

#: Modules workflow code takes from the worker process instead of re-importing in the sandbox:
#: toolnexus itself, and what it imports lazily on the workflow path (answer-schema checks).
SANDBOX_PASSTHROUGH = ("toolnexus", "jsonschema")


def _checked_llm(llm: Optional[dict[str, Any]]) -> dict[str, Any]:
    llm = dict(llm or {})
    unknown = sorted(k for k in llm if k not in LLM_KEYS)
    if unknown:
        raise ToolnexusValueError(
            f"toolnexus.temporal: unknown llm key(s) {', '.join(map(repr, unknown))} — a worker reads "
            f"only {', '.join(LLM_KEYS)}; configure anything else on the transport"
        )
    return llm


async def connect(address: str, *, namespace: str = "default", **options: Any) -> Client:
    """`temporalio.client.Client.connect`, with an unreachable server reported as `TemporalUnavailable`."""
    from ._errors import TemporalUnavailable

    try:
        return await Client.connect(address, namespace=namespace, **options)
    except RuntimeError as exc:  # the SDK reports connection failures as RuntimeError
        raise TemporalUnavailable(address, exc) from None


async def ensure_search_attributes(client: Client) -> list[str]:
    """Add the `Toolnexus*` search attributes the namespace lacks; the names added."""
    from temporalio.api.enums.v1 import IndexedValueType
    from temporalio.api.operatorservice.v1 import AddSearchAttributesRequest, ListSearchAttributesRequest

    listed = await client.operator_service.list_search_attributes(
        ListSearchAttributesRequest(namespace=client.namespace))
    missing = {name: kind for name, kind in SEARCH_ATTRIBUTES.items() if name not in listed.custom_attributes}
    if missing:
        kinds = {"Keyword": IndexedValueType.INDEXED_VALUE_TYPE_KEYWORD,
                 "KeywordList": IndexedValueType.INDEXED_VALUE_TYPE_KEYWORD_LIST}
        await client.operator_service.add_search_attributes(AddSearchAttributesRequest(
            namespace=client.namespace, search_attributes={n: kinds[k] for n, k in missing.items()}))
    return sorted(missing)


class AgentWorker:
    """A running (or runnable) toolnexus worker: `await w.run()`, or `async with w:` around code
    that needs it running. `.worker` is the underlying `temporalio.worker.Worker`."""

    def __init__(self, worker: Worker, hosted: Hosted, task_queue: str, owned: Any) -> None:
        self.worker = worker
        self.task_queue = task_queue
        self._hosted = hosted
        self._owned = owned

    async def _cleanup(self) -> None:
        unhost(self.task_queue, self._hosted)
        if self._owned is not None:
            owned, self._owned = self._owned, None
            await owned.aclose()

    async def run(self) -> None:
        """Poll the task queue until cancelled (or `shutdown()`)."""
        try:
            await self.worker.run()
        finally:
            await self._cleanup()

    async def shutdown(self) -> None:
        await self.worker.shutdown()

    async def __aenter__(self) -> "AgentWorker":
        await self.worker.__aenter__()
        return self

    async def __aexit__(self, *exc: Any) -> None:
        try:
            await self.worker.__aexit__(*exc)
        finally:
            await self._cleanup()


async def create_worker(client: Client, *, agents: Any, llm: Optional[dict[str, Any]] = None, transport: Any = None,
                        task_queue: str = DEFAULT_TASK_QUEUE, options: Optional[TemporalOptions] = None,
                        register_search_attributes: bool = True, passthrough: Sequence[str] = (),
                        **worker_options: Any) -> AgentWorker:
    """A worker for `task_queue` running `agents` (an `Agent`, `AgentDef`s, a list, or a registry dict)
    against `llm` through `transport`; `worker_options` go to `temporalio.worker.Worker`."""
    registry = await registry_of(agents)
    if not registry:
        raise ToolnexusValueError("toolnexus.temporal: create_worker needs at least one agent definition (agents=...)")
    llm = _checked_llm(llm)
    api_key = llm.get("api_key")
    public = {**llm, "api_key": KEY_PLACEHOLDER} if api_key else llm
    options = options if options is not None else TemporalOptions()
    if not isinstance(options, TemporalOptions):
        raise ToolnexusTypeError(f"toolnexus.temporal: options must be a TemporalOptions, got {type(options).__name__}")
    owned = None
    if transport is None:
        from ..client._http11 import default_transport

        transport = owned = default_transport()
    if register_search_attributes:
        try:
            await ensure_search_attributes(client)
        except Exception as exc:
            warn(f"[toolnexus] temporal: could not register the search attributes {', '.join(SEARCH_ATTRIBUTES)} "
                 f"({type(exc).__name__}: {exc}); create them on the namespace, or pending() cannot list runs")
    registry = gated_registry(registry)  # approvals are asked inside the tool-call activity
    hosted = Hosted(workflow_registry(registry, options), public, options)
    host(task_queue, hosted)
    acts = AgentActivities(registry, transport, api_key, options)
    restrictions = SandboxRestrictions.default.with_passthrough_modules(*SANDBOX_PASSTHROUGH, *passthrough)
    try:
        worker = Worker(client, task_queue=task_queue, workflows=[AgentWorkflow], activities=acts.activities(),
                        workflow_runner=SandboxedWorkflowRunner(restrictions=restrictions), **worker_options)
    except BaseException:
        unhost(task_queue, hosted)
        if owned is not None:
            await owned.aclose()
        raise
    return AgentWorker(worker, hosted, task_queue, owned)


async def run_worker(address: str, *, agents: Any, llm: Optional[dict[str, Any]] = None, transport: Any = None,
                     task_queue: str = DEFAULT_TASK_QUEUE, namespace: str = "default",
                     options: Optional[TemporalOptions] = None, ready: Optional[asyncio.Event] = None,
                     **worker_options: Any) -> None:
    """Connect to `address` and run a worker until cancelled; `ready` is set once it polls."""
    client = await connect(address, namespace=namespace)
    worker = await create_worker(client, agents=agents, llm=llm, transport=transport, task_queue=task_queue,
                                 options=options, **worker_options)
    async with worker:
        if ready is not None:
            ready.set()
        await asyncio.Future()  # until cancelled
