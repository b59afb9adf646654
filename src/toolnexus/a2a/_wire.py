"""The A2A wire, both generations: how each dialect spells our three calls, and one tolerant reader.

We write three dialects, chosen per peer by `_peer.py`:

- `V1`: A2A 1.0 JSON-RPC — `SendMessage`/`GetTask`/`CancelTask`, header `A2A-Version: 1.0`,
  role `ROLE_USER`, parts `{"text": ...}`, `configuration.returnImmediately`.
- `V03`: A2A 0.3 — `message/send`/`tasks/get`/`tasks/cancel`, `kind` parts, role `user`,
  `configuration.blocking`.
- `MIXED`: the existing toolnexus form (1.0 method names, 0.3 parts, no version header), byte for
  byte the baseline request, so existing toolnexus peers keep working.

Replies are read by one reader that accepts every generation at once: a Task bare or wrapped in
`{"task": ...}`, a direct Message (`{"message": ...}` or `kind: "message"`), `TASK_STATE_*` or
lowercase states (normalised to lowercase with dashes, `cancelled` → `canceled`), parts with or
without `kind`, roles `agent`/`ROLE_AGENT`. The reader never raises on odd shapes: a missing piece
reads as absent. Not here: HTTP, budgets, what a state means for the caller (`_call.py`).

For the serving side (`toolnexus.serve`) it also writes tasks in each generation's spelling:
`v1_state` (`input-required` → `TASK_STATE_INPUT_REQUIRED`), `v1_part` / `v03_part` (a part in
1.0 form — `{"text"}`, `{"url"}`, `{"data"}` — or in 0.3 `kind` form).
"""

from __future__ import annotations

import uuid
from dataclasses import dataclass
from typing import Any, Callable, Optional

# Wire shapes are plain JSON objects; the aliases document intent at signatures.
A2APart = dict[str, Any]
A2AMessage = dict[str, Any]
A2AArtifact = dict[str, Any]
A2ATaskStatus = dict[str, Any]
A2ATask = dict[str, Any]
A2ASkill = dict[str, Any]
AgentCard = dict[str, Any]
A2ATaskState = str


def _kind_text_part(text: str) -> A2APart:
    return {"kind": "text", "text": text}


def _bare_text_part(text: str) -> A2APart:
    return {"text": text}


def _blocking_flag(blocking: bool) -> dict[str, Any]:
    return {"blocking": blocking}


def _return_immediately(blocking: bool) -> dict[str, Any]:
    return {"returnImmediately": not blocking}


@dataclass(frozen=True)
class Dialect:
    """One protocol generation's spelling of the calls we make. Data only: no branching on names."""

    name: str
    send_method: str
    get_method: str
    cancel_method: str
    headers: tuple[tuple[str, str], ...]
    user_role: str
    message_extra: tuple[tuple[str, str], ...]
    text_part: Callable[[str], A2APart]
    configuration: Callable[[bool], dict[str, Any]]

    def send_params(self, text: str, *, blocking: bool = False, context_id: Optional[str] = None,
                    task_id: Optional[str] = None, tenant: Optional[str] = None) -> dict[str, Any]:
        """`SendMessage` params: a fresh user message with one text part (continuing a task when
        `task_id` is given)."""
        message: dict[str, Any] = dict(self.message_extra)
        message.update({"role": self.user_role, "messageId": str(uuid.uuid4()), "parts": [self.text_part(text)]})
        if context_id:
            message["contextId"] = context_id
        if task_id:
            message["taskId"] = task_id
        params: dict[str, Any] = {"message": message, "configuration": self.configuration(blocking)}
        return _with_tenant(params, tenant)

    def task_params(self, task_id: str, tenant: Optional[str] = None) -> dict[str, Any]:
        """`GetTask` / `CancelTask` params."""
        return _with_tenant({"id": task_id}, tenant)


def _with_tenant(params: dict[str, Any], tenant: Optional[str]) -> dict[str, Any]:
    if tenant:
        params["tenant"] = tenant
    return params


V1 = Dialect("1.0", "SendMessage", "GetTask", "CancelTask", (("A2A-Version", "1.0"),), "ROLE_USER", (),
             _bare_text_part, _return_immediately)
V03 = Dialect("0.3", "message/send", "tasks/get", "tasks/cancel", (), "user", (("kind", "message"),),
              _kind_text_part, _blocking_flag)
MIXED = Dialect("mixed", "SendMessage", "GetTask", "CancelTask", (), "user", (), _kind_text_part, _blocking_flag)


# ---------------------------------------------------------------------------- reading replies


def normalize_state(value: Any) -> Optional[A2ATaskState]:
    """`TASK_STATE_INPUT_REQUIRED` / `input-required` / `input_required` → `input-required`.

    `cancelled` spellings become `canceled`; empty, unknown-typed or `unspecified` → None.
    """
    if not isinstance(value, str) or not value.strip():
        return None
    state = value.strip().lower()
    state = state.removeprefix("task_state_").replace("_", "-")
    if state == "cancelled":
        state = "canceled"
    return None if state == "unspecified" else state


def _is_text_part(part: Any) -> bool:
    if not isinstance(part, dict) or not isinstance(part.get("text"), str):
        return False
    return part.get("kind", part.get("type", "text")) == "text"


def parts_text(parts: Any) -> list[str]:
    """The `str` texts of the text parts, in order (0.3 `kind` parts and 1.0 bare parts alike)."""
    if not isinstance(parts, list):
        return []
    return [p["text"] for p in parts if _is_text_part(p)]


def _is_agent(message: Any) -> bool:
    role = message.get("role") if isinstance(message, dict) else None
    return isinstance(role, str) and role.lower().removeprefix("role_") == "agent"


def unwrap_send_result(result: Any) -> tuple[Optional[A2ATask], Optional[A2AMessage]]:
    """A `SendMessage`/`GetTask` result → `(task, None)` or `(None, message)`.

    1.0 wraps the answer (`{"task": ...}` / `{"message": ...}`); 0.3 and the mixed form return it
    bare (a Message then has `kind: "message"`). Anything unreadable is an empty task.
    """
    if not isinstance(result, dict):
        return {}, None
    if isinstance(result.get("task"), dict):
        return result["task"], None
    if "status" not in result:
        if isinstance(result.get("message"), dict):
            return None, result["message"]
        if result.get("kind") == "message":
            return None, result
    return result, None


def task_state(task: Optional[A2ATask]) -> Optional[A2ATaskState]:
    status = task.get("status") if isinstance(task, dict) else None
    return normalize_state(status.get("state")) if isinstance(status, dict) else None


def _status_message(task: Optional[A2ATask]) -> Any:
    status = task.get("status") if isinstance(task, dict) else None
    return status.get("message") if isinstance(status, dict) else None


def status_text(task: Optional[A2ATask]) -> str:
    """The text of `status.message` (parts joined `"\\n"`), or `""`."""
    message = _status_message(task)
    return "\n".join(parts_text(message.get("parts"))) if isinstance(message, dict) else ""


def status_url(task: Optional[A2ATask]) -> Optional[str]:
    """The first link in `status.message`: a 1.0 `url` part or a 0.3 file part's `uri`."""
    message = _status_message(task)
    for part in (message.get("parts") if isinstance(message, dict) else None) or []:
        if not isinstance(part, dict):
            continue
        file = part.get("file")
        url = part.get("url") or (file.get("uri") if isinstance(file, dict) else None)
        if isinstance(url, str) and url:
            return url
    return None


def completed_output(task: A2ATask) -> str:
    """A completed task's answer: the artifacts' text; else the last agent message in `history`
    that has text; else the status message's text (an extension for 1.0 peers that answer
    there); else `""`."""
    artifacts = task.get("artifacts")
    texts = [t for a in (artifacts if isinstance(artifacts, list) else []) if isinstance(a, dict)
             for t in parts_text(a.get("parts"))]
    if texts:
        return "\n".join(texts)
    history = task.get("history")
    for message in reversed(history if isinstance(history, list) else []):
        if _is_agent(message):
            texts = parts_text(message.get("parts"))
            if texts:
                return "\n".join(texts)
    return status_text(task)


# ---------------------------------------------------------------------------- writing (serving side)

V1_STATE_PREFIX = "TASK_STATE_"
V1_AGENT_ROLE = "ROLE_AGENT"

# Which dialect's method names a JSON-RPC method belongs to (1.0 and the mixed form share names).
DIALECTS_BY_METHOD: dict[str, str] = {
    V1.send_method: "1.0", V1.get_method: "1.0", V1.cancel_method: "1.0",
    V03.send_method: "0.3", V03.get_method: "0.3", V03.cancel_method: "0.3",
}


def v1_state(state: A2ATaskState) -> str:
    """A lowercase state as A2A 1.0 spells it: `input-required` → `TASK_STATE_INPUT_REQUIRED`."""
    return V1_STATE_PREFIX + str(state).upper().replace("-", "_")


def v1_part(part: Any) -> A2APart:
    """One part in 1.0 form: `{"text"}`, `{"url", "mediaType"?, "filename"?}` or `{"data"}`."""
    if not isinstance(part, dict):
        return {"text": str(part)}
    if isinstance(part.get("text"), str):
        return {"text": part["text"]}
    file = part.get("file") if isinstance(part.get("file"), dict) else None
    url = part.get("url") or (file.get("uri") if file else None)
    if isinstance(url, str) and url:
        out: A2APart = {"url": url}
        media = part.get("mediaType") or (file.get("mimeType") if file else None)
        name = part.get("filename") or (file.get("name") if file else None)
        if isinstance(media, str) and media:
            out["mediaType"] = media
        if isinstance(name, str) and name:
            out["filename"] = name
        return out
    if "data" in part:
        return {"data": part["data"]}
    return {"text": ""}


def v03_part(part: Any) -> A2APart:
    """One part in 0.3 `kind` form: `{"kind": "text"}`, `{"kind": "file", "file": {"uri"}}` or `{"kind": "data"}`."""
    if not isinstance(part, dict):
        return _kind_text_part(str(part))
    if isinstance(part.get("text"), str):
        return _kind_text_part(part["text"])
    file = part.get("file") if isinstance(part.get("file"), dict) else None
    url = part.get("url") or (file.get("uri") if file else None)
    if isinstance(url, str) and url:
        inner: dict[str, Any] = {"uri": url}
        media = part.get("mediaType") or (file.get("mimeType") if file else None)
        if isinstance(media, str) and media:
            inner["mimeType"] = media
        return {"kind": "file", "file": inner}
    if isinstance(part.get("data"), dict):
        return {"kind": "data", "data": part["data"]}
    return _kind_text_part("")
