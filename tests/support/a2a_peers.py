"""Scripted A2A peers over real loopback HTTP, one per protocol generation, for outbound tests.

`A2APeer(dialect)` serves an Agent Card and a JSON-RPC endpoint with starlette + uvicorn on
127.0.0.1:<free port> in a thread. Dialects:

- `"1.0"`: card with `supportedInterfaces` only (endpoint `/a2a/v1`); requires `A2A-Version: 1.0`
  (else -32009); methods `SendMessage`/`GetTask`/`CancelTask`; rejects `kind` parts, roles other
  than `ROLE_USER` and unknown configuration fields (-32602), like a protobuf-JSON server; replies
  `{"task": ...}` with `TASK_STATE_*` states and bare `{"text"}` parts.
- `"0.3"`: card with `protocolVersion: 0.3.0` and `url` (endpoint `/a2a/jsonrpc`); methods
  `message/send`/`tasks/get`/`tasks/cancel`; `kind` parts; lowercase states; `kind: "task"`.
- `"mixed"`: the existing toolnexus server: 0.3 card, JSON-RPC on every POST path, methods
  `SendMessage`/`GetTask` only (anything else -32601), `kind` parts, bare Task replies.

Tests script the task with neutral `Step`s: `peer.on_send` answers successive `SendMessage`
calls, `peer.polls` successive `GetTask` calls (the last step repeats). A step may instead be a
fault: an HTTP status, a JSON-RPC error, a raw (non-JSON) body, or a hang until the client goes
away. Every request is recorded (`peer.calls`); `await peer.arrived(method, n)` waits for the
n-th call of a method without sleeping (a condition variable, waited on in a worker thread).
"""

from __future__ import annotations

import asyncio
import json
import socket
import threading
import time
from dataclasses import dataclass
from typing import Any, Optional

import uvicorn
from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import JSONResponse, Response
from starlette.routing import Route

__all__ = ["Step", "Call", "A2APeer", "JumpClock", "SleepWatchClock", "working", "completed", "failed"]

CARD_PATH = "/.well-known/agent-card.json"


@dataclass
class Step:
    """One scripted reply. `artifacts`: per artifact, its parts (a `str` is a text part, a `dict`
    is sent as is). `history`: `(role, text)` pairs, role `user`/`agent`. `message`: status text."""

    state: str = "working"
    artifacts: tuple[tuple[Any, ...], ...] = ()
    history: tuple[tuple[str, str], ...] = ()
    message: Optional[str] = None
    message_parts: tuple[Any, ...] = ()  # extra status-message parts (e.g. a url part)
    reply_message: Optional[str] = None  # answer SendMessage with a Message, not a Task
    http: Optional[tuple[int, str]] = None  # fault: HTTP status + body
    rpc_error: Optional[dict[str, Any]] = None  # fault: JSON-RPC error object
    raw: Optional[str] = None  # fault: this body verbatim (e.g. not JSON)
    null_result: bool = False  # fault: "result": null
    hang: bool = False  # fault: never answer; wait for the client to leave


def working() -> Step:
    return Step("working")


def completed(*texts: str) -> Step:
    return Step("completed", artifacts=(tuple(texts),) if texts else ())


def failed(message: Optional[str] = None) -> Step:
    return Step("failed", message=message)


@dataclass
class Call:
    method: str
    params: dict[str, Any]
    headers: dict[str, str]  # lower-cased names
    path: str


class JumpClock:
    """A virtual clock: `sleep(s)` advances `now()` by `s` at once (and yields to the loop).

    Time is kept in whole nanoseconds so sums of sleeps do not drift (10 × 0.1 s is 1 s exactly).
    """

    def __init__(self) -> None:
        self.ns = 0
        self.sleeps: list[float] = []

    def now(self) -> float:
        return self.ns / 1e9

    async def sleep(self, seconds: float) -> None:
        self.sleeps.append(seconds)
        self.ns += max(0, round(seconds * 1e9))
        await asyncio.sleep(0)


class SleepWatchClock:
    """Real time, but `sleeping` is set whenever a sleep starts: a test can act *during* a sleep."""

    def __init__(self) -> None:
        self.sleeping = asyncio.Event()

    def now(self) -> float:
        return time.monotonic()

    async def sleep(self, seconds: float) -> None:
        self.sleeping.set()
        await asyncio.sleep(seconds)


class _PromptServer(uvicorn.Server):
    """uvicorn whose main loop waits on an event instead of a 0.1 s tick, so stopping is prompt."""

    _loop: Optional[asyncio.AbstractEventLoop] = None
    _wake: Optional[asyncio.Event] = None

    async def main_loop(self) -> None:
        self._loop, self._wake = asyncio.get_running_loop(), asyncio.Event()
        if not self.should_exit:
            await self._wake.wait()

    def stop(self) -> None:
        self.should_exit = True
        if self._loop is not None and self._wake is not None:
            self._loop.call_soon_threadsafe(self._wake.set)


_METHODS = {
    "1.0": {"SendMessage": "send", "GetTask": "get", "CancelTask": "cancel"},
    "0.3": {"message/send": "send", "tasks/get": "get", "tasks/cancel": "cancel"},
    "mixed": {"SendMessage": "send", "GetTask": "get"},
}
_V1_CONFIG_KEYS = {"acceptedOutputModes", "historyLength", "returnImmediately", "taskPushNotificationConfig"}
_V03_CONFIG_KEYS = {"acceptedOutputModes", "historyLength", "blocking", "pushNotificationConfig"}


class A2APeer:
    """A scripted A2A agent (see the module docstring). Use as a context manager."""

    def __init__(self, dialect: str = "1.0", *, name: Any = "Peer Agent", skills: Optional[list[Any]] = None,
                 card: Optional[dict[str, Any]] = None, card_status: int = 200, card_body: Optional[str] = None,
                 card_hang: bool = False) -> None:
        assert dialect in _METHODS, dialect
        self.dialect = dialect
        self.name = name
        self.skills = (
            skills if skills is not None else [{"id": "search", "name": "Search", "description": "Finds things."}]
        )
        self.card_override = card
        self.card_status = card_status
        self.card_body = card_body
        self.card_hang = card_hang
        self.on_send: list[Step] = [working()]
        self.polls: list[Step] = [completed("done")]
        self.calls: list[Call] = []
        self.card_requests: list[dict[str, str]] = []
        self.tasks: dict[str, dict[str, Any]] = {}
        self.client_left = threading.Event()
        self._cond = threading.Condition()
        self._sends = 0
        self._gets = 0
        self._stopping = threading.Event()
        self.base_url = ""

    # ------------------------------------------------------------------ lifecycle

    def __enter__(self) -> "A2APeer":
        sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        # inherited by accepted sockets: without it each reply waits ~40 ms on Nagle + delayed ACK
        sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        sock.bind(("127.0.0.1", 0))
        sock.listen(64)  # listening before uvicorn runs: early clients wait in the backlog
        self._sock = sock
        self.base_url = f"http://127.0.0.1:{sock.getsockname()[1]}"
        app = Starlette(routes=[Route(CARD_PATH, self._card, methods=["GET"]),
                                Route("/{path:path}", self._rpc, methods=["POST"])])
        self._server = _PromptServer(uvicorn.Config(app, log_level="critical", lifespan="off",
                                                    timeout_graceful_shutdown=1))
        self._thread = threading.Thread(target=lambda: asyncio.run(self._server.serve(sockets=[sock])), daemon=True)
        self._thread.start()
        return self

    def __exit__(self, *exc: Any) -> None:
        self._stopping.set()
        self._server.stop()
        self._thread.join(10)
        self._sock.close()

    @property
    def card_url(self) -> str:
        return self.base_url + CARD_PATH

    @property
    def rpc_path(self) -> str:
        return {"1.0": "/a2a/v1", "0.3": "/a2a/jsonrpc", "mixed": "/"}[self.dialect]

    # ------------------------------------------------------------------ observation

    def methods(self) -> list[str]:
        with self._cond:
            return [c.method for c in self.calls]

    def calls_of(self, method: str) -> list[Call]:
        with self._cond:
            return [c for c in self.calls if c.method == method]

    async def arrived(self, method: str, count: int = 1, timeout: float = 10.0) -> Call:
        """Wait until `method` was called `count` times; return that call."""

        def wait() -> Call:
            with self._cond:
                ok = self._cond.wait_for(lambda: len([c for c in self.calls if c.method == method]) >= count, timeout)
                if not ok:
                    raise AssertionError(f"{method} was not called {count} time(s); calls: {self.methods()}")
                return [c for c in self.calls if c.method == method][count - 1]

        return await asyncio.to_thread(wait)

    # ------------------------------------------------------------------ card

    def card(self) -> dict[str, Any]:
        card: dict[str, Any] = {"name": self.name, "description": "A scripted peer.", "version": "1.0.0"}
        if self.dialect == "1.0":
            card["supportedInterfaces"] = [{"url": self.base_url + self.rpc_path, "protocolBinding": "JSONRPC",
                                            "protocolVersion": "1.0"}]
        else:
            card["protocolVersion"] = "0.3.0"
            card["url"] = self.base_url + self.rpc_path
            if self.dialect == "0.3":
                card["preferredTransport"] = "JSONRPC"
        card.update({"capabilities": {"streaming": False, "pushNotifications": False},
                     "defaultInputModes": ["text"], "defaultOutputModes": ["text"], "skills": self.skills})
        if self.card_override is not None:
            card.update(self.card_override)
            card = {k: v for k, v in card.items() if v is not None}
        return card

    async def _card(self, request: Request) -> Response:
        with self._cond:
            self.card_requests.append({k.lower(): v for k, v in request.headers.items()})
        if self.card_hang:
            await self._hang(request)
            return Response(status_code=504)
        if self.card_body is not None or self.card_status != 200:
            return Response(self.card_body or "", status_code=self.card_status, media_type="application/json")
        return JSONResponse(self.card())

    # ------------------------------------------------------------------ json-rpc

    async def _rpc(self, request: Request) -> Response:
        raw = await request.body()
        try:
            body = json.loads(raw)
        except ValueError:
            return _rpc_reply(None, error={"code": -32700, "message": "Parse error"})
        rid, method, params = body.get("id"), body.get("method"), body.get("params") or {}
        call = Call(str(method), params, {k.lower(): v for k, v in request.headers.items()}, request.url.path)
        with self._cond:
            self.calls.append(call)
            self._cond.notify_all()
        if self.dialect != "mixed" and request.url.path != self.rpc_path:
            return Response("not found", status_code=404)
        if self.dialect == "1.0" and request.headers.get("a2a-version") != "1.0":
            return _rpc_reply(rid, error={"code": -32009, "message": "A2A version not supported"})
        kind = _METHODS[self.dialect].get(str(method))
        if kind is None:
            return _rpc_reply(rid, error={"code": -32601, "message": f"Method not found: {method}"})
        if kind == "send":
            return await self._send(request, rid, params)
        task = self.tasks.get(str(params.get("id")))
        if task is None:
            return _rpc_reply(rid, error={"code": -32001, "message": f"Task not found: {params.get('id')}"})
        if kind == "cancel":
            task["state"] = "canceled"
            return _rpc_reply(rid, result=self._task_json(task, Step("canceled")))
        with self._cond:
            step = self.polls[min(self._gets, len(self.polls) - 1)]
            self._gets += 1
        return await self._answer(request, rid, task, step, wrap=False)

    async def _send(self, request: Request, rid: Any, params: dict[str, Any]) -> Response:
        problem = self._check_message(params)
        if problem:
            return _rpc_reply(rid, error={"code": -32602, "message": f"Invalid params: {problem}"})
        message = params["message"]
        with self._cond:
            step = self.on_send[min(self._sends, len(self.on_send) - 1)]
            self._sends += 1
            task_id = message.get("taskId") or f"t{self._sends}"
            task = self.tasks.setdefault(
                task_id, {"id": task_id, "contextId": message.get("contextId") or f"ctx-{self._sends}"}
            )
        return await self._answer(request, rid, task, step, wrap=self.dialect == "1.0")

    def _check_message(self, params: dict[str, Any]) -> Optional[str]:
        message = params.get("message")
        if not isinstance(message, dict) or not isinstance(message.get("parts"), list) or not message.get("messageId"):
            return "message with messageId and parts required"
        config = params.get("configuration") or {}
        if self.dialect == "1.0":
            if message.get("role") != "ROLE_USER":
                return f"role {message.get('role')!r}"
            if any("kind" in p for p in message["parts"]) or "kind" in message:
                return "unknown field kind"
            if set(config) - _V1_CONFIG_KEYS:
                return f"unknown configuration fields {sorted(set(config) - _V1_CONFIG_KEYS)}"
        else:
            if message.get("role") != "user":
                return f"role {message.get('role')!r}"
            if any(p.get("kind") != "text" for p in message["parts"]):
                return "parts need kind"
            if self.dialect == "0.3" and set(config) - _V03_CONFIG_KEYS:
                return f"unknown configuration fields {sorted(set(config) - _V03_CONFIG_KEYS)}"
        return None

    async def _answer(self, request: Request, rid: Any, task: dict[str, Any], step: Step, wrap: bool) -> Response:
        if step.hang:
            await self._hang(request)
            return Response(status_code=504)
        if step.http is not None:
            return Response(step.http[1], status_code=step.http[0])
        if step.raw is not None:
            return Response(step.raw, media_type="application/json")
        if step.rpc_error is not None:
            return _rpc_reply(rid, error=step.rpc_error)
        if step.null_result:
            return _rpc_reply(rid, result=None)
        if step.reply_message is not None:
            msg = self._message("agent", [step.reply_message])
            msg.update({"taskId": task["id"], "contextId": task["contextId"]})
            return _rpc_reply(rid, result={"message": msg} if wrap else msg)
        task["state"] = step.state
        body = self._task_json(task, step)
        return _rpc_reply(rid, result={"task": body} if wrap else body)

    async def _hang(self, request: Request) -> None:
        while not self._stopping.is_set():
            if await request.is_disconnected():
                self.client_left.set()
                return
            await asyncio.sleep(0.02)

    # ------------------------------------------------------------------ rendering

    def _part(self, part: Any) -> Any:
        if not isinstance(part, str):
            return part
        return {"text": part} if self.dialect == "1.0" else {"kind": "text", "text": part}

    def _message(self, role: str, parts: list[Any]) -> dict[str, Any]:
        msg: dict[str, Any] = {"role": f"ROLE_{role.upper()}" if self.dialect == "1.0" else role,
                               "messageId": f"m-{role}", "parts": [self._part(p) for p in parts]}
        if self.dialect == "0.3":
            msg["kind"] = "message"
        return msg

    def _task_json(self, task: dict[str, Any], step: Step) -> dict[str, Any]:
        state = "TASK_STATE_" + step.state.upper().replace("-", "_") if self.dialect == "1.0" else step.state
        status: dict[str, Any] = {"state": state}
        if step.message is not None or step.message_parts:
            parts = ([step.message] if step.message is not None else []) + list(step.message_parts)
            status["message"] = self._message("agent", parts)
        out: dict[str, Any] = {"id": task["id"], "contextId": task["contextId"], "status": status}
        if step.artifacts:
            out["artifacts"] = [{"artifactId": f"a{i}", "parts": [self._part(p) for p in parts]}
                                for i, parts in enumerate(step.artifacts)]
        if step.history:
            out["history"] = [self._message(role, [text] if text else []) for role, text in step.history]
        if self.dialect == "0.3":
            out["kind"] = "task"
        return out


def _rpc_reply(rid: Any, *, result: Any = None, error: Optional[dict[str, Any]] = None) -> Response:
    body: dict[str, Any] = {"jsonrpc": "2.0", "id": rid}
    if error is not None:
        body["error"] = error
    else:
        body["result"] = result
    return JSONResponse(body)
