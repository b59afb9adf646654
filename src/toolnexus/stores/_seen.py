"""`SeenConversations`: what this process last loaded or saved of each client conversation.

A store keeps `(version, messages)` per conversation id so the next `save` can refuse a write
that another writer got in first (the version) and write only the new messages (the prefix it
handed out). Kept forever, that is every transcript a long-lived server ever served, so it is
bounded: past `keep` entries the oldest are forgotten — but never one whose id is locked, because
a client holds a conversation's lock from its `get` to its `save`, and that entry is what makes
the save safe. A forgotten entry only costs the next save a read of the stored transcript.
"""

from __future__ import annotations

from collections import OrderedDict
from typing import Any, Optional

from ..client._memory import IdLocks

Seen = tuple[int, list[Any]]


class SeenConversations:
    """Bounded `(version, messages)` per conversation id (see the module docstring)."""

    def __init__(self, locks: IdLocks, keep: int = 256) -> None:
        self.keep = keep
        self._locks = locks
        self._seen: OrderedDict[str, Seen] = OrderedDict()

    def get(self, id: str) -> Optional[Seen]:
        return self._seen.get(id)

    def put(self, id: str, version: int, messages: list[Any]) -> None:
        self._seen[id] = (version, messages)
        self._seen.move_to_end(id)
        if len(self._seen) > self.keep:
            for old in [k for k in self._seen if not self._locks.held(k)][: len(self._seen) - self.keep]:
                del self._seen[old]

    def pop(self, id: str) -> None:
        self._seen.pop(id, None)

    def __len__(self) -> int:
        return len(self._seen)
