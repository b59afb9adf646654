"""`TurnJournal`: what one turn's client reports to (see `toolnexus.client._journal`).

The run's start, each tool call before it runs and after it finished, the results once they are in
the transcript: each is staged in the durable run (the entries ride in the handle's record) and
committed — awaited before a side effect, otherwise in the background, overlapping the LLM call
that follows. It also notes which call each suspension came from, so a parked handle's
`Suspension` names its `tool_call_id` — with or without a store.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any, Callable, Optional

from ..._write_ahead import WriteAhead
from ...client._journal import FINISHED, QUEUED, STARTED, call_entry
from ...types import Answer, Request, ToolResult, pending_of
from ._run import DurableRun
from ._scheduler import BACKGROUND_COMMIT_DELAY

if TYPE_CHECKING:  # pragma: no cover
    from ...client._wire.base import ToolCall
    from .._handle import Handle


def _never(name: str) -> bool:
    return False


class TurnJournal:
    """The run journal of one turn's client (see the module docstring).

    Without a store (`durable` None) it only notes which call each suspension came from (`halted`);
    with one, it stages the transcript and the call's entry and commits before the loop goes on.
    `on_checkpoint` stages the handle's own checkpoint; `idempotent(name)` says a tool may run
    twice (its start then need not be on disk before it runs)."""

    def __init__(self, durable: Optional[DurableRun], h: "Handle", on_checkpoint: Callable[[], None],
                 idempotent: Callable[[str], bool] = _never) -> None:
        self._durable = durable
        self._conv = h.id
        self._handle = h
        self._on_checkpoint = on_checkpoint
        self._idempotent = idempotent
        self.halted: dict[str, ToolCall] = {}  # request id → the call that minted it

    def journal(self, conv: str) -> Optional["TurnJournal"]:
        return self if conv == self._conv else None

    async def _commit(self, messages: Optional[list[dict[str, Any]]], *, wait: bool) -> None:
        """Stage, then commit: awaited before a side effect (`wait`), otherwise in the background,
        overlapping the LLM call that follows — a crash that beats such a commit only makes the
        recovery more careful (the LLM asked again, a finished call asked about), never wrong."""
        durable = self._stage(messages)
        if wait:
            await durable.flush()
        else:
            durable.schedule(BACKGROUND_COMMIT_DELAY)

    def _stage(self, messages: Optional[list[dict[str, Any]]]) -> DurableRun:
        """Stage the transcript (if given) and this handle's checkpoint; the run they go to."""
        durable = self._durable
        assert durable is not None
        if messages is not None:
            durable.stage_conversation(self._conv, messages)
        self._on_checkpoint()
        return durable

    async def run_started(self, messages: list[dict[str, Any]]) -> None:
        if self._durable is None:
            return
        if self._handle.turn_info is not None:
            self._handle.turn_info["started"] = True
        self._durable.touch(self._handle)
        await self._commit(messages, wait=False)

    async def call_queued(self, messages: list[dict[str, Any]], call: "ToolCall", request: Request,
                          answer: Answer) -> None:
        if self._durable is None:
            return
        self._durable.stage_call(self._handle, call.id, call_entry(QUEUED, call, call.args, answer=answer,
                                                                 request=request))
        await self._commit(messages, wait=True)

    async def call_started(self, messages: list[dict[str, Any]], call: "ToolCall",
                           args: dict[str, Any]) -> Optional[WriteAhead]:
        if self._durable is None:
            return None
        self._durable.stage_call(self._handle, call.id, call_entry(STARTED, call, args))
        # Only a call that must not run twice needs its start on disk before it runs; an idempotent
        # one found without a result after a crash simply runs again.
        if self._idempotent(call.name):
            await self._commit(messages, wait=False)
            return None
        return await self._stage(messages).write_ahead()

    async def call_finished(self, call: "ToolCall", result: ToolResult) -> None:
        request = pending_of(result)
        if request is not None:
            self.halted.setdefault(request.id, call)
        if self._durable is None:
            return
        self._durable.stage_call(self._handle, call.id, call_entry(FINISHED, call, call.args, result=result))
        await self._commit(None, wait=False)

    def results_written(self, messages: list[dict[str, Any]], call_ids: list[str]) -> None:
        if self._durable is None:
            return
        self._durable.stage_conversation(self._conv, messages)
        for call_id in call_ids:
            self._durable.stage_call(self._handle, call_id, None)
        self._durable.schedule(BACKGROUND_COMMIT_DELAY)
