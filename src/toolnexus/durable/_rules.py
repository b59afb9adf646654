"""The decisions every store makes the same way: who may take a lease, who may claim an answer.

Kept apart from any backend so memory, file, SQLite and PostgreSQL agree by construction: each
backend reads the rows inside its own transaction and asks these functions.
"""

from __future__ import annotations

import contextlib
from datetime import UTC
from typing import TYPE_CHECKING, Any, AsyncIterator, Optional

from .._diag import warn
from ._model import APPLIED, CANCELLED, CLAIMED, QUARANTINED, QUEUED, Holder, PendingRow
from ._protocol import DEFAULT_LEASE_TTL, RunStore
from .errors import AnswerAlreadyApplied, RequestWithdrawn, RunDamaged, RunInProgress

if TYPE_CHECKING:  # pragma: no cover
    from datetime import datetime


def lease_is_ours(lease: Optional[dict[str, Any]], me: Holder) -> bool:
    return isinstance(lease, dict) and lease.get("id") == me.id


def check_lease(run_id: str, lease: Optional[dict[str, Any]], lease_expires: Optional[float], me: Holder,
                now: float, takeover: bool) -> None:
    """Raise `RunInProgress` unless `me` may take the run's lease now."""
    if takeover or lease is None or lease_is_ours(lease, me):
        return
    if lease_expires is not None and lease_expires <= now:
        return
    holder = Holder.from_dict(lease)
    if holder is None or holder.is_dead_here():
        return
    left = None if lease_expires is None else max(0.0, lease_expires - now)
    raise RunInProgress(run_id, holder.describe(), left)


def check_claim(row: PendingRow, me: Holder, now: float, ttl: float) -> None:
    """Raise `AnswerAlreadyApplied` unless `me` may claim this ledger row now (`RequestWithdrawn` for a
    withdrawn request, `RunDamaged` for one of a quarantined run)."""
    if row.status == APPLIED:
        raise AnswerAlreadyApplied(row.request_id, row.run_id)
    if row.status == CANCELLED:
        raise RequestWithdrawn(row.request_id, row.run_id)
    if row.status == QUARANTINED:
        raise RunDamaged(row.run_id, "request", "", request_id=row.request_id, quarantined=True)
    if row.status == QUEUED:  # the work queue holds the answer until a worker takes it (never by age)
        queued = Holder.from_dict(row.claim)
        if queued is not None and queued.id == me.id:
            return
        raise AnswerAlreadyApplied(row.request_id, row.run_id, queued=True)
    if row.status != CLAIMED:
        return
    claimer = Holder.from_dict(row.claim)
    if claimer is None or claimer.id == me.id or claimer.is_dead_here():
        return
    if row.answered_at is not None and row.answered_at + ttl <= now:
        return
    raise AnswerAlreadyApplied(row.request_id, row.run_id, in_flight=True)


def expires_at_epoch(request: Optional[dict[str, Any]]) -> Optional[float]:
    """`request["expiresAt"]` as epoch seconds (RFC 3339, `Z` accepted, naive = UTC), else None."""
    when = expiry_of(request.get("expiresAt") if isinstance(request, dict) else None)
    return when.timestamp() if when is not None else None


# -- the expiry parser and the claim block -------------------------------------------------------------


def expiry_of(raw: Any) -> Optional["datetime"]:
    """An `expiresAt` value as an aware datetime (RFC 3339, `Z` accepted, naive = UTC), else None:
    the one parser of the expiry (an unparseable value is not enforced: it reads as no expiry)."""
    from datetime import datetime

    if not isinstance(raw, str) or not raw.strip():
        return None
    text = raw.strip().upper()
    if text.endswith("Z"):
        text = text[:-1] + "+00:00"
    try:
        when = datetime.fromisoformat(text)
    except ValueError:
        return None
    return when if when.tzinfo is not None else when.replace(tzinfo=UTC)


@contextlib.asynccontextmanager
async def claimed(store: RunStore, request_id: str, holder: Holder, answer: Optional[dict[str, Any]] = None, *,
                  ttl: Optional[float] = None, run_id: Optional[str] = None) -> AsyncIterator[None]:
    """Hold the claim on `request_id`'s answer for the block, and give it back if the block raises.

    With `answer` the claim is taken on entry (`store.claim`, refused by the ledger as usual);
    without, the caller holds it already. Giving back a claim that failed to be given back (the
    store is down) is warned about: the claim then expires with its TTL."""
    if answer is not None:
        await store.claim(request_id, holder, answer, ttl=ttl if ttl is not None else DEFAULT_LEASE_TTL, run_id=run_id)
    try:
        yield
    except BaseException:
        try:
            await store.unclaim(request_id, holder)
        except Exception as exc:
            warn(f"[toolnexus] giving back the claim on {request_id!r} failed: {exc}")
        raise
