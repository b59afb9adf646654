"""The state of one admitted turn, as plain data: `TurnState` and what a resumed turn carries.

A leaf of `agents/` (it imports nothing of the runtime): the core, the turn body, escalation and
the `task` tool all read and write a turn through this one shape, and `handle.LiveTurn` is the
part of it the handle tree needs. Kinds of turn besides a plain wake:

- `Continuation`: a durable resume that continues the halted turn (the client fills the halted
  slot from the Answer) instead of replaying it;
- `Recovery`: a turn brought back after a crash, from the journal;
- `ReplayBinding`: the Answer of a replayed resume and the one call it answers.
"""

from __future__ import annotations

import asyncio
import dataclasses
import json
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Callable, Optional

from ..client import ResumeError
from ..types import Answer, Request
from ._gate import TurnMeter
from ._suspension import Suspension

if TYPE_CHECKING:  # pragma: no cover
    from ._durable import TurnJournal
    from ._handle import TaskResult


def _canonical(value: Any) -> str:
    try:
        return json.dumps(value, sort_keys=True, separators=(",", ":"), default=repr)
    except (TypeError, ValueError):
        return repr(value)


def same_args(a: Any, b: Any) -> bool:
    """Structural equality of two argument payloads (key order ignored)."""
    return _canonical(a) == _canonical(b)


def _same_question(a: Request, b: Request) -> bool:
    """Two requests ask the same thing: kind, prompt, url and data (ignoring the stamped path)."""

    def data_of(r: Request) -> dict[str, Any]:
        return {k: v for k, v in (r.data or {}).items() if k != "path"}

    return a.kind == b.kind and a.prompt == b.prompt and a.url == b.url and same_args(data_of(a), data_of(b))


@dataclasses.dataclass
class ReplayBinding:
    """The `Answer` of a durable resume and the call it answers; it can be used once.

    `call` is `{"name", "args"}` of the halted call when the suspension came from a tool (the
    binding then resolves inside the toolkit, `held` being the request the host answered); for a
    suspension minted by a `before_tool` hook, `request` is the original question and the binding
    resolves through the client's `wait_for`.
    """

    answer: Answer
    call: Optional[dict[str, Any]] = None
    request: Optional[Request] = None
    used: bool = False
    held: Optional[Request] = None

    def claims_call(self, name: str, args: Any) -> bool:
        if self.used or self.call is None:
            return False
        return self.call.get("name") == name and same_args(self.call.get("args"), args)

    def claims_request(self, req: Request) -> bool:
        if self.used or self.request is None:
            return False
        return _same_question(self.request, req)


@dataclass
class Continuation:
    """A durable resume that continues the halted turn instead of replaying it.

    `request` / `answer` are what `client.ask_with_answer` checks and applies; `held` is the
    handle's `Suspension` as it was, put back if the client refuses the answer.
    """

    request: Request
    answer: Answer
    held: Optional[Suspension]


@dataclass
class Recovery:
    """A turn brought back after a crash: the conversation's journal rows, and whether its run
    had started (its user turn is in the stored transcript)."""

    calls: dict[str, dict[str, Any]]
    started: bool


class TurnState:
    """One admitted turn of a handle: live, runtime-private, never persisted.

    `replay` marks a turn whose `task` calls may reattach (a resume or a recovery); `binding` is
    the durable Answer bound to the halted call; `abort` is the reason an interrupt/close
    cancelled it; `result` is set once, when the turn is settled.
    """

    def __init__(self, input: str, *, meter: TurnMeter,
                 one_shot: Optional[Callable[[Request], Any]] = None, binding: Optional[ReplayBinding] = None,
                 replay: bool = False, continuation: Optional[Continuation] = None,
                 recovery: Optional[Recovery] = None) -> None:
        self.input = input
        self.meter = meter
        self.one_shot = one_shot
        self.binding = binding
        self.replay = replay or continuation is not None or recovery is not None
        self.continuation = continuation
        self.recovery = recovery
        self.refusal: Optional[ResumeError] = None  # a continuation the client refused
        self.abort: Optional[str] = None
        self.ask_task: Optional[asyncio.Future[Any]] = None
        self.result: Optional[TaskResult] = None
        self.finished = asyncio.Event()
        self.tool_minted: set[str] = set()
        self.reattach_cursor: dict[str, int] = {}
        self.reattached: set[str] = set()
        self.journal: Optional[TurnJournal] = None
        self.snapshot: Optional[list[dict[str, Any]]] = None  # the stored transcript at the turn's start
        self.final_messages: Optional[list[dict[str, Any]]] = None  # what the client saved (with a store)

    @property
    def settled(self) -> bool:
        return self.result is not None

    @property
    def continued(self) -> bool:
        """The turn goes on from a kept transcript (a continuation or a recovery)."""
        return self.continuation is not None or self.recovery is not None

    def cancel(self, reason: str) -> None:
        """Abort the turn (`reason` is "interrupted" or "closed"): cancel its ask, if it started."""
        self.abort = reason
        if self.ask_task is not None:
            self.ask_task.cancel()
