"""The worker side of the activity seam: `AgentActivities`, the two activities every workflow-run
agent calls — one LLM call, one tool call.

Both run on any worker of the task queue, so they carry everything they need in their input and
look the rest up in this worker's own agent definitions and transport:

- `toolnexus.llm`: sends one request through the worker's transport (sync or async, the client's
  `as_async_transport` rules), with the worker's API key put back in place of the placeholder the
  workflow sent. A provider error that retrying cannot fix (a 4xx other than 429, a malformed
  body) is raised as non-retryable, so the activity's retry policy only repeats what may pass.
- `toolnexus.tool`: runs the named tool of the named agent definition with the arguments the
  model sent (and the host's `Answer`, on a resumed call). Whatever the tool raises becomes the
  same error result the in-process toolkit gives (`tool <name> failed: ...`), so an activity
  failure only ever means "the outcome is unknown" (a dead worker, a timeout) — that is what the
  workflow turns into an `in_doubt` question for a non-idempotent tool.

Each activity heartbeats while it runs (a third of its heartbeat timeout), so the cluster notices
a dead worker quickly and a cancelled turn cancels its activity. Results are checked against the
payload limit before they are handed to history.
"""

from __future__ import annotations

import asyncio
import contextlib
from typing import Any, AsyncIterator, Optional

from temporalio import activity
from temporalio.exceptions import ApplicationError

from .._shapes import as_dict
from ..agents._defs import AgentDef
from ..client._errors import ProviderError, ProviderResponseError
from ..client._journal import result_record
from ..client._retry import RETRYABLE_STATUSES
from ..client._transport import as_async_transport
from ..types import Answer, Request, ToolContext, ToolResult
from ._errors import PayloadTooLarge
from ._names import KEY_PLACEHOLDER, LLM_ACTIVITY, TOOL_ACTIVITY
from ._options import TemporalOptions
from ._proxies import NON_RETRYABLE, PAYLOAD_TOO_LARGE, TOOL_MISSING, check_payload


@contextlib.asynccontextmanager
async def _heartbeating() -> AsyncIterator[None]:
    """Heartbeat in the background while the body runs (when the activity has a heartbeat timeout)."""
    timeout = activity.info().heartbeat_timeout
    if not timeout:
        yield
        return
    every = max(0.05, timeout.total_seconds() / 3)

    async def beat() -> None:
        while True:
            activity.heartbeat()
            await asyncio.sleep(every)

    task = asyncio.ensure_future(beat())
    try:
        yield
    finally:
        task.cancel()
        with contextlib.suppress(asyncio.CancelledError):
            await task


class AgentActivities:
    """The activities of one worker: its agents' tools, its transport and its API key."""

    def __init__(self, registry: dict[str, AgentDef], transport: Any, api_key: Optional[str],
                 options: TemporalOptions) -> None:
        self._tools = {(name, t.name): t for name, defn in registry.items() for t in (defn.tools or [])}
        self._caller = as_async_transport(transport)
        self._api_key = api_key
        self._options = options

    def activities(self) -> list[Any]:
        return [self.llm_call, self.tool_call]

    def _headers(self, headers: Any) -> dict[str, str]:
        out = {str(k): str(v) for k, v in (headers or {}).items()}
        if self._api_key is not None:
            out = {k: v.replace(KEY_PLACEHOLDER, self._api_key) for k, v in out.items()}
        return out

    @activity.defn(name=LLM_ACTIVITY)
    async def llm_call(self, call: dict[str, Any]) -> Any:
        async with _heartbeating():
            try:
                response = await self._caller.post(str(call["url"]), self._headers(call.get("headers")),
                                                   call["payload"], float(call.get("timeout") or 120.0))
            except ProviderError as exc:
                raise ApplicationError(str(exc), type="ProviderError",
                                       non_retryable=exc.status not in RETRYABLE_STATUSES) from None
            except ProviderResponseError as exc:
                raise ApplicationError(str(exc), type=NON_RETRYABLE, non_retryable=True) from None
            except OSError as exc:
                raise ApplicationError(f"{type(exc).__name__}: {exc}", type="OSError") from None
            except (TypeError, ValueError, NotImplementedError) as exc:  # a transport that cannot do this call
                raise ApplicationError(f"{type(exc).__name__}: {exc}", type=NON_RETRYABLE, non_retryable=True) from None
        try:
            check_payload(response, "the LLM response", self._options.max_payload_bytes)
        except PayloadTooLarge as exc:
            raise ApplicationError(str(exc), type=PAYLOAD_TOO_LARGE, non_retryable=True) from None
        return response

    @activity.defn(name=TOOL_ACTIVITY)
    async def tool_call(self, call: dict[str, Any]) -> dict[str, Any]:
        agent, name = str(call.get("agent")), str(call.get("tool"))
        tool = self._tools.get((agent, name))
        if tool is None:
            known = ", ".join(sorted(f"{a}.{t}" for a, t in self._tools)) or "none"
            raise ApplicationError(
                f"this worker has no tool {name!r} for agent {agent!r} (it has: {known}) — run the same agent "
                "definitions on every worker of the task queue", type=TOOL_MISSING, non_retryable=True)
        answer, request = call.get("answer"), call.get("request")
        ctx = ToolContext(answer=Answer.from_dict(answer),
                          request=Request.from_dict(request) if isinstance(request, dict) else None
                          ) if isinstance(answer, dict) else None
        args = as_dict(call.get("args"))
        async with _heartbeating():
            try:
                result = await tool.execute(args, ctx)
            except Exception as exc:
                result = ToolResult(output=f"tool {name} failed: {type(exc).__name__}: {exc}", is_error=True)
        if not isinstance(result, ToolResult):
            result = ToolResult(output=f"tool {name} failed: returned {type(result).__name__}, not a ToolResult",
                                is_error=True)
        record = result_record(result)
        try:
            check_payload(record, f"the result of tool {name}", self._options.max_payload_bytes)
        except PayloadTooLarge as exc:
            raise ApplicationError(str(exc), type=PAYLOAD_TOO_LARGE, non_retryable=True) from None
        return record
