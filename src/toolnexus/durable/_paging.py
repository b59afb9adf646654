"""Paged listings of a store: `Page`, the opaque cursor, and the filters `pending` and `runs` take.

`store.pending(limit=50)` returns a `Page` — a `list` of this page's items with `page.next`, the
cursor of the page after it (None on the last page); pass it back as `after=` for that page. A
cursor is a keyset position (the last item's sort key), never an offset: an item added or
removed while a host pages through never shifts the page boundaries, and a request answered
meanwhile simply drops out. Cursors are opaque text, valid for the store and the listing that
made them.

`pending()` and `runs()` called with no paging argument return every item, as 0.21 did (a `Page`
is a `list`, with `next` None).

This module only shapes values and checks arguments; the stores run the queries.
"""

from __future__ import annotations

import base64
import json
import math
import re
from dataclasses import dataclass
from datetime import timedelta
from typing import Any, Iterable, Optional, Sequence, TypeVar, Union

from ..errors import ToolnexusValueError

T = TypeVar("T")
Age = Union[float, int, timedelta]
MAX_LIMIT = 10_000  # the largest page a store returns at once

# Run statuses after which nothing more happens by itself (`prune` deletes these; `cancel` leaves one).
FINAL_STATUSES = ("done", "error", "incomplete", "interrupted", "closed", "timeout", "cancelled")


class Page(list[T]):
    """One page of a listing: the items (it is a `list`), and `next`, the cursor of the following
    page (None: this is the last one)."""

    def __init__(self, items: Iterable[T] = (), next: Optional[str] = None) -> None:
        super().__init__(items)
        self.next = next


def encode_cursor(listing: str, key: Sequence[Any]) -> str:
    """An opaque cursor for the item whose sort key is `key` in `listing`."""
    raw = json.dumps([listing, *key], separators=(",", ":")).encode()
    return base64.urlsafe_b64encode(raw).decode().rstrip("=")


def decode_cursor(listing: str, cursor: str, size: int) -> list[Any]:
    """The sort key a cursor of `listing` holds; a clear error for anything else."""
    try:
        padded = cursor + "=" * (-len(cursor) % 4)
        value = json.loads(base64.urlsafe_b64decode(padded.encode()))
    except (ValueError, TypeError):
        value = None
    if not isinstance(value, list) or len(value) != size + 1 or value[0] != listing:
        raise ToolnexusValueError(f"toolnexus: after={cursor!r} is not a cursor of store.{listing}() — pass the "
                                  f"`next` of a page that store.{listing}() returned")
    return value[1:]


def seconds_of(value: Optional[Age], name: str) -> Optional[float]:
    """`older_than=` as seconds (a number of seconds or a `timedelta`), checked."""
    if value is None:
        return None
    if isinstance(value, timedelta):
        seconds = value.total_seconds()
    elif isinstance(value, (int, float)) and not isinstance(value, bool):
        seconds = float(value)
    else:
        raise ToolnexusValueError(f"toolnexus: {name}= takes seconds or a timedelta, got {type(value).__name__}")
    if seconds < 0 or seconds != seconds:
        raise ToolnexusValueError(f"toolnexus: {name}= must be >= 0 seconds, got {value!r}")
    return seconds


_UNITS = {"s": 1, "m": 60, "h": 3600, "d": 86400, "w": 7 * 86400}
_DURATION = re.compile(r"^\s*(\d+(?:\.\d+)?)\s*([smhdw]?)\s*$")


def parse_duration(text: str) -> Optional[float]:
    """`90s`, `15m`, `12h`, `30d`, `2w` or plain seconds, as seconds; None for anything else. One
    spelling of a duration for flags (`--older-than`) and store URLs (`?retention=`)."""
    found = _DURATION.match(str(text).lower())
    return None if found is None else float(found.group(1)) * _UNITS[found.group(2) or "s"]


def retention_of(value: Any, where: str) -> Optional[float]:
    """A store's `retention` — a duration text (`30d`), seconds or a `timedelta` — as seconds > 0
    (None stays None); `where` names where it was given, for the error."""
    if value is None:
        return None
    seconds: Optional[float] = None
    if isinstance(value, str):
        seconds = parse_duration(value)
    elif isinstance(value, timedelta):
        seconds = value.total_seconds()
    elif isinstance(value, (int, float)) and not isinstance(value, bool):
        seconds = float(value)
    if seconds is None or not 0 < seconds < math.inf:
        raise ToolnexusValueError(f"toolnexus: retention={value!r} {where} must be a duration > 0 such as 30d, 12h, "
                                  "90m or 3600 (seconds)")
    return seconds


def _limit(limit: Optional[int]) -> Optional[int]:
    if limit is None:
        return None
    if isinstance(limit, bool) or not isinstance(limit, int) or limit < 1:
        raise ToolnexusValueError(f"toolnexus: limit= must be a positive integer, got {limit!r}")
    return min(limit, MAX_LIMIT)


def _text(value: Optional[str], name: str) -> Optional[str]:
    if value is not None and (not isinstance(value, str) or not value):
        raise ToolnexusValueError(f"toolnexus: {name}= must be a non-empty string, got {value!r}")
    return value


@dataclass(frozen=True)
class PendingQuery:
    """What `store.pending(...)` was asked for, checked. Order: oldest request first (`created_at`,
    then request id). `agent`: the run's entry agent; `older_than`: requests waiting at least that
    many seconds."""

    limit: Optional[int] = None
    after: Optional[tuple[float, str]] = None
    agent: Optional[str] = None
    kind: Optional[str] = None
    older_than: Optional[float] = None

    @classmethod
    def of(cls, limit: Optional[int], after: Optional[str], agent: Optional[str], kind: Optional[str],
           older_than: Optional[Age]) -> "PendingQuery":
        key = None
        if after is not None:
            at, rid = decode_cursor("pending", str(after), 2)
            if not isinstance(at, (int, float)) or not isinstance(rid, str):
                raise ToolnexusValueError(f"toolnexus: after={after!r} is not a cursor of store.pending()")
            key = (float(at), rid)
        return cls(_limit(limit), key, _text(agent, "agent"), _text(kind, "kind"), seconds_of(older_than, "older_than"))

    @property
    def plain(self) -> bool:
        """No argument at all: the 0.21 listing (everything)."""
        return self == PendingQuery()

    def cursor(self, created_at: float, request_id: str) -> str:
        return encode_cursor("pending", [created_at, request_id])


@dataclass(frozen=True)
class RunsQuery:
    """What `store.runs(...)` was asked for, checked. Unpaged (`limit=None`, no `after`): every run,
    newest update first, as 0.21. Paged: newest *created* first (`created_at`, then run id,
    descending) — a run's creation time never changes, so a run never moves between pages while
    it is updated. `older_than`: runs created at least that many seconds ago."""

    status: Optional[tuple[str, ...]] = None
    limit: Optional[int] = None
    after: Optional[tuple[float, str]] = None
    agent: Optional[str] = None
    kind: Optional[str] = None
    older_than: Optional[float] = None

    @classmethod
    def of(cls, status: Union[None, str, Sequence[str]], limit: Optional[int], after: Optional[str],
           agent: Optional[str], kind: Optional[str], older_than: Optional[Age]) -> "RunsQuery":
        statuses: Optional[tuple[str, ...]] = None
        if isinstance(status, str):
            statuses = (status,)
        elif status is not None:
            statuses = tuple(str(s) for s in status)
            if not statuses:
                raise ToolnexusValueError("toolnexus: status= must name at least one status")
        key = None
        if after is not None:
            at, rid = decode_cursor("runs", str(after), 2)
            if not isinstance(at, (int, float)) or not isinstance(rid, str):
                raise ToolnexusValueError(f"toolnexus: after={after!r} is not a cursor of store.runs()")
            key = (float(at), rid)
        return cls(statuses, _limit(limit), key, _text(agent, "agent"), _text(kind, "kind"),
                   seconds_of(older_than, "older_than"))

    @property
    def paged(self) -> bool:
        return self.limit is not None or self.after is not None

    def cursor(self, created_at: float, run_id: str) -> str:
        return encode_cursor("runs", [created_at, run_id])
