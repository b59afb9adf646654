"""What a durable store can refuse, each with the run or request it concerns.

All derive from `StoreError` (itself a `ToolnexusError`), so a host can catch store trouble as one
family; the ones a host reacts to differently get their own class:

- `StoreUnavailable`: the store cannot be reached or written (server down, file locked, disk
  full). Nothing that was committed is lost; retry, or restore the run once the store is back.
- `StoreVersionError`: the store (or one run in it) was written by a newer toolnexus.
- `RunNotFound`, `RunExists`: an unknown run id; a run id that is already taken.
- `RunInProgress`: another live process holds the run's lease.
- `LeaseLost`: this process's lease was taken over; it must stop writing.
- `RunChanged`: another process wrote the run since this runtime last did (its tree is stale).
- `AnswerAlreadyApplied`: the request was already answered (or is being answered right now).
- `RequestWithdrawn`: the request was cancelled (its handle was interrupted) and cannot be answered.
- `StoreConflict`: a conversation changed under a client since it was loaded.
- `RestoreError`: a run cannot be restored with the definitions given (a missing agent).
- `RunDamaged`: a stored row of the run cannot be read (cut mid-JSON, not JSON, the wrong shape),
  or the run was quarantined for that; it names the run, the row and, for a ledger row, the
  request. Nothing was changed.
"""

from __future__ import annotations

from typing import Optional

from ..errors import ToolnexusError

__all__ = [
    "StoreError",
    "StoreUnavailable",
    "StoreVersionError",
    "RunNotFound",
    "RunExists",
    "RunInProgress",
    "LeaseLost",
    "RunChanged",
    "AnswerAlreadyApplied",
    "RequestWithdrawn",
    "StoreConflict",
    "RestoreError",
    "RunDamaged",
]


class StoreError(ToolnexusError):
    """Base of every durable-store error."""


class StoreUnavailable(StoreError):
    """The store could not be reached or written; what was committed before is intact."""


class StoreVersionError(StoreError):
    """Data written by a newer toolnexus (schema or run format) that this version cannot read."""


class RunNotFound(StoreError, KeyError):
    """No run with this id in the store."""

    def __init__(self, run_id: str, store: str = "") -> None:
        self.run_id = run_id
        where = f" in {store}" if store else ""
        super().__init__(f"toolnexus: no run {run_id!r}{where}")

    def __str__(self) -> str:  # KeyError would repr() the message
        return str(self.args[0])


class RunExists(StoreError):
    """A run with this id already exists (a caller-chosen run id can be used once)."""

    def __init__(self, run_id: str) -> None:
        self.run_id = run_id
        super().__init__(
            f"toolnexus: run id {run_id!r} is already used in this store — choose another run_id, or "
            "restore the existing run with AgentRuntime.restore"
        )


class RunInProgress(StoreError):
    """Another live process holds the run's lease."""

    def __init__(self, run_id: str, holder: str, expires_in: Optional[float] = None) -> None:
        self.run_id = run_id
        self.holder = holder
        left = f"; its lease ends in {expires_in:.0f}s unless renewed" if expires_in is not None else ""
        super().__init__(
            f"toolnexus: run {run_id!r} is being run by {holder}{left} — wait for it to park or finish, "
            "or pass takeover=True if that process is gone"
        )


class LeaseLost(StoreError):
    """The run's lease is held by someone else now: this runtime must not write to it."""

    def __init__(self, run_id: str, holder: Optional[str]) -> None:
        self.run_id = run_id
        self.holder = holder
        by = f" by {holder}" if holder else ""
        super().__init__(
            f"toolnexus: lost the lease on run {run_id!r} (taken over{by}); this runtime stopped writing — "
            "restore the run where it is running now"
        )


class RunChanged(StoreError):
    """Another process wrote this run since this runtime last did: its in-memory tree is stale."""

    def __init__(self, run_id: str, ours: int, stored: int) -> None:
        self.run_id = run_id
        super().__init__(
            f"toolnexus: run {run_id!r} was changed by another process since this runtime last wrote it (version "
            f"{ours}, store has {stored}); restore it with AgentRuntime.restore")


class AnswerAlreadyApplied(StoreError):
    """The request was answered already, or is being answered right now by another process."""

    def __init__(self, request_id: str, run_id: Optional[str], *, in_flight: bool = False,
                 queued: bool = False) -> None:
        self.request_id = request_id
        self.run_id = run_id
        of = f" of run {run_id!r}" if run_id else ""
        what = "is being answered right now by another process" if in_flight else "was already answered"
        if queued:
            what = "was already answered (that answer waits in the store's work queue for a worker)"
        super().__init__(f"toolnexus: request {request_id!r}{of} {what}; this answer was not applied")


class RequestWithdrawn(StoreError):
    """The request was withdrawn (its handle was interrupted); there is nothing to answer."""

    def __init__(self, request_id: str, run_id: Optional[str]) -> None:
        self.request_id = request_id
        self.run_id = run_id
        of = f" of run {run_id!r}" if run_id else ""
        super().__init__(f"toolnexus: request {request_id!r}{of} was withdrawn (its agent was interrupted); "
                         "this answer was not applied")


class StoreConflict(StoreError):
    """A conversation was changed by another writer since this client loaded it."""


class RestoreError(StoreError, ValueError):
    """The run cannot be restored with the agent definitions given."""


class RunDamaged(StoreError):
    """A stored row of this run cannot be read, or the run is quarantined (see `store.check()`).

    `run_id`, `request_id` (for a row of the answer ledger, else None), `part` (which row: e.g.
    `"request"`, `"message 3 of conversation 'root/payer.1'"`) and `reason` say what is damaged;
    `quarantined` is True when the run was taken out of service (its rows are kept as they are)."""

    def __init__(self, run_id: Optional[str], part: str, reason: str, *, request_id: Optional[str] = None,
                 store: str = "", quarantined: bool = False) -> None:
        self.run_id = run_id
        self.request_id = request_id
        self.part = part
        self.reason = reason
        self.quarantined = quarantined
        where = f" in {store}" if store else ""
        run = f"run {run_id!r}" if run_id else "a run"
        row = f"request {request_id!r} ({part})" if request_id else part
        doctor = f"toolnexus doctor --store {store}" if store else "toolnexus doctor --store URL"
        if quarantined:
            detail = f": {row} cannot be read ({reason})" if reason else ""
            text = (f"toolnexus: {run}{where} is quarantined{detail}; its rows are kept as they were — repair it and "
                    f"release it with `{doctor} --release {run_id}`, or delete the run")
        else:
            text = (f"toolnexus: {run}{where} is damaged: {row} cannot be read: {reason} — nothing was changed; "
                    f"`{doctor}` lists damaged runs and can quarantine them")
        self.store = store
        super().__init__(text)

    def at(self, store: str) -> "RunDamaged":
        """The same error naming the store it came from (unchanged if it names one)."""
        if self.store or not store:
            return self
        return RunDamaged(self.run_id, self.part, self.reason, request_id=self.request_id, store=store,
                          quarantined=self.quarantined)
