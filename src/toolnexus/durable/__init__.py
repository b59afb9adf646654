"""The durable-store interface shared by the client, the agent runtime and `toolnexus.stores`.

`protocol.RunStore` is what a store must do, `model` the plain records it reads and writes,
`rules` the lease and claim decisions every backend makes alike, `errors` what it can refuse,
`paging` the paged listings (`Page`, cursors), `queue` the work queue and worker rows a fleet of
workers shares, `outbox` the notifications waiting for delivery.
Nothing here does I/O; the backends are in `toolnexus.stores`.
"""

from __future__ import annotations

from ._model import (
                     Changes,
                     ConversationOps,
                     DamagedRow,
                     DamagedRun,
                     Holder,
                     LoadedRun,
                     PendingRow,
                     PendingRun,
                     RunSummary,
)
from ._outbox import OutboxBackend, OutboxItem, Outgoing
from ._paging import FINAL_STATUSES, Page
from ._protocol import DEFAULT_LEASE_TTL, PreparedCommit, RunStore, is_run_store
from ._queue import FleetBackend, Queued, QueueStats, WorkerInfo, WorkItem
from .errors import (
                     AnswerAlreadyApplied,
                     LeaseLost,
                     RequestWithdrawn,
                     RestoreError,
                     RunChanged,
                     RunDamaged,
                     RunExists,
                     RunInProgress,
                     RunNotFound,
                     StoreConflict,
                     StoreError,
                     StoreUnavailable,
                     StoreVersionError,
)

__all__ = [
    "RunStore",
    "PreparedCommit",
    "is_run_store",
    "DEFAULT_LEASE_TTL",
    "PendingRun",
    "RunSummary",
    "Holder",
    "Changes",
    "ConversationOps",
    "LoadedRun",
    "PendingRow",
    "Page",
    "FINAL_STATUSES",
    "Queued",
    "WorkItem",
    "WorkerInfo",
    "QueueStats",
    "FleetBackend",
    "OutboxBackend",
    "OutboxItem",
    "Outgoing",
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
    "DamagedRow",
    "DamagedRun",
]
