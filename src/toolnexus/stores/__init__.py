"""`toolnexus.stores`: durable homes for agent runs and client conversations.

`open_store(url)` gives one (`memory:`, `file:DIR`, `sqlite:///runs.db`, `postgresql://…`); pass
it as `store=` to `Agent.run`, `AgentRuntime` or `Client`, and a parked run survives the process:
`store.pending()` is the inbox, `toolnexus.agents.resume(store, answer, agents=[...])` answers
one from any process, exactly once. All stores implement `RunStore` and pass one conformance
suite; they are async context managers and never block the event loop. Each stored row is read
on its own: a damaged one is reported (`RunDamaged`, `store.check()`, `toolnexus doctor`) and can
be quarantined, never a failure of the whole store.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from ..durable import (
    DEFAULT_LEASE_TTL,
    AnswerAlreadyApplied,
    DamagedRow,
    DamagedRun,
    LeaseLost,
    PendingRun,
    RequestWithdrawn,
    RestoreError,
    RunChanged,
    RunDamaged,
    RunExists,
    RunInProgress,
    RunNotFound,
    RunStore,
    RunSummary,
    StoreConflict,
    StoreError,
    StoreUnavailable,
    StoreVersionError,
    is_run_store,
)
from ._url import open_store

if TYPE_CHECKING:  # the backends below load on first use; spelled out for type checkers and the API reference
    from ._file import FileStore as FileStore
    from ._memory import MemoryStore as MemoryStore
    from ._postgres import PostgresStore as PostgresStore
    from ._sqlite import SqliteStore as SqliteStore

__all__ = [
    "open_store",
    "RunStore",
    "is_run_store",
    "PendingRun",
    "RunSummary",
    "DEFAULT_LEASE_TTL",
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
    "MemoryStore",
    "FileStore",
    "SqliteStore",
    "PostgresStore",
]


def __getattr__(name: str) -> type:  # the backends load on first use (psycopg only when asked for)
    if name == "MemoryStore":
        from ._memory import MemoryStore

        return MemoryStore
    if name == "FileStore":
        from ._file import FileStore

        return FileStore
    if name == "SqliteStore":
        from ._sqlite import SqliteStore

        return SqliteStore
    if name == "PostgresStore":
        from ._postgres import PostgresStore

        return PostgresStore
    raise AttributeError(f"module 'toolnexus.stores' has no attribute {name!r}")
