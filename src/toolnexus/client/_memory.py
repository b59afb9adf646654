"""Conversation memory: the `ConversationStore` protocol, the in-memory store, `Conversation`.

`InMemoryConversationStore` deep-copies on save and on get (a hook mutating a live transcript can
never corrupt what was stored), and can be bounded: `max_conversations` evicts the least recently
saved id, `ttl_seconds` forgets ids not saved for that long (clock injectable for tests). It also
offers `lock(id)`, the per-id lock `ask(id=...)`/`stream(id=...)` hold across load → run → save so
two concurrent turns on one conversation cannot overwrite each other. For a store without `lock`,
the client keeps its own per-id locks (`IdLocks`). What a store offers beyond `get` / `save` is
said by two runtime-checkable protocols, checked once when a client is given the store:
`LockingStore` (`lock(id)`) and `JournalingStore` (`journal(id)`, the run journal a durable agent
runtime's store keeps per conversation).

Not here: durable stores (`toolnexus.stores`).
"""

from __future__ import annotations

import asyncio
import copy
import time
from collections import OrderedDict
from contextlib import AbstractAsyncContextManager, asynccontextmanager
from typing import Any, AsyncIterator, Callable, Optional, Protocol, runtime_checkable

from ._journal import RunJournal
from ._result import RunResult


@runtime_checkable
class ConversationStore(Protocol):
    """Where `ask(id=...)` keeps transcripts."""

    async def get(self, id: str) -> Optional[list[dict[str, Any]]]: ...

    async def save(self, id: str, messages: list[dict[str, Any]]) -> None: ...


@runtime_checkable
class LockingStore(Protocol):
    """A store that serialises load → run → save for one conversation itself (a durable store's lease)."""

    def lock(self, id: str) -> AbstractAsyncContextManager[None]: ...


@runtime_checkable
class JournalingStore(Protocol):
    """A store that keeps a run journal per conversation (the agent runtime's turn store)."""

    def journal(self, id: str) -> Optional[RunJournal]: ...


class IdLocks:
    """One `asyncio.Lock` per key, dropped when nobody holds or waits for it."""

    def __init__(self) -> None:
        self._locks: dict[str, list[Any]] = {}

    @asynccontextmanager
    async def hold(self, key: str) -> AsyncIterator[None]:
        entry = self._locks.setdefault(key, [asyncio.Lock(), 0])
        entry[1] += 1
        try:
            async with entry[0]:
                yield
        finally:
            entry[1] -= 1
            if entry[1] == 0 and self._locks.get(key) is entry:
                del self._locks[key]

    def held(self, key: str) -> bool:
        """Someone holds or waits for `key`'s lock."""
        return key in self._locks


class InMemoryConversationStore:
    """Dict-backed store with deep copies, optional size cap and TTL."""

    def __init__(self, *, max_conversations: Optional[int] = None, ttl_seconds: Optional[float] = None,
                 clock: Callable[[], float] = time.monotonic) -> None:
        self.max_conversations = max_conversations
        self.ttl_seconds = ttl_seconds
        self._clock = clock
        self._data: OrderedDict[str, tuple[float, list[dict[str, Any]]]] = OrderedDict()
        self._locks = IdLocks()

    def _expired(self, saved_at: float) -> bool:
        return self.ttl_seconds is not None and self._clock() - saved_at >= self.ttl_seconds

    async def get(self, id: str) -> Optional[list[dict[str, Any]]]:
        entry = self._data.get(id)
        if entry is None:
            return None
        if self._expired(entry[0]):
            del self._data[id]
            return None
        return copy.deepcopy(entry[1])

    async def save(self, id: str, messages: list[dict[str, Any]]) -> None:
        self._data[id] = (self._clock(), copy.deepcopy(list(messages)))
        self._data.move_to_end(id)
        for key in [k for k, (at, _) in self._data.items() if self._expired(at)]:
            del self._data[key]
        while self.max_conversations is not None and len(self._data) > max(self.max_conversations, 0):
            self._data.popitem(last=False)

    def lock(self, id: str) -> AbstractAsyncContextManager[None]:
        """Async context manager serialising load → run → save for one conversation id."""
        return self._locks.hold(id)


class _Runs(Protocol):
    """What a `Conversation` needs of its client: `run` with a history."""

    async def run(self, prompt: Any, toolkit: Any = None, history: Optional[list[dict[str, Any]]] = None,
                  cancel: Optional[asyncio.Event] = None) -> RunResult: ...


class Conversation:
    """A multi-turn chat held in memory: each `send` continues from the previous messages."""

    def __init__(self, client: _Runs, toolkit: Any = None, cancel: Optional[asyncio.Event] = None) -> None:
        self.client = client
        self.toolkit = toolkit
        self.cancel = cancel
        self.messages: list[dict[str, Any]] = []

    async def send(self, prompt: Any) -> RunResult:
        result = await self.client.run(prompt, self.toolkit, history=self.messages, cancel=self.cancel)
        self.messages = result.messages
        return result

    def reset(self) -> None:
        self.messages = []
