"""Reading inbound A2A requests and writing served tasks in the caller's protocol generation.

A request declares its generation by its method names and its `A2A-Version` header:

- `SendMessage`/`GetTask`/`CancelTask` with `A2A-Version: 1.x` → **1.0**: the reply to
  `SendMessage` is `{"task": Task}`, states are `TASK_STATE_*`, roles `ROLE_AGENT`, parts bare
  (`{"text"}`).
- `message/send`/`tasks/get`/`tasks/cancel` (no header, or `0.x`) → **0.3**: bare Tasks with
  `kind: "task"`, lowercase states, `kind` parts, messages with `kind: "message"`.
- the 1.0 names without a header (or with a `0.x` one) → the existing toolnexus **mixed** form:
  the stored task verbatim, byte for byte what earlier toolnexus peers read.
A header naming another major version is refused with -32009; 0.3 names with a 1.0 header are
served as 0.3 (the names say what the caller will parse).

Tasks are stored in one neutral form (lowercase states, `kind` parts; see `serve.tasks`); the
functions here only reshape copies of it. Generation-required fields that the stored form leaves
out are filled in deterministically: a status message's `messageId` is derived from the task id
and state (stable across polls), and 0.3's required `contextId` is always present because every
served task has one. A task's `history` (the caller's messages and the agent's earlier status
messages, oldest first) is written in the caller's generation too, cut to the newest
`historyLength` messages when one is asked for (0: no `history` field at all); the mixed form
stays what earlier peers read — no `status.timestamp`, and `history` only when a `historyLength`
is asked for; `include_artifacts=False` leaves
the artifacts out (what `ListTasks` does unless asked). Keys of the stored form that begin with
`_` are the server's own bookkeeping and are never sent, in any generation.
"""

from __future__ import annotations

import uuid
from typing import Any, Optional

from .._shapes import as_list
from ..a2a._wire import (
    DIALECTS_BY_METHOD,
    V1 as V1_WIRE,
    V1_AGENT_ROLE,
    v03_part,
    v1_part,
    v1_state,
)
from ..errors import ToolnexusError

V1 = "1.0"
V03 = "0.3"
MIXED = "mixed"
LIST_METHOD = "ListTasks"  # A2A 1.0 only (0.3 has no list)
_SERVED_METHODS: dict[str, str] = {**DIALECTS_BY_METHOD, LIST_METHOD: V1}
_ID_NAMESPACE = uuid.UUID("6f1d2a57-3c4b-4a7e-9e0b-7f2a1c9d5e31")


class VersionError(ToolnexusError):
    """The request names an A2A version we do not speak (JSON-RPC -32009)."""


def _major(version: str) -> Optional[int]:
    head = version.strip().lstrip("vV").split(".")[0]
    return int(head) if head.isdigit() else None


def negotiate(method: Any, version_header: Optional[str]) -> Optional[str]:
    """The generation to answer in: `V1`, `V03`, `MIXED`; None for a method we do not serve."""
    family = _SERVED_METHODS.get(method) if isinstance(method, str) else None
    if family is None:
        return None
    version = (version_header or "").strip()
    major = _major(version) if version else None
    if version and major not in (0, 1):
        raise VersionError(version)
    if family == "0.3":
        return V03
    return V1 if major == 1 else MIXED


def status_message_id(task_id: str, status: dict[str, Any]) -> str:
    """The id a status message without one is given: the same on every poll, and the same when the
    message later moves into the task's history (a second question in one state differs by its time)."""
    state = str(status.get("state") or "submitted")
    stamp = status.get("timestamp")
    key = f"{task_id}/{state}/{stamp}" if isinstance(stamp, str) else f"{task_id}/{state}"
    return str(uuid.uuid5(_ID_NAMESPACE, key))


def _status(task: dict[str, Any], dialect: str) -> dict[str, Any]:
    status = dict(task.get("status") or {})
    state = str(status.get("state") or "submitted")
    message = status.get("message")
    if isinstance(message, dict):
        parts = as_list(message.get("parts"))
        out_msg: dict[str, Any] = {"messageId": message.get("messageId") or status_message_id(str(task.get("id")),
                                                                                              status)}
        if dialect == V1:
            out_msg.update(role=V1_AGENT_ROLE, parts=[v1_part(p) for p in parts])
        else:
            out_msg.update(kind="message", role="agent", parts=[v03_part(p) for p in parts])
        out_msg.update(taskId=task.get("id"), contextId=task.get("contextId"))
        status["message"] = {k: v for k, v in out_msg.items() if v is not None}
    status["state"] = v1_state(state) if dialect == V1 else state
    return status


def _history_message(message: Any, task: dict[str, Any], dialect: str) -> Optional[dict[str, Any]]:
    if not isinstance(message, dict):
        return None
    agent = message.get("role") == "agent"
    parts = as_list(message.get("parts"))
    out: dict[str, Any] = {"messageId": message.get("messageId") or ""}
    if dialect == V1:
        out.update(role=V1_AGENT_ROLE if agent else V1_WIRE.user_role, parts=[v1_part(p) for p in parts])
    else:
        out.update(kind="message", role="agent" if agent else "user", parts=[v03_part(p) for p in parts])
    out.update(taskId=task.get("id"), contextId=task.get("contextId"))
    return out


def _cut(history: Any, history_length: Optional[int]) -> list[Any]:
    messages = as_list(history)
    if history_length is None:
        return messages
    return messages[-history_length:] if history_length > 0 else []


def public(task: dict[str, Any]) -> dict[str, Any]:
    """The stored task without the server's own bookkeeping (keys beginning with `_`)."""
    return {k: v for k, v in task.items() if not k.startswith("_")}


def render_task(task: dict[str, Any], dialect: str, *, history_length: Optional[int] = None,
                include_artifacts: bool = True) -> dict[str, Any]:
    """The stored task as `dialect` spells a Task (a copy; `MIXED` = the stored form as is)."""
    if dialect == MIXED:  # what earlier toolnexus peers read: no history unless asked, no status time
        out = public(task)
        history = _cut(out.pop("history", None), history_length)
        if history and history_length:
            out["history"] = history
        if isinstance(out.get("status"), dict):
            out["status"] = {k: v for k, v in out["status"].items() if k != "timestamp"}
        if not include_artifacts:
            out.pop("artifacts", None)
        return out
    out = {}
    if dialect == V03:
        out["kind"] = "task"
    out["id"] = task.get("id")
    out["contextId"] = task.get("contextId") or ""
    out["status"] = _status(task, dialect)
    artifacts = task.get("artifacts")
    if include_artifacts and isinstance(artifacts, list):
        part = v1_part if dialect == V1 else v03_part
        out["artifacts"] = [
            {"artifactId": a.get("artifactId") or "", "parts": [part(p) for p in a.get("parts") or []]}
            for a in artifacts if isinstance(a, dict)
        ]
    history = [m for m in (_history_message(m, task, dialect) for m in _cut(task.get("history"), history_length))
               if m is not None]
    if history:
        out["history"] = history
    if isinstance(task.get("metadata"), dict):
        out["metadata"] = task["metadata"]
    return out


def render_send_result(task: dict[str, Any], dialect: str, history_length: Optional[int] = None) -> dict[str, Any]:
    """A `SendMessage` result: 1.0 wraps the Task (`{"task": ...}`), the others send it bare."""
    rendered = render_task(task, dialect, history_length=history_length)
    return {"task": rendered} if dialect == V1 else rendered
