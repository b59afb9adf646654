"""One execution of an A2A tool: submit → poll → a `ToolResult`.

The flow, per call: budget = `ctx.timeout` (s) if given, else the agent's timeout (ms); the
clock starts; `SendMessage` (trying the peer's routes in order, falling back on "method not
found" / "version not supported"); then, while the task is not final: stop if aborted, time out
if the budget is spent, sleep `poll_every` (clipped to what is left of the budget; abortable),
stop if aborted, `GetTask`. Every RPC's HTTP timeout is the *remaining* budget (at least
`RPC_FLOOR` s), so a hung peer cannot stretch a call past its budget; an RPC that
times out yields the pinned timeout result.

Final states: `completed` → the answer text; `failed` / `canceled` / `rejected` → the pinned
`A2A task <id> <state>[: <detail>]` error; `input-required` / `auth-required` → a pending
(suspended) result whose `Request` id carries the task and context ids, so the retry with
`ctx.answer` (also in a fresh process) continues the same remote task: an answer with text
(`data["text"]` / `data["output"]`, else the data as JSON) is sent as the next message of that
task; an answer without data (authorization done out of band) just resumes polling it.

An abort (`ctx.signal`) returns the pinned canceled result and, when a remote task exists and is
not final, sends it a best-effort `CancelTask` bounded by `CANCEL_TIMEOUT` s. A
signal already set before the call sends nothing. Task cancellation (`asyncio.CancelledError`)
propagates untouched. Every result carries the pinned `metadata` keys `agent`, `taskId`,
`state`, `polls`, `ms` (a pending result also has `pending`).

Time (the budget, poll sleeps) is read from an injectable clock (real time by default). Polling needs
only a reading and a sleep (`toolnexus.client.Timer`), so any toolnexus clock fits, a runtime's
included, and tests inject one whose `sleep` just advances `now`.
Every wait races `ctx.signal` through `toolnexus._abort.unless_aborted`: an `asyncio.Event` wakes
it at once, any other signal is checked at least every 20 ms of real time.
"""

from __future__ import annotations

import json
from typing import Any, Optional
from urllib.parse import quote, unquote

import httpx

from .._abort import Aborted, unless_aborted
from .._clock import Timer
from .._env import expand_headers
from ..types import Answer, ToolResult, new_request_id, pending, signal_fired
from ._descriptor import TERMINAL, RemoteAgent
from ._peer import METHOD_NOT_FOUND, VERSION_NOT_SUPPORTED, Peer, Route, RpcError, rpc
from ._wire import (
    A2ATask,
    completed_output,
    parts_text,
    status_text,
    status_url,
    task_state,
    unwrap_send_result,
)

RPC_FLOOR = 0.2  # seconds: the least time one RPC gets, even when the budget is (nearly) spent
CANCEL_TIMEOUT = 2.0  # seconds for the best-effort CancelTask after an abort
INTERRUPTED = frozenset({"input-required", "auth-required"})
FINAL = TERMINAL | {"rejected"} | INTERRUPTED
_FALLBACK_CODES = (METHOD_NOT_FOUND, VERSION_NOT_SUPPORTED)
_RESUME_PREFIX = "a2a"
_SPENT_MS = 1e-3  # a budget with less than a microsecond left is spent (float sums of sleeps drift)


def resume_id(task_id: str, context_id: str) -> str:
    """A `Request` id that names the interrupted task: `a2a-<hex ms>-<n>:<task>:<context>`."""
    return f"{new_request_id(_RESUME_PREFIX)}:{quote(task_id, safe='')}:{quote(context_id, safe='')}"


def parse_resume_id(request_id: Any) -> Optional[tuple[str, str]]:
    """`(task_id, context_id)` from an id made by `resume_id`, else None."""
    if not isinstance(request_id, str) or not request_id.startswith(_RESUME_PREFIX + "-") or request_id.count(":") != 2:
        return None
    _, task_id, context_id = request_id.split(":")
    return unquote(task_id), unquote(context_id)


def _answer_text(answer: Optional[Answer]) -> Optional[str]:
    """What to tell the agent after a suspension: `data["text"]` / `data["output"]`, else the data
    as JSON; None when the answer carries no data."""
    data = answer.data if answer is not None else None
    if not data:
        return None
    for key in ("text", "output"):
        if isinstance(data.get(key), str):
            return data[key]
    return json.dumps(data)


class TaskCall:
    """The state of one execution; `run()` drives it to a `ToolResult`."""

    def __init__(self, ag: RemoteAgent, peer: Peer, clock: Timer, args: Optional[dict[str, Any]], ctx: Any) -> None:
        self.ag, self.peer, self.clock = ag, peer, clock
        timeout = getattr(ctx, "timeout", None)
        self.budget_ms = ag.budget_ms() if timeout is None else float(timeout) * 1000.0
        self.poll_ms = ag.poll_ms()
        self.signal = getattr(ctx, "signal", None)
        self.answer: Optional[Answer] = getattr(ctx, "answer", None)
        self.text = str((args or {}).get("task") or "")
        self.user_headers = expand_headers(ag.headers)
        self.start = clock.now()
        self.task_id = ""
        self.context_id = ""
        self.state = "submitted"
        self.task: A2ATask = {}
        self.polls = 0
        self.route: Optional[Route] = None

    # ------------------------------------------------------------------ driving

    async def run(self) -> ToolResult:
        if signal_fired(self.signal):
            return self._canceled()
        try:
            return await self._drive()
        except Aborted:
            return await self._abort()
        except httpx.TimeoutException:
            return await self._abort() if signal_fired(self.signal) else self._timed_out()
        except Exception as exc:
            if signal_fired(self.signal):
                return await self._abort()
            return self._result(str(exc) or type(exc).__name__, True)

    async def _drive(self) -> ToolResult:
        early = await self._begin()
        if early is not None:
            return early
        while self.state not in FINAL:
            if signal_fired(self.signal):
                raise Aborted()
            left = self._left_ms()
            if left < _SPENT_MS:
                return self._timed_out()
            await unless_aborted(self.clock.sleep(min(self.poll_ms, left) / 1000.0), self.signal)
            if signal_fired(self.signal):
                raise Aborted()
            assert self.route is not None
            reply = await self._rpc(self.route, self.route.dialect.get_method,
                                    self.route.dialect.task_params(self.task_id, self.route.tenant))
            self.polls += 1
            task, _ = unwrap_send_result(reply)
            self._absorb(task or {}, default_state=self.state)
        return self._final()

    async def _begin(self) -> Optional[ToolResult]:
        """Submit the task — or, on the retry after a suspension, continue the interrupted one."""
        answer = self.answer if self.answer is not None and self.answer.ok else None
        resume = parse_resume_id(answer.id) if answer is not None else None
        if resume is None:
            reply = await self._submit(self.text, "", self.ag.context_id or "")
        else:
            follow_up = _answer_text(answer)
            if follow_up is None:  # nothing to say (e.g. signed in out of band): watch the task again
                self.task_id, self.context_id = resume
                self.route, self.state = self.peer.current, "working"
                return None
            reply = await self._submit(follow_up, *resume)
        task, message = unwrap_send_result(reply)
        if message is not None:
            return self._direct_message(message)
        self._absorb(task or {}, default_state="submitted")
        return None

    async def _submit(self, text: str, task_id: str, context_id: str) -> Any:
        routes = self.peer.in_order()
        for i, route in enumerate(routes):
            params = route.dialect.send_params(text, blocking=self.ag.blocking, context_id=context_id or None,
                                               task_id=task_id or None, tenant=route.tenant)
            try:
                reply = await self._rpc(route, route.dialect.send_method, params)
            except RpcError as exc:
                if exc.code in _FALLBACK_CODES and i + 1 < len(routes):
                    continue
                raise
            self.peer.prefer(route)
            self.route = route
            return reply
        raise AssertionError("unreachable: a peer always has at least one route")

    async def _rpc(self, route: Route, method: str, params: dict[str, Any], *, timeout_s: Optional[float] = None,
                   abortable: bool = True) -> Any:
        """One RPC: `Content-Type`, then the dialect's headers, then the user's (user wins)."""
        headers = httpx.Headers({"Content-Type": "application/json"})
        headers.update(dict(route.dialect.headers))
        headers.update(self.user_headers)
        if timeout_s is None:
            timeout_s = max(self._left_ms() / 1000.0, RPC_FLOOR)
        exchange = rpc(route.url, method, params, headers, timeout_s)
        return await unless_aborted(exchange, self.signal if abortable else None)

    def _absorb(self, task: A2ATask, default_state: str) -> None:
        if task:
            self.task = task
        if isinstance(task.get("id"), str) and task["id"] and not self.task_id:
            self.task_id = task["id"]
        if isinstance(task.get("contextId"), str) and task["contextId"]:
            self.context_id = task["contextId"]
        self.state = task_state(task) or default_state

    async def _abort(self) -> ToolResult:
        """Best-effort remote cancel, then the pinned canceled result."""
        route = self.route
        if self.task_id and route is not None and self.state not in FINAL:
            try:
                await self._rpc(
                    route,
                    route.dialect.cancel_method,
                    route.dialect.task_params(self.task_id, route.tenant),
                    timeout_s=CANCEL_TIMEOUT,
                    abortable=False,
                )
            except Exception:
                pass
        return self._canceled()

    # ------------------------------------------------------------------ results

    def _elapsed_ms(self) -> float:
        return (self.clock.now() - self.start) * 1000.0

    def _left_ms(self) -> float:
        return self.budget_ms - self._elapsed_ms()

    def _metadata(self) -> dict[str, Any]:
        return {"agent": self.peer.name, "taskId": self.task_id, "state": self.state, "polls": self.polls,
                "ms": int(self._elapsed_ms())}

    def _result(self, output: str, is_error: bool) -> ToolResult:
        return ToolResult(output=output, is_error=is_error, metadata=self._metadata())

    def _canceled(self) -> ToolResult:
        self.state = "canceled"
        return self._result(f"A2A task {self.task_id} canceled", True)

    def _timed_out(self) -> ToolResult:
        return self._result(
            f"A2A task {self.task_id} timed out after {int(self.budget_ms)}ms (state={self.state})", True
        )

    def _direct_message(self, message: dict[str, Any]) -> ToolResult:
        """The peer answered with a Message instead of a Task: that text is the answer."""
        task_id = message.get("taskId")
        self.task_id = task_id if isinstance(task_id, str) else ""
        self.state = "completed"
        return self._result("\n".join(parts_text(message.get("parts"))), False)

    def _final(self) -> ToolResult:
        if self.state == "completed":
            return self._result(completed_output(self.task), False)
        if self.state in INTERRUPTED:
            return self._pending()
        detail = status_text(self.task)
        return self._result(f"A2A task {self.task_id} {self.state}" + (f": {detail}" if detail else ""), True)

    def _pending(self) -> ToolResult:
        """input-required / auth-required → a suspension the host can answer."""
        prompt = status_text(self.task) or f"A2A task {self.task_id} {self.state}"
        kind = "authorization" if self.state == "auth-required" else "input"
        result = pending(kind=kind, prompt=prompt, id=resume_id(self.task_id, self.context_id),
                         url=status_url(self.task),
                         data={"agent": self.peer.name, "taskId": self.task_id, "contextId": self.context_id,
                               "state": self.state})
        assert result.metadata is not None
        result.metadata.update(self._metadata())
        return result
