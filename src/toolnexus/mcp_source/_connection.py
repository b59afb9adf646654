"""One MCP server connection: an owner task holds the transport and the session.

Why an owner task: the SDK's remote transports and session are anyio task groups / cancel scopes
that must be entered and exited by the same task, and a local server's process must be stopped
by whoever started it. Each connection therefore lives in a dedicated task that opens it, lists
the tools, then waits for `stop`; `close()` just sets `stop` and waits for that task, so it works
from any task, and is idempotent. Requests (`call`, `list_tools`) go through the session from the
caller's own task.

Two kinds of session behind one small interface (`list_page`, `call`, `is_lost`): a local server
gets our own `StdioSession` (_session.py) on the child's pipes — no SDK import, a few
microseconds per message; a remote one the SDK's `ClientSession` (_remote.py), tried over
streamable HTTP first, then over legacy SSE if that fails at any point up to and including
`initialize`. The SDK is imported on first use, in a worker thread and before the server's
`timeout` starts: its import takes about a second on a slow machine, which must neither stall the
event loop nor count against a server that answers at once.

A remote server protected by OAuth gets an `OAuthClient` (toolnexus.mcp_auth) whose `BearerAuth`
rides on the transport. When connecting needs a person to sign in, `connect()` raises
`AuthorizationRequired` carrying the `Request(kind="auth")` — or, with a `wait_for`, asks it
right there (outside the server's `timeout`: a person is slower than a server) and connects again.

Besides tools the connection reaches the server's resources and prompts (each list read to its
end, within `MAX_LIST_PAGES`), hears its log and progress notifications (the host's
`mcp_log` / `mcp_progress` hooks, and the span of each call in flight), and answers its sampling
requests under the host's `SamplingPolicy` (_sampling.py).

A connection whose transport ended (the stdio child died, the HTTP stream broke) is "lost"; the
next request reconnects once, lazily. While a local server's `initialize` is in flight a
`HandshakeGuard` (_handshake.py) ends it early for a program that is not an MCP server (junk on
stdout and nothing else, an early exit) and for a command that cannot start.
"""

from __future__ import annotations

import asyncio
import inspect
from contextlib import AsyncExitStack
from dataclasses import dataclass, field
from typing import Any, Awaitable, Callable, Optional

from ..errors import NetworkError, ToolnexusError, ToolnexusRuntimeError
from ..mcp_auth import AuthorizationRequired, TokenVault
from ..types import Answer, Request
from . import _stdio as stdio
from ._config import ServerSpec
from ._convert import elicit_result_dict, elicitation_to_request
from ._handshake import HandshakeFailed, HandshakeGuard, spawn_failure
from ._options import McpOptions, fire_hook
from ._reasons import describe_error as describe_error
from ._sampling import Sampling
from ._session import StdioSession

_REMOTE = "toolnexus.mcp_source._remote"


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


@dataclass
class Listing:
    """A server's tools as listed (wire dicts); `overflow`: listing stopped at the tool limit with
    more pages to come."""

    tools: list[dict[str, Any]]
    overflow: bool = False


async def list_all(fetch: Callable[[Optional[str]], Awaitable[dict[str, Any]]], key: str,
                   limit: Optional[int] = None) -> tuple[list[dict[str, Any]], bool]:
    """Every page of a paginated list (`key`: "tools", "resources", ...), as wire dicts, stopping
    early once `limit` items are in; guards against cursor loops."""
    items: list[dict[str, Any]] = []
    cursor: Optional[str] = None
    seen: set[str] = set()
    for _ in range(MAX_LIST_PAGES):
        page = await fetch(cursor)
        items += [t for t in page.get(key) or [] if isinstance(t, dict)]
        cursor = page.get("nextCursor")
        if cursor is None:
            return items, False
        if limit is not None and len(items) >= limit:
            return items, True
        if cursor in seen:
            raise ToolnexusRuntimeError(f"MCP list returned duplicate cursor: {cursor}")
        seen.add(cursor)
    raise ToolnexusRuntimeError(f"MCP list exceeded {MAX_LIST_PAGES} pages")


async def list_all_tools(session: Any, limit: Optional[int] = None) -> Listing:
    tools, overflow = await list_all(session.list_page, "tools", limit)
    return Listing(tools, overflow)


@dataclass
class _Link:
    """One live connection attempt: its owner task and what it opened."""

    stop: asyncio.Event = field(default_factory=asyncio.Event)
    ready: asyncio.Future = field(default_factory=lambda: asyncio.get_running_loop().create_future())
    owner: Optional[asyncio.Task] = None
    session: Any = None  # a StdioSession, or remote.SdkSession
    lost: bool = False


Watcher = Callable[[str, dict[str, Any]], None]  # (kind "log" | "progress", event)


class ServerConnection:
    """A configured server: connect, call, re-list, reconnect once when lost, close."""

    def __init__(self, spec: ServerSpec, wait_for: Any = None, options: Optional[McpOptions] = None,
                 vault: Optional[TokenVault] = None) -> None:
        self.spec = spec
        self.wait_for = wait_for
        self.options = options if options is not None else McpOptions()
        self.vault = vault
        self.closed = False
        self.stale = False  # set by notifications/tools/list_changed until the next list
        self.oauth: Any = None  # an mcp_auth.flow.OAuthClient for a remote server with OAuth on
        self.watchers: set[Watcher] = set()  # the calls in flight that want log lines (their spans)
        self._sampling = Sampling.for_server(self.options.sampling, spec.name)
        self._link: Optional[_Link] = None
        self._lock = asyncio.Lock()

    @property
    def capabilities(self) -> dict[str, Any]:
        """The server's capabilities from `initialize` (`{}` before a connection)."""
        link = self._link
        return dict(link.session.capabilities) if link is not None and link.session is not None else {}

    # ------------------------------------------------------------------ lifecycle

    async def connect(self) -> Listing:
        """Open the connection; returns the server's tools. Raises on failure — `AuthorizationRequired`
        when a person must sign in and there is no `wait_for` to ask (with one, it is asked here)."""
        try:
            self._link, listing = await self._open_link()
        except AuthorizationRequired as need:
            if self.wait_for is None:
                raise
            await self.sign_in(await self._ask_request(need.request))
            self._link, listing = await self._open_link()
        return listing

    async def sign_in(self, answer: Optional[Answer]) -> None:
        """Finish a sign-in with the person's answer (raises `AuthorizationDeclined` / `OAuthError`)."""
        from ..mcp_auth import AuthorizationDeclined

        if answer is None:
            raise AuthorizationDeclined(f'the sign-in to "{self.spec.name}" was declined')
        await self._oauth().complete(answer)

    def authorization(self) -> Optional[Request]:
        """The sign-in a person must do for this server now, if one is waiting."""
        return self.oauth.pending if self.oauth is not None else None

    async def close(self) -> None:
        self.closed = True
        link, self._link = self._link, None
        if link is not None:
            await self._retire(link)
        if self.oauth is not None:
            await self.oauth.aclose()

    def _oauth(self) -> Any:
        if self.oauth is None:
            from ..mcp_auth import OAuthOptions
            from ..mcp_auth._flow import OAuthClient

            assert self.spec.oauth is not None and self.vault is not None
            self.oauth = OAuthClient(server=self.spec.name, url=self.spec.url, settings=self.spec.oauth,
                                     options=self.options.auth or OAuthOptions(), vault=self.vault)
        return self.oauth

    async def _open_link(self) -> tuple[_Link, Listing]:
        if self.spec.remote:
            await load_remote()  # before the clock starts (see the module docstring)
            if self.spec.oauth is not None:
                self._oauth()
        link = _Link()
        link.owner = asyncio.create_task(self._own(link), name=f"toolnexus-mcp:{self.spec.name}")
        try:
            async with asyncio.timeout(self.spec.timeout):
                defs = await link.ready
        except BaseException as exc:
            link.owner.cancel()  # an aborted connect kills a spawned child at once
            await asyncio.gather(link.owner, return_exceptions=True)
            if isinstance(exc, Exception) and not isinstance(exc, AuthorizationRequired):
                self._check_authorization()  # refused after `initialize` (listing): a sign-in, or why not
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
                defs = await list_all_tools(session, self.options.limits.max_tools)
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
        from ._handshake import http_refusal
        from ._remote import Listeners, open_remote

        listeners = Listeners(on_list_changed=self._list_changed, ask=self._ask if self.wait_for is not None else None,
                              sample=self._sampling.answer if self._sampling is not None else None, log=self._log)
        auth = None
        if self.oauth is not None:
            from ..mcp_auth._flow import BearerAuth

            auth = BearerAuth(self.oauth)
        failures: list[Exception] = []
        for streamable in (True, False):  # streamable HTTP, then the legacy SSE transport
            refused: list[int] = []  # non-2xx statuses of our POSTs (the SDK reports them vaguely)
            try:
                return await open_remote(stack, spec, streamable=streamable, refused=refused,
                                         on_lost=lambda: setattr(link, "lost", True), listeners=listeners, auth=auth)
            except BaseException as exc:
                failure = _as_failure(exc)
                if failure is None:
                    raise
                self._check_authorization()  # a sign-in is needed: not a transport problem, no fallback
                failures.append(http_refusal(refused[0], spec.url) if refused else failure)
        raise _RemoteConnectError(*failures) from failures[0]

    def _check_authorization(self) -> None:
        """Raise what OAuth says when it stopped the request: a sign-in to do, or why it failed."""
        if self.oauth is None:
            return
        if self.oauth.pending is not None:
            raise AuthorizationRequired(self.oauth.pending)
        if self.oauth.problem is not None:
            raise HandshakeFailed(f"authorization failed: {self.oauth.problem}")

    async def _open_local(self, stack: AsyncExitStack, link: _Link) -> StdioSession:
        spec = self.spec
        try:
            proc = await stack.enter_async_context(stdio.stdio_process(spec, self.options.containment))
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
                               on_list_changed=self._list_changed,
                               on_sample=self._sampling.answer if self._sampling is not None else None,
                               on_log=self._log)
        session.start()
        stack.push_async_callback(session.aclose)
        await guard.run(session.initialize())
        return session

    # ------------------------------------------------------------------ server → client

    def _list_changed(self) -> None:
        self.stale = True

    def _log(self, params: dict[str, Any]) -> None:
        """A server's log line (`notifications/message`): to the host's `mcp_log` hook and to the
        span of every call in flight."""
        event = {"server": self.spec.name, "level": params.get("level"), "logger": params.get("logger"),
                 "data": params.get("data")}
        for watcher in list(self.watchers):
            watcher("log", event)
        fire_hook(self.options.hooks, "mcp_log", event)

    def progress_listener(self, tool: str, watcher: Optional[Watcher]) -> Callable[[dict[str, Any]], None]:
        """The `on_progress` of one call of `tool`: to the host's `mcp_progress` hook and its span."""

        def heard(params: dict[str, Any]) -> None:
            event = {"server": self.spec.name, "tool": tool, "progress": params.get("progress"),
                     "total": params.get("total"), "message": params.get("message")}
            if watcher is not None:
                watcher("progress", event)
            fire_hook(self.options.hooks, "mcp_progress", event)

        return heard

    async def _ask(self, params: Any) -> Optional[Answer]:
        """An elicitation as a suspension `Request`, answered by `wait_for`."""
        return await self._ask_request(elicitation_to_request(params))

    async def _ask_request(self, request: Request) -> Optional[Answer]:
        answer = self.wait_for(request)
        if inspect.isawaitable(answer):
            answer = await answer
        return answer

    async def _elicit_local(self, params: dict[str, Any]) -> dict[str, Any]:
        try:
            return elicit_result_dict(await self._ask(params))
        except Exception as exc:
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
                    except AuthorizationRequired:
                        raise  # a person must sign in: the caller suspends on it
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

    async def call(self, name: str, arguments: dict[str, Any], timeout: float,
                   on_progress: Optional[Callable[[dict[str, Any]], None]] = None) -> Any:
        link = await self._live()
        assert link.session is not None
        if on_progress is None:
            return await self._request(link, link.session.call(name, arguments, timeout))
        return await self._request(link, link.session.call(name, arguments, timeout, on_progress))

    async def list_tools(self) -> Listing:
        link = await self._live()
        assert link.session is not None
        self.stale = False
        return await self._request(link, list_all_tools(link.session, self.options.limits.max_tools))

    async def list_of(self, what: str) -> list[dict[str, Any]]:
        """Every item of one of the server's lists: "resources", "resourceTemplates" or "prompts"."""
        link = await self._live()
        session = link.session
        assert session is not None
        fetch = {"resources": session.list_resources, "resourceTemplates": session.list_resource_templates,
                 "prompts": session.list_prompts}[what]
        items, _ = await self._request(link, list_all(fetch, what))
        return items

    async def read_resource(self, uri: str) -> dict[str, Any]:
        link = await self._live()
        assert link.session is not None
        return await self._request(link, link.session.read_resource(uri))

    async def get_prompt(self, name: str, arguments: Optional[dict[str, str]] = None) -> dict[str, Any]:
        link = await self._live()
        assert link.session is not None
        return await self._request(link, link.session.get_prompt(name, arguments))
