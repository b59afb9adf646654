"""`AgentWorkflow`: one agent run as a Temporal workflow — the toolnexus `AgentRuntime` itself,
running on the workflow's deterministic event loop.

There is no second loop and no second state machine: the workflow builds an `AgentRuntime` from
the worker's agent definitions (`_hosting.py`), spawns the entry agent, wakes it with the prompt
and waits, exactly as `Agent.run` does. What changes is the seams:

- the transport's `post` is an LLM-call activity and each definition's tools are activity
  proxies (`_proxies.py`), so every LLM call and every tool call is recorded in history and a
  replay — on this worker or another, after a crash — reuses their results instead of repeating
  them; the `task` tool, handles, ids, budgets, counters and reattachment are the runtime's own;
- the clock is the workflow's (`_clock.py`): timeouts, `max_wall_ms` and `expiresAt` follow
  workflow time, and timers are durable.

Nothing non-deterministic happens in workflow code: request ids of tool suspensions are minted
inside activities, an `in_doubt` question's id comes from the workflow's random source, time is
the workflow's. Definitions' own callables (`wait_for`, hooks, completion gates) run here too and
must be deterministic.

**A suspension is a durable wait.** When no `wait_for` answers a request, the handles park as
they do with a store and the workflow waits — for hours or months — with nothing running. Each
parked request is listed by the `toolnexus.pending` query, in the memo and in the
`ToolnexusRequests` search attribute (so any process can list them across the fleet); its answer
arrives as the `toolnexus.answer` update. The update's validator refuses, before anything is
written to history, an answer to an unknown request id, to a request already answered, to an
expired one, or one whose `data` violates the request's schema; the handler re-checks and marks
the request answered before its first await, so two answers can never both be applied — the
second is refused, whether it arrives later or in the same workflow task. A request with
`expiresAt` gets a durable timer: when it fires the request is declined with reason `expired`
(the model is told `declined/expired: <prompt>`), and a later answer is refused as expired.

The run ends when the entry agent settles (done, incomplete, error) with nothing running; its
`TaskResult` (as JSON, plus `run_id`) is the workflow's result. `toolnexus.settled` is an update
that waits until the run is quiet — parked or finished — and returns where it stands: a host's
"wait for the next result" without polling.
"""

from __future__ import annotations

import asyncio
from datetime import datetime
from typing import Any, Optional

from temporalio import workflow
from temporalio.common import SearchAttributeKey
from temporalio.exceptions import ApplicationError

with workflow.unsafe.imports_passed_through():
    from ..agents._answering import parked_handles
    from ..agents._core import RuntimeCore
    from ..agents._handle import SpawnError, TaskResult, is_parked, pending_result, stamp_path, subtree
    from ..agents._runtime import AgentRuntime
    from ..client._memory import InMemoryConversationStore
    from ..client._resume import RESUME_PREFIX
    from ..client._tool_calls import answer_refusal, expires_at
    from ..types import Answer, Request
    from ._clock import WorkflowClock
    from ._hosting import hosted_for
    from ._names import (
        ANSWER_UPDATE,
        MEMO_PENDING,
        PENDING_QUERY,
        SA_REQUESTS,
        SA_STATUS,
        SETTLED_UPDATE,
        STATUS_QUERY,
        TRANSCRIPT_QUERY,
        WORKFLOW_TYPE,
    )
    from ._proxies import ActivityTransport
    from ._spec import RunSpec

__all__ = ["AgentWorkflow", "WorkflowConversations", "REJECT_ANSWERED", "REJECT_EXPIRED", "REJECT_UNKNOWN",
           "REJECT_SCHEMA", "REJECT_INVALID", "RESUME_FAILED"]

REJECT_ANSWERED = "AnswerAlreadyApplied"
REJECT_EXPIRED = "expired"
REJECT_UNKNOWN = "unknown"
REJECT_SCHEMA = "schema"
REJECT_INVALID = "invalid"
RESUME_FAILED = "ResumeError"

_STATUS_KEY = SearchAttributeKey.for_keyword(SA_STATUS)
_REQUESTS_KEY = SearchAttributeKey.for_keyword_list(SA_REQUESTS)


class WorkflowConversations(InMemoryConversationStore):
    """The in-workflow conversation store, readable synchronously (queries cannot await)."""

    def peek(self, id: str) -> Optional[list[dict[str, Any]]]:
        entry = self._data.get(id)
        return [dict(m) for m in entry[1]] if entry is not None else None


def _iso(when: Optional[datetime]) -> Optional[str]:
    return when.isoformat() if when is not None else None


def _reject(message: str, kind: str) -> ApplicationError:
    return ApplicationError(message, type=kind, non_retryable=True)


@workflow.defn(name=WORKFLOW_TYPE)
class AgentWorkflow:
    """One agent run (see the module docstring)."""

    def __init__(self) -> None:
        self._rt: Optional[AgentRuntime] = None
        self._store = WorkflowConversations()
        self._entry: Any = None
        self._started = False
        self._final: Optional[dict[str, Any]] = None
        self._answered: dict[str, str] = {}  # request id → "answered" | "expired"
        self._seen: dict[str, datetime] = {}  # request id → when it was first pending
        self._timers: dict[str, asyncio.Task[None]] = {}
        self._applying = 0
        self._published: Any = None

    # -- the run ---------------------------------------------------------------------------------------

    @workflow.run
    async def run(self, spec: dict[str, Any]) -> dict[str, Any]:
        try:
            run = RunSpec.from_dict(spec)
            hosted = hosted_for(workflow.info().task_queue)
            rt = AgentRuntime(registry=hosted.registry, transport=ActivityTransport(hosted.options), llm=hosted.llm,
                              clock=WorkflowClock(), store=self._store, resume_mode=run.resume_mode,
                              max_concurrent_turns=run.max_concurrent_turns, inbox_cap=run.inbox_cap)
        except (TypeError, ValueError, LookupError) as exc:
            return self._finish(TaskResult(str(exc), True, "error"))
        self._rt = rt
        publisher = asyncio.ensure_future(self._publish_loop())
        try:
            h = rt.spawn(rt.root, run.agent, run.budget_obj())
            if isinstance(h, SpawnError):
                self._started = True
                return self._finish(TaskResult(h.error, True, "error"))
            self._entry = h
            rt.wake(h, run.prompt)
            await rt.wait(h)
            self._started = True
            await workflow.wait_condition(self._settled)
            final = await rt.wait(h)
            await rt.close(rt.root)
            record = self._finish(final)
            await workflow.wait_condition(workflow.all_handlers_finished)
            return record
        except asyncio.CancelledError:  # the workflow was cancelled: stop every turn, then say so
            await rt.close(rt.root, force=True)
            raise
        finally:
            publisher.cancel()
            for timer in list(self._timers.values()):
                timer.cancel()

    def _finish(self, result: TaskResult) -> dict[str, Any]:
        record = {**result.to_record(), "run_id": workflow.info().workflow_id}
        self._final = record
        self._publish()
        return record

    # -- where the run stands ---------------------------------------------------------------------------

    def _state(self) -> RuntimeCore:
        """The runtime's state, through its supported accessor (`AgentRuntime.run_state`)."""
        assert self._rt is not None
        return self._rt.run_state

    def _quiet(self) -> bool:
        """Nothing runs: every turn and every answer being applied has finished."""
        if self._final is not None:
            return True
        if not self._started or self._applying or self._rt is None:
            return False
        return not self._state().turns

    def _settled(self) -> bool:
        """The entry agent has its result and nothing is left running or parked under it."""
        entry = self._entry
        if not self._quiet() or entry is None or is_parked(entry):
            return False
        return entry.state in ("idle", "closed") and entry.last_result is not None and not entry.wake_queue

    def _outcome(self) -> dict[str, Any]:
        """Where the run stands, as a `TaskResult` record: the final one, or the entry's pending one."""
        if self._final is not None:
            return self._final
        entry = self._entry
        if entry is not None and is_parked(entry):
            result = pending_result(entry)
        elif entry is not None and entry.last_result is not None:
            result = entry.last_result
        else:
            result = TaskResult("running", False, "pending")
        return {**result.to_record(), "run_id": workflow.info().workflow_id}

    def _status(self) -> str:
        if self._final is not None:
            return str(self._final["status"])
        if self._rt is None:
            return "running"
        return self._state().run_status()

    def _pending_now(self) -> dict[str, tuple[Request, list[str]]]:
        """Each parked request id → (the request stamped with the top of its parked chain, that path)."""
        if self._rt is None or self._final is not None:
            return {}
        found: dict[str, tuple[Request, list[str], int]] = {}
        for h in parked_handles(self._state()):
            req = h.pending_req
            if req is None:
                continue
            held = found.get(req.id)
            if held is None or h.depth < held[2]:
                stamped = stamp_path(req, h)
                found[req.id] = (stamped, list((stamped.data or {}).get("path") or []), h.depth)
        return {rid: (req, path) for rid, (req, path, _) in found.items()}

    def _items(self) -> list[dict[str, Any]]:
        out = []
        for rid, (req, path) in self._pending_now().items():
            out.append({"run_id": workflow.info().workflow_id, "request": _request_dict(req), "path": path,
                        "created_at": _iso(self._seen.get(rid)), "expires_at": _iso(expires_at(req))})
        return out

    # -- publishing: search attributes, memo, expiry timers ---------------------------------------------

    def _key(self) -> Any:
        return self._status(), tuple(sorted(self._pending_now()))

    async def _publish_loop(self) -> None:
        while True:
            await workflow.wait_condition(lambda: self._key() != self._published)
            self._publish()

    def _publish(self) -> None:
        key = self._key()
        if key == self._published:
            return
        self._published = key
        status, ids = key
        pending = self._pending_now()
        for rid, (req, _) in pending.items():
            if rid not in self._seen:
                self._seen[rid] = workflow.now()
            when = expires_at(req)
            if when is not None and rid not in self._timers and rid not in self._answered:
                self._timers[rid] = asyncio.ensure_future(self._expire(rid, when))
        for rid in [r for r in self._timers if r not in pending]:
            timer = self._timers.pop(rid)
            if timer is not asyncio.current_task():
                timer.cancel()
        workflow.upsert_search_attributes([_STATUS_KEY.value_set(status), _REQUESTS_KEY.value_set(list(ids))])
        workflow.upsert_memo({MEMO_PENDING: self._items()})

    async def _expire(self, rid: str, when: datetime) -> None:
        delay = (when - workflow.now()).total_seconds()
        if delay > 0:
            await workflow.sleep(delay, summary=f"expiresAt of {rid}")
        if rid in self._answered or rid not in self._pending_now():
            return
        self._timers.pop(rid, None)
        try:
            await self._apply(Answer(id=rid, ok=False, reason="expired"), "expired")
        except Exception as exc:
            workflow.logger.warning("toolnexus.temporal: declining expired request %s failed: %s", rid, exc)

    # -- answers ------------------------------------------------------------------------------------------

    def _check(self, answer: Any) -> Answer:
        """The answer as it will be applied, or the reason it is refused (an `ApplicationError`)."""
        run_id = workflow.info().workflow_id
        if (
            not isinstance(answer, dict)
            or not isinstance(answer.get("id"), str)
            or not isinstance(answer.get("ok"), bool)
        ):
            raise _reject(f"toolnexus.temporal: an answer is a JSON object {{id: str, ok: bool, data?, reason?}}, got "
                          f"{answer!r:.200}", REJECT_INVALID)
        try:
            parsed = Answer.from_dict(answer)
        except (TypeError, ValueError) as exc:
            raise _reject(f"toolnexus.temporal: invalid answer: {exc}", REJECT_INVALID) from None
        rid = parsed.id
        how = self._answered.get(rid)
        if how == "expired":
            raise _reject(f"toolnexus: request {rid!r} of run {run_id!r} expired and was declined; this answer was "
                          "not applied", REJECT_EXPIRED)
        if how is not None:
            raise _reject(f"toolnexus: request {rid!r} of run {run_id!r} was already answered; this answer was not "
                          "applied", REJECT_ANSWERED)
        pending = self._pending_now()
        if rid not in pending:
            listing = ", ".join(repr(r) for r in pending) or "none"
            raise _reject(RESUME_PREFIX + f"run {run_id!r} has no pending request {rid!r} (pending: {listing})",
                          REJECT_UNKNOWN)
        request = pending[rid][0]
        when = expires_at(request)
        if when is not None and when <= workflow.now():
            raise _reject(f"toolnexus: request {rid!r} of run {run_id!r} expired at {request.expiresAt}; it is "
                          "declined, this answer was not applied", REJECT_EXPIRED)
        refused = answer_refusal(request, parsed)  # an approval's edit, a repeated approver, data off-schema
        if refused is not None:
            raise _reject(RESUME_PREFIX + refused, REJECT_SCHEMA)
        return parsed

    async def _apply(self, answer: Answer, how: str) -> TaskResult:
        """Mark the request answered (synchronously, before any await), then resume the runtime."""
        assert self._rt is not None
        self._answered[answer.id] = how
        timer = self._timers.pop(answer.id, None)
        if timer is not None and timer is not asyncio.current_task():
            timer.cancel()
        self._applying += 1
        try:
            return await self._rt.resume(answer)
        except BaseException:
            self._answered.pop(answer.id, None)  # nothing was applied: it may be answered again
            raise
        finally:
            self._applying -= 1

    @workflow.update(name=ANSWER_UPDATE)
    async def answer(self, answer: dict[str, Any]) -> dict[str, Any]:
        """Apply a host's `Answer`; returns where the run stands once it is quiet again."""
        parsed = self._check(answer)
        try:
            await self._apply(parsed, "answered")
        except Exception as exc:
            raise _reject(str(exc) or type(exc).__name__, RESUME_FAILED) from None
        await workflow.wait_condition(self._quiet)
        return self._outcome()

    @answer.validator
    def _validate_answer(self, answer: dict[str, Any]) -> None:
        self._check(answer)

    @workflow.update(name=SETTLED_UPDATE)
    async def settled(self) -> dict[str, Any]:
        """Wait until nothing runs (the run is parked or finished); where it stands then."""
        await workflow.wait_condition(self._quiet)
        return self._outcome()

    # -- queries ------------------------------------------------------------------------------------------

    @workflow.query(name=PENDING_QUERY)
    def pending(self) -> list[dict[str, Any]]:
        return self._items()

    @workflow.query(name=STATUS_QUERY)
    def status(self) -> dict[str, Any]:
        handles = []
        if self._rt is not None:
            root = self._rt.root
            handles = [{"id": h.id, "state": h.state, "tokens": h.usage_total, "own_tokens": h.own_total,
                        "turns": h.turns_total, "inbox": len(h.inbox)} for h in subtree(root) if h is not root]
        return {"run_id": workflow.info().workflow_id, "status": self._status(), "quiet": self._quiet(),
                "result": self._final, "handles": handles, "answered": dict(self._answered),
                "trace": list(self._rt.trace) if self._rt else []}

    @workflow.query(name=TRANSCRIPT_QUERY)
    def transcript(self, handle_id: str) -> Optional[list[dict[str, Any]]]:
        return self._store.peek(handle_id)


def _request_dict(req: Request) -> dict[str, Any]:
    from dataclasses import asdict

    return asdict(req)
