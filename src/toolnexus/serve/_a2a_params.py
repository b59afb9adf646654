"""Checking the params of the A2A methods we serve, before anything runs or is stored.

Each reader returns a small dataclass or raises `ParamError` (JSON-RPC -32602) saying which field
was wrong and what it must be:

- `send_params` (`SendMessage` / `message/send`): `params.message` an object with a non-empty
  `messageId`, the user's `role` (`ROLE_USER` / `user`), a non-empty list of `parts` (objects) and
  at least one non-empty text part (the served agent reads text); `taskId` / `contextId` strings
  when given; `configuration` an object whose `historyLength` is a non-negative integer and whose
  `returnImmediately` / `blocking` are true or false. The message is kept in our stored form
  (lowercase role, `kind` parts) for the task's history.
- `task_query` (`GetTask`, `CancelTask`): `id` as given (an unknown or missing id is the
  method's -32001), `historyLength` a non-negative integer when given.
- `list_params` (`ListTasks`): `pageSize` 1–100 (default 50), `historyLength` ≥ 0,
  `status` a task state (`TASK_STATE_WORKING` or `working`), `statusTimestampAfter` an ISO 8601
  time, `includeArtifacts` true or false, `contextId` and `pageToken` strings.

Not here: what the values do (`toolnexus.serve._fulfil`, `toolnexus.serve._task_list`).
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any, Optional

from ..a2a._wire import normalize_state, parts_text, v03_part
from ..errors import ToolnexusError

DEFAULT_PAGE_SIZE = 50
MAX_PAGE_SIZE = 100
STATES = frozenset({"submitted", "working", "input-required", "auth-required", "completed", "failed", "canceled",
                    "rejected"})
_USER_ROLES = ("user", "role_user")


class ParamError(ToolnexusError):
    """Invalid params (JSON-RPC -32602); the message names the field."""

    def __init__(self, message: str) -> None:
        super().__init__(f"Invalid params: {message}")
        self.message = f"Invalid params: {message}"


@dataclass(frozen=True)
class SendParams:
    """What a `SendMessage` asks for: the text the agent reads and the message as stored."""

    text: str
    message: dict[str, Any]
    context_id: Optional[str]
    task_id: Optional[str]
    blocking: bool
    history_length: Optional[int]


@dataclass(frozen=True)
class TaskQuery:
    task_id: str
    history_length: Optional[int]


@dataclass(frozen=True)
class ListParams:
    context_id: Optional[str]
    state: Optional[str]
    page_size: int
    page_token: Optional[str]
    history_length: Optional[int]
    updated_after: Optional[datetime]
    include_artifacts: bool


def _optional_str(container: dict[str, Any], key: str, where: str) -> Optional[str]:
    value = container.get(key)
    if value is None:
        return None
    if not isinstance(value, str):
        raise ParamError(f"{where}{key} must be a string, got {type(value).__name__}")
    return value or None


def _optional_bool(container: dict[str, Any], key: str, where: str) -> Optional[bool]:
    value = container.get(key)
    if value is not None and not isinstance(value, bool):
        raise ParamError(f"{where}{key} must be true or false, got {value!r}")
    return value


def _int(value: Any) -> Optional[int]:
    """An integer from JSON (a whole float such as 2.0 counts; booleans do not)."""
    if isinstance(value, bool):
        return None
    if isinstance(value, int):
        return value
    if isinstance(value, float) and value.is_integer():
        return int(value)
    return None


def history_length(container: dict[str, Any], where: str) -> Optional[int]:
    value = container.get("historyLength")
    if value is None:
        return None
    n = _int(value)
    if n is None or n < 0:
        raise ParamError(f"{where}historyLength must be a non-negative integer, got {value!r}")
    return n


def send_params(params: dict[str, Any], dialect: str) -> SendParams:
    """Check `SendMessage` params (see the module docstring); `dialect` decides the blocking default."""
    message = params.get("message")
    if not isinstance(message, dict):
        raise ParamError("params.message must be a message object")
    message_id = message.get("messageId")
    if not isinstance(message_id, str) or not message_id.strip():
        raise ParamError("message.messageId is required: a unique id for this message (a UUID, say)")
    role = message.get("role")
    if not isinstance(role, str) or role.lower() not in _USER_ROLES:
        raise ParamError(f"message.role must be the user's (ROLE_USER, or user in A2A 0.3), got {role!r}")
    parts = message.get("parts")
    if not isinstance(parts, list) or not parts or not all(isinstance(p, dict) for p in parts):
        raise ParamError("message.parts must be a non-empty list of part objects")
    task_id = _optional_str(message, "taskId", "message.")
    context_id = _optional_str(message, "contextId", "message.")
    text = "".join(parts_text(parts))
    if not text.strip():
        raise ParamError("the message has no text (send at least one non-empty text part)")
    config = params.get("configuration")
    if config is None:
        config = {}
    if not isinstance(config, dict):
        raise ParamError("params.configuration must be an object")
    immediately = _optional_bool(config, "returnImmediately", "configuration.")
    blocking_flag = _optional_bool(config, "blocking", "configuration.")
    if dialect == "1.0":  # 1.0 waits for the outcome unless told to return at once
        blocking = immediately is not True
    elif dialect == "0.3":  # 0.3 clients block unless they say otherwise
        blocking = blocking_flag is not False
    else:  # the existing toolnexus form answers at once unless asked to block
        blocking = blocking_flag is True
    stored: dict[str, Any] = {"role": "user", "parts": [v03_part(p) for p in parts], "messageId": message_id}
    return SendParams(text, stored, context_id, task_id, blocking, history_length(config, "configuration."))


def task_query(params: dict[str, Any]) -> TaskQuery:
    """`GetTask` / `CancelTask` params: the id as the existing form reads it, and `historyLength`."""
    return TaskQuery(str(params.get("id") or ""), history_length(params, ""))


def _timestamp(value: Any) -> Optional[datetime]:
    if value is None:
        return None
    refusal = ParamError(f'statusTimestampAfter must be an ISO 8601 time such as "2026-01-31T10:00:00Z", got {value!r}')
    if not isinstance(value, str):
        raise refusal
    try:
        stamp = datetime.fromisoformat(value.strip())
    except ValueError:
        raise refusal from None
    return stamp if stamp.tzinfo is not None else stamp.replace(tzinfo=UTC)


def list_params(params: dict[str, Any]) -> ListParams:
    """`ListTasks` params (see the module docstring)."""
    size = params.get("pageSize")
    page_size = DEFAULT_PAGE_SIZE if size is None else _int(size)
    if page_size is None or not 1 <= page_size <= MAX_PAGE_SIZE:
        raise ParamError(f"pageSize must be an integer from 1 to {MAX_PAGE_SIZE}, got {size!r}")
    raw_state = params.get("status")
    state = None
    if raw_state is not None:
        state = normalize_state(raw_state) if isinstance(raw_state, str) else ""
        if raw_state != "TASK_STATE_UNSPECIFIED" and state not in STATES:
            raise ParamError(f"status must be a task state such as TASK_STATE_WORKING, got {raw_state!r}")
    return ListParams(
        context_id=_optional_str(params, "contextId", ""),
        state=state if state in STATES else None,
        page_size=page_size,
        page_token=_optional_str(params, "pageToken", ""),
        history_length=history_length(params, ""),
        updated_after=_timestamp(params.get("statusTimestampAfter")),
        include_artifacts=_optional_bool(params, "includeArtifacts", "") is True,
    )
