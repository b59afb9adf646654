"""The A2A endpoint: the Agent Card and JSON-RPC on every other path of the served app.

Order of checks: Host/Origin (421/403, the DNS-rebinding guard) → bearer token when the profile
sets `auth_token` (401, the card included) → method: `GET` of the card path answers the card,
any other `GET` is 404 `not found`, `POST` is JSON-RPC, anything else 405 → body cap (413).

JSON-RPC: every reply is HTTP 200 `application/json`. Methods and errors:

    SendMessage / message/send   a new task (or the answer to an interrupted one, by taskId)
    GetTask / tasks/get          the stored task                 -32001 Task not found: <id>
    CancelTask / tasks/cancel    stop the run, store canceled    -32002 Task cannot be canceled: …
    body not JSON                -32700 Parse error (id null)
    not a JSON object            -32600 Invalid Request (id null)
    other methods                -32601 Method not found: <method>
    params not an object, no message, no text                    -32602 Invalid params: …
    a message to a running or finished task                      -32004 Task <id> is …
    an A2A-Version we do not speak                               -32009 Version not supported: <v>
    a store failure              -32603 Internal error (also while the server is stopping)

The caller's protocol generation (1.0, 0.3, or the existing toolnexus form) is read from each
request and the task is written back in it (`toolnexus.serve.a2a_render`). A blocking
`SendMessage` (the 1.0 and 0.3 defaults) waits up to `blocking_timeout` seconds for the task to
finish or ask for input, then answers with whatever the task is by then.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from typing import Any, Optional

from .._diag import logger
from ..mcp_serve.http import Receive, Send, send_text
from .a2a_profile import blocking_timeout, max_body
from .a2a_render import VersionError, message_in, negotiate, render_send_result, render_task
from .card import CARD_PATH, build_agent_card
from .fulfil import Fulfiller, ServerStopping, TaskBusy, TaskFinished, TaskNotFound
from .guard import BodyTooLarge, ClientGone, HostGuard, bearer_ok, header, read_body
from ..errors import ToolnexusError

__all__ = ["A2AEndpoint"]

PARSE_ERROR = -32700
INVALID_REQUEST = -32600
METHOD_NOT_FOUND = -32601
INVALID_PARAMS = -32602
INTERNAL_ERROR = -32603
TASK_NOT_FOUND = -32001
TASK_NOT_CANCELABLE = -32002
UNSUPPORTED_OPERATION = -32004
VERSION_NOT_SUPPORTED = -32009
_SEND, _GET, _CANCEL = "send", "get", "cancel"
_OPS = {"SendMessage": _SEND, "message/send": _SEND, "GetTask": _GET, "tasks/get": _GET,
        "CancelTask": _CANCEL, "tasks/cancel": _CANCEL}


class _RpcError(ToolnexusError):
    def __init__(self, code: int, message: str) -> None:
        super().__init__(message)
        self.code, self.message = code, message


async def _send_json(send: Send, payload: Any, status: int = 200) -> None:
    body = json.dumps(payload).encode("utf-8")
    await send({"type": "http.response.start", "status": status,
                "headers": [(b"content-type", b"application/json"), (b"content-length", str(len(body)).encode())]})
    await send({"type": "http.response.body", "body": body})


class A2AEndpoint:
    """ASGI app for the A2A routes of one served profile."""

    def __init__(self, profile: dict[str, Any], skills: list[Any], fulfiller: Fulfiller, *,
                 wildcard_bind: bool, local_url: Callable[[], str]) -> None:
        self._profile = profile
        self._skills = list(skills)
        self.fulfiller = fulfiller
        self._guard = HostGuard(profile.get("allowed_hosts"), profile.get("allowed_origins"))
        self._token: Optional[str] = profile.get("auth_token")
        self._limit = max_body(profile)
        self._blocking_timeout = blocking_timeout(profile)
        self._wildcard = wildcard_bind
        self._local_url = local_url

    # ------------------------------------------------------------------ HTTP

    async def __call__(self, scope: dict[str, Any], receive: Receive, send: Send) -> None:
        refusal = self._guard.refusal(scope)
        if refusal is not None:
            await send_text(send, *refusal)
            return
        if self._token is not None and not bearer_ok(scope, self._token):
            await send_text(send, 401, "unauthorized", [(b"www-authenticate", b"Bearer")])
            return
        method = scope.get("method")
        if method == "GET":
            if scope.get("path") == CARD_PATH:
                await _send_json(send, build_agent_card(self._profile, self._skills, self.endpoint_url(scope)))
            else:
                await send_text(send, 404, "not found")
            return
        if method != "POST":
            await send_text(send, 405, "method not allowed", [(b"allow", b"GET, POST")])
            return
        try:
            body = await read_body(scope, receive, self._limit)
        except BodyTooLarge:
            await send_text(send, 413, "request body too large")
            return
        except ClientGone:
            return
        await _send_json(send, await self.answer(body, header(scope, b"a2a-version")))

    def endpoint_url(self, scope: dict[str, Any]) -> str:
        """The JSON-RPC URL the card advertises (see `toolnexus.serve.card`)."""
        public = self._profile.get("public_url")
        if public:
            return str(public)
        host = header(scope, b"host")
        if self._wildcard and host:
            return f"{scope.get('scheme') or 'http'}://{host.strip()}/"
        return self._local_url() + "/"

    # ------------------------------------------------------------------ JSON-RPC

    async def answer(self, body: bytes, version: Optional[str]) -> dict[str, Any]:
        """One JSON-RPC request body → the reply object."""
        try:
            request = json.loads(body)
        except ValueError:
            return _error(None, PARSE_ERROR, "Parse error")
        if not isinstance(request, dict):
            return _error(None, INVALID_REQUEST, "Invalid Request: expected one JSON-RPC request object")
        rid = request.get("id")
        method = request.get("method")
        try:
            try:
                dialect = negotiate(method, version)
            except VersionError as exc:
                raise _RpcError(VERSION_NOT_SUPPORTED, f"Version not supported: {exc} (this server speaks 1.0 and 0.3)")
            if dialect is None:
                raise _RpcError(METHOD_NOT_FOUND, f"Method not found: {method}")
            params = request.get("params")
            params = {} if params is None else params
            if not isinstance(params, dict):
                raise _RpcError(INVALID_PARAMS, "Invalid params: params must be a JSON object")
            op = _OPS[str(method)]
            if op == _SEND:
                result = await self._send_message(params, dialect)
            elif op == _GET:
                result = render_task(await self._get(_task_id(params)), dialect)
            else:
                result = render_task(await self._cancel(_task_id(params)), dialect)
        except _RpcError as exc:
            return _error(rid, exc.code, exc.message)
        except ServerStopping:
            return _error(rid, INTERNAL_ERROR, "Internal error: the server is stopping")
        except Exception:  # noqa: BLE001 - e.g. the store failed: an error reply, never a crash
            logger.warning("toolnexus: A2A request %r failed", method, exc_info=True)
            return _error(rid, INTERNAL_ERROR, "Internal error")
        return {"jsonrpc": "2.0", "id": rid, "result": result}

    async def _send_message(self, params: dict[str, Any], dialect: str) -> dict[str, Any]:
        inbound = message_in(params, dialect)
        if inbound is None:
            raise _RpcError(INVALID_PARAMS, "Invalid params: params.message must be a message object")
        if not inbound.text.strip():
            raise _RpcError(INVALID_PARAMS, "Invalid params: the message has no text (send at least one non-empty text part)")
        if inbound.task_id:
            try:
                task = await self.fulfiller.follow_up(inbound.task_id, inbound.text)
            except TaskNotFound:
                raise _RpcError(TASK_NOT_FOUND, f"Task not found: {inbound.task_id}") from None
            except (TaskBusy, TaskFinished) as exc:
                raise _RpcError(UNSUPPORTED_OPERATION, str(exc)) from None
        else:
            task = await self.fulfiller.submit(inbound.text, inbound.context_id)
        if inbound.blocking:
            await self.fulfiller.wait_settled(task["id"], self._blocking_timeout)
            task = await self.fulfiller.store.get(task["id"]) or task
        return render_send_result(task, dialect)

    async def _get(self, task_id: str) -> dict[str, Any]:
        task = await self.fulfiller.store.get(task_id)
        if task is None:
            raise _RpcError(TASK_NOT_FOUND, f"Task not found: {task_id}")
        return task

    async def _cancel(self, task_id: str) -> dict[str, Any]:
        try:
            return await self.fulfiller.cancel(task_id)
        except TaskNotFound:
            raise _RpcError(TASK_NOT_FOUND, f"Task not found: {task_id}") from None
        except TaskFinished as exc:
            raise _RpcError(TASK_NOT_CANCELABLE, f"Task cannot be canceled: {task_id} is {exc.state}") from None


def _task_id(params: dict[str, Any]) -> str:
    return str(params.get("id") or "")


def _error(rid: Any, code: int, message: str) -> dict[str, Any]:
    return {"jsonrpc": "2.0", "id": rid, "error": {"code": code, "message": message}}
