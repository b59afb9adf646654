"""The connected MCP clients as a served tool sees them: log level, subscriptions, the back channel.

`Peers` keeps what a server remembers per connection: the level set with `logging/setLevel` and
the resources subscribed to. A connection is keyed by its HTTP session id, or is the one direct
connection of a stdio / in-memory server; a stateless HTTP request has no key, so nothing is
remembered for it (`logging/setLevel` is accepted and changes nothing; `resources/subscribe` is
refused, since no update could ever reach that client). The session host calls `forget(key)`
when a session ends.

`McpCaller` is the `ToolCaller` a served tool gets as `ctx.caller`:
- `log` sends `notifications/message` on the call's own stream, at or above the connection's level
  (all levels until the client sets one; on the 2026-07-28 revision only what the request opted
  into); data that is not JSON is sent as its `str`.
- `progress` sends `notifications/progress` when the request carried a progress token.
- `sample` sends `sampling/createMessage` and returns the reply's text; it refuses (with
  `UnsupportedOperation`) when the client did not declare sampling or the connection cannot carry
  a request to it (stateless HTTP, the 2026-07-28 revision).
- `close_stream` ends the call's SSE response early (SSE polling): the client reconnects with
  `Last-Event-ID` and receives the rest; a no-op where streams are not resumable.
Every string a tool hands these (log data, a progress message, sampling messages) goes out strict:
a lone surrogate becomes U+FFFD, as on every other wire — the SDK's encoder refuses it.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any, Optional

import mcp_types as mtypes
from mcp.server.connection import allowed_log_levels
from mcp.shared.exceptions import MCPError
from mcp.shared.message import ServerMessageMetadata

from .._diag import logger as _log
from .._text import strict_text, strict_value
from ..errors import UnsupportedOperation
from ..resources import listen_for_changes
from ..types import LOG_LEVELS

DIRECT = "direct"  # the one connection of a stdio / in-memory server
SESSION_HEADER = "mcp-session-id"
_SAMPLING = mtypes.ClientCapabilities(sampling=mtypes.SamplingCapability())


def peer_key(ctx: Any) -> Optional[str]:
    """The connection `ctx` belongs to: its HTTP session id, `DIRECT` off HTTP, None when stateless."""
    request = getattr(ctx, "request", None)
    if request is None:
        return DIRECT
    headers = getattr(request, "headers", None)
    return headers.get(SESSION_HEADER) if headers is not None else None


@dataclass
class _Peer:
    level: Optional[str] = None  # None: every level
    subscribed: dict[str, Any] = field(default_factory=dict)  # uri -> the ServerSession to notify


class Peers:
    """Per-connection state of one server (see the module docstring)."""

    def __init__(self) -> None:
        self._peers: dict[str, _Peer] = {}
        self._listening = False

    def _peer(self, key: str) -> _Peer:
        peer = self._peers.get(key)
        if peer is None:
            peer = self._peers[key] = _Peer()
        return peer

    def forget(self, key: str) -> None:
        self._peers.pop(key, None)

    def wants_log(self, key: Optional[str], level: str) -> bool:
        peer = self._peers.get(key) if key is not None else None
        if peer is None or peer.level is None:
            return True
        return LOG_LEVELS.index(level) >= LOG_LEVELS.index(peer.level)

    async def set_level(self, ctx: Any, params: mtypes.SetLevelRequestParams) -> mtypes.EmptyResult:
        key = peer_key(ctx)
        if key is not None:
            self._peer(key).level = params.level
        return mtypes.EmptyResult()

    def subscribe(self, ctx: Any, uri: str) -> None:
        key = peer_key(ctx)
        if key is None:
            raise MCPError(code=mtypes.INVALID_REQUEST,
                           message="resources/subscribe needs a session, and this request has none: updates could "
                                   "never reach it (the server opens a session at initialize for clients that "
                                   "declare capabilities)")
        self._peer(key).subscribed[uri] = ctx.session
        if not self._listening:
            listen_for_changes(self)
            self._listening = True

    def unsubscribe(self, ctx: Any, uri: str) -> None:
        key = peer_key(ctx)
        peer = self._peers.get(key) if key is not None else None
        if peer is not None:
            peer.subscribed.pop(uri, None)

    async def resource_changed(self, uri: str) -> None:
        """Send `notifications/resources/updated` to every connection subscribed to `uri`."""
        note = mtypes.ResourceUpdatedNotification(params=mtypes.ResourceUpdatedNotificationParams(uri=uri))
        for peer in list(self._peers.values()):
            session = peer.subscribed.get(uri)
            if session is not None:
                try:
                    await session.send_notification(note)
                except Exception:
                    _log.debug("toolnexus: MCP serve: resource update to a client failed", exc_info=True)


def _jsonable(data: Any) -> Any:
    try:
        json.dumps(data)
    except (TypeError, ValueError):
        return str(data)
    return data


def _sampling_messages(messages: Any) -> list[mtypes.SamplingMessage]:
    if isinstance(messages, str):
        messages = [{"role": "user", "content": messages}]
    if not isinstance(messages, list) or not messages:
        raise UnsupportedOperation("ctx.sample(): prompt must be a text or a non-empty list of {role, content}")
    out = []
    for item in messages:
        if not isinstance(item, Mapping) or item.get("role") not in ("user", "assistant"):
            raise UnsupportedOperation(f"ctx.sample(): each message needs role user or assistant, got {item!r}")
        content = item.get("content")
        block: Any = mtypes.TextContent(type="text", text=content) if isinstance(content, str) else content
        if isinstance(block, Mapping):
            block = mtypes.SamplingMessage.model_validate({"role": item["role"], "content": dict(block)}).content
        out.append(mtypes.SamplingMessage(role=item["role"], content=block))
    return out


def _reply_text(result: mtypes.CreateMessageResult) -> str:
    blocks = result.content if isinstance(result.content, list) else [result.content]
    return "".join(b.text for b in blocks if isinstance(b, mtypes.TextContent))


class McpCaller:
    """`ctx.caller` for a tool run by one served MCP request (see the module docstring)."""

    def __init__(self, ctx: Any, peers: Peers) -> None:
        self._ctx = ctx
        self._peers = peers

    async def log(self, level: str, data: Any, logger: Optional[str] = None) -> None:
        ctx = self._ctx
        if not self._peers.wants_log(peer_key(ctx), level):
            return
        if level not in allowed_log_levels(ctx.protocol_version, ctx.meta):
            return  # the 2026-07-28 revision: the request did not opt into this level
        params = mtypes.LoggingMessageNotificationParams(level=level, data=strict_value(_jsonable(data)),
                                                         logger=None if logger is None else strict_text(logger))
        await ctx.session.send_notification(mtypes.LoggingMessageNotification(params=params),
                                            related_request_id=ctx.request_id)

    async def progress(self, progress: float, total: Optional[float] = None, message: Optional[str] = None) -> None:
        await self._ctx.session.report_progress(progress, total, None if message is None else strict_text(message))

    async def sample(self, messages: Any, *, max_tokens: int, system: Optional[str] = None,
                     temperature: Optional[float] = None, stop: Optional[list[str]] = None) -> str:
        session = self._ctx.session
        if not session.check_client_capability(_SAMPLING):
            raise UnsupportedOperation("ctx.sample(): the MCP client did not declare sampling")
        if not session.can_send_request:
            raise UnsupportedOperation("ctx.sample(): this MCP connection cannot carry a request to the client "
                                       "(stateless HTTP, or the 2026-07-28 revision)")
        params = mtypes.CreateMessageRequestParams(messages=_sampling_messages(strict_value(messages)),
                                                   max_tokens=max_tokens,
                                                   system_prompt=None if system is None else strict_text(system),
                                                   temperature=temperature, stop_sequences=strict_value(stop))
        result = await session.send_request(mtypes.CreateMessageRequest(params=params), mtypes.CreateMessageResult,
                                            metadata=ServerMessageMetadata(related_request_id=self._ctx.request_id))
        return _reply_text(result)

    async def close_stream(self) -> None:
        close = self._ctx.close_sse_stream
        if close is not None:
            await close()
