"""Relay (declaration-only) tools: the model sees a schema, the *host* runs the call.

A relay tool suspends on its first execution with a `kind="tool_call"` Request whose
`data["calls"]` describes the call; the host executes it wherever it likes and answers with
`relay_answer(id, results)` (or the single-call shorthand `{"output", "isError"}`). In process,
the answer comes through `wait_for` and the retry reads it; durably, `Client.run_with_answer`
fills the results into the transcript.

This module is the tool-level half only: the loop stamps provider call ids into the blank `id`
of each call and merges the calls of several relay suspensions of one turn.
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import Any, Optional, Union

from .types import Answer, JSONSchema, Request, Tool, ToolContext, ToolResult, pending

__all__ = [
    "RELAY_KIND",
    "RelayCall",
    "RelayResult",
    "relay_tool",
    "is_relay_request",
    "relay_calls_of",
    "relay_answer",
    "relay_prompt",
    "no_result_text",
    "relay_declined_text",
    "relay_output_of",
]

RELAY_KIND = "tool_call"


@dataclass
class RelayCall:
    """One relayed call: provider call id, tool name, parsed input and the raw arguments string."""

    id: str
    name: str
    input: dict[str, Any]
    arguments: str


@dataclass
class RelayResult:
    """The host's result for one relayed call (wire key of `is_error` is `isError`)."""

    id: str
    output: str
    is_error: bool = False


def relay_prompt(name: str) -> str:
    return f"relay tool call {name} to the caller for execution"


def no_result_text(name: str) -> str:
    return f"no result supplied on resume for {name}"


def relay_declined_text(name: str, reason: Optional[str]) -> str:
    """What a relayed call gets when its durable answer is not ok."""
    return f"relay declined for {name}: {reason or 'declined'}"


def relay_output_of(
    name: str, call_id: Optional[str], data: Optional[Mapping[str, Any]], *, first: bool = True
) -> ToolResult:
    """The result for one relayed call read from an Answer's `data`.

    `data["results"]` is searched by call id; when the id is unknown (`call_id=None`: the
    in-process retry, which does not see its provider id) a single entry is accepted for the first
    call. The shorthand `{"output", "isError"}` applies to the first call only. A missing or
    non-string output yields the pinned `no result supplied on resume for <name>` error.
    """
    data = data or {}
    entry: Any = None
    results = data.get("results")
    if isinstance(results, list):
        entry = next((r for r in results if isinstance(r, Mapping) and r.get("id") == call_id), None)
        if entry is None and call_id is None and len(results) == 1 and first and isinstance(results[0], Mapping):
            entry = results[0]
    elif first:
        entry = data
    if not isinstance(entry, Mapping) or not isinstance(entry.get("output"), str):
        return ToolResult(output=no_result_text(name), is_error=True)
    return ToolResult(output=entry["output"], is_error=entry.get("isError") is True)


def relay_tool(name: str, description: str, schema: Optional[JSONSchema] = None) -> Tool:
    """A tool with a schema and no behaviour: its calls travel to the host (source `relay`)."""
    input_schema = schema if schema is not None else {"type": "object", "properties": {}}

    async def execute(args: Optional[dict[str, Any]] = None, ctx: Optional[ToolContext] = None) -> ToolResult:
        args = dict(args or {})
        if ctx is not None and ctx.answer is not None:
            return relay_output_of(name, None, ctx.answer.data)
        call = {"id": "", "name": name, "input": args,
                "arguments": json.dumps(args, separators=(",", ":"), ensure_ascii=False)}
        return pending(kind=RELAY_KIND, prompt=relay_prompt(name), data={"calls": [call]})

    return Tool(name=name, description=description, input_schema=input_schema, source="relay", execute=execute)


def is_relay_request(request: Optional[Request]) -> bool:
    return request is not None and request.kind == RELAY_KIND


def relay_calls_of(request: Optional[Request]) -> list[RelayCall]:
    """The calls a relay request carries, in order; `[]` for any other request."""
    if not is_relay_request(request):
        return []
    out = []
    for c in (request.data or {}).get("calls") or []:  # type: ignore[union-attr]
        if isinstance(c, Mapping):
            out.append(RelayCall(id=str(c.get("id") or ""), name=str(c.get("name") or ""),
                                 input=dict(c.get("input") or {}), arguments=str(c.get("arguments") or "")))
    return out


def relay_answer(id: str, results: Iterable[Union[RelayResult, Mapping[str, Any]]]) -> Answer:
    """An ok Answer carrying one result per relayed call."""
    out = []
    for r in results:
        if isinstance(r, RelayResult):
            out.append({"id": r.id, "output": r.output, "isError": r.is_error})
        else:
            out.append({"id": str(r.get("id", "")), "output": r.get("output"),
                        "isError": bool(r.get("isError", r.get("is_error", False)))})
    return Answer(id=id, ok=True, data={"results": out})
