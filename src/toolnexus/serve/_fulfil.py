"""Fulfilling served A2A tasks: submit → working → an outcome, in the background, never crashing.

A new task is saved `submitted` (with its `contextId` and the caller's message as the first entry
of its `history`) before its fulfilment is scheduled on the serving loop; the fulfilment sets
`working`, awaits `run_task(text, context_id)` and saves the outcome. Every state carries the
task's `contextId` and a `status.timestamp` (ISO 8601, UTC):

- a run that ended `pending` becomes `input-required` — or `auth-required` for a request of kind
  `authorization` — whose status message is the request's prompt (plus its `url` as a link part
  for authorization) and whose `metadata["pending"]` is the `Request` as plain JSON. It is never
  reported `completed`.
- any other result becomes `completed` with one artifact holding the run's text.
- an exception becomes `failed`; its text passes the redaction hook first (it may quote a
  provider error, a header, a path).
- a cancellation (inbound `CancelTask`, or `stop()` after its drain time) becomes `canceled`.

When a new status replaces one that had a message, that message moves into `history` (the newest
`HISTORY_KEEP` messages are kept, at most `HISTORY_BYTES` of them), so the history reads as the
conversation of the task.

**Messages on a task.** A message on an `input-required`/`auth-required` task answers it: with a
`resume_task` (the toolkit's is `client.ask_with_answer`) the halted run resumes with
`Answer(ok=True, data={"text": <message text>})` — or, for an approval request (its whole
`data["approval"]` is in the task's `metadata.pending`), the reply read as a decision by
`toolnexus.approvals.answer_from_text` (`approve`, `always`, `reject: <why>`, `edit {json}`;
anything else rejects, carrying the text); without one the text is sent as the next prompt of the
same conversation. An answer records who gave it (`by`: `answered_by`, the identity the server's
bearer token stands for — never a name the message claims, when the server knows one) and
`via="a2a"`; it is checked before the task changes (`toolnexus.approvals.answer_problem` with the
profile's `answerers`: a group's request from someone not in the group, an approver who already
approved, an edit the tool's schema refuses), and a refused answer is an invalid-params error that
leaves the task waiting for a better one.

A message on a task that is still `submitted`/`working` on its prompt is queued (at most
`QUEUE_MAX`, `QUEUE_BYTES` of text): when the current turn completes, the next queued message
runs as the next prompt of the same conversation and the task stays `working`; the task settles
with its last turn. A queued message is never taken as an answer: if the turn
asks a question instead, the queue waits for that question's answer, and a task that fails or is
canceled drops its queue (the messages stay in its history). A message on a task that is working
*on an answer* is refused (`TaskBusy`): it is almost surely a second answer to the same question,
and two answers must not both run. A message on a finished task is refused (`TaskFinished`).

**One change at a time, across servers.** Every change of a task goes through the store's
compare-and-set (`TaskStore.swap`): read, decide, write only if nothing changed meanwhile, else
decide again. The running turn holds a token in the stored task (`_run`); its outcome lands only
while the token is still there, so a terminal state is final (never overwritten, not even by the
turn that was running) and an answer is taken by exactly one of any number of servers sharing the
store. A server notices within `watch_every` seconds that another one canceled a task it is
running, and stops the run (not watched: a store in this process's memory, which no other server
can change). In one process a task's changes are also serialised by a lock, so a
store without a real compare-and-set is still safe within one server.

After each settled outcome (a question, or a final state) is saved, `on_task({"id", "task",
"result", "state"})` is called (awaited when it returns an awaitable; its errors are logged at
debug and swallowed). A store that fails on the final save is logged and swallowed too: the next
poll then shows the last state it did save.
"""

from __future__ import annotations

import asyncio
import copy
import dataclasses
import inspect
import json
import time
import uuid
from collections.abc import AsyncIterator, Awaitable, Callable, Mapping
from contextlib import asynccontextmanager
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any, Optional, Union

from .._diag import logger
from ..approvals import Answerers, answer_from_text, answer_problem, is_approval_request
from ..approvals._answerers import caller_problem
from ..durable._rules import expires_at_epoch
from ..errors import ToolnexusError
from ..types import Answer, Request, ToolResult, pending_of
from ._a2a_params import ParamError
from ._a2a_render import public, status_message_id
from ._tasks import FINISHED_STATES, InMemoryTaskStore, TaskStore

RunTask = Callable[..., Awaitable[Any]]
ResumeTask = Callable[[str, Request, Answer], Awaitable[Any]]
OnTask = Callable[[dict[str, Any]], Union[None, Awaitable[None]]]
Redact = Callable[[str], str]
A2ATask = dict[str, Any]
Decide = Callable[[Optional[A2ATask]], Optional[A2ATask]]

INTERRUPTED_STATES = frozenset({"input-required", "auth-required"})
ACTIVE_STATES = frozenset({"submitted", "working"})
FINISHING_WAIT = 10.0  # seconds an answer waits for the asking run to finish up (its `on_task` observer)
HISTORY_KEEP = 100  # messages of history kept per task …
HISTORY_BYTES = 1024 * 1024  # … and at most this much of them (as JSON), the newest message always
QUEUE_MAX = 16  # messages waiting for a working task's next turn …
QUEUE_BYTES = 1024 * 1024  # … and at most this much queued text
SWAP_TRIES = 64  # compare-and-set attempts before a change gives up (the task is changing that fast)
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
    """The task cannot take this message now (see the module docstring)."""

    def __init__(self, task_id: str, why: str = "is still running; wait for it to finish or cancel it") -> None:
        super().__init__(f"Task {task_id} {why}")
        self.task_id = task_id


class TaskConflict(ToolnexusError):
    """The task kept changing under us (`SWAP_TRIES` compare-and-sets lost in a row)."""


def _state(task: Optional[A2ATask]) -> str:
    status = task.get("status") if isinstance(task, dict) else None
    return str(status.get("state") or "") if isinstance(status, dict) else ""


def _turn(task: Optional[A2ATask]) -> dict[str, Any]:
    run = task.get("_run") if isinstance(task, dict) else None
    return run if isinstance(run, dict) else {}


def pending_request(result: Any) -> Optional[Request]:
    """The `Request` of a run that ended pending, read tolerantly; None for anything else (a tool's
    own result included: a served run's result is a run's, never a `ToolResult`)."""
    return None if isinstance(result, ToolResult) else pending_of(result)


def _text_part(text: str) -> dict[str, Any]:
    return {"kind": "text", "text": text}


def _agent_message(*parts: dict[str, Any]) -> dict[str, Any]:
    return {"role": "agent", "parts": list(parts)}  # its id is derived from the status (`status_message_id`)


def _user_message(text: str) -> dict[str, Any]:
    return {"role": "user", "parts": [_text_part(text)], "messageId": str(uuid.uuid4())}


@dataclass
class _Outcome:
    """What a turn ended in: the state, its status message, artifacts to add, the pending request."""

    state: str
    message: Optional[dict[str, Any]] = None
    artifacts: list[dict[str, Any]] = dataclasses.field(default_factory=list)
    pending: Optional[dict[str, Any]] = None


class Fulfiller:
    """Runs and tracks the fulfilments of one server's tasks (see the module docstring)."""

    def __init__(self, store: TaskStore, run_task: RunTask, *, resume_task: Optional[ResumeTask] = None,
                 on_task: Optional[OnTask] = None, redact: Optional[Redact] = None,
                 clock: Callable[[], float] = time.time, watch_every: float = 1.0,
                 answered_by: Optional[str] = None, answerers: Optional[Answerers] = None) -> None:
        self.store = store
        self.answered_by = answered_by  # who an answer through this server comes from (None: not known)
        self.answerers = answerers if answerers is not None else Answerers()
        self._run_task = run_task
        self._resume_task = resume_task
        self._on_task = on_task
        self._redact = redact or (lambda text: text)
        self._clock = clock
        # A store in this process's memory is nobody else's: no other server can change its tasks.
        self._watch_every: Optional[float] = None if isinstance(store, InMemoryTaskStore) else watch_every
        self._running: dict[str, asyncio.Task[None]] = {}
        self._turns: dict[str, str] = {}  # task id -> the turn token its local run holds
        self._settled: dict[str, asyncio.Event] = {}
        self._finishing: set[str] = set()  # tasks whose run is over and whose outcome is being saved/observed
        self._locks: dict[str, tuple[asyncio.Lock, int]] = {}  # task id -> (its lock, how many use it)
        self._stopping = False

    # ------------------------------------------------------------------ entry points

    async def submit(self, text: str, context_id: Optional[str] = None, *,
                     message: Optional[dict[str, Any]] = None) -> A2ATask:
        """Save a new `submitted` task and start fulfilling it; returns the submitted task."""
        if self._stopping:
            raise ServerStopping()
        task_id = str(uuid.uuid4())
        context = context_id or str(uuid.uuid4())
        turn = str(uuid.uuid4())
        first = dict(message or _user_message(text), taskId=task_id, contextId=context)
        task = {"id": task_id, "contextId": context, "status": self._status("submitted"), "history": [first],
                "_run": {"turn": turn, "answer": False}}
        if not await self._swap(None, task):
            raise TaskConflict(f"toolnexus: a task with the new id {task_id} already exists")
        self._start(task_id, context, turn, self._fulfil(task_id, context, turn, text, None, claimed=False))
        return public(task)

    async def follow_up(self, task_id: str, text: str, *, message: Optional[dict[str, Any]] = None,
                        context_id: Optional[str] = None) -> A2ATask:
        """A message on an existing task: answer its question, or queue it (see the module docstring).

        Returns the task as saved with the message taken."""
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
        msg = dict(message or _user_message(text), taskId=task_id)
        taken: dict[str, Any] = {}

        def decide(current: Optional[A2ATask]) -> Optional[A2ATask]:
            taken.clear()
            if current is None:
                raise TaskNotFound(task_id)
            context = str(current.get("contextId") or "")
            if context_id and context and context_id != context:
                raise ParamError(f"message.contextId {context_id!r} is not the context of task {task_id} ({context!r})")
            state = _state(current)
            new = copy.deepcopy(current)
            _append(new, dict(msg, contextId=context))
            if state in FINISHED_STATES:
                raise TaskFinished(task_id, state)
            if state in INTERRUPTED_STATES:
                if task_id in self._running:
                    raise TaskBusy(task_id)
                metadata: dict[str, Any] = new["metadata"] if isinstance(new.get("metadata"), dict) else {}
                resume = self._resumption(metadata.get("pending"), text) if self._resume_task is not None else None
                if resume is not None:
                    self._check_answer(*resume)
                taken.update(turn=str(uuid.uuid4()), pending=metadata.pop("pending", None), context=context,
                             resume=resume)
                if not metadata:
                    new.pop("metadata", None)
                self._set_status(new, "working")
                new["_run"] = {"turn": taken["turn"], "answer": True}
                return new
            if state not in ACTIVE_STATES or not _turn(current):
                raise TaskBusy(task_id)  # an unknown state, or a task stored before turns were kept
            if _turn(current).get("answer"):
                raise TaskBusy(task_id, "is working on an answer to its question; "
                                        "wait for it (a second answer is not taken)")
            queue = list(new.get("_queue") or [])
            waiting = sum(len(str(q.get("text") or "")) for q in queue) + len(text)
            if len(queue) >= QUEUE_MAX or waiting > QUEUE_BYTES:
                raise TaskBusy(task_id, f"already has {len(queue)} messages waiting; wait for it to finish")
            new["_queue"] = queue + [{"text": text, "messageId": msg.get("messageId")}]
            return new

        _, after = await self._change(task_id, decide)
        assert after is not None
        if "turn" in taken:  # we took the answer: resume (or continue) the run here
            context = taken["context"] or str(uuid.uuid4())
            self._start(task_id, context, taken["turn"],
                        self._fulfil(task_id, context, taken["turn"], text, taken["resume"], claimed=True))
        return public(after)

    async def cancel(self, task_id: str) -> A2ATask:
        """Stop the task's run (if any) and store `canceled`; returns the canceled task."""
        running = self._running.get(task_id)
        if running is not None:
            running.cancel()
            await asyncio.wait({running})

        def decide(current: Optional[A2ATask]) -> Optional[A2ATask]:
            if current is None:
                raise TaskNotFound(task_id)
            state = _state(current)
            if state in FINISHED_STATES:
                if running is not None:  # our run just settled it (canceled, or finished first)
                    return None
                raise TaskFinished(task_id, state)
            return self._finished(current, _Outcome("canceled"))

        before, after = await self._change(task_id, decide)
        if after is None:
            return public(before or {})
        await self._observe(task_id, after, None, "canceled")
        return public(after)

    async def wait_settled(self, task_id: str, timeout: float) -> None:
        """Wait (at most `timeout` s) until the task asks a question or ends.

        A task run by this server is awaited; one run by another server on the same store is
        polled."""
        event = self._settled.get(task_id)
        try:
            if event is not None:
                await asyncio.wait_for(event.wait(), timeout)
            else:
                await asyncio.wait_for(self._poll_settled(task_id), timeout)
        except TimeoutError:
            pass

    async def _poll_settled(self, task_id: str) -> None:
        pause = 0.05
        while _state(await self.store.get(task_id)) in ACTIVE_STATES:
            event = self._settled.get(task_id)
            if event is not None:  # it is ours now
                await event.wait()
                return
            await asyncio.sleep(pause)  # another server runs it: look again, less often
            pause = min(pause * 2, 0.5)

    def in_flight(self) -> int:
        return len(self._running)

    async def stop(self, drain_timeout: float) -> None:
        """Let runs finish for `drain_timeout` s, then cancel the rest; none is left `working`.

        From the first moment of `stop()`, new tasks and answers are refused (`ServerStopping`).
        """
        self._stopping = True
        tasks = dict(self._running)
        turns = dict(self._turns)
        if not tasks:
            return
        if drain_timeout > 0:
            await asyncio.wait(set(tasks.values()), timeout=drain_timeout)
        for task in tasks.values():
            task.cancel()
        await asyncio.wait(set(tasks.values()))
        for task_id in tasks:  # a run cancelled before it began never saved its own outcome
            await self._settle(task_id, turns[task_id], _Outcome("canceled", _agent_message(_text_part(_STOPPED_TEXT))),
                               None)

    # ------------------------------------------------------------------ changing a task

    @asynccontextmanager
    async def _locked(self, task_id: str) -> AsyncIterator[None]:
        """This server's changes of one task, one at a time (forgotten when nobody holds or awaits it)."""
        lock, users = self._locks.get(task_id) or (asyncio.Lock(), 0)
        self._locks[task_id] = (lock, users + 1)
        try:
            async with lock:
                yield
        finally:
            lock, users = self._locks[task_id]
            if users > 1:
                self._locks[task_id] = (lock, users - 1)
            else:
                del self._locks[task_id]

    async def _swap(self, expected: Optional[A2ATask], task: A2ATask) -> bool:
        if isinstance(self.store, TaskStore):
            return await self.store.swap(expected, task)
        if await self.store.get(str(task["id"])) != expected:  # a duck-typed store: atomic in-process only
            return False
        await self.store.save(task)
        return True

    async def _change(self, task_id: str, decide: Decide) -> tuple[Optional[A2ATask], Optional[A2ATask]]:
        """Apply `decide` to the stored task until the write lands: `(before, after)`, `after`
        None when `decide` chose to change nothing. `decide` may raise to refuse."""
        async with self._locked(task_id):
            for _ in range(SWAP_TRIES):
                current = await self.store.get(task_id)
                new = decide(copy.deepcopy(current) if current is not None else None)
                if new is None:
                    return current, None
                if await self._swap(current, new):
                    return current, new
        raise TaskConflict(f"toolnexus: task {task_id} changed {SWAP_TRIES} times while this server tried to "
                           "update it; try again")

    def _now(self) -> str:
        stamp = datetime.fromtimestamp(self._clock(), UTC).isoformat(timespec="microseconds")
        return stamp.replace("+00:00", "Z")

    def _status(self, state: str, message: Optional[dict[str, Any]] = None) -> dict[str, Any]:
        status: dict[str, Any] = {"state": state}
        if message is not None:
            status["message"] = message
        status["timestamp"] = self._now()
        return status

    def _set_status(self, task: A2ATask, state: str, message: Optional[dict[str, Any]] = None) -> None:
        old = task.get("status")
        if isinstance(old, dict) and isinstance(old.get("message"), dict):
            moved = dict(old["message"])
            moved.setdefault("messageId", status_message_id(str(task.get("id")), old))
            _append(task, moved)
        task["status"] = self._status(state, message)

    def _finished(self, current: A2ATask, outcome: _Outcome) -> A2ATask:
        """`current` moved to a settled `outcome` (a question, or a final state)."""
        new = copy.deepcopy(current)
        if outcome.artifacts:
            new["artifacts"] = list(new.get("artifacts") or []) + outcome.artifacts
        metadata = dict(new.get("metadata") or {}) if isinstance(new.get("metadata"), dict) else {}
        metadata.pop("pending", None)
        if outcome.pending is not None:
            metadata["pending"] = outcome.pending
        if metadata:
            new["metadata"] = metadata
        else:
            new.pop("metadata", None)
        self._set_status(new, outcome.state, outcome.message)
        new.pop("_run", None)
        if outcome.state in FINISHED_STATES:
            new.pop("_queue", None)  # the queued messages stay in the history
        return new

    def _resumption(self, raw: Any, text: str) -> Optional[tuple[Request, Answer]]:
        if not isinstance(raw, Mapping):
            return None
        try:
            req = Request.from_dict(dict(raw))
        except (TypeError, ValueError):
            return None
        if is_approval_request(req):  # the reply is a decision: approve, always, reject: <why>, edit {...}
            answer = answer_from_text(req, text, by=self.answered_by, via="a2a")
            if self.answered_by is not None:  # the server knows who it let in: not who the message says
                answer = dataclasses.replace(answer, by=self.answered_by)
            return req, answer
        return req, Answer(id=req.id, ok=True, data={"text": text}, by=self.answered_by, via="a2a")

    def _check_answer(self, request: Request, answer: Answer) -> None:
        """Refuse (invalid params, the task unchanged) an answer the request would not take: first who
        gave it (only the identity this server authenticated counts), then the answer itself — unless
        the request has expired, where any answer is its expiry (the resume applies it)."""
        problem = caller_problem(request, answer, self.answered_by, self.answerers, "A2A")
        expires = expires_at_epoch(dataclasses.asdict(request))
        if problem is None and (expires is None or expires > self._clock()):
            problem = answer_problem(request, answer)
        if problem is not None:
            raise ParamError(f"message: the answer to {request.id!r} is refused: {problem}")

    # ------------------------------------------------------------------ running

    def _start(self, task_id: str, context: str, turn: str, work: Awaitable[None]) -> "asyncio.Future[None]":
        self._settled[task_id] = asyncio.Event()
        self._turns[task_id] = turn
        runner = asyncio.ensure_future(work)
        self._running[task_id] = runner
        runner.add_done_callback(lambda _t: self._forget(task_id, runner))
        return runner

    def _forget(self, task_id: str, runner: "asyncio.Task[None]") -> None:
        if self._running.get(task_id) is runner:
            del self._running[task_id]
            self._turns.pop(task_id, None)
            self._finishing.discard(task_id)
            event = self._settled.pop(task_id, None)
            if event is not None:
                event.set()
        if not runner.cancelled() and runner.exception() is not None:  # a bug of ours: never silent
            logger.warning("toolnexus: A2A task %s fulfilment failed: %r", task_id, runner.exception())

    async def _fulfil(self, task_id: str, context: str, turn: str, text: str,
                      resume: Optional[tuple[Request, Answer]], *, claimed: bool) -> None:
        try:
            if not claimed:
                def working(current: Optional[A2ATask]) -> Optional[A2ATask]:
                    if current is None or _turn(current).get("turn") != turn or _state(current) not in ACTIVE_STATES:
                        return None  # canceled before it began
                    self._set_status(current, "working")
                    return current

                _, started = await self._change(task_id, working)
                if started is None:
                    return
            while True:
                result, outcome = await self._watched(task_id, turn, self._turn_of(text, context, resume))
                if outcome is None:  # another server decided the task (canceled it): our run was stopped
                    return
                queued = await self._settle(task_id, turn, outcome, result)
                if queued is None:
                    return
                text, resume = queued, None  # a queued message: the next prompt of the same conversation
        except asyncio.CancelledError:
            why = _STOPPED_TEXT if self._stopping else None
            message = _agent_message(_text_part(why)) if why else None
            await self._settle(task_id, turn, _Outcome("canceled", message), None)
            raise
        except Exception:
            logger.warning("toolnexus: A2A task %s could not be saved", task_id, exc_info=True)

    async def _turn_of(self, text: str, context: str, resume: Optional[tuple[Request, Answer]]) -> tuple[Any, _Outcome]:
        try:
            if resume is not None:
                assert self._resume_task is not None
                result = await self._resume_task(context, *resume)
            else:
                result = await self._run_task(text, context)
            return result, self._outcome(result)
        except asyncio.CancelledError:
            raise
        except Exception as exc:
            return None, _Outcome("failed", _agent_message(_text_part(self._safe_text(exc))))

    async def _watched(self, task_id: str, turn: str,
                       work: Awaitable[tuple[Any, _Outcome]]) -> tuple[Any, Optional[_Outcome]]:
        """Run one turn, looking at the stored task every `watch_every` s: when another server has
        taken the task from this turn (canceled it), the turn is stopped and the outcome is None."""
        if self._watch_every is None:
            return await work
        job = asyncio.ensure_future(work)
        try:
            while True:
                done, _ = await asyncio.wait({job}, timeout=self._watch_every)
                if done:
                    return job.result()
                try:
                    current = await self.store.get(task_id)
                except Exception:
                    continue
                if _turn(current).get("turn") != turn:
                    job.cancel()
                    await asyncio.wait({job})
                    logger.info("toolnexus: A2A task %s was settled by another server; its run here stopped", task_id)
                    return None, None
        finally:
            if not job.done():
                job.cancel()
                await asyncio.wait({job})

    def _safe_text(self, exc: BaseException) -> str:
        text = str(exc) or type(exc).__name__
        try:
            return str(self._redact(text))
        except Exception:
            logger.debug("toolnexus: A2A redaction hook raised", exc_info=True)
            return "the task failed"

    @staticmethod
    def _outcome(result: Any) -> _Outcome:
        req = pending_request(result)
        if req is not None:
            state = "auth-required" if req.kind == "authorization" else "input-required"
            parts = [_text_part(req.prompt)]
            if state == "auth-required" and req.url:
                parts.append({"kind": "file", "file": {"uri": req.url}})
            return _Outcome(state, _agent_message(*parts), pending=dataclasses.asdict(req))
        text = getattr(result, "text", "")
        text = text if isinstance(text, str) else ("" if text is None else str(text))
        return _Outcome("completed", artifacts=[{"artifactId": str(uuid.uuid4()), "parts": [_text_part(text)]}])

    async def _settle(self, task_id: str, turn: str, outcome: _Outcome, result: Any) -> Optional[str]:
        """Save the turn's outcome if the task is still this turn's; the next queued message's
        text when the task goes on with it, else None."""
        follow: dict[str, str] = {}

        def decide(current: Optional[A2ATask]) -> Optional[A2ATask]:
            if current is None or _turn(current).get("turn") != turn or _state(current) not in ACTIVE_STATES:
                return None  # another server (or a cancel) settled it already: the first word stands
            queue = list(current.get("_queue") or [])
            follow.clear()
            if outcome.state == "completed" and queue:
                new = copy.deepcopy(current)
                new["artifacts"] = list(new.get("artifacts") or []) + outcome.artifacts
                follow["text"] = str(queue.pop(0).get("text") or "")
                if queue:
                    new["_queue"] = queue
                else:
                    new.pop("_queue", None)
                self._set_status(new, "working")
                return new
            return self._finished(current, outcome)

        if outcome.state in INTERRUPTED_STATES and task_id in self._running:
            self._finishing.add(task_id)
        _, after = await self._change(task_id, decide)
        if after is None:
            return None
        if follow:
            return follow["text"]
        await self._observe(task_id, after, result, outcome.state)
        return None

    async def _observe(self, task_id: str, task: A2ATask, result: Any, state: str) -> None:
        event = self._settled.get(task_id)
        if event is not None:
            event.set()
        if self._on_task is None:
            return
        try:
            outcome = self._on_task({"id": task_id, "task": public(task), "result": result, "state": state})
            if inspect.isawaitable(outcome):
                await outcome
        except Exception:
            logger.debug("toolnexus: A2A on_task raised (ignored)", exc_info=True)


def _append(task: A2ATask, message: dict[str, Any]) -> None:
    history = (list(task.get("history") or []) + [message])[-HISTORY_KEEP:]
    sizes = [len(json.dumps(m)) for m in history]
    while len(history) > 1 and sum(sizes) > HISTORY_BYTES:  # the oldest go first; the newest always stays
        history.pop(0)
        sizes.pop(0)
    task["history"] = history
