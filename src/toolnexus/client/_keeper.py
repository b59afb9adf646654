"""`Keeper`: what a `Client` keeps about its stored conversations between runs.

One per client (`client.keeper`), shared by `ask`/`stream` with an `id`, durable resume
(_resume.py) and crash recovery (_recover.py). It holds the client's `store` and `approvals` (the
client hands it a new one when its attribute is set) and:

- `lock(id)`: one run per conversation at a time — the store's own lock when it has one (a
  durable store's lease, `LockingStore`), else a per-client lock;
- `journal(id)`: the store's run journal for the conversation, when it keeps one (`JournalingStore`);
- `save(id, result)`: the transcript after a run; with a durable store a halt also opens its
  request in the store's answer ledger;
- `answers`: this client's ledger of answers applied (a second answer to one request is refused);
  `holder`: who this client is in a durable store's ledger (one identity per client);
- `scope(id)`: the approval scope of a run on conversation `id` — the client's own
  `approvals` when it was given one (an agent turn's: the agent run's memory and path), else
  the sticky approval decisions kept per conversation (the last `SCOPES_KEPT` conversations;
  a run with no id gets a fresh one).

What a store can do beyond `get` / `save` is read once, when the store is set, through the
runtime-checkable protocols in _memory.py — never probed per call.
"""

from __future__ import annotations

from collections import OrderedDict
from contextlib import AbstractAsyncContextManager
from dataclasses import asdict
from typing import Optional

from ..approvals import ApprovalMemory, ApprovalScope
from ..durable import Holder, RunStore
from ._journal import RunJournal
from ._memory import ConversationStore, IdLocks, JournalingStore, LockingStore
from ._result import RunResult
from ._resume import AnswerLedger

SCOPES_KEPT = 4096


class Keeper:
    """Conversation bookkeeping of one client (see module docstring)."""

    durable: Optional[RunStore]
    """The store, when it is a durable `RunStore` (its answer ledger is then the one that counts)."""

    def __init__(self, store: ConversationStore, approvals: Optional[ApprovalScope] = None) -> None:
        self._locks = IdLocks()
        self.answers = AnswerLedger()
        self._holder: Optional[Holder] = None
        self._memories: OrderedDict[str, ApprovalMemory] = OrderedDict()
        self._own_lock: Optional[LockingStore] = None
        self._journals: Optional[JournalingStore] = None
        self.approvals = approvals
        self.store = store

    @property
    def store(self) -> ConversationStore:
        return self._store

    @store.setter
    def store(self, store: ConversationStore) -> None:
        self._store = store
        self.durable = store if isinstance(store, RunStore) else None
        self._own_lock = store if isinstance(store, LockingStore) else None
        self._journals = store if isinstance(store, JournalingStore) else None

    def scope(self, id: Optional[str]) -> ApprovalScope:
        """The approval scope of a run on conversation `id` (see the module docstring)."""
        if self.approvals is not None:
            return self.approvals
        if not id:
            return ApprovalScope()
        memory = self._memories.get(id)
        if memory is None:
            memory = self._memories[id] = ApprovalMemory()
            while len(self._memories) > SCOPES_KEPT:
                self._memories.popitem(last=False)
        self._memories.move_to_end(id)
        return ApprovalScope(memory)

    def lock(self, id: str) -> AbstractAsyncContextManager[None]:
        return self._own_lock.lock(id) if self._own_lock is not None else self._locks.hold(id)

    def journal(self, id: str) -> Optional[RunJournal]:
        """The store's run journal for conversation `id`, when it keeps one (the agent runtime's)."""
        return self._journals.journal(id) if self._journals is not None else None

    @property
    def holder(self) -> Holder:
        """Who this client is in a durable store's answer ledger (one identity per client)."""
        if self._holder is None:
            self._holder = Holder.here()
        return self._holder

    async def save(self, id: str, result: RunResult) -> None:
        """Save a run's transcript; with a durable store a halt also opens its request in the ledger."""
        if result.pending is not None and self.durable is not None:
            await self.durable.save_halt(id, result.messages, asdict(result.pending))
        else:
            await self.store.save(id, result.messages)
