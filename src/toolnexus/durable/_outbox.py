"""The store's outbox: notifications waiting to be delivered, kept in the store so a restart loses none.

A notifier (`toolnexus.inbox.Notifications`) adds one `Outgoing` per (channel, request) — adding
the same `dedup` key twice is a no-op, also after it was delivered — and a delivering process
takes what is due, tries it, and records how that went: `delivered`, `retry` (back in the outbox
until `available_at`, its attempt counted) or `fail` (kept, not tried again). A taken item whose
taker died (no record within `lease` seconds) is taken again by anyone. Delivery is therefore at
least once: an item a process delivered and died before recording is delivered again; receivers
tell the two apart by the item's id (`X-Toolnexus-Delivery`).

Only the SQL stores have an outbox (`store.outbox()`); the memory and file stores say so.
Nothing here does I/O.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Optional, Protocol

OUTBOX_QUEUED = "queued"
OUTBOX_TAKEN = "taken"
OUTBOX_DELIVERED = "delivered"
OUTBOX_FAILED = "failed"


@dataclass(frozen=True)
class Outgoing:
    """One notification to add: for `channel` (a notifier's name), deduplicated by `dedup`."""

    channel: str
    dedup: str
    payload: dict[str, Any]
    run_id: Optional[str] = None
    request_id: Optional[str] = None


@dataclass
class OutboxItem:
    """One notification as the outbox holds it."""

    id: int
    channel: str
    dedup: str
    payload: dict[str, Any]
    status: str
    run_id: Optional[str]
    request_id: Optional[str]
    created_at: float
    available_at: float
    attempts: int = 0
    taken_by: Optional[str] = None
    delivered_at: Optional[float] = None
    error: Optional[str] = None
    extra: dict[str, Any] = field(default_factory=dict)


class OutboxBackend(Protocol):
    """What a store gives a notifier (see the module docstring)."""

    async def add(self, items: list[Outgoing]) -> int:
        """Add what is not there yet (by `dedup`); how many were added."""

    async def known(self, dedups: list[str]) -> set[str]:
        """Which of these `dedup` keys the outbox holds, in any status."""

    async def take(self, taker: str, *, limit: int, lease: float,
                   channels: Optional[list[str]] = None) -> list[OutboxItem]:
        """Up to `limit` items that are due (oldest first), or taken by someone more than `lease`
        seconds ago, marked taken by `taker` with their attempt counted."""

    async def delivered(self, item: OutboxItem, taker: str) -> bool:
        """Record a delivery; False when the item is no longer ours (taken again after our lease)."""

    async def retry(self, item: OutboxItem, taker: str, *, delay: float, error: str) -> bool:
        """Back in the outbox, due in `delay` seconds; False when the item is no longer ours."""

    async def fail(self, item: OutboxItem, taker: str, *, error: str) -> bool:
        """Kept as failed, not tried again; False when the item is no longer ours."""

    async def items(self, *, channel: Optional[str] = None, request_id: Optional[str] = None) -> list[OutboxItem]:
        """Every item (of `channel`, of `request_id`), oldest first: for tests and operators."""

    async def prune(self, *, older_than: float) -> int:
        """Delete delivered and failed items added at least `older_than` seconds ago."""
