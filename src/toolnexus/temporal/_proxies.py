"""The workflow side of the activity seam: the LLM transport and the tools an agent sees inside a
workflow, each call one activity.

- `ActivityTransport` is the `HttpTransport` of a workflow-run `AgentRuntime`: its `post` runs
  the LLM-call activity (the worker's real transport does the HTTP); the request goes into
  history with the API key replaced by a placeholder the activity swaps back, so the key is never
  stored. A request over the payload limit is refused before it is sent (`PayloadTooLarge`), and
  an LLM call that failed for good becomes `LLMCallFailed` with the provider's message, which
  ends the turn in error as the same failure would in-process. Streaming is not offered.
- `proxy_tool(agent, tool)` is the same `Tool` whose `execute` runs the tool-call activity. An
  idempotent tool retries by policy; any other tool runs at most once, and when its outcome is
  unknown (its worker died, it timed out) the call becomes a suspension of kind `in_doubt` naming
  the tool and its arguments, as a crash does with a durable store: the host answers ok (the tool
  runs again, as a new call) or declines (the model is told it was not run). The request id of
  such a question comes from the workflow's deterministic random source, so a replay mints the
  same one.

The `task` tool is not proxied: delegation is runtime state (handles, budgets, task keys) and runs
inside the workflow, with each child's LLM and tool calls activities of their own.
"""

from __future__ import annotations

import asyncio
import dataclasses
import json
from datetime import timedelta
from typing import Any, Optional

from temporalio import workflow
from temporalio.exceptions import ActivityError, ApplicationError, CancelledError, TimeoutError

from ..client._journal import in_doubt_request, result_from_record
from ..client._wire.base import ToolCall
from ..errors import UnsupportedOperation
from ..types import Tool, ToolContext, ToolResult
from ._errors import LLMCallFailed, PayloadTooLarge
from ._names import LLM_ACTIVITY, TOOL_ACTIVITY
from ._options import TemporalOptions

#: ApplicationError types the activities raise for failures that retrying cannot fix.
NON_RETRYABLE = "toolnexus.NonRetryable"
TOOL_MISSING = "toolnexus.ToolMissing"
PAYLOAD_TOO_LARGE = "toolnexus.PayloadTooLarge"
_KNOWN_FAILURES = (NON_RETRYABLE, TOOL_MISSING, PAYLOAD_TOO_LARGE)


def encoded_size(value: Any) -> int:
    """Bytes of `value` as the default JSON payload converter writes it (near enough)."""
    return len(json.dumps(value, separators=(",", ":"), ensure_ascii=False, default=str).encode("utf-8"))


def check_payload(value: Any, what: str, limit: Optional[int]) -> None:
    if limit is None:
        return
    size = encoded_size(value)
    if size > limit:
        raise PayloadTooLarge(what, size, limit)


def _failure_text(exc: ActivityError) -> str:
    cause = exc.cause
    if isinstance(cause, ApplicationError):
        return cause.message
    if isinstance(cause, TimeoutError):
        return f"timed out ({cause.type.name.lower().replace('_', '-') if cause.type else 'timeout'})"
    return str(cause or exc)


def _cancelled(exc: ActivityError) -> bool:
    return isinstance(exc.cause, CancelledError)


class ActivityTransport:
    """The transport of a workflow-run runtime: every `post` is one LLM-call activity."""

    def __init__(self, options: TemporalOptions) -> None:
        self._options = options

    async def post(self, url: str, headers: dict[str, str], payload: dict[str, Any], timeout: float) -> Any:
        call = {"url": url, "headers": dict(headers), "payload": payload, "timeout": timeout}
        check_payload(call, "the LLM request", self._options.max_payload_bytes)
        opts = self._options
        try:
            return await workflow.execute_activity(
                LLM_ACTIVITY, call, start_to_close_timeout=timedelta(seconds=opts.llm_timeout),
                heartbeat_timeout=timedelta(seconds=opts.heartbeat_timeout),
                retry_policy=opts.retry_policy(opts.llm_attempts, _KNOWN_FAILURES),
                summary=f"LLM call ({payload.get('model')})")
        except ActivityError as exc:
            if _cancelled(exc):
                raise asyncio.CancelledError() from None
            raise LLMCallFailed(_failure_text(exc)) from None

    def open(self, url: str, headers: dict[str, str], payload: dict[str, Any], timeout: float) -> Any:
        raise UnsupportedOperation("toolnexus.temporal: streaming is not available inside a workflow; agent turns "
                                  "use the non-streaming call")


def _doubt_id() -> str:
    """A request id in the usual `pnd-<hex ms>-<n>` shape, from the workflow's time and random."""
    return f"pnd-{int(workflow.now().timestamp() * 1000):x}-{workflow.random().randint(1, 1 << 24)}"


def _in_doubt(tool: Tool, args: dict[str, Any]) -> ToolResult:
    request = in_doubt_request(ToolCall(id="", name=tool.name, args=args), args)
    data = {k: v for k, v in (request.data or {}).items() if k != "tool_call_id"}
    request = dataclasses.replace(request, id=_doubt_id(), data=data,
                                  prompt=request.prompt.replace("when the process stopped", "when its worker stopped"))
    return ToolResult(request.prompt, True, {"pending": request})


def proxy_tool(agent: str, tool: Tool, options: TemporalOptions) -> Tool:
    """`tool` of agent definition `agent`, run as a tool-call activity (see the module docstring)."""

    async def execute(args: Any = None, ctx: Optional[ToolContext] = None) -> ToolResult:
        answer = getattr(ctx, "answer", None)
        arguments: dict[str, Any] = args if isinstance(args, dict) else {}
        request = getattr(ctx, "request", None)
        call = {"agent": agent, "tool": tool.name, "args": arguments,
                "answer": dataclasses.asdict(answer) if answer is not None else None,
                "request": dataclasses.asdict(request) if request is not None else None}
        check_payload(call, f"the arguments of tool {tool.name}", options.max_payload_bytes)
        attempts = options.tool_attempts if tool.idempotent else 1
        try:
            record = await workflow.execute_activity(
                TOOL_ACTIVITY, call, start_to_close_timeout=timedelta(seconds=options.tool_timeout),
                heartbeat_timeout=timedelta(seconds=options.heartbeat_timeout),
                retry_policy=options.retry_policy(attempts, _KNOWN_FAILURES), summary=f"{agent}: {tool.name}")
        except ActivityError as exc:
            if _cancelled(exc):
                raise asyncio.CancelledError() from None
            cause = exc.cause
            known = isinstance(cause, ApplicationError) and cause.type in _KNOWN_FAILURES
            if known or tool.idempotent:
                return ToolResult(f"tool {tool.name} failed: {_failure_text(exc)}", True)
            return _in_doubt(tool, arguments)
        return result_from_record(record)

    return dataclasses.replace(tool, execute=execute)

