"""Fulfilling served A2A tasks: submit → working → an outcome, in the background, never crashing.

A new task is saved `submitted` (with its `contextId`) before its fulfilment is scheduled on the
serving loop; the fulfilment saves `working`, awaits `run_task(text, context_id)` and saves the
outcome. Every saved state carries the task's `contextId` (a caller can always continue the
conversation from any poll):

- a run that ended `pending` becomes `input-required` — or `auth-required` for a request of kind
  `authorization` — whose status message is the request's prompt (plus its `url` as a link part
  for authorization) and whose `metadata["pending"]` is the `Request` as plain JSON. It is never
  reported `completed`.
- any other result becomes `completed` with one artifact holding the run's text.
- an exception becomes `failed`; its text passes the redaction hook first (it may quote a
  provider error, a header, a path).
- a cancellation (inbound `CancelTask`, or `stop()` after its drain time) becomes `canceled`.

A later message on an `input-required`/`auth-required` task answers it: with a `resume_task`
(the toolkit's is `client.ask_with_answer`) the halted run resumes with
`Answer(ok=True, data={"text": <message text>})` — or, for an approval request (its whole
`data["approval"]` is in the task's `metadata.pending`), the reply read as a decision by
`toolnexus.approvals.answer_from_text` (`approve`, `always`, `reject: <why>`, `edit {json}`;
anything else rejects, carrying the text); without one the text is sent as the next prompt
of the same conversation. A message on a task that is still running, or already finished, is
refused (`TaskBusy` / `TaskFinished`), as two answers to one question would race — except in the
moment after the question is saved while its run is still finishing up (the `on_task` observer):
a client that answers as soon as it sees the question waits for that, at most `FINISHING_WAIT`.

After each outcome is saved, `on_task({"id", "task", "result", "state"})` is called (awaited when
it returns an awaitable; its errors are logged at debug and swallowed). A store that fails on the
final save is logged and swallowed too: the next poll then shows the last state it did save.
"""

from __future__ import annotations

import asyncio
import dataclasses
import inspect
import uuid
from collections.abc import Awaitable, Callable, Mapping
from typing import Any, Optional, Union

from .._diag import logger
from ..approvals import answer_from_text, is_approval_request
from ..types import Answer, Request
from .tasks import FINISHED_STATES, TaskStore
from ..errors import ToolnexusError

__all__ = [
    "INTERRUPTED_STATES",
    "Fulfiller",
    "OnTask",
    "Redact",
    "ResumeTask",
    "RunTask",
    "ServerStopping",
    "TaskBusy",
    "TaskFinished",
    "TaskNotFound",
    "pending_request",
]

RunTask = Callable[..., Awaitable[Any]]
ResumeTask = Callable[[str, Request, Answer], Awaitable[Any]]
OnTask = Callable[[dict[str, Any]], Union[None, Awaitable[None]]]
Redact = Callable[[str], str]
A2ATask = dict[str, Any]

INTERRUPTED_STATES = frozenset({"input-required", "auth-required"})
FINISHING_WAIT = 10.0  # seconds an answer waits for the asking run to finish up (its `on_task` observer)
_STOPPED_TEXT = "canceled: the server stopped before the task finished"


class TaskNotFound(ToolnexusError):
    def __init__(self, task_id: str) -> None:
        super().__init__(task_id)
        self.task_id = task_id


class TaskFinished(ToolnexusError):
    """The task is in a final state (nothing left to answer or cancel)."""

    def __init__(self, task_id: str, state: str) -> None:
        super().__init__(f"Task {task_id} is in terminal state: {state}")
        self.task_id, self.state = task_id, state


class ServerStopping(ToolnexusError):
    """`stop()` has begun: no new runs are started."""


class TaskBusy(ToolnexusError):
    """The task is still running; it cannot take a message now."""

    def __init__(self, task_id: str) -> None:
        super().__init__(f"Task {task_id} is still running; wait for it to finish or cancel it")
        self.task_id = task_id


def _state(task: Optional[A2ATask]) -> str:
    status = task.get("status") if isinstance(task, dict) else None
    return str(status.get("state") or "") if isinstance(status, dict) else ""


def pending_request(result: Any) -> Optional[Request]:
    """The `Request` of a run that ended pending, read tolerantly; None for anything else."""
    if getattr(result, "status", None) != "pending":
        return None
    req = getattr(result, "pending", None)
    if isinstance(req, Request):
        return req
    if isinstance(req, Mapping) and all(isinstance(req.get(k), str) for k in ("id", "kind", "prompt")):
        return Request.from_dict(dict(req))
    return None


def _text_part(text: str) -> dict[str, Any]:
    return {"kind": "text", "text": text}


def _agent_message(*parts: dict[str, Any]) -> dict[str, Any]:
    return {"role": "agent", "parts": list(parts)}


class Fulfiller:
    """Runs and tracks the fulfilments of one server's tasks (see the module docstring)."""

    def __init__(self, store: TaskStore, run_task: RunTask, *, resume_task: Optional[ResumeTask] = None,
                 on_task: Optional[OnTask] = None, redact: Optional[Redact] = None) -> None:
        self.store = store
        self._run_task = run_task
        self._resume_task = resume_task
        self._on_task = on_task
        self._redact = redact or (lambda text: text)
        self._running: dict[str, asyncio.Task[None]] = {}
        self._contexts: dict[str, str] = {}
        self._settled: dict[str, asyncio.Event] = {}
        self._finishing: set[str] = set()  # tasks whose run is over and whose outcome is being saved/observed
        self._stopping = False

    # ------------------------------------------------------------------ entry points

    async def submit(self, text: str, context_id: Optional[str]) -> A2ATask:
        """Save a new `submitted` task and start fulfilling it; returns the submitted task."""
        if self._stopping:
            raise ServerStopping()
        task_id = str(uuid.uuid4())
        context = context_id or str(uuid.uuid4())
        task = {"id": task_id, "contextId": context, "status": {"state": "submitted"}}
        await self.store.save(task)
        self._start(task_id, context, self._fulfil(task_id, context, text, None))
        return dict(task)

    async def follow_up(self, task_id: str, text: str) -> A2ATask:
        """Answer an interrupted task with `text`; returns it as saved before the run resumes."""
        if self._stopping:
            raise ServerStopping()
        task = await self.store.get(task_id)
        if task is None:
            raise TaskNotFound(task_id)
        finishing = self._running.get(task_id) if task_id in self._finishing else None
        if finishing is not None:
            # Its outcome (the question) is saved and it is only finishing up (the `on_task`
            # observer): a client that answers the moment it sees the question waits for that,
            # rather than being told the task is busy.
            await asyncio.wait({finishing}, timeout=FINISHING_WAIT)
            task = await self.store.get(task_id) or task
        state = _state(task)
        if task_id in self._running:
            raise TaskBusy(task_id)
        if state in FINISHED_STATES:
            raise TaskFinished(task_id, state)
        if state not in INTERRUPTED_STATES:
            raise TaskBusy(task_id)  # submitted/working in another process, or an unknown state
        context = str(task.get("contextId") or "") or str(uuid.uuid4())
        resume = None
        raw = (task.get("metadata") or {}).get("pending") if isinstance(task.get("metadata"), dict) else None
        if self._resume_task is not None and isinstance(raw, Mapping):
            try:
                req = Request.from_dict(dict(raw))
                resume = (req, answer_from_text(req, text, via="a2a") if is_approval_request(req)
                          else Answer(id=req.id, ok=True, data={"text": text}))
            except (TypeError, ValueError):
                resume = None
        ready = asyncio.Event()
        runner = self._start(task_id, context, self._fulfil(task_id, context, text, resume, ready))
        waiter = asyncio.ensure_future(ready.wait())
        try:  # reply once `working` is saved, so a poll right after cannot read the old question
            racers: list[asyncio.Future[Any]] = [waiter, runner]
            await asyncio.wait(racers, return_when=asyncio.FIRST_COMPLETED)
        finally:
            waiter.cancel()
        return await self.store.get(task_id) or {"id": task_id, "contextId": context, "status": {"state": "working"}}

    async def cancel(self, task_id: str) -> A2ATask:
        """Stop the task's run (if any) and store `canceled`; returns the canceled task."""
        task = await self.store.get(task_id)
        running = self._running.get(task_id)
        if task is None and running is None:
            raise TaskNotFound(task_id)
        state = _state(task)
        if running is None and state in FINISHED_STATES:
            raise TaskFinished(task_id, state)
        context = self._contexts.get(task_id) or str((task or {}).get("contextId") or "")
        if running is not None:
            running.cancel()
            await asyncio.wait({running})
        if _state(await self.store.get(task_id)) not in FINISHED_STATES:  # never ran, or waiting for input
            await self._finish(task_id, self._canceled(task_id, context), "canceled", None)
        return await self.store.get(task_id) or self._canceled(task_id, context)

    async def wait_settled(self, task_id: str, timeout: float) -> None:
        """Wait (at most `timeout` s) until the task's current run has saved its outcome."""
        event = self._settled.get(task_id)
        if event is None:
            return
        try:
            await asyncio.wait_for(event.wait(), timeout)
        except asyncio.TimeoutError:
            pass

    def in_flight(self) -> int:
        return len(self._running)

    async def stop(self, drain_timeout: float) -> None:
        """Let runs finish for `drain_timeout` s, then cancel the rest; none is left `working`.

        From the first moment of `stop()`, new tasks and answers are refused (`ServerStopping`).
        """
        self._stopping = True
        tasks = dict(self._running)
        if not tasks:
            return
        if drain_timeout > 0:
            await asyncio.wait(set(tasks.values()), timeout=drain_timeout)
        for task in tasks.values():
            task.cancel()
        await asyncio.wait(set(tasks.values()))
        for task_id in tasks:
            if _state(await self.store.get(task_id)) in ("submitted", "working"):  # cancelled before it ran
                context = self._contexts.get(task_id, "")
                await self._finish(task_id, self._canceled(task_id, context, _STOPPED_TEXT), "canceled", None)

    # ------------------------------------------------------------------ running

    def _start(self, task_id: str, context: str, work: Awaitable[None]) -> "asyncio.Future[None]":
        self._contexts[task_id] = context
        self._settled[task_id] = asyncio.Event()
        runner = asyncio.ensure_future(work)
        self._running[task_id] = runner
        runner.add_done_callback(lambda _t: self._forget(task_id, runner))
        return runner

    def _forget(self, task_id: str, runner: "asyncio.Task[None]") -> None:
        if self._running.get(task_id) is runner:
            del self._running[task_id]
            self._finishing.discard(task_id)
            event = self._settled.pop(task_id, None)
            if event is not None:
                event.set()
        if not runner.cancelled() and runner.exception() is not None:  # a bug of ours: never silent
            logger.warning("toolnexus: A2A task %s fulfilment failed: %r", task_id, runner.exception())

    async def _fulfil(self, task_id: str, context: str, text: str, resume: Optional[tuple[Request, Answer]],
                      ready: Optional[asyncio.Event] = None) -> None:
        stopping = False
        try:
            await self._save({"id": task_id, "contextId": context, "status": {"state": "working"}})
            if ready is not None:
                ready.set()
            if resume is not None:
                assert self._resume_task is not None
                result = await self._resume_task(context, *resume)
            else:
                result = await self._run_task(text, context)
            final, state = self._outcome(task_id, context, result)
        except asyncio.CancelledError:
            stopping = True
            why = _STOPPED_TEXT if self._stopping else None
            await self._finish(task_id, self._canceled(task_id, context, why), "canceled", None)
            raise
        except Exception as exc:  # noqa: BLE001 - a failed run is a failed task, never a crash
            result, state = None, "failed"
            final = {"id": task_id, "contextId": context,
                     "status": {"state": "failed", "message": _agent_message(_text_part(self._safe_text(exc)))}}
        if not stopping:
            await self._finish(task_id, final, state, result)

    def _safe_text(self, exc: BaseException) -> str:
        text = str(exc) or type(exc).__name__
        try:
            return str(self._redact(text))
        except Exception:  # noqa: BLE001 - a broken hook must not leak the raw text
            logger.debug("toolnexus: A2A redaction hook raised", exc_info=True)
            return "the task failed"

    def _outcome(self, task_id: str, context: str, result: Any) -> tuple[A2ATask, str]:
        req = pending_request(result)
        if req is not None:
            state = "auth-required" if req.kind == "authorization" else "input-required"
            parts = [_text_part(req.prompt)]
            if state == "auth-required" and req.url:
                parts.append({"kind": "file", "file": {"uri": req.url}})
            task: dict[str, Any] = {"id": task_id, "contextId": context,
                    "status": {"state": state, "message": _agent_message(*parts)},
                    "metadata": {"pending": dataclasses.asdict(req)}}
            return task, state
        text = getattr(result, "text", "")
        text = text if isinstance(text, str) else ("" if text is None else str(text))
        task = {"id": task_id, "contextId": context, "status": {"state": "completed"},
                "artifacts": [{"artifactId": str(uuid.uuid4()), "parts": [_text_part(text)]}]}
        return task, "completed"

    @staticmethod
    def _canceled(task_id: str, context: str, why: Optional[str] = None) -> A2ATask:
        status: dict[str, Any] = {"state": "canceled"}
        if why:
            status["message"] = _agent_message(_text_part(why))
        return {"id": task_id, "contextId": context, "status": status}

    async def _save(self, task: A2ATask) -> bool:
        try:
            await self.store.save(task)
            return True
        except Exception:  # noqa: BLE001 - the store failing must not kill the fulfilment
            logger.warning("toolnexus: A2A task store failed to save task %s", task.get("id"), exc_info=True)
            return False

    async def _finish(self, task_id: str, final: A2ATask, state: str, result: Any) -> None:
        if task_id in self._running:
            self._finishing.add(task_id)
        await self._save(final)
        event = self._settled.get(task_id)
        if event is not None:
            event.set()
        if self._on_task is None:
            return
        try:
            outcome = self._on_task({"id": task_id, "task": final, "result": result, "state": state})
            if inspect.isawaitable(outcome):
                await outcome
        except Exception:  # noqa: BLE001 - an observer never breaks serving
            logger.debug("toolnexus: A2A on_task raised (ignored)", exc_info=True)
