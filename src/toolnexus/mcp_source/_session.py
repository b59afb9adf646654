"""`StdioSession`: the client side of MCP with a local server, on its pipes, without the SDK.

Why ours: with a local server MCP is newline-delimited JSON-RPC 2.0 on stdin/stdout, and what a
tool source needs of it is small — `initialize`, `tools/list`, `tools/call`, answering `ping` and
elicitations, noticing `tools/list_changed`. The `mcp` SDK does all that too, but importing it
is slow and heavy for a process that only wants a tool list (see docs/performance.md), and each
call crosses its anyio streams and pydantic models. The SDK stays where its transports earn their
keep: remote servers (streamable HTTP, legacy SSE) and serving.

How it behaves:

- requests carry increasing integer ids and are matched to replies by id (a reply nobody waits
  for is dropped); a JSON-RPC error reply raises `McpRequestError` with the server's code and
  message; a result that is not an object is a protocol error, not a crash;
- a request that outlives its timeout gets `notifications/cancelled` sent for it and raises
  `McpRequestError(REQUEST_TIMEOUT, "Request 'tools/call' timed out")`; a caller's cancellation
  sends the same courtesy notice, then propagates;
- server → client requests: `ping` is answered `{}`; `elicitation/create` goes to `on_elicit` and
  `sampling/createMessage` to `on_sample` (each advertised only when there is one) and the answer
  — or its failure, as an error reply — goes back; anything else gets "Method not found".
  Notifications: `notifications/tools/list_changed` calls `on_list_changed`,
  `notifications/message` (a server's log line) `on_log`, `notifications/progress` the
  `on_progress` of the call whose `progressToken` it names; the rest are ignored;
- every line read is handed to `on_item` first (the handshake guard judges the first one): a
  dict for a JSON-RPC message, a `NotJsonRpc` for anything else, which is then skipped;
- the end of stdout — the server exited, crashed or closed it — fails every waiting request with
  `McpRequestError(CONNECTION_CLOSED, "Connection closed")` and calls `on_closed`; so does a
  line longer than `max_line` bytes (the connection is dropped rather than our memory growing).
"""

from __future__ import annotations

import asyncio
import functools
import itertools
import json
from contextlib import suppress
from typing import Any, Awaitable, Callable, Optional

from .._diag import warn
from .._shapes import as_dict
from ..errors import InputTooLarge, ToolnexusError
from ._handshake import NotJsonRpc

PROTOCOL_VERSION = "2025-11-25"
SUPPORTED_VERSIONS = ("2024-11-05", "2025-03-26", "2025-06-18", "2025-11-25")
CONNECTION_CLOSED = -32000
REQUEST_TIMEOUT = -32001
METHOD_NOT_FOUND = -32601
INTERNAL_ERROR = -32603
_CHUNK = 1 << 16
_CANCEL_WRITE_TIMEOUT = 2.0


class McpRequestError(ToolnexusError, RuntimeError):
    """A request that failed: the server's JSON-RPC error, a timeout, or a closed connection."""

    def __init__(self, code: int, message: str, data: Any = None) -> None:
        super().__init__(message)
        self.code = code
        self.message = message
        self.data = data


def _client_info() -> dict[str, str]:
    from .._version import VERSION as __version__

    return {"name": "toolnexus", "version": __version__}


class StdioSession:
    """One MCP client session over a child's stdout (`reader`) and stdin (`writer`)."""

    def __init__(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter, *, name: str,
                 timeout: float, max_line: int,
                 on_elicit: Optional[Callable[[dict[str, Any]], Awaitable[dict[str, Any]]]] = None,
                 on_list_changed: Optional[Callable[[], None]] = None,
                 on_item: Optional[Callable[[Any], None]] = None,
                 on_closed: Optional[Callable[[Optional[str]], None]] = None,
                 on_sample: Optional[Callable[[dict[str, Any]], Awaitable[dict[str, Any]]]] = None,
                 on_log: Optional[Callable[[dict[str, Any]], None]] = None) -> None:
        self._reader = reader
        self._writer = writer
        self.name = name
        self.timeout = timeout
        self._max_line = max_line
        self._on_elicit = on_elicit
        self._on_list_changed = on_list_changed
        self._on_item = on_item
        self._on_closed = on_closed
        self._on_sample = on_sample
        self._on_log = on_log
        self._progress: dict[str, Callable[[dict[str, Any]], None]] = {}  # progressToken -> the call's listener
        self._ids = itertools.count(1)
        self._waiting: dict[int, asyncio.Future[Any]] = {}
        self._served: dict[Any, asyncio.Task[None]] = {}  # server → client requests being answered, by id
        self._write_lock = asyncio.Lock()
        self.closed = False
        self.server_info: dict[str, Any] = {}
        self.capabilities: dict[str, Any] = {}  # the server's, from `initialize`
        self._pump: Optional[asyncio.Task[None]] = None

    # -- lifecycle --------------------------------------------------------------------------------

    def start(self) -> None:
        self._pump = asyncio.ensure_future(self._read())

    async def aclose(self) -> None:
        """Stop reading and fail whatever still waits (the transport closes the pipes)."""
        tasks = [t for t in (self._pump, *self._served.values()) if t is not None]
        for task in tasks:
            task.cancel()
        await asyncio.gather(*tasks, return_exceptions=True)
        self._lost()

    def _lost(self, reason: Optional[str] = None) -> None:
        """The connection is gone: fail every waiting request (with `reason` when there is one)."""
        if not self.closed:
            self.closed = True
            if self._on_closed is not None:
                self._on_closed(reason)
        waiting, self._waiting = self._waiting, {}
        for future in waiting.values():
            if not future.done():
                future.set_exception(McpRequestError(CONNECTION_CLOSED, reason or "Connection closed"))

    # -- the protocol -----------------------------------------------------------------------------

    async def initialize(self) -> dict[str, Any]:
        capabilities: dict[str, Any] = {}
        if self._on_elicit is not None:
            capabilities["elicitation"] = {"form": {}, "url": {}}
        if self._on_sample is not None:
            capabilities["sampling"] = {}
        result = await self.request("initialize", {"protocolVersion": PROTOCOL_VERSION,
                                                   "capabilities": capabilities, "clientInfo": _client_info()})
        version = result.get("protocolVersion")
        if version not in SUPPORTED_VERSIONS:
            raise McpRequestError(INTERNAL_ERROR, f"Unsupported protocol version from the server: {version}")
        self.server_info = as_dict(result.get("serverInfo"))
        self.capabilities = as_dict(result.get("capabilities"))
        await self.notify("notifications/initialized")
        return result

    async def list_tools(self, cursor: Optional[str] = None) -> dict[str, Any]:
        return await self.request("tools/list", {"cursor": cursor} if cursor is not None else {})

    async def call_tool(self, name: str, arguments: dict[str, Any], timeout: Optional[float] = None,
                        on_progress: Optional[Callable[[dict[str, Any]], None]] = None) -> dict[str, Any]:
        params: dict[str, Any] = {"name": name, "arguments": arguments}
        if on_progress is None:
            return await self.request("tools/call", params, timeout)
        token = f"p{next(self._ids)}"
        params["_meta"] = {"progressToken": token}
        self._progress[token] = on_progress
        try:
            return await self.request("tools/call", params, timeout)
        finally:
            self._progress.pop(token, None)

    async def _paged(self, method: str, cursor: Optional[str]) -> dict[str, Any]:
        return await self.request(method, {"cursor": cursor} if cursor is not None else {})

    async def list_resources(self, cursor: Optional[str] = None) -> dict[str, Any]:
        return await self._paged("resources/list", cursor)

    async def list_resource_templates(self, cursor: Optional[str] = None) -> dict[str, Any]:
        return await self._paged("resources/templates/list", cursor)

    async def read_resource(self, uri: str) -> dict[str, Any]:
        return await self.request("resources/read", {"uri": uri})

    async def list_prompts(self, cursor: Optional[str] = None) -> dict[str, Any]:
        return await self._paged("prompts/list", cursor)

    async def get_prompt(self, name: str, arguments: Optional[dict[str, str]] = None) -> dict[str, Any]:
        params: dict[str, Any] = {"name": name}
        if arguments:
            params["arguments"] = arguments
        return await self.request("prompts/get", params)

    # the interface `_connection.py` uses for either kind of session
    list_page = list_tools
    call = call_tool

    @staticmethod
    def is_lost(exc: BaseException) -> bool:
        return isinstance(exc, McpRequestError) and exc.code == CONNECTION_CLOSED

    # -- requests ---------------------------------------------------------------------------------

    async def request(self, method: str, params: dict[str, Any], timeout: Optional[float] = None) -> dict[str, Any]:
        if self.closed:
            raise McpRequestError(CONNECTION_CLOSED, "Connection closed")
        rid = next(self._ids)
        future: asyncio.Future[Any] = asyncio.get_running_loop().create_future()
        self._waiting[rid] = future
        limit = self.timeout if timeout is None else timeout
        try:
            await self._send({"jsonrpc": "2.0", "id": rid, "method": method, "params": params})
            try:
                async with asyncio.timeout(limit if limit and limit > 0 else None):
                    result = await future
            except TimeoutError:
                await self._cancel(rid, f"timed out after {limit:g}s")
                raise McpRequestError(REQUEST_TIMEOUT, f"Request {method!r} timed out") from None
            except asyncio.CancelledError:
                await asyncio.shield(self._cancel(rid, "caller cancelled"))
                raise
        finally:
            self._waiting.pop(rid, None)
            if future.done() and not future.cancelled():
                future.exception()  # failed while we raised another way (a dead pipe): not "never retrieved"
        if not isinstance(result, dict):
            raise McpRequestError(INTERNAL_ERROR, f"MCP server sent a {method} result that is not an object")
        return result

    async def notify(self, method: str, params: Optional[dict[str, Any]] = None) -> None:
        message: dict[str, Any] = {"jsonrpc": "2.0", "method": method}
        if params is not None:
            message["params"] = params
        await self._send(message)

    async def _cancel(self, rid: int, reason: str) -> None:
        """The courtesy `notifications/cancelled`, bounded: a server that stopped reading must not
        hold the caller."""
        if self.closed:
            return
        with suppress(Exception):
            async with asyncio.timeout(_CANCEL_WRITE_TIMEOUT):
                await self.notify("notifications/cancelled", {"requestId": rid, "reason": reason})

    async def _send(self, message: dict[str, Any]) -> None:
        data = json.dumps(message, separators=(",", ":")).encode("utf-8") + b"\n"
        try:
            async with self._write_lock:
                self._writer.write(data)
                await self._writer.drain()
        except (OSError, RuntimeError) as exc:  # a dead pipe: the connection is gone
            self._lost()
            raise McpRequestError(CONNECTION_CLOSED, "Connection closed") from exc

    # -- reading ----------------------------------------------------------------------------------

    async def _read(self) -> None:
        """Child stdout → messages, one per line, until EOF (or a line over the cap)."""
        buf = bytearray()
        scanned = 0
        reason: Optional[str] = None
        try:
            while chunk := await self._reader.read(_CHUNK):
                buf += chunk
                start = 0
                while (nl := buf.find(b"\n", max(start, scanned))) >= 0:
                    line = bytes(buf[start:nl])
                    start, scanned = nl + 1, 0
                    if line.strip():
                        self._line(line)
                del buf[:start]
                scanned = len(buf)
                if len(buf) > self._max_line:
                    reason = str(InputTooLarge(f'MCP server "{self.name}" sent a line longer than {self._max_line} '
                                               "bytes without a newline; the connection is closed"))
                    warn(f"[toolnexus] {reason}")
                    return
        except (ConnectionError, OSError):
            pass
        finally:
            self._lost(reason)

    def _line(self, line: bytes) -> None:
        try:
            message = json.loads(line)
        except (ValueError, RecursionError):
            message = None
        if not isinstance(message, dict) or message.get("jsonrpc") != "2.0":
            if self._on_item is not None:
                self._on_item(NotJsonRpc(line))
            return
        if self._on_item is not None:
            self._on_item(message)
        if "method" in message:
            method = message["method"]
            if "id" in message:
                rid = message["id"]
                if not isinstance(rid, (int, str)) or isinstance(rid, bool) or rid in self._served:
                    return  # not a request we can answer (JSON-RPC ids are strings or numbers)
                task = asyncio.ensure_future(self._serve(message))
                self._served[rid] = task
                task.add_done_callback(functools.partial(self._forget, rid))
            elif method == "notifications/tools/list_changed" and self._on_list_changed is not None:
                self._on_list_changed()
            elif method == "notifications/message" and self._on_log is not None:
                self._on_log(as_dict(message.get("params")))
            elif method == "notifications/progress":
                progress = as_dict(message.get("params"))
                listener = self._progress.get(str(progress.get("progressToken")))
                if listener is not None:
                    listener(progress)
            elif method == "notifications/cancelled":  # the server gave up on one of its requests
                params = message.get("params")
                target = params.get("requestId") if isinstance(params, dict) else None
                served = self._served.get(target) if isinstance(target, (int, str)) else None
                if served is not None:
                    served.cancel()
            return
        rid = message.get("id")
        future = self._waiting.get(rid) if isinstance(rid, int) else None
        if future is None or future.done():
            return
        error = message.get("error")
        if isinstance(error, dict):
            code = error.get("code")
            future.set_exception(McpRequestError(code if isinstance(code, int) else INTERNAL_ERROR,
                                                 str(error.get("message") or "MCP error"), error.get("data")))
        else:
            future.set_result(message.get("result"))

    def _forget(self, served_id: Any, _task: "asyncio.Task[None]") -> None:
        self._served.pop(served_id, None)

    async def _serve(self, message: dict[str, Any]) -> None:
        """Answer one request from the server."""
        method = message.get("method")
        reply: dict[str, Any] = {"jsonrpc": "2.0", "id": message.get("id")}
        if method == "ping":
            reply["result"] = {}
        elif method == "elicitation/create" and self._on_elicit is not None:
            params = message.get("params")
            try:
                reply["result"] = await self._on_elicit(params if isinstance(params, dict) else {})
            except Exception as exc:
                reply["error"] = {"code": INTERNAL_ERROR, "message": f"elicitation failed: {exc}"}
        elif method == "sampling/createMessage" and self._on_sample is not None:
            try:
                reply["result"] = await self._on_sample(as_dict(message.get("params")))
            except Exception as exc:
                reply["error"] = {"code": INTERNAL_ERROR, "message": f"sampling refused: {exc}"}
        else:
            reply["error"] = {"code": METHOD_NOT_FOUND, "message": "Method not found"}
        with suppress(McpRequestError):
            await self._send(reply)
