"""Remote MCP servers through the `mcp` SDK: streamable HTTP first, then legacy SSE.

Imported only when a configured server has a `url`, so a process with local servers alone never
loads the SDK. The SDK's transports and `ClientSession` are anyio task groups and cancel scopes
that must be entered and exited by one task: `connection.py`'s owner task does both.

`SdkSession` puts the SDK's session behind the small interface `connection.py` uses for both
kinds of server (`list_page`, `call`, `is_lost`). A remote that answers our POSTs with an HTTP
error is reported by that status (`http_refusal`), which the SDK itself reports vaguely.
"""

from __future__ import annotations

from contextlib import AsyncExitStack
from typing import Any, Awaitable, Callable, Optional

import anyio
import httpx2
import mcp.types as mtypes
from mcp import ClientSession
from mcp.client.sse import sse_client
from mcp.client.streamable_http import streamable_http_client
from mcp.shared.exceptions import MCPError

from .config import ServerSpec
from .convert import answer_to_elicit_result, wire
from .reasons import describe_error
from ..types import Answer

__all__ = ["SdkSession", "open_remote"]

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


class SdkSession:
    """The SDK's `ClientSession` behind `connection.py`'s session interface."""

    def __init__(self, session: ClientSession) -> None:
        self.session = session

    async def list_page(self, cursor: Optional[str]) -> dict[str, Any]:
        params = mtypes.PaginatedRequestParams(cursor=cursor) if cursor is not None else None
        return wire(await self.session.list_tools(params=params))

    async def call(self, name: str, arguments: dict[str, Any], timeout: float) -> Any:
        return await self.session.call_tool(name, arguments, read_timeout_seconds=timeout)

    @staticmethod
    def is_lost(exc: BaseException) -> bool:
        return isinstance(exc, MCPError) and exc.code == mtypes.CONNECTION_CLOSED


async def _start(stack: AsyncExitStack, spec: ServerSpec, read: Any, write: Any, on_lost: Callable[[], None],
                 ask: Optional[Callable[[Any], Awaitable[Optional[Answer]]]],
                 on_list_changed: Callable[[], None]) -> SdkSession:
    async def elicit(context: Any, params: Any) -> Any:
        assert ask is not None
        try:
            return answer_to_elicit_result(await ask(params))
        except Exception as exc:  # noqa: BLE001 - the server gets an error reply instead
            return mtypes.ErrorData(code=mtypes.INTERNAL_ERROR, message=f"elicitation failed: {describe_error(exc)}")

    async def on_message(message: Any) -> None:
        if isinstance(message, mtypes.ToolListChangedNotification):
            on_list_changed()

    session = ClientSession(_Watched(read, on_lost), write, read_timeout_seconds=spec.timeout,
                            elicitation_callback=elicit if ask is not None else None, message_handler=on_message)
    await stack.enter_async_context(session)
    await session.initialize()
    return SdkSession(session)


async def open_remote(stack: AsyncExitStack, spec: ServerSpec, *, streamable: bool, refused: list[int],
                      on_lost: Callable[[], None], ask: Optional[Callable[[Any], Awaitable[Optional[Answer]]]],
                      on_list_changed: Callable[[], None]) -> SdkSession:
    """Connect and initialize over one transport; on success its contexts move onto `stack`.
    `refused` collects the HTTP error statuses of our POSTs (for the failure's reason)."""

    async def note(response: httpx2.Response) -> None:
        if response.status_code >= 400 and response.request.method == "POST":
            refused.append(response.status_code)

    async with AsyncExitStack() as attempt:
        if streamable:
            timeout = httpx2.Timeout(spec.timeout, read=max(spec.timeout, STREAM_READ_TIMEOUT))
            client = await attempt.enter_async_context(httpx2.AsyncClient(headers=spec.headers, timeout=timeout))
            client.event_hooks["response"].append(note)
            streams = await attempt.enter_async_context(streamable_http_client(spec.url, http_client=client))
        else:
            streams = await attempt.enter_async_context(sse_client(spec.url, headers=spec.headers, timeout=spec.timeout))
        session = await _start(attempt, spec, streams[0], streams[1], on_lost, ask, on_list_changed)
        await stack.enter_async_context(attempt.pop_all())
        return session
