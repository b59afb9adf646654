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
served task has one.
"""

from __future__ import annotations

import uuid
from dataclasses import dataclass
from typing import Any, Optional

from .._shapes import as_dict, as_list
from ..a2a.wire import (
    DIALECTS_BY_METHOD,
    V1_AGENT_ROLE,
    parts_text,
    v03_part,
    v1_part,
    v1_state,
)
from ..errors import ToolnexusError

__all__ = [
    "MIXED",
    "V03",
    "V1",
    "Inbound",
    "VersionError",
    "message_in",
    "negotiate",
    "render_send_result",
    "render_task",
]

V1 = "1.0"
V03 = "0.3"
MIXED = "mixed"
_ID_NAMESPACE = uuid.UUID("6f1d2a57-3c4b-4a7e-9e0b-7f2a1c9d5e31")


class VersionError(ToolnexusError):
    """The request names an A2A version we do not speak (JSON-RPC -32009)."""


def _major(version: str) -> Optional[int]:
    head = version.strip().lstrip("vV").split(".")[0]
    return int(head) if head.isdigit() else None


def negotiate(method: Any, version_header: Optional[str]) -> Optional[str]:
    """The generation to answer in: `V1`, `V03`, `MIXED`; None for a method we do not serve."""
    family = DIALECTS_BY_METHOD.get(method) if isinstance(method, str) else None
    if family is None:
        return None
    version = (version_header or "").strip()
    major = _major(version) if version else None
    if version and major not in (0, 1):
        raise VersionError(version)
    if family == "0.3":
        return V03
    return V1 if major == 1 else MIXED


@dataclass
class Inbound:
    """What a `SendMessage` carries that we use."""

    text: str
    context_id: Optional[str]
    task_id: Optional[str]
    blocking: bool


def message_in(params: Any, dialect: str) -> Optional[Inbound]:
    """Read `SendMessage` params; None when there is no message object at all."""
    message = params.get("message") if isinstance(params, dict) else None
    if not isinstance(message, dict):
        return None
    text = "".join(parts_text(message.get("parts")))
    context_id = message.get("contextId") if isinstance(message.get("contextId"), str) else None
    task_id = message.get("taskId") if isinstance(message.get("taskId"), str) else None
    config = as_dict(params.get("configuration"))
    if dialect == V1:  # 1.0 waits for the outcome unless told to return at once
        blocking = config.get("returnImmediately") is not True
    elif dialect == V03:  # 0.3 clients block unless they say otherwise
        blocking = config.get("blocking") is not False
    else:  # the existing toolnexus form answers at once unless asked to block
        blocking = config.get("blocking") is True
    return Inbound(text, context_id or None, task_id or None, blocking)


def _message_id(task_id: str, state: str) -> str:
    return str(uuid.uuid5(_ID_NAMESPACE, f"{task_id}/{state}"))


def _status(task: dict[str, Any], dialect: str) -> dict[str, Any]:
    status = dict(task.get("status") or {})
    state = str(status.get("state") or "submitted")
    message = status.get("message")
    if isinstance(message, dict):
        parts = as_list(message.get("parts"))
        out_msg: dict[str, Any] = {"messageId": message.get("messageId") or _message_id(str(task.get("id")), state)}
        if dialect == V1:
            out_msg.update(role=V1_AGENT_ROLE, parts=[v1_part(p) for p in parts])
        else:
            out_msg.update(kind="message", role="agent", parts=[v03_part(p) for p in parts])
        out_msg.update(taskId=task.get("id"), contextId=task.get("contextId"))
        status["message"] = {k: v for k, v in out_msg.items() if v is not None}
    status["state"] = v1_state(state) if dialect == V1 else state
    return status


def render_task(task: dict[str, Any], dialect: str) -> dict[str, Any]:
    """The stored task as `dialect` spells a Task (a copy; `MIXED` = the stored form as is)."""
    if dialect == MIXED:
        return dict(task)
    out: dict[str, Any] = {}
    if dialect == V03:
        out["kind"] = "task"
    out["id"] = task.get("id")
    out["contextId"] = task.get("contextId") or ""
    out["status"] = _status(task, dialect)
    artifacts = task.get("artifacts")
    if isinstance(artifacts, list):
        part = v1_part if dialect == V1 else v03_part
        out["artifacts"] = [
            {"artifactId": a.get("artifactId") or "", "parts": [part(p) for p in a.get("parts") or []]}
            for a in artifacts if isinstance(a, dict)
        ]
    if isinstance(task.get("metadata"), dict):
        out["metadata"] = task["metadata"]
    return out


def render_send_result(task: dict[str, Any], dialect: str) -> dict[str, Any]:
    """A `SendMessage` result: 1.0 wraps the Task (`{"task": ...}`), the others send it bare."""
    rendered = render_task(task, dialect)
    return {"task": rendered} if dialect == V1 else rendered
