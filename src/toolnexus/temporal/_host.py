"""`TemporalHost`: the host verbs of a durable store, for runs that are Temporal workflows — from
any process that can reach the cluster.

| store (`toolnexus.stores`) | Temporal (`TemporalHost`) |
|---|---|
| `agent.run(prompt, store=s, run_id=id)` | `await host.start("agent", prompt, run_id=id)` (the run id is the workflow id) |
| `await store.pending()` | `await host.pending()` (visibility: every run's parked requests, across the fleet) |
| `await resume(store, answer, agents=...)` | `await host.answer(answer)` (routed by request id) |
| `await store.runs(status=...)` | `await host.runs(status=...)` |
| — | `await host.wait(run_id)` (until parked or finished), `await host.result(run_id)` (finished) |

The host needs no agent definitions and no model: workers run the agents. Errors are the
store's: a used run id is `RunExists`, an unknown one `RunNotFound`, a second answer to a request
`AnswerAlreadyApplied`, an answer the run's validator refused (unknown request id, expired, schema
violation) an `AnswerRejected` (a `ResumeError`) with `.reason`. Nothing was applied in any of
those cases.

`pending()` reads visibility, which a cluster updates a moment after a request opens (on the dev
server, typically within a second); `pending(run_id=...)` and `wait(run_id)` ask the run itself
and are exact. `answer()` without `run_id` finds the run by visibility too, waiting up to
`route_timeout` seconds (default 5) for it to catch up before it reports the request unknown. Listing and routing by
request id need the `Toolnexus*` search attributes (registered by `create_worker` by default).
"""  # noqa: E501 - Markdown tables, one row per line

from __future__ import annotations

import asyncio
import dataclasses
from datetime import UTC, datetime
from typing import Any, Optional

from temporalio.client import Client, WorkflowUpdateFailedError
from temporalio.common import (
    SearchAttributeKey,
    SearchAttributePair,
    TypedSearchAttributes,
    WorkflowIDConflictPolicy,
    WorkflowIDReusePolicy,
)
from temporalio.exceptions import ApplicationError, WorkflowAlreadyStartedError
from temporalio.service import RPCError, RPCStatusCode

from ..agents._handle import TaskResult
from ..client._errors import ResumeError
from ..client._resume import RESUME_PREFIX
from ..durable import AnswerAlreadyApplied, PendingRun, RunExists, RunNotFound, RunSummary
from ..errors import ToolnexusTypeError, ToolnexusValueError
from ..types import Answer, Request
from ._errors import AnswerRejected
from ._names import (
    ANSWER_UPDATE,
    DEFAULT_TASK_QUEUE,
    MEMO_PENDING,
    PENDING_QUERY,
    SA_AGENT,
    SA_REQUESTS,
    SA_STATUS,
    SETTLED_UPDATE,
    STATUS_QUERY,
    TRANSCRIPT_QUERY,
    WORKFLOW_TYPE,
)
from ._spec import RunSpec
from .workflow import REJECT_ANSWERED, RESUME_FAILED


def _when(text: Any) -> Optional[datetime]:
    if not isinstance(text, str):
        return None
    try:
        return datetime.fromisoformat(text)
    except ValueError:
        return None


def _pending_run(item: dict[str, Any]) -> PendingRun:
    created = _when(item.get("created_at")) or datetime.now(UTC)
    return PendingRun(str(item.get("run_id")), Request.from_dict(item["request"]), list(item.get("path") or []),
                      created, _when(item.get("expires_at")))


def _result(record: dict[str, Any]) -> TaskResult:
    return dataclasses.replace(TaskResult.from_record(record), run_id=record.get("run_id"))


def _quoted(value: str, what: str) -> str:
    if any(ch in value for ch in "'\"\\\n"):
        raise ToolnexusValueError(
            f"toolnexus.temporal: cannot look up {what} {value!r} by visibility (it holds a quote or "
            "backslash); pass run_id= to address the run directly"
        )
    return f"'{value}'"


def _not_found(exc: RPCError) -> bool:
    return exc.status == RPCStatusCode.NOT_FOUND


class TemporalHost:
    """Host verbs over one Temporal client and task queue (see the module docstring)."""

    def __init__(self, client: Client, *, task_queue: str = DEFAULT_TASK_QUEUE, route_timeout: float = 5.0) -> None:
        self.client = client
        self.task_queue = task_queue
        self.route_timeout = route_timeout

    @classmethod
    async def connect(cls, address: str, *, namespace: str = "default", task_queue: str = DEFAULT_TASK_QUEUE,
                      route_timeout: float = 5.0, **options: Any) -> "TemporalHost":
        from ._worker import connect

        return cls(await connect(address, namespace=namespace, **options), task_queue=task_queue,
                   route_timeout=route_timeout)

    # -- start / wait / result -------------------------------------------------------------------------

    async def start(self, agent: str, prompt: str, *, run_id: str, budget: Any = None,
                    resume_mode: Optional[str] = None, max_concurrent_turns: int = 8, inbox_cap: int = 8,
                    wait: bool = False) -> Any:
        """Start a run of `agent` (a name the workers host) under `run_id`, once; its id, or with
        `wait=True` its first result (`pending` with the request, or final) as a `TaskResult`."""
        if not isinstance(run_id, str) or not run_id.strip():
            raise ToolnexusValueError(f"toolnexus.temporal: run_id must be a non-empty string, got {run_id!r}")
        spec = RunSpec.of(agent, prompt, budget=budget, resume_mode=resume_mode,
                          max_concurrent_turns=max_concurrent_turns, inbox_cap=inbox_cap)
        attrs = TypedSearchAttributes([SearchAttributePair(SearchAttributeKey.for_keyword(SA_STATUS), "running"),
                                       SearchAttributePair(SearchAttributeKey.for_keyword(SA_AGENT), agent)])
        try:
            await self.client.start_workflow(
                WORKFLOW_TYPE, spec.to_dict(), id=run_id, task_queue=self.task_queue, search_attributes=attrs,
                id_reuse_policy=WorkflowIDReusePolicy.REJECT_DUPLICATE,
                id_conflict_policy=WorkflowIDConflictPolicy.FAIL, static_summary=f"toolnexus agent {agent}")
        except WorkflowAlreadyStartedError:
            raise RunExists(run_id) from None
        return await self.wait(run_id) if wait else run_id

    async def wait(self, run_id: str) -> TaskResult:
        """Until the run is quiet: its pending result (with `.pending`) or its final one."""
        handle = self.client.get_workflow_handle(run_id)
        try:
            return _result(await handle.execute_update(SETTLED_UPDATE))
        except RPCError as exc:
            if _not_found(exc) and not await self._exists(run_id):
                raise RunNotFound(run_id, "this Temporal namespace") from None
            return await self.result(run_id)
        except WorkflowUpdateFailedError:
            return await self.result(run_id)

    async def result(self, run_id: str) -> TaskResult:
        """The run's final result (waits until it finishes)."""
        handle = self.client.get_workflow_handle(run_id)
        try:
            return _result(await handle.result())
        except RPCError as exc:
            if _not_found(exc):
                raise RunNotFound(run_id, "this Temporal namespace") from None
            raise

    async def _exists(self, run_id: str) -> bool:
        try:
            await self.client.get_workflow_handle(run_id).describe()
            return True
        except RPCError as exc:
            if _not_found(exc):
                return False
            raise

    # -- pending / answer --------------------------------------------------------------------------------

    async def pending(self, run_id: Optional[str] = None) -> list[PendingRun]:
        """Requests waiting for an answer, oldest first: of every run (visibility), or of `run_id`
        (asked of the run itself)."""
        if run_id is not None:
            try:
                items = await self.client.get_workflow_handle(run_id).query(PENDING_QUERY)
            except RPCError as exc:
                if _not_found(exc):
                    raise RunNotFound(run_id, "this Temporal namespace") from None
                raise
            return sorted((_pending_run(i) for i in items), key=lambda p: p.created_at)
        found: list[PendingRun] = []
        query = f"WorkflowType = '{WORKFLOW_TYPE}' AND ExecutionStatus = 'Running' AND {SA_REQUESTS} IS NOT NULL"
        async for execution in self.client.list_workflows(query):
            memo = await execution.memo()
            found.extend(_pending_run(i) for i in memo.get(MEMO_PENDING) or [])
        return sorted(found, key=lambda p: p.created_at)

    async def _route(self, request_id: str) -> str:
        """The run waiting on `request_id`, by visibility; waits up to `route_timeout` seconds for
        visibility to catch up with a request that opened a moment ago."""
        query = f"WorkflowType = '{WORKFLOW_TYPE}' AND {SA_REQUESTS} = {_quoted(request_id, 'request id')}"
        loop = asyncio.get_running_loop()
        deadline = loop.time() + self.route_timeout
        while True:
            runs = [e.id async for e in self.client.list_workflows(query)]
            if runs or loop.time() >= deadline:
                break
            await asyncio.sleep(min(0.1, max(0.0, deadline - loop.time())))
        if not runs:
            raise AnswerRejected(
                RESUME_PREFIX + f"no run waits on request {request_id!r} (visibility may lag a moment "
                "after a request opens; pass run_id= to address the run directly)", reason="unknown",
                request_id=request_id)
        return runs[0]

    async def answer(self, answer: Any, *, run_id: Optional[str] = None) -> TaskResult:
        """Apply `answer` to the run waiting on its request (found by request id unless `run_id` is
        given), exactly once; where the run stands once it is quiet again (`pending` again, or final)."""
        if isinstance(answer, dict):
            answer = Answer.from_dict(answer)
        if not isinstance(answer, Answer):
            raise ToolnexusTypeError(f"toolnexus.temporal: answer() takes an Answer, got {type(answer).__name__}")
        target = run_id if run_id is not None else await self._route(answer.id)
        handle = self.client.get_workflow_handle(target)
        try:
            return _result(await handle.execute_update(ANSWER_UPDATE, dataclasses.asdict(answer)))
        except WorkflowUpdateFailedError as exc:
            raise self._refusal(exc, answer.id, target) from None
        except RPCError as exc:
            if _not_found(exc):
                if not await self._exists(target):
                    raise RunNotFound(target, "this Temporal namespace") from None
                raise await self._finished_refusal(target, answer.id) from None
            raise

    async def _finished_refusal(self, run_id: str, request_id: str) -> Exception:
        """Why a finished run refuses an answer: answered (or expired) earlier, or never asked."""
        how = None
        try:
            state = await self.client.get_workflow_handle(run_id).query(STATUS_QUERY)
            how = (state.get("answered") or {}).get(request_id)
        except Exception:
            pass
        if how == "answered":
            return AnswerAlreadyApplied(request_id, run_id)
        if how == "expired":
            return AnswerRejected(f"toolnexus: request {request_id!r} of run {run_id!r} expired and was declined; "
                                  "this answer was not applied", reason="expired", request_id=request_id,
                                  run_id=run_id)
        return AnswerRejected(
            RESUME_PREFIX + f"run {run_id!r} has finished; request {request_id!r} is not pending",
            reason="unknown",
            request_id=request_id,
            run_id=run_id,
        )

    @staticmethod
    def _refusal(exc: WorkflowUpdateFailedError, request_id: str, run_id: str) -> Exception:
        cause = exc.cause
        if not isinstance(cause, ApplicationError):
            return AnswerRejected(f"toolnexus: the answer to {request_id!r} was not applied: {cause}",
                                  reason="invalid", request_id=request_id, run_id=run_id)
        if cause.type == REJECT_ANSWERED:
            return AnswerAlreadyApplied(request_id, run_id)
        if cause.type == RESUME_FAILED:
            return ResumeError(cause.message)
        return AnswerRejected(cause.message, reason=str(cause.type), request_id=request_id, run_id=run_id)

    # -- runs / inspect ------------------------------------------------------------------------------------

    async def runs(self, status: Optional[str] = None) -> list[RunSummary]:
        """Runs of this namespace, newest first; `status` filters (running, pending, done, ...)."""
        query = f"WorkflowType = '{WORKFLOW_TYPE}'"
        if status is not None:
            query += f" AND {SA_STATUS} = {_quoted(status, 'status')}"
        out = []
        async for e in self.client.list_workflows(query):
            attrs = e.typed_search_attributes
            out.append(RunSummary(e.id, attrs.get(SearchAttributeKey.for_keyword(SA_STATUS)) or "running",
                                  attrs.get(SearchAttributeKey.for_keyword(SA_AGENT)),
                                  e.close_time or e.execution_time or e.start_time, e.start_time))
        return sorted(out, key=lambda r: r.created_at, reverse=True)

    async def inspect(self, run_id: str) -> dict[str, Any]:
        """The run's status, handles (ids, states, counters) and trace, asked of the run itself."""
        return await self.client.get_workflow_handle(run_id).query(STATUS_QUERY)

    async def transcript(self, run_id: str, handle_id: str) -> Optional[list[dict[str, Any]]]:
        """One handle's stored transcript (e.g. `"root/support.1"`), asked of the run itself."""
        return await self.client.get_workflow_handle(run_id).query(TRANSCRIPT_QUERY, handle_id)

    async def cancel(self, run_id: str) -> None:
        """Cancel the run: every turn is stopped and the workflow ends cancelled."""
        await self.client.get_workflow_handle(run_id).cancel()
