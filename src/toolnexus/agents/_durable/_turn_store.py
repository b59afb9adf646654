"""`TurnStore`: the conversation store one turn's client sees.

It is the runtime's conversation store (the durable run's view, or a plain store) plus this turn's
journal; with a durable store the run's final transcript is held for the turn's settle, which
commits it together with the state change. When the store serialises conversations itself (a
`LockingStore`), the turn store passes its `lock` on; otherwise it has none and the client keeps
its own per-id locks.
"""

from __future__ import annotations

from typing import Any, Callable, Optional

from ...client._memory import ConversationStore, LockingStore
from ._journal import TurnJournal


class TurnStore:
    """The store a turn's client sees (see the module docstring)."""

    def __init__(self, inner: ConversationStore, journal: TurnJournal,
                 hold: Optional[Callable[[list[dict[str, Any]]], None]] = None) -> None:
        self._inner = inner
        self._journal = journal
        self._hold = hold
        if isinstance(inner, LockingStore):  # checked once: the capability is the store's for good
            self.lock = inner.lock

    async def get(self, id: str) -> Optional[list[dict[str, Any]]]:
        return await self._inner.get(id)

    async def save(self, id: str, messages: list[dict[str, Any]]) -> None:
        """With a store, the run's final transcript is held for the turn's settle, which commits it
        together with the state change; without one it is saved at once."""
        if self._hold is not None:
            self._hold(messages)
        else:
            await self._inner.save(id, messages)

    def journal(self, id: str) -> Optional[TurnJournal]:
        return self._journal.journal(id)
