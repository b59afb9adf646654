"""What the next commit of a durable run writes, staged in memory until a commit takes it.

Verbs and turns mark what they change: a handle (`touch`), a transcript (`stage_conversation`), a
journal entry (`stage_call`), a pending request, an applied or cancelled answer, a trace line, the
run-level state. `take` hands all of it to one `Changes` and empties the staging; `put_back`
restores what a failed commit took, in front of anything staged meanwhile, so nothing is lost.

Transcripts are append-only: each conversation is kept as JSON text, with the first index changed
since the last commit, so a turn writes only its new messages and a rewind deletes only what it
drops.

The journal of a turn rides in its handle's record (`record_of`), which the same commit writes
anyway: a call's start adds no row of its own. Rows of the store's own journal, which an earlier
version wrote, are deleted once their call moves on.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Optional

from ..._clock import Timer
from ...durable import Changes, ConversationOps, PendingRow
from ...durable._model import dumps, epoch, loads
from ...durable._rules import expires_at_epoch

if TYPE_CHECKING:  # pragma: no cover
    from .._handle import Handle


@dataclass
class Conversation:
    """One transcript as the store will hold it once staged changes commit."""

    texts: list[str] = field(default_factory=list)
    committed: int = 0  # messages the store holds now
    dirty_from: int = 0  # first index changed since the last commit
    handed_out: Optional[list[Any]] = None  # what the last get/save saw (identity fast path)

    def dirty(self) -> bool:
        return self.dirty_from < len(self.texts) or self.dirty_from < self.committed


@dataclass
class Taken:
    """What one commit took, to put back if it fails."""

    handles: dict[str, "Handle"]
    conversations: dict[str, tuple[int, int]]  # conv → (dirty_from, committed) before
    dropped: set[tuple[str, str]]
    pending: list[PendingRow]
    applied: list[str]
    cancelled: list[str]
    trace: list[str]
    status: Optional[str]
    state: bool


class Staging:
    """One run's staged changes (see the module docstring). `clock` is the runtime's, whose `now()`
    the handles' spawn times are on."""

    def __init__(self, run_id: str, clock: Timer) -> None:
        self.run_id = run_id
        self._clock = clock
        self.state: dict[str, Any] = {}
        self._handles: dict[str, Handle] = {}
        self._conversations: dict[str, Conversation] = {}
        self._journal: dict[str, dict[str, dict[str, Any]]] = {}  # handle id → its turn's calls (in its record)
        self._dropped: set[tuple[str, str]] = set()  # rows of the store's own journal to delete
        self._live_calls: set[tuple[str, str]] = set()  # such rows the store holds (written by an earlier version)
        self._pending: list[PendingRow] = []
        self._applied: list[str] = []
        self._cancelled: list[str] = []
        self._trace: list[str] = []
        self._status_written: Optional[str] = None
        self._state_dirty = False

    def record_of(self, h: "Handle") -> dict[str, Any]:
        """A handle's record as stored: its `to_record()` plus its age on the wall clock, so a
        wall-clock budget keeps counting in another process."""
        rec = h.to_record()
        rec["spawned_epoch"] = epoch() - (self._clock.now() - h.spawned_at)
        entries = self._journal.get(h.id)
        if entries:
            rec["calls"] = dict(entries)
        return rec

    # -- handles, trace, requests, state -----------------------------------------------------------

    def touch(self, *handles: "Handle") -> None:
        for h in handles:
            self._handles[h.id] = h

    def forget_handles(self) -> None:
        """The tree was replaced by a restored one: drop records staged from the old objects."""
        self._handles.clear()

    def trace(self, line: str) -> None:
        self._trace.append(line)

    def open_request(self, h: "Handle", request: dict[str, Any], path: Optional[list[str]]) -> None:
        self._pending.append(PendingRow(request["id"], self.run_id, h.id, request, path, epoch(),
                                        expires_at_epoch(request)))

    def applied(self, request_id: str) -> None:
        self._applied.append(request_id)

    def cancelled(self, request_id: str) -> None:
        self._cancelled.append(request_id)

    def set_state(self, **values: Any) -> None:
        """Update the run-level record (written with the next commit)."""
        self.state.update(values)
        self._state_dirty = True

    def state_written(self) -> None:
        """The run's state goes with its creation: no separate update of it is staged."""
        self._state_dirty = False

    def mark_status(self, status: str) -> None:
        """The run status the store holds (restore), so an unchanged status is not rewritten."""
        self._status_written = status

    # -- transcripts -------------------------------------------------------------------------------

    def conversation(self, conv: str) -> Optional[list[dict[str, Any]]]:
        c = self._conversations.get(conv)
        if c is None:
            return None
        messages: list[dict[str, Any]] = [loads(text) for text in c.texts]
        c.handed_out = list(messages)
        return messages

    def stage_conversation(self, conv: str, messages: list[dict[str, Any]]) -> None:
        c = self._conversations.setdefault(conv, Conversation())
        messages = list(messages)
        k = 0
        if c.handed_out is not None and len(c.handed_out) == len(c.texts):
            for a, b in zip(c.handed_out, messages, strict=False):
                if a is not b and a != b:
                    break
                k += 1
        else:
            for text, message in zip(c.texts, messages, strict=False):
                if dumps(message) != text:
                    break
                k += 1
        if k < len(c.texts) or k < len(messages):
            del c.texts[k:]
            c.texts.extend(dumps(m) for m in messages[k:])
            c.dirty_from = min(c.dirty_from, k)
        c.handed_out = messages

    def load_conversation(self, conv: str, messages: list[dict[str, Any]]) -> None:
        """A transcript as committed (restore)."""
        texts = [dumps(m) for m in messages]
        self._conversations[conv] = Conversation(texts, len(texts), len(texts))

    # -- the turn journal --------------------------------------------------------------------------

    def stage_call(self, h: "Handle", call_id: str, entry: Optional[dict[str, Any]]) -> None:
        """A journal entry of `h`'s turn (None: the call is settled, its result in the transcript).
        The journal is committed inside `h`'s record, which the same commit writes anyway."""
        entries = self._journal.setdefault(h.id, {})
        if entry is None:
            entries.pop(call_id, None)
        else:
            entries[call_id] = entry
        if not entries:
            del self._journal[h.id]
        self.touch(h)
        key = (h.id, call_id)
        if key in self._live_calls:
            self._dropped.add(key)

    def load_calls(self, rows: dict[tuple[str, str], dict[str, Any]],
                   records: dict[str, dict[str, Any]]) -> None:
        """The journal as committed (restore): in the handles' records, and any rows of the
        store's own journal. It replaces whatever was staged."""
        self._live_calls.update(rows)
        self._journal = {}
        for hid, rec in records.items():
            entries = rec.get("calls")
            if entries:
                self._journal[hid] = dict(entries)

    def calls_of(self, hid: str) -> dict[str, dict[str, Any]]:
        """The journal entries of `hid`'s turn as loaded (restore)."""
        return dict(self._journal.get(hid) or {})

    def drop_calls(self, h: "Handle") -> None:
        """The turn of `h` is settled: none of its journal entries is needed any more."""
        if self._journal.pop(h.id, None) is not None:
            self.touch(h)
        for key in [k for k in self._live_calls if k[0] == h.id]:
            self._dropped.add(key)

    # -- taking and putting back -------------------------------------------------------------------

    def take(self, status: str) -> tuple[Changes, Taken]:
        """Everything staged, as one `Changes` (the run's `status` only if it changed since the
        store last held it); the staging is empty afterwards."""
        changes = Changes()
        taken = Taken(dict(self._handles), {}, set(self._dropped), self._pending, self._applied, self._cancelled,
                      self._trace, self._status_written, self._state_dirty)
        changes.handles = {hid: self.record_of(h) for hid, h in self._handles.items()}
        for conv, c in self._conversations.items():
            if c.dirty():
                changes.conversations[conv] = ConversationOps(c.dirty_from, c.texts[c.dirty_from:], c.committed)
                taken.conversations[conv] = (c.dirty_from, c.committed)
                c.committed = c.dirty_from = len(c.texts)
        changes.calls = dict.fromkeys(self._dropped)
        changes.pending, changes.applied, changes.cancelled = self._pending, self._applied, self._cancelled
        changes.trace = self._trace
        if status != self._status_written:
            changes.status = status
            self._status_written = status
        if self._state_dirty:
            changes.state = dict(self.state)
            self._state_dirty = False
        self._handles, self._dropped = {}, set()
        self._pending, self._applied, self._cancelled, self._trace = [], [], [], []
        return changes, taken

    def put_back(self, taken: Taken) -> None:
        """A commit failed: what it took is staged again, ahead of anything staged since."""
        for hid, h in taken.handles.items():
            self._handles.setdefault(hid, h)
        for conv, (dirty_from, committed) in taken.conversations.items():
            c = self._conversations[conv]
            c.dirty_from = min(c.dirty_from, dirty_from)
            c.committed = committed
        self._dropped |= taken.dropped
        self._pending = taken.pending + self._pending
        self._applied = taken.applied + self._applied
        self._cancelled = taken.cancelled + self._cancelled
        self._trace = taken.trace + self._trace
        self._status_written = taken.status
        self._state_dirty = self._state_dirty or taken.state

    def committed(self, changes: Changes) -> None:
        """`changes` landed: the store's own journal rows they deleted are gone."""
        for key, entry in changes.calls.items():
            if entry is None:
                self._live_calls.discard(key)
