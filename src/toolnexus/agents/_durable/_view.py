"""The runtime's conversation store when it has a durable one: transcripts read from and saved to
the run's staging, written by its next commit."""

from __future__ import annotations

from contextlib import AbstractAsyncContextManager
from typing import Any, Optional

from ...client._memory import IdLocks
from ._staging import Staging


class ConversationView:
    """A `ConversationStore` (`get` / `save`) that also serialises each conversation (`lock`)."""

    def __init__(self, staging: Staging) -> None:
        self._staging = staging
        self._locks = IdLocks()

    async def get(self, id: str) -> Optional[list[dict[str, Any]]]:
        return self._staging.conversation(id)

    async def save(self, id: str, messages: list[dict[str, Any]]) -> None:
        self._staging.stage_conversation(id, messages)

    def lock(self, id: str) -> AbstractAsyncContextManager[None]:
        return self._locks.hold(id)
