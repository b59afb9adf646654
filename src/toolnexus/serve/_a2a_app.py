"""The A2A endpoint: the Agent Card and JSON-RPC on every other path of the served app.

Order of checks: Host/Origin (421/403, the DNS-rebinding guard) → bearer token when the profile
sets `auth_token` (401, the card included) → method: `GET` of the card path answers the card,
any other `GET` is 404 `not found`, `POST` is JSON-RPC, anything else 405 → body cap (413).

JSON-RPC (`toolnexus.serve._jsonrpc` checks the envelope first): every reply is HTTP 200
`application/json`. Methods and errors:

    SendMessage / message/send   a new task, or a message on one (by taskId): its answer, or queued
    GetTask / tasks/get          the stored task                 -32001 Task not found: <id>
    CancelTask / tasks/cancel    stop the run, store canceled    -32002 Task cannot be canceled: …
    ListTasks (1.0)              a page of tasks, newest first (filters, pageSize 1–100, pageToken);
                                 -32004 when the profile's `list_tasks` is false
    body not JSON                -32700 Parse error (id null)
    not one request object, `jsonrpc` not "2.0", no `method`, an `id` not a string/integer/null
                                 -32600 Invalid Request: … (never a result)
    streaming, resubscribing, the extended card (not declared on the card)
                                 -32004 <method> is not supported: …
    push notification configs (not declared on the card)
                                 -32003 Push notifications are not supported: …
    other methods                -32601 Method not found: <method>
    bad params (no message, no messageId, no text, a negative historyLength, a bad ListTasks
    filter or page, a contextId that is not the task's, …)  -32602 Invalid params: <what, where>
    a message to a finished task, to one working on an answer, or a full queue
                                 -32004 Task <id> is …
    an A2A-Version we do not speak                               -32009 Version not supported: <v>
    a store failure              -32603 Internal error (also while the server is stopping)

The caller's protocol generation (1.0, 0.3, or the existing toolnexus form) is read from each
request and the task is written back in it (`toolnexus.serve._a2a_render`), its history cut to
`historyLength` when asked. A blocking `SendMessage` (the 1.0 and 0.3 defaults) waits up to
`blocking_timeout` seconds for the task to finish or ask for input, then answers with whatever
the task is by then.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, Optional

from .._diag import logger
from .._text import strict_json
from ..errors import UnsupportedOperation
from ..mcp_serve._http import Receive, Send, send_text
from ._a2a_params import ParamError, list_params, send_params, task_query
from ._a2a_profile import blocking_timeout, lists_tasks, max_body
from ._a2a_render import LIST_METHOD, VersionError, negotiate, render_send_result, render_task
from ._card import CARD_PATH, build_agent_card
from ._fulfil import Fulfiller, ServerStopping, TaskBusy, TaskConflict, TaskFinished, TaskNotFound
from ._jsonrpc import INTERNAL_ERROR, INVALID_PARAMS, METHOD_NOT_FOUND, RpcError, error_reply, read_request
from ._task_list import page_of
from ._tasks import TaskStore
from .guard import BodyTooLarge, ClientGone, HostGuard, bearer_ok, header, read_body

TASK_NOT_FOUND = -32001
TASK_NOT_CANCELABLE = -32002
PUSH_NOT_SUPPORTED = -32003
UNSUPPORTED_OPERATION = -32004
VERSION_NOT_SUPPORTED = -32009
_SEND, _GET, _CANCEL, _LIST = "send", "get", "cancel", "list"
_OPS = {"SendMessage": _SEND, "message/send": _SEND, "GetTask": _GET, "tasks/get": _GET,
        "CancelTask": _CANCEL, "tasks/cancel": _CANCEL, LIST_METHOD: _LIST}
# A2A methods (1.0 and 0.3 names) for capabilities the card does not declare: the error A2A says
# to answer with, not "method not found".
_NO_STREAMING = (UNSUPPORTED_OPERATION, "is not supported: this agent does not stream (capabilities.streaming is "
                                        "false); use SendMessage and GetTask")
_NO_PUSH = (PUSH_NOT_SUPPORTED, "Push notifications are not supported: capabilities.pushNotifications is false; "
                                "poll with GetTask")
_NO_EXTENDED_CARD = (UNSUPPORTED_OPERATION, "is not supported: this agent has no extended agent card; read "
                                            "/.well-known/agent-card.json")
_UNDECLARED = {
    "SendStreamingMessage": _NO_STREAMING, "SubscribeToTask": _NO_STREAMING, "message/stream": _NO_STREAMING,
    "tasks/resubscribe": _NO_STREAMING, "GetExtendedAgentCard": _NO_EXTENDED_CARD,
    "agent/getAuthenticatedExtendedCard": _NO_EXTENDED_CARD,
    **{name: _NO_PUSH for name in (
        "CreateTaskPushNotificationConfig", "GetTaskPushNotificationConfig", "ListTaskPushNotificationConfigs",
        "DeleteTaskPushNotificationConfig", "tasks/pushNotificationConfig/set", "tasks/pushNotificationConfig/get",
        "tasks/pushNotificationConfig/list", "tasks/pushNotificationConfig/delete")},
}


async def _send_json(send: Send, payload: Any, status: int = 200) -> None:
    body = strict_json(payload)  # a lone surrogate as \ufffd: strict parsers refuse its escape
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
        self._list_tasks = lists_tasks(profile)
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
        """The JSON-RPC URL the card advertises (see `toolnexus.serve._card`)."""
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
        call = read_request(body)
        if isinstance(call, RpcError):
            return error_reply(call.rid, call.code, call.message)
        rid, method, params = call.rid, call.method, call.params
        try:
            try:
                dialect = negotiate(method, version)
            except VersionError as exc:
                raise RpcError(
                    VERSION_NOT_SUPPORTED, f"Version not supported: {exc} (this server speaks 1.0 and 0.3)"
                ) from exc
            if dialect is None and method in _UNDECLARED:
                code, why = _UNDECLARED[method]
                raise RpcError(code, why if code == PUSH_NOT_SUPPORTED else f"{method} {why}")
            if dialect is None:
                raise RpcError(METHOD_NOT_FOUND, f"Method not found: {method}")
            op = _OPS[method]
            if op == _SEND:
                result = await self._send_message(params, dialect)
            elif op == _LIST:
                result = await self._list(params, dialect)
            else:
                query = task_query(params)
                task = await (self._get(query.task_id) if op == _GET else self._cancel(query.task_id))
                result = render_task(task, dialect, history_length=query.history_length)
        except RpcError as exc:
            return error_reply(rid, exc.code, exc.message)
        except ParamError as exc:
            return error_reply(rid, INVALID_PARAMS, exc.message)
        except ServerStopping:
            return error_reply(rid, INTERNAL_ERROR, "Internal error: the server is stopping")
        except TaskConflict:
            return error_reply(rid, INTERNAL_ERROR, "Internal error: the task kept changing; try again")
        except Exception:
            logger.warning("toolnexus: A2A request %r failed", method, exc_info=True)
            return error_reply(rid, INTERNAL_ERROR, "Internal error")
        return {"jsonrpc": "2.0", "id": rid, "result": result}

    async def _send_message(self, params: dict[str, Any], dialect: str) -> dict[str, Any]:
        send = send_params(params, dialect)
        if send.task_id:
            try:
                task = await self.fulfiller.follow_up(send.task_id, send.text, message=send.message,
                                                      context_id=send.context_id)
            except TaskNotFound:
                raise RpcError(TASK_NOT_FOUND, f"Task not found: {send.task_id}") from None
            except (TaskBusy, TaskFinished) as exc:
                raise RpcError(UNSUPPORTED_OPERATION, str(exc)) from None
        else:
            task = await self.fulfiller.submit(send.text, send.context_id, message=send.message)
        if send.blocking:
            await self.fulfiller.wait_settled(task["id"], self._blocking_timeout)
            task = await self.fulfiller.store.get(task["id"]) or task
        return render_send_result(task, dialect, send.history_length)

    async def _get(self, task_id: str) -> dict[str, Any]:
        task = await self.fulfiller.store.get(task_id)
        if task is None:
            raise RpcError(TASK_NOT_FOUND, f"Task not found: {task_id}")
        return task

    async def _cancel(self, task_id: str) -> dict[str, Any]:
        try:
            return await self.fulfiller.cancel(task_id)
        except TaskNotFound:
            raise RpcError(TASK_NOT_FOUND, f"Task not found: {task_id}") from None
        except TaskFinished as exc:
            raise RpcError(TASK_NOT_CANCELABLE, f"Task cannot be canceled: {task_id} is {exc.state}") from None

    async def _list(self, params: dict[str, Any], dialect: str) -> dict[str, Any]:
        if not self._list_tasks:
            raise RpcError(UNSUPPORTED_OPERATION, "ListTasks is not available on this server (list_tasks is off); "
                                                  "ask for a task by its id with GetTask")
        query = list_params(params)
        store = self.fulfiller.store
        try:
            if not isinstance(store, TaskStore):  # a duck-typed store with only get/save
                raise UnsupportedOperation(type(store).__name__)
            tasks = await store.list_tasks()
        except UnsupportedOperation:
            raise RpcError(UNSUPPORTED_OPERATION, "ListTasks is not available: this server's task store "
                                                  "cannot list its tasks") from None
        page = page_of(tasks, query)
        return {"tasks": [render_task(t, dialect, history_length=query.history_length,
                                      include_artifacts=query.include_artifacts) for t in page.tasks],
                "nextPageToken": page.next_token, "pageSize": len(page.tasks), "totalSize": page.total}
