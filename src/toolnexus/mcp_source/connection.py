"""One MCP server connection: an owner task holds the transport and the session.

Why an owner task: the SDK's remote transports and session are anyio task groups / cancel scopes
that must be entered and exited by the same task, and a local server's process must be stopped
by whoever started it. Each connection therefore lives in a dedicated task that opens it, lists
the tools, then waits for `stop`; `close()` just sets `stop` and waits for that task, so it works
from any task, and is idempotent. Requests (`call`, `list_tools`) go through the session from the
caller's own task.

Two kinds of session behind one small interface (`list_page`, `call`, `is_lost`): a local server
gets our own `StdioSession` (session.py) on the child's pipes — no SDK import, a few
microseconds per message; a remote one the SDK's `ClientSession` (remote.py), tried over
streamable HTTP first, then over legacy SSE if that fails at any point up to and including
`initialize`. The SDK is imported on first use, in a worker thread and before the server's
`timeout` starts: its import takes about a second on a slow machine, which must neither stall the
event loop nor count against a server that answers at once.

A connection whose transport ended (the stdio child died, the HTTP stream broke) is "lost"; the
next request reconnects once, lazily. While a local server's `initialize` is in flight a
`HandshakeGuard` (handshake.py) ends it early for a program that is not an MCP server (junk on
stdout and nothing else, an early exit) and for a command that cannot start.
"""

from __future__ import annotations

import asyncio
import inspect
from contextlib import AsyncExitStack
from dataclasses import dataclass, field
from typing import Any, Optional

from . import stdio
from .config import ServerSpec
from .convert import elicit_result_dict, elicitation_to_request
from .handshake import HandshakeGuard, spawn_failure
from .reasons import describe_error
from .session import StdioSession
from ..errors import NetworkError, ToolnexusError, ToolnexusRuntimeError
from ..types import Answer

__all__ = ["MAX_LIST_PAGES", "ServerConnection", "describe_error", "load_remote"]

_REMOTE = "toolnexus.mcp_source.remote"


async def load_remote() -> None:
    """Import the SDK-backed remote session module off the event loop (once per process)."""
    import sys

    if _REMOTE not in sys.modules:
        import importlib

        await asyncio.to_thread(importlib.import_module, _REMOTE)

MAX_LIST_PAGES = 1000


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


async def list_all_tools(session: Any) -> list[dict[str, Any]]:
    """Every page of `tools/list`, as wire dicts; guards against cursor loops."""
    tools: list[dict[str, Any]] = []
    cursor: Optional[str] = None
    seen: set[str] = set()
    for _ in range(MAX_LIST_PAGES):
        page = await session.list_page(cursor)
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
    session: Any = None  # a StdioSession, or remote.SdkSession
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
        if self.spec.remote:
            await load_remote()  # before the clock starts (see the module docstring)
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

    async def _open_session(self, stack: AsyncExitStack, link: _Link) -> Any:
        spec = self.spec
        if not spec.remote:
            return await self._open_local(stack, link)
        from .handshake import http_refusal
        from .remote import open_remote

        failures: list[Exception] = []
        for streamable in (True, False):  # streamable HTTP, then the legacy SSE transport
            refused: list[int] = []  # non-2xx statuses of our POSTs (the SDK reports them vaguely)
            try:
                return await open_remote(stack, spec, streamable=streamable, refused=refused,
                                         on_lost=lambda: setattr(link, "lost", True),
                                         ask=self._ask if self.wait_for is not None else None,
                                         on_list_changed=self._list_changed)
            except BaseException as exc:
                failure = _as_failure(exc)
                if failure is None:
                    raise
                failures.append(http_refusal(refused[0], spec.url) if refused else failure)
        raise _RemoteConnectError(*failures) from failures[0]

    async def _open_local(self, stack: AsyncExitStack, link: _Link) -> StdioSession:
        spec = self.spec
        try:
            proc = await stack.enter_async_context(stdio.stdio_process(spec))
        except (FileNotFoundError, PermissionError, NotADirectoryError) as exc:
            raise spawn_failure(spec.command, spec.cwd, exc) from exc
        guard = HandshakeGuard(strict=spec.strict_stdout, process=proc, server=spec.name)

        def closed(reason: Optional[str]) -> None:
            link.lost = True
            if reason is None:
                guard.ended()

        assert proc.stdout is not None and proc.stdin is not None
        session = StdioSession(proc.stdout, proc.stdin, name=spec.name, timeout=spec.timeout,
                               max_line=stdio.MAX_LINE_BYTES, on_item=guard.seen, on_closed=closed,
                               on_elicit=self._elicit_local if self.wait_for is not None else None,
                               on_list_changed=self._list_changed)
        session.start()
        stack.push_async_callback(session.aclose)
        await guard.run(session.initialize())
        return session

    # ------------------------------------------------------------------ server → client

    def _list_changed(self) -> None:
        self.stale = True

    async def _ask(self, params: Any) -> Optional[Answer]:
        """An elicitation as a suspension `Request`, answered by `wait_for`."""
        answer = self.wait_for(elicitation_to_request(params))
        if inspect.isawaitable(answer):
            answer = await answer
        return answer

    async def _elicit_local(self, params: dict[str, Any]) -> dict[str, Any]:
        try:
            return elicit_result_dict(await self._ask(params))
        except Exception as exc:  # noqa: BLE001 - the server gets an error reply instead
            raise ToolnexusRuntimeError(describe_error(exc)) from exc

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
        except Exception as exc:
            if link.session is not None and link.session.is_lost(exc):
                link.lost = True  # this request is not replayed; the next one reconnects
            raise

    async def call(self, name: str, arguments: dict[str, Any], timeout: float) -> Any:
        link = await self._live()
        assert link.session is not None
        return await self._request(link, link.session.call(name, arguments, timeout))

    async def list_tools(self) -> list[dict[str, Any]]:
        link = await self._live()
        assert link.session is not None
        self.stale = False
        return await self._request(link, list_all_tools(link.session))
