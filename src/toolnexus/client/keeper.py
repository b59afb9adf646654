"""`Keeper`: what a `Client` keeps about its stored conversations between runs.

One per client (`client.keeper`), shared by `ask`/`stream` with an `id`, durable resume
(resume.py) and crash recovery (recover.py):

- `lock(id)`: one run per conversation at a time — the store's own lock when it has one (a
  durable store's lease), else a per-client lock;
- `journal(id)`: the store's run journal for the conversation, when it keeps one;
- `save(id, result)`: the transcript after a run; with a durable store a halt also opens its
  request in the store's answer ledger;
- `answers`: this client's ledger of answers applied (a second answer to one request is refused);
  `holder`: who this client is in a durable store's ledger (one identity per client);
- `scope(id)`: the approval scope of a run on conversation `id` — the client's own
  `approvals` when it was given one (an agent turn's: the agent run's memory and path), else
  the sticky approval decisions kept per conversation (the last `SCOPES_KEPT` conversations;
  a run with no id gets a fresh one).
"""

from __future__ import annotations

from collections import OrderedDict
from dataclasses import asdict
from typing import TYPE_CHECKING, Any, Optional

from ..approvals import ApprovalMemory, ApprovalScope
from ..durable import is_run_store
from .memory import IdLocks
from .resume import AnswerLedger

if TYPE_CHECKING:
    from .client import Client
    from .result import RunResult

__all__ = ["Keeper", "SCOPES_KEPT"]

SCOPES_KEPT = 4096


class Keeper:
    """Conversation bookkeeping of one client (see module docstring)."""

    def __init__(self, client: "Client") -> None:
        self._client = client
        self._locks = IdLocks()
        self.answers = AnswerLedger()
        self._holder: Any = None
        self._memories: OrderedDict[str, ApprovalMemory] = OrderedDict()

    def scope(self, id: Optional[str]) -> ApprovalScope:  # noqa: A002
        """The approval scope of a run on conversation `id` (see the module docstring)."""
        given = self._client.approvals
        if given is not None:
            return given
        if not id:
            return ApprovalScope()
        memory = self._memories.get(id)
        if memory is None:
            memory = self._memories[id] = ApprovalMemory()
            while len(self._memories) > SCOPES_KEPT:
                self._memories.popitem(last=False)
        self._memories.move_to_end(id)
        return ApprovalScope(memory)

    def lock(self, id: str) -> Any:  # noqa: A002
        lock = getattr(self._client.store, "lock", None)
        return lock(id) if callable(lock) else self._locks.hold(id)

    def journal(self, id: str) -> Any:  # noqa: A002
        """The store's run journal for conversation `id`, when it keeps one (the agent runtime's)."""
        journal = getattr(self._client.store, "journal", None)
        return journal(id) if callable(journal) else None

    @property
    def holder(self) -> Any:
        """Who this client is in a durable store's answer ledger (one identity per client)."""
        if self._holder is None:
            from ..durable import Holder

            self._holder = Holder.here()
        return self._holder

    async def save(self, id: str, result: "RunResult") -> None:  # noqa: A002
        """Save a run's transcript; with a durable store a halt also opens its request in the ledger."""
        store = self._client.store
        if result.pending is not None and is_run_store(store):
            await store.save_halt(id, result.messages, asdict(result.pending))  # type: ignore[attr-defined]
        else:
            await store.save(id, result.messages)
