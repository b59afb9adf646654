"""`ListTasks`: which stored tasks match, in what order, one page at a time.

Tasks are filtered (`contextId`, state, status time at or after `statusTimestampAfter`), sorted
by status time, newest first (ties by id), and cut into pages. A page token is opaque to callers:
the sort key of the last task of the page before, so the next page starts right after it even if
tasks were added meanwhile (a task updated between two pages moves to the front and is not seen
again on later pages — a cursor over a live list). A token we did not issue is invalid params.
`totalSize` counts every match, `pageSize` the tasks on this page.

The store is read in full (`TaskStore.list_tasks`); the bundled stores keep at most
`max_tasks` (in memory) or what a durable store holds, and listing is a caller's occasional
look, not a hot path. Not here: rendering the tasks (`toolnexus.serve._a2a_render`).
"""

from __future__ import annotations

import base64
import binascii
import json
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any, Optional

from ._a2a_params import ListParams, ParamError

_EPOCH = datetime(1970, 1, 1, tzinfo=UTC)


@dataclass(frozen=True)
class Page:
    tasks: list[dict[str, Any]]
    next_token: str
    total: int


def status_time(task: dict[str, Any]) -> datetime:
    """When the task's status was last set (the epoch for a task stored without a time)."""
    status = task.get("status")
    stamp = status.get("timestamp") if isinstance(status, dict) else None
    try:
        when = datetime.fromisoformat(stamp) if isinstance(stamp, str) else _EPOCH
    except ValueError:
        return _EPOCH
    return when if when.tzinfo is not None else when.replace(tzinfo=UTC)


def _key(task: dict[str, Any]) -> tuple[float, str]:
    return (-status_time(task).timestamp(), str(task.get("id")))


def _token(key: tuple[float, str]) -> str:
    raw = json.dumps([key[0], key[1]], separators=(",", ":")).encode("utf-8")
    return base64.urlsafe_b64encode(raw).decode("ascii").rstrip("=")


def _after(token: str) -> tuple[float, str]:
    try:
        raw = base64.urlsafe_b64decode(token + "=" * (-len(token) % 4))
        when, task_id = json.loads(raw)
        if isinstance(when, (int, float)) and not isinstance(when, bool) and isinstance(task_id, str):
            return (float(when), task_id)
    except (ValueError, TypeError, binascii.Error):
        pass
    raise ParamError("pageToken is not one this server gave out (use the nextPageToken of the page before, "
                     "or leave it out to start at the first page)")


def _state(task: dict[str, Any]) -> Optional[str]:
    status = task.get("status")
    return status.get("state") if isinstance(status, dict) else None


def page_of(tasks: list[dict[str, Any]], query: ListParams) -> Page:
    """The page `query` asks for out of `tasks` (stored form)."""
    start = _after(query.page_token) if query.page_token else None
    matching = [t for t in tasks
                if (query.context_id is None or t.get("contextId") == query.context_id)
                and (query.state is None or _state(t) == query.state)
                and (query.updated_after is None or status_time(t) >= query.updated_after)]
    matching.sort(key=_key)
    rest = [t for t in matching if start is None or _key(t) > start]
    page = rest[:query.page_size]
    more = len(rest) > len(page)
    return Page(page, _token(_key(page[-1])) if more and page else "", len(matching))
