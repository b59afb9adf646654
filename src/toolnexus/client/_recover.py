"""Continue a run that a crash cut short, from its stored transcript and its run journal.

`continue_run(provider, keeper, toolkit, id, calls)` (`Client.continue_run`) is what a durable
agent runtime calls for a handle
that was running when its process died. The transcript under `id` is as the last commit left
it; `calls` are the journal rows of that conversation (`_journal.py`), keyed by call id. If the
transcript ends with an open tool-call turn, it is filled first:

| journal row | what happens |
|---|---|
| `finished` | the recorded result is used; the tool does not run again |
| `queued` (a halted call with its answer) | it runs now with that answer (it never started) |
| `started`, tool declared `idempotent` | it runs again |
| `started`, any other tool | it becomes a suspension of kind `in_doubt` naming the tool and its arguments; answer ok ⇒ it runs again as a new call, declined ⇒ the model is told it was not run |
| none | it never started: it runs |

Then the loop continues with no new user turn, so an LLM call the crash cut is simply sent again.
A halted slot being re-filled by a resume (its call has a journal row) is re-filled the same way;
earlier results stay byte for byte.

Not here: deciding which handles to recover (the agent runtime) or the journal itself.
"""  # noqa: E501 - Markdown tables, one row per line

from __future__ import annotations

import asyncio
from dataclasses import dataclass
from typing import Any, AsyncGenerator, Optional

from ..types import Answer, Request, ToolResult, pending_of
from ._journal import FINISHED, QUEUED, STARTED, in_doubt_request, result_from_record
from ._loop import Prelude, RunLoop, drain
from ._provider import Provider
from ._result import RunResult, Toolset
from ._resume import Conversations
from ._tool_calls import CallOutcome, resolve_with_answer
from ._wire.base import ResultEntry, ToolCall, WireDialect


@dataclass
class _OpenTurn:
    index: int  # of the assistant message
    calls: list[ToolCall]
    kept: list[dict[str, Any]]  # results kept as they are
    open: list[ToolCall]


def open_turn(dialect: WireDialect, history: list[dict[str, Any]],
              calls: dict[str, dict[str, Any]]) -> Optional[_OpenTurn]:
    """The last tool-call turn if some of its calls still need a result, else None."""
    for index in range(len(history) - 1, -1, -1):
        message = history[index]
        if isinstance(message, dict) and message.get("role") == "assistant":
            turn_calls = dialect.assistant_calls(message)
            if turn_calls:
                break
            return None  # the last assistant message has no calls: nothing is open
    else:
        return None
    results, rest = dialect.split_results(history[index + 1:])
    if rest:
        return None
    ids = [c.id for c in turn_calls]
    got = [r.get(dialect.result_id_key) for r in results]
    if got != ids[: len(got)]:
        return None
    kept = len(got)
    if kept and ids[kept - 1] in calls:  # a halted slot being re-filled by a resume
        kept -= 1
    if kept == len(ids):
        return None
    return _OpenTurn(index, turn_calls, results[:kept], turn_calls[kept:])


def _idempotent(toolkit: Optional[Toolset], name: str) -> bool:
    tool = toolkit.get(name) if toolkit is not None else None
    return tool is not None and tool.idempotent


async def _settled(loop: RunLoop, turn: _OpenTurn, calls: dict[str, dict[str, Any]]) -> dict[int, CallOutcome]:
    """What the journal decides for the open calls (see the module docstring)."""
    out: dict[int, CallOutcome] = {}
    runner = loop.runner(0)
    for pos, call in enumerate(turn.open):
        row = calls.get(call.id)
        if not isinstance(row, dict):
            continue
        recorded = row.get("args")
        args: dict[str, Any] = recorded if isinstance(recorded, dict) else call.args
        status = row.get("status")
        if status == FINISHED and isinstance(row.get("result"), dict):
            result = result_from_record(row["result"])
            out[pos] = CallOutcome(call, args, result, pending_of(result))
        elif status == QUEUED and isinstance(row.get("answer"), dict) and isinstance(row.get("request"), dict):
            request, answer = Request.from_dict(row["request"]), Answer.from_dict(row["answer"])
            halted = CallOutcome(call, args, ToolResult(request.prompt, True, {"pending": request}), request)
            out[pos] = CallOutcome(call, args, await loop.bounded(resolve_with_answer(runner, halted, answer)))
        elif status == STARTED and not _idempotent(loop.toolkit, call.name):
            request = in_doubt_request(call, args)
            result = ToolResult(request.prompt, True, {"pending": request})
            if loop.journal is not None:
                await loop.journal.call_finished(call, result)
            out[pos] = CallOutcome(call, args, result, request)
    return out


def _prelude(turn: _OpenTurn, calls: dict[str, dict[str, Any]]) -> Prelude:
    async def prelude(loop: RunLoop) -> AsyncGenerator[dict[str, Any], None]:
        loop.abort.check()
        settled = await _settled(loop, turn, calls)

        def write(entries: list[ResultEntry]) -> None:
            loop.messages = loop.dialect.rewrite_results(loop.messages, turn.index, turn.kept, entries)

        async for event in loop.tool_turn(turn.open, 0, write, settled=settled):
            yield event

    return prelude


async def continue_run(provider: Provider, keeper: Conversations, toolkit: Optional[Toolset], id: str,
                       calls: dict[str, dict[str, Any]], *, cancel: Optional[asyncio.Event] = None) -> RunResult:
    """Continue the run stored under `id` after a crash (see the module docstring)."""
    async with keeper.lock(id):
        history = await keeper.store.get(id) or []
        loop = RunLoop(provider, toolkit, cancel, streaming=False, journal=keeper.journal(id),
                       approvals=keeper.scope(id)).continue_from(history)
        turn = open_turn(loop.dialect, history, calls)
        result = await drain(loop.events(prelude=_prelude(turn, calls) if turn is not None else None))
        await keeper.save(id, result)
    return result
