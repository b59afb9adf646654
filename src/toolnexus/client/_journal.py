"""The run journal: where the loop tells a durable store what it is about to do, mid-run.

A run that holds a transcript in memory until it ends cannot survive a crash in the middle. With
a journal (a durable store offers one per conversation), the loop reports the points that make a
crash recoverable, and the store commits them before the loop goes on:

- `run_started(messages)`: the new user turn is in the transcript (a crash during the first LLM
  call can send it again);
- `call_queued(messages, call, request, answer)`: a halted call is about to be re-run with the
  host's answer (durable resume), so a crash before it starts still runs it exactly once;
- `call_started(messages, call, args)`: the tool is about to run — committed *before* the side
  effect, so a crash while it runs is known: the call is *in doubt*. It may return a prepared
  `WriteAhead` instead, which the tool runner has written before the tool acts (on the tool's
  own worker thread when it runs a plain function: see `toolnexus._write_ahead`);
- `call_finished(call, result)`: its outcome, committed before the loop uses it;
- `results_written(messages, call_ids)`: the turn's results are in the transcript (the journal
  rows of those calls can go); staged, written with the next commit.

`messages` is the loop's transcript at that point; the journal writes only what is new.

After a crash, `_recover.py` rebuilds the open tool-call turn from these rows: finished calls keep
their recorded result, calls that never started run, a queued call runs with its answer, and a
call that started but recorded nothing is not run again silently — it becomes a request of kind
`in_doubt` (answer ok ⇒ run it again; declined ⇒ the model is told it was not run), unless its
tool is declared `idempotent`, which simply runs again.

Not here: the store side (`toolnexus.agents._durable`, `toolnexus.stores`).
"""

from __future__ import annotations

import json
from dataclasses import asdict
from typing import Any, Optional, Protocol, runtime_checkable

from .._write_ahead import WriteAhead
from ..types import Answer, Request, ToolResult, new_request_id
from ._wire.base import ToolCall

IN_DOUBT_KIND = "in_doubt"
QUEUED = "queued"
STARTED = "started"
FINISHED = "finished"


@runtime_checkable
class RunJournal(Protocol):
    async def run_started(self, messages: list[dict[str, Any]]) -> None: ...

    async def call_queued(self, messages: list[dict[str, Any]], call: ToolCall, request: Request,
                          answer: Answer) -> None: ...

    async def call_started(self, messages: list[dict[str, Any]], call: ToolCall,
                           args: dict[str, Any]) -> Optional[WriteAhead]: ...

    async def call_finished(self, call: ToolCall, result: ToolResult) -> None: ...

    def results_written(self, messages: list[dict[str, Any]], call_ids: list[str]) -> None: ...


def result_record(result: ToolResult) -> dict[str, Any]:
    """A tool result as plain JSON (a suspension's `Request` as its dict)."""
    meta = result.metadata
    if isinstance(meta, dict) and isinstance(meta.get("pending"), Request):
        meta = {**meta, "pending": asdict(meta["pending"])}
    try:
        json.dumps(meta)
    except (TypeError, ValueError):
        meta = {"unserializable": repr(meta)[:500]}
    return {"output": result.output, "is_error": bool(result.is_error), "metadata": meta, "parts": result.parts}


def result_from_record(rec: dict[str, Any]) -> ToolResult:
    meta = rec.get("metadata")
    if isinstance(meta, dict) and isinstance(meta.get("pending"), dict):
        meta = {**meta, "pending": Request.from_dict(meta["pending"])}
    return ToolResult(str(rec.get("output", "")), bool(rec.get("is_error")), meta, rec.get("parts"))


def call_entry(status: str, call: ToolCall, args: dict[str, Any], *, answer: Optional[Answer] = None,
               request: Optional[Request] = None, result: Optional[ToolResult] = None) -> dict[str, Any]:
    """One journal row: a call's state, name and the arguments it runs with."""
    entry: dict[str, Any] = {"status": status, "name": call.name, "args": args}
    if answer is not None:
        entry["answer"] = asdict(answer)
    if request is not None:
        entry["request"] = asdict(request)
    if result is not None:
        entry["result"] = result_record(result)
    return entry


def in_doubt_request(call: ToolCall, args: dict[str, Any]) -> Request:
    """The question a call in doubt asks the host: run it again or not?"""
    shown = json.dumps(args, ensure_ascii=False, sort_keys=True)
    if len(shown) > 300:
        shown = shown[:299] + "…"
    prompt = (f"The tool {call.name} was running with arguments {shown} when the process stopped, and no result "
              "was recorded: it may or may not have taken effect. Run it again?")
    return Request(id=new_request_id(), kind=IN_DOUBT_KIND, prompt=prompt,
                   data={"tool": call.name, "arguments": args, "tool_call_id": call.id})


def not_run_text(name: str) -> str:
    """What the model is told when the host declines to re-run a call in doubt."""
    return (f"not run: the tool {name} was interrupted before its result was recorded, and running it again was "
            "declined; it may or may not have taken effect")
