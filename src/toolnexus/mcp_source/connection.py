"""One MCP server connection: an owner task holds the transport and the `ClientSession`.

Why an owner task: the SDK's transports and session are anyio task groups / cancel scopes that
must be entered and exited by the same task. Each connection therefore lives in a dedicated
task that opens it, lists the tools, then waits for `stop`; `close()` just sets `stop` and waits
for that task, so it works from any task, and is idempotent. Requests (`call_tool`,
`list_tools`) go through the session from the caller's own task.

A connection whose transport ended (the stdio child died, the HTTP stream broke) is "lost";
the next request reconnects once, lazily. A remote server is tried over streamable HTTP first,
then over legacy SSE if that fails at any point up to and including `initialize`. While
`initialize` is in flight a `HandshakeGuard` (handshake.py) ends it at once for a program that
is not an MCP server (junk on stdout, an early exit) and for a command that cannot start; a
remote that answers our POSTs with an HTTP error is reported by that status (`http_refusal`).
"""

from __future__ import annotations

import asyncio
import inspect
import os
import socket
from contextlib import AsyncExitStack
from dataclasses import dataclass, field
from typing import Any, Callable, Optional

import anyio
import httpx2
import mcp.types as mtypes
from mcp import ClientSession
from mcp.client.sse import sse_client
from mcp.client.streamable_http import streamable_http_client
from mcp.shared.exceptions import MCPError
from mcp.shared._httpx_utils import MCP_DEFAULT_SSE_READ_TIMEOUT, create_mcp_http_client

from .config import ServerSpec
from .convert import answer_to_elicit_result, elicitation_to_request, wire
from .handshake import HandshakeGuard, http_refusal, spawn_failure
from .stdio import stdio_transport
from ..errors import NetworkError, ToolnexusError, ToolnexusRuntimeError

__all__ = ["MAX_LIST_PAGES", "ServerConnection", "describe_error"]

MAX_LIST_PAGES = 1000


def _leaf(exc: BaseException) -> BaseException:
    """The most telling exception inside (possibly nested) exception groups."""
    while isinstance(exc, BaseExceptionGroup):
        leaves = list(exc.exceptions)
        exc = next((e for e in leaves if not isinstance(e, asyncio.CancelledError)), leaves[0])
    return exc


def _os_cause(exc: BaseException) -> Optional[OSError]:
    seen = 0
    cur: Optional[BaseException] = exc
    while cur is not None and seen < 8:
        if isinstance(cur, OSError) and (cur.errno or isinstance(cur, socket.gaierror)):
            return cur
        cur, seen = cur.__cause__ or cur.__context__, seen + 1
    return None


def describe_error(exc: BaseException) -> str:
    """A one-line reason naming the real cause (not `timed out` for a refused connection)."""
    exc = _leaf(exc)
    if isinstance(exc, TimeoutError):
        return "timed out"
    if isinstance(exc, httpx2.HTTPStatusError):  # the legacy SSE transport's refusal
        return str(http_refusal(exc.response.status_code, str(exc.request.url)))
    if isinstance(exc, httpx2.TransportError):
        cause = _os_cause(exc)
        if cause is not None:
            if isinstance(cause, socket.gaierror):
                reason = str(cause.strerror or cause).lower()
            else:
                reason = os.strerror(cause.errno).lower() if cause.errno and cause.errno > 0 else str(cause)
            try:
                where = str(exc.request.url)
            except RuntimeError:
                where = "server"
            return f"could not connect to {where}: {reason}"
    return str(exc) or type(exc).__name__


def _as_failure(exc: BaseException) -> Optional[Exception]:
    """`exc` as a connection failure, or None when it is a real cancellation of this task.

    anyio task groups can raise a `BaseExceptionGroup` mixing their internal cancellations with
    the real error; unless our own task is being cancelled, that is a failure like any other.
    """
    if isinstance(exc, Exception):
        return exc
    task = asyncio.current_task()
    if isinstance(exc, BaseExceptionGroup) and not (task is not None and task.cancelling()):
        return ConnectionError(describe_error(exc))
    return None


class _RemoteConnectError(ToolnexusError, ConnectionError):
    """Both remote transports failed; the message names each cause once."""

    def __init__(self, first: BaseException, second: BaseException) -> None:
        a, b = describe_error(first), describe_error(second)
        super().__init__(a if a == b else f"{a} (SSE fallback: {b})")


class _Watched:
    """A transport read stream that reports its end (the transport is gone)."""

    def __init__(self, inner: Any, on_end: Callable[[], None], guard: Optional[HandshakeGuard] = None) -> None:
        self._inner, self._on_end, self._guard = inner, on_end, guard

    @property
    def last_context(self) -> Any:  # the dispatcher restores the sender's context from this
        return getattr(self._inner, "last_context", None)

    async def receive(self) -> Any:
        try:
            item = await self._inner.receive()
        except (anyio.EndOfStream, anyio.ClosedResourceError, anyio.BrokenResourceError):
            self._on_end()
            if self._guard is not None:
                self._guard.ended()
            raise
        if self._guard is not None:
            self._guard.seen(item)
        return item

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


async def list_all_tools(session: ClientSession) -> list[dict[str, Any]]:
    """Every page of `tools/list`, as wire dicts; guards against cursor loops."""
    tools: list[dict[str, Any]] = []
    cursor: Optional[str] = None
    seen: set[str] = set()
    for _ in range(MAX_LIST_PAGES):
        params = mtypes.PaginatedRequestParams(cursor=cursor) if cursor is not None else None
        page = wire(await session.list_tools(params=params))
        tools += [t for t in page.get("tools") or [] if isinstance(t, dict)]
        cursor = page.get("nextCursor")
        if cursor is None:
            return tools
        if cursor in seen:
            raise ToolnexusRuntimeError(f"MCP list returned duplicate cursor: {cursor}")
        seen.add(cursor)
    raise ToolnexusRuntimeError(f"MCP list exceeded {MAX_LIST_PAGES} pages")


@dataclass
class _Link:
    """One live connection attempt: its owner task and what it opened."""

    stop: asyncio.Event = field(default_factory=asyncio.Event)
    ready: asyncio.Future = field(default_factory=lambda: asyncio.get_running_loop().create_future())
    owner: Optional[asyncio.Task] = None
    session: Optional[ClientSession] = None
    lost: bool = False


class ServerConnection:
    """A configured server: connect, call, re-list, reconnect once when lost, close."""

    def __init__(self, spec: ServerSpec, wait_for: Any = None) -> None:
        self.spec = spec
        self.wait_for = wait_for
        self.closed = False
        self.stale = False  # set by notifications/tools/list_changed until the next list
        self._link: Optional[_Link] = None
        self._lock = asyncio.Lock()

    # ------------------------------------------------------------------ lifecycle

    async def connect(self) -> list[dict[str, Any]]:
        """Open the connection; returns the server's tools (wire dicts). Raises on failure."""
        self._link, defs = await self._open_link()
        return defs

    async def close(self) -> None:
        self.closed = True
        link, self._link = self._link, None
        if link is not None:
            await self._retire(link)

    async def _open_link(self) -> tuple[_Link, list[dict[str, Any]]]:
        link = _Link()
        link.owner = asyncio.create_task(self._own(link), name=f"toolnexus-mcp:{self.spec.name}")
        try:
            async with asyncio.timeout(self.spec.timeout):
                defs = await link.ready
        except BaseException:
            link.owner.cancel()  # an aborted connect kills a spawned child at once
            await asyncio.gather(link.owner, return_exceptions=True)
            raise
        return link, defs

    @staticmethod
    async def _retire(link: _Link) -> None:
        link.stop.set()
        if link.owner is not None:
            # Shielded: a cancelled closer must not abandon a half-closed transport.
            await asyncio.shield(asyncio.gather(link.owner, return_exceptions=True))

    async def _own(self, link: _Link) -> None:
        try:
            async with AsyncExitStack() as stack:
                session = await self._open_session(stack, link)
                defs = await list_all_tools(session)
                link.session = session
                if not link.ready.done():
                    link.ready.set_result(defs)
                await link.stop.wait()
        except BaseException as exc:
            failure = _as_failure(exc)
            if not link.ready.done():
                if failure is not None:
                    link.ready.set_exception(failure)
                else:
                    link.ready.cancel()
            if failure is None:
                raise
            # A transport that dies after connecting just leaves the link lost.
        finally:
            link.lost = True

    async def _open_session(self, stack: AsyncExitStack, link: _Link) -> ClientSession:
        spec = self.spec
        if not spec.remote:
            try:
                read, write, proc = await stack.enter_async_context(stdio_transport(spec))
            except (FileNotFoundError, PermissionError, NotADirectoryError) as exc:
                raise spawn_failure(spec.command, spec.cwd, exc) from exc
            guard = HandshakeGuard(strict=spec.strict_stdout, process=proc)
            return await self._start(stack, link, read, write, guard)
        failures: list[Exception] = []
        for streamable in (True, False):  # streamable HTTP, then the legacy SSE transport
            refused: list[int] = []  # non-2xx statuses of our POSTs (the SDK reports them vaguely)
            try:
                return await self._try_remote(stack, link, streamable=streamable, refused=refused)
            except BaseException as exc:
                failure = _as_failure(exc)
                if failure is None:
                    raise
                failures.append(http_refusal(refused[0], spec.url) if refused else failure)
        raise _RemoteConnectError(*failures) from failures[0]

    async def _try_remote(self, stack: AsyncExitStack, link: _Link, *, streamable: bool,
                          refused: list[int]) -> ClientSession:
        spec = self.spec

        async def note(response: httpx2.Response) -> None:
            if response.status_code >= 400 and response.request.method == "POST":
                refused.append(response.status_code)

        async with AsyncExitStack() as attempt:
            if streamable:
                timeout = httpx2.Timeout(spec.timeout, read=max(spec.timeout, MCP_DEFAULT_SSE_READ_TIMEOUT))
                client = await attempt.enter_async_context(create_mcp_http_client(headers=spec.headers, timeout=timeout))
                client.event_hooks["response"].append(note)
                streams = await attempt.enter_async_context(streamable_http_client(spec.url, http_client=client))
            else:
                streams = await attempt.enter_async_context(sse_client(spec.url, headers=spec.headers, timeout=spec.timeout))
            session = await self._start(attempt, link, streams[0], streams[1])
            await stack.enter_async_context(attempt.pop_all())
            return session

    async def _start(self, stack: AsyncExitStack, link: _Link, read: Any, write: Any,
                     guard: Optional[HandshakeGuard] = None) -> ClientSession:
        def lost() -> None:
            link.lost = True

        session = ClientSession(
            _Watched(read, lost, guard),
            write,
            read_timeout_seconds=self.spec.timeout,
            elicitation_callback=self._elicit if self.wait_for is not None else None,
            message_handler=self._on_message,
        )
        await stack.enter_async_context(session)
        await (guard.run(session.initialize()) if guard is not None else session.initialize())
        return session

    # ------------------------------------------------------------------ server → client

    async def _on_message(self, message: Any) -> None:
        if isinstance(message, mtypes.ToolListChangedNotification):
            self.stale = True

    async def _elicit(self, context: Any, params: Any) -> Any:
        try:
            answer = self.wait_for(elicitation_to_request(params))
            if inspect.isawaitable(answer):
                answer = await answer
            return answer_to_elicit_result(answer)
        except Exception as exc:  # noqa: BLE001 - the server gets an error reply instead
            return mtypes.ErrorData(code=mtypes.INTERNAL_ERROR, message=f"elicitation failed: {describe_error(exc)}")

    # ------------------------------------------------------------------ requests

    async def _live(self) -> _Link:
        """The live link, reconnecting once (shared by concurrent callers) if it was lost."""
        if self.closed:
            raise ToolnexusRuntimeError(f'MCP server "{self.spec.name}" is closed')
        link = self._link
        if link is None or link.lost:
            async with self._lock:
                if self._link is link:
                    if link is not None:
                        await self._retire(link)
                    try:
                        fresh, _defs = await self._open_link()
                    except Exception as exc:
                        raise NetworkError(f"connection lost; reconnect failed: {describe_error(exc)}") from exc
                    if self.closed:
                        await self._retire(fresh)
                        raise ToolnexusRuntimeError(f'MCP server "{self.spec.name}" is closed')
                    self._link = fresh
                link = self._link
        if link is None or link.session is None or link.lost:
            raise NetworkError("connection lost")
        return link

    @staticmethod
    async def _request(link: _Link, request: Any) -> Any:
        try:
            return await request
        except MCPError as exc:
            if exc.code == mtypes.CONNECTION_CLOSED:
                link.lost = True  # this request is not replayed; the next one reconnects
            raise

    async def call(self, name: str, arguments: dict[str, Any], timeout: float) -> Any:
        link = await self._live()
        assert link.session is not None
        return await self._request(link, link.session.call_tool(name, arguments, read_timeout_seconds=timeout))

    async def list_tools(self) -> list[dict[str, Any]]:
        link = await self._live()
        assert link.session is not None
        self.stale = False
        return await self._request(link, list_all_tools(link.session))
