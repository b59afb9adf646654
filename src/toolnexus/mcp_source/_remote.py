"""Remote MCP servers through the `mcp` SDK: streamable HTTP first, then legacy SSE.

Imported only when a configured server has a `url`, so a process with local servers alone never
loads the SDK. The SDK's transports and `ClientSession` are anyio task groups and cancel scopes
that must be entered and exited by one task: `_connection.py`'s owner task does both.

`SdkSession` puts the SDK's session behind the small interface `_connection.py` uses for both
kinds of server (`list_page`, `call`, the resource and prompt requests, `is_lost`). A remote that
answers our POSTs with an HTTP error is reported by that status (`http_refusal`), which the SDK
itself reports vaguely. We introduce ourselves as `{"name": "toolnexus", "version": <ours>}` (the
SDK's default would be its own name); `auth` (an `httpx2.Auth`, OAuth's `BearerAuth`) goes on
both transports.
"""

from __future__ import annotations

from contextlib import AsyncExitStack
from dataclasses import dataclass
from typing import Any, Awaitable, Callable, Optional

import anyio
import httpx2
import mcp.types as mtypes
from mcp import ClientSession
from mcp.client.sse import sse_client
from mcp.client.streamable_http import streamable_http_client
from mcp.shared.exceptions import MCPError

from ..types import Answer
from ._config import ServerSpec
from ._convert import answer_to_elicit_result, wire
from ._reasons import describe_error

# A server may hold a response stream open between events: reads wait this long (seconds), as the
# SDK's own clients do; connecting and writing keep the server's `timeout`. The client is ours
# (plain `httpx2.AsyncClient`, redirects off: the SDK's transports follow them within the origin).
STREAM_READ_TIMEOUT = 300.0


class _Watched:
    """A transport read stream that reports its end (the transport is gone)."""

    def __init__(self, inner: Any, on_end: Callable[[], None]) -> None:
        self._inner, self._on_end = inner, on_end

    @property
    def last_context(self) -> Any:  # the dispatcher restores the sender's context from this
        return getattr(self._inner, "last_context", None)

    async def receive(self) -> Any:
        try:
            return await self._inner.receive()
        except (anyio.EndOfStream, anyio.ClosedResourceError, anyio.BrokenResourceError):
            self._on_end()
            raise

    def __aiter__(self) -> "_Watched":
        return self

    async def __anext__(self) -> Any:
        try:
            return await self.receive()
        except anyio.EndOfStream:
            raise StopAsyncIteration from None

    async def aclose(self) -> None:
        await self._inner.aclose()

    async def __aenter__(self) -> "_Watched":
        return self

    async def __aexit__(self, *exc: Any) -> None:
        await self.aclose()


def _page(cursor: Optional[str]) -> Optional[mtypes.PaginatedRequestParams]:
    return mtypes.PaginatedRequestParams(cursor=cursor) if cursor is not None else None


class SdkSession:
    """The SDK's `ClientSession` behind `_connection.py`'s session interface."""

    def __init__(self, session: ClientSession, capabilities: dict[str, Any]) -> None:
        self.session = session
        self.capabilities = capabilities

    async def list_page(self, cursor: Optional[str]) -> dict[str, Any]:
        return wire(await self.session.list_tools(params=_page(cursor)))

    async def call(self, name: str, arguments: dict[str, Any], timeout: float,
                   on_progress: Optional[Callable[[dict[str, Any]], None]] = None) -> Any:
        if on_progress is None:
            return await self.session.call_tool(name, arguments, read_timeout_seconds=timeout)
        listener = on_progress

        async def heard(progress: float, total: Optional[float], message: Optional[str]) -> None:
            event: dict[str, Any] = {"progress": progress}
            if total is not None:
                event["total"] = total
            if message is not None:
                event["message"] = message
            listener(event)

        return await self.session.call_tool(name, arguments, read_timeout_seconds=timeout, progress_callback=heard)

    async def list_resources(self, cursor: Optional[str] = None) -> dict[str, Any]:
        return wire(await self.session.list_resources(params=_page(cursor)))

    async def list_resource_templates(self, cursor: Optional[str] = None) -> dict[str, Any]:
        return wire(await self.session.list_resource_templates(params=_page(cursor)))

    async def read_resource(self, uri: str) -> dict[str, Any]:
        return wire(await self.session.read_resource(uri))

    async def list_prompts(self, cursor: Optional[str] = None) -> dict[str, Any]:
        return wire(await self.session.list_prompts(params=_page(cursor)))

    async def get_prompt(self, name: str, arguments: Optional[dict[str, str]] = None) -> dict[str, Any]:
        return wire(await self.session.get_prompt(name, arguments))

    @staticmethod
    def is_lost(exc: BaseException) -> bool:
        return isinstance(exc, MCPError) and exc.code == mtypes.CONNECTION_CLOSED


@dataclass
class Listeners:
    """What the connection wants to hear from a remote server (None: not offered / ignored)."""

    on_list_changed: Callable[[], None]
    ask: Optional[Callable[[Any], Awaitable[Optional[Answer]]]] = None
    sample: Optional[Callable[[dict[str, Any]], Awaitable[dict[str, Any]]]] = None
    log: Optional[Callable[[dict[str, Any]], None]] = None


def _client_info() -> mtypes.Implementation:
    from .._version import VERSION as __version__

    return mtypes.Implementation(name="toolnexus", version=__version__)


async def _start(stack: AsyncExitStack, spec: ServerSpec, read: Any, write: Any, on_lost: Callable[[], None],
                 listeners: Listeners) -> SdkSession:
    ask, on_list_changed = listeners.ask, listeners.on_list_changed

    async def elicit(context: Any, params: Any) -> Any:
        assert ask is not None
        try:
            return answer_to_elicit_result(await ask(params))
        except Exception as exc:
            return mtypes.ErrorData(code=mtypes.INTERNAL_ERROR, message=f"elicitation failed: {describe_error(exc)}")

    async def on_message(message: Any) -> None:
        if isinstance(message, mtypes.ToolListChangedNotification):
            on_list_changed()

    async def sample(context: Any, params: Any) -> Any:
        assert listeners.sample is not None
        try:
            return mtypes.CreateMessageResult.model_validate(await listeners.sample(wire(params)))
        except Exception as exc:
            return mtypes.ErrorData(code=mtypes.INTERNAL_ERROR, message=f"sampling refused: {describe_error(exc)}")

    async def log(params: Any) -> None:
        assert listeners.log is not None
        listeners.log(wire(params))

    session = ClientSession(_Watched(read, on_lost), write, read_timeout_seconds=spec.timeout,
                            elicitation_callback=elicit if ask is not None else None, message_handler=on_message,
                            sampling_callback=sample if listeners.sample is not None else None,
                            logging_callback=log if listeners.log is not None else None, client_info=_client_info())
    await stack.enter_async_context(session)
    result = await session.initialize()
    return SdkSession(session, wire(result).get("capabilities") or {})


async def open_remote(stack: AsyncExitStack, spec: ServerSpec, *, streamable: bool, refused: list[int],
                      on_lost: Callable[[], None], listeners: Listeners,
                      auth: Optional[httpx2.Auth] = None) -> SdkSession:
    """Connect and initialize over one transport; on success its contexts move onto `stack`.
    `refused` collects the HTTP error statuses of our POSTs (for the failure's reason)."""

    async def note(response: httpx2.Response) -> None:
        if response.status_code >= 400 and response.request.method == "POST":
            refused.append(response.status_code)

    async with AsyncExitStack() as attempt:
        if streamable:
            timeout = httpx2.Timeout(spec.timeout, read=max(spec.timeout, STREAM_READ_TIMEOUT))
            client = await attempt.enter_async_context(httpx2.AsyncClient(headers=spec.headers, timeout=timeout,
                                                                          auth=auth))
            client.event_hooks["response"].append(note)
            streams = await attempt.enter_async_context(streamable_http_client(spec.url, http_client=client))
        else:
            streams = await attempt.enter_async_context(sse_client(spec.url, headers=spec.headers, timeout=spec.timeout,
                                                                   auth=auth))
        session = await _start(attempt, spec, streams[0], streams[1], on_lost, listeners)
        await stack.enter_async_context(attempt.pop_all())
        return session
