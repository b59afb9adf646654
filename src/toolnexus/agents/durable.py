"""A runtime's link to its durable store: what changed, one commit at a time, under a lease.

`DurableRun` is everything an `AgentRuntime` built with a `RunStore` needs to make its run
survive the process:

- **Staging.** Verbs and turns mark what they change (`touch(handle)`, a transcript saved
  through the conversation view, a journal entry, a pending request, a trace line). Nothing is
  written until a commit.
- **One commit, one transaction.** `flush()` takes everything staged and hands it to
  `store.commit` as one `Changes`; a state flip and the transcript rewind that goes with it land
  together or not at all. Commits are serialised; callers that arrive while one is in flight
  share the next one. A failed commit puts its changes back, so nothing staged is lost: the
  next flush writes them (or the run is restored from the last commit).
- **Transcripts are append-only.** The view keeps each conversation as JSON text and remembers
  the first index changed since the last commit; a turn writes its new messages only, a rewind
  deletes only what it drops.
- **The lease.** The first commit creates the run (or the runtime acquired it on restore) — with
  a generated run id, possibly the first tool call's start, written on the tool's thread; the
  lease is renewed in the background while held, given up in the commit that parks the run (no
  live turn), and taken again (checking that nobody else wrote the run meanwhile) when work
  starts again.
- **The journal.** `TurnJournal` is what one turn's client reports to (see
  `toolnexus.client._journal`): the run's start, each tool call before it runs and after it
  finished, the results once they are in the transcript. The entries ride in the handle's own
  record (`record_of`), which the commit writes anyway: a call's start adds no row of its own
  (on SQLite that was ~1% of a run with a side-effecting tool). It also notes which call each
  suspension came from, so a parked handle's `Suspension` names its `tool_call_id` — with or
  without a store.

Not here: deciding what a turn does (`turn.py`), rebuilding a run from the store (`restore.py`).
"""

from __future__ import annotations

import asyncio
import functools
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Callable, Optional

from .._diag import warn
from ..client._journal import FINISHED, QUEUED, STARTED, call_entry
from ..client._memory import IdLocks
from .._write_ahead import WriteAhead
from ..durable import DEFAULT_LEASE_TTL, Changes, ConversationOps, Holder, LeaseLost, PendingRow, RunStore, StoreError
from ..durable.model import KIND_AGENTS, dumps, epoch, loads
from ..durable.rules import expires_at_epoch
from ..types import Answer, Request, ToolResult, pending_of
from .ahead import AheadCommit

if TYPE_CHECKING:  # pragma: no cover
    from ..client._wire.base import ToolCall
    from .handle import Handle

__all__ = ["DurableRun", "ConversationView", "TurnJournal", "TurnStore", "BACKGROUND_COMMIT_DELAY"]

# A checkpoint that need not precede a side effect (a finished call's result, a state change, a
# parked run giving its lease up) is written within this many seconds, or sooner with the next
# commit that must be awaited: a fast model's next tool call takes it along (one commit per turn
# instead of two); a slow one's LLM call overlaps it. A crash inside the window only makes
# recovery more careful, never wrong.
BACKGROUND_COMMIT_DELAY = 0.005


@dataclass
class _Conversation:
    """One transcript as the store will hold it once staged changes commit."""

    texts: list[str] = field(default_factory=list)
    committed: int = 0  # messages the store holds now
    dirty_from: int = 0  # first index changed since the last commit
    handed_out: Optional[list[Any]] = None  # what the last get/save saw (identity fast path)

    def dirty(self) -> bool:
        return self.dirty_from < len(self.texts) or self.dirty_from < self.committed


@dataclass
class _Taken:
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


class ConversationView:
    """The runtime's conversation store when it has a durable one: transcripts staged for the
    next commit (a `ConversationStore`: `get` / `save` / `lock`)."""

    def __init__(self, durable: "DurableRun") -> None:
        self._durable = durable
        self._locks = IdLocks()

    async def get(self, id: str) -> Optional[list[dict[str, Any]]]:  # noqa: A002
        return self._durable.conversation(id)

    async def save(self, id: str, messages: list[dict[str, Any]]) -> None:  # noqa: A002
        self._durable.stage_conversation(id, messages)

    def lock(self, id: str) -> Any:  # noqa: A002
        return self._locks.hold(id)


class DurableRun:
    """One run's staged changes, commit writer and lease (see the module docstring)."""

    def __init__(self, store: RunStore, run_id: str, *, run_status: Callable[[], str], clock: Any,
                 lease_ttl: float = DEFAULT_LEASE_TTL, named: bool = True) -> None:
        self.store = store
        self.run_id = run_id
        self.lease_ttl = lease_ttl
        self._clock = clock
        self._core: Any = None
        self.holder = Holder.here()
        self.created = False
        self.named = named  # the caller chose the run id (False: generated, so it cannot be in use yet)
        self.held = False
        self.version = 0
        self.entry_agent: Optional[str] = None
        self.state: dict[str, Any] = {}
        self.view = ConversationView(self)
        self._run_status = run_status
        self._handles: dict[str, Handle] = {}
        self._conversations: dict[str, _Conversation] = {}
        self._journal: dict[str, dict[str, dict[str, Any]]] = {}  # handle id → its turn's calls (in its record)
        self._dropped: set[tuple[str, str]] = set()  # rows of the store's own journal to delete
        self._live_calls: set[tuple[str, str]] = set()  # such rows the store holds (written by an earlier version)
        self._pending: list[PendingRow] = []
        self._applied: list[str] = []
        self._cancelled: list[str] = []
        self._trace: list[str] = []
        self._status_written: Optional[str] = None
        self._state_dirty = False
        self._release = False
        self._lock: Optional[asyncio.Lock] = None
        self._ahead: Optional[AheadCommit] = None  # a commit prepared for a tool's thread, not landed yet
        self._scheduled: Optional[asyncio.Task[None]] = None
        self._due = 0.0
        self._flushing = False  # the scheduled task has started: what it commits is taken already
        self._again = False  # something was staged (or parked) since: it goes round once more
        self._renewer: Optional[asyncio.Task[None]] = None
        self.failure: Optional[BaseException] = None  # the last commit error not yet overcome
        self._landed: set[str] = set()  # request ids whose answer's application has committed
        self.abandoned = False  # a refused restore: this runtime never writes the run

    def bind(self, core: Any) -> None:
        """Attach to the runtime core whose state this run commits."""
        from .snapshot import registry_fingerprint

        self._core = core
        self._run_status = core.run_status
        self.state = {"registry": registry_fingerprint(core.registry)}
        self.touch(core.root)  # a new run's first commit writes its root

    def record_of(self, h: "Handle") -> dict[str, Any]:
        """A handle's record as stored: its `to_record()` plus its age on the wall clock, so a
        wall-clock budget keeps counting in another process."""
        rec = h.to_record()
        rec["spawned_epoch"] = epoch() - (self._clock.now() - h.spawned_at)
        entries = self._journal.get(h.id)
        if entries:
            rec["calls"] = dict(entries)
        return rec

    # -- staging -----------------------------------------------------------------------------------

    def touch(self, *handles: "Handle") -> None:
        for h in handles:
            self._handles[h.id] = h

    def trace(self, line: str) -> None:
        self._trace.append(line)

    def conversation(self, conv: str) -> Optional[list[dict[str, Any]]]:
        c = self._conversations.get(conv)
        if c is None:
            return None
        messages = [loads(text) for text in c.texts]
        c.handed_out = list(messages)
        return messages

    def conversation_length(self, conv: str) -> int:
        c = self._conversations.get(conv)
        return len(c.texts) if c is not None else 0

    def stage_conversation(self, conv: str, messages: list[dict[str, Any]]) -> None:
        c = self._conversations.setdefault(conv, _Conversation())
        messages = list(messages)
        k = 0
        if c.handed_out is not None and len(c.handed_out) == len(c.texts):
            for a, b in zip(c.handed_out, messages):
                if a is not b and a != b:
                    break
                k += 1
        else:
            for text, message in zip(c.texts, messages):
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
        self._conversations[conv] = _Conversation(texts, len(texts), len(texts))

    def stage_call(self, h: "Handle", call_id: str, entry: Optional[dict[str, Any]]) -> None:
        """A journal entry of `h`'s turn (None: the call is settled, its result in the transcript).
        The journal is committed inside `h`'s record, which the same commit writes anyway: a call's
        start costs no row of its own. A row of the store's own journal (an earlier version wrote
        those) is dropped when its call moves on."""
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

    def forget_staged_handles(self) -> None:
        """The tree was replaced by a restored one: drop records staged from the old objects."""
        self._handles.clear()

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

    def mark_status(self, status: str) -> None:
        """The run status the store holds (restore), so an unchanged status is not rewritten."""
        self._status_written = status

    async def start(self, entry_agent: str) -> None:
        """Create the run now (before any work), so a used run id is refused up front."""
        self.entry_agent = entry_agent
        await self.flush()

    def hold(self) -> None:
        """Work is starting: keep the lease (cancel a pending release)."""
        self._release = False

    def park(self) -> None:
        """Nothing runs: give the lease up with the next commit, so another process may resume."""
        self._release = True
        self.schedule()

    # -- committing --------------------------------------------------------------------------------

    def schedule(self, delay: float = BACKGROUND_COMMIT_DELAY) -> None:
        """Commit in the background, within `delay` seconds — sooner if an awaited commit comes
        first and takes the staged changes along (a run that ends in `Agent.run` writes its last
        turn, its result and its lease in one commit, not three). Each commit that takes what is
        staged restarts the wait, so a fast run's background commits are all taken along by its
        awaited ones. A failure is kept in `failure`; the changes stay staged and the next commit
        writes them.

        A background commit that has already started took its changes before this call: it then
        commits once more, so a change (or a park) staged during its commit is never left behind."""
        try:
            loop = asyncio.get_running_loop()
        except RuntimeError:
            return  # no loop (a verb called from sync code): the next awaited flush writes it
        due = loop.time() + delay
        current = self._scheduled
        if current is not None and not current.done():
            if self._flushing:
                self._again = True
                return
            if self._due <= due:
                return
            current.cancel()
        self._due = due
        self._scheduled = loop.create_task(self._background_flush())

    def _restart_wait(self) -> None:
        """Everything staged was just taken by a commit: a scheduled background commit waits a full
        delay from now (anything staged later is written by then, or by the next awaited commit)."""
        current = self._scheduled
        if current is not None and not current.done() and not self._flushing:
            self._due = max(self._due, asyncio.get_running_loop().time() + BACKGROUND_COMMIT_DELAY)

    async def _background_flush(self) -> None:
        try:
            loop = asyncio.get_running_loop()
            while (wait := self._due - loop.time()) > 0:
                await asyncio.sleep(wait)
            await self._after_ahead()
            self._flushing = True
            try:
                await self.flush()
                while self._again and not self.abandoned:
                    self._again = False
                    await self.flush()
            finally:
                self._flushing = self._again = False
        except asyncio.CancelledError:
            raise
        except Exception as exc:
            self.failure = exc
            warn(f"[toolnexus] agents: committing run {self.run_id!r} failed: {exc}")

    def abandon(self) -> None:
        """Never write this run from here (a restore that was refused half-way)."""
        self.abandoned = True
        self.held = False

    async def flush(self, *, hold: bool = False) -> None:
        """Commit everything staged, in one transaction (no-op when nothing is).

        The first commit creates the run; a commit while the lease is not held takes it in the
        same transaction (refused if a live holder has it, or if another process wrote the run
        since this runtime did). `hold`: make sure the lease is held afterwards, even with nothing
        to write (before work starts)."""
        if self.abandoned:
            return
        async with self._locked():
            await self._land_ahead()
            if hold:
                self._release = False
            plan = self._plan(hold)
            if plan is not None:
                await self._commit_now(*plan)

    def landed(self, request_id: str) -> bool:
        """The answer to `request_id` was applied, and that is committed."""
        return request_id in self._landed

    async def flush_applied(self, request_id: str) -> Optional[StoreError]:
        """`flush()` after the answer to `request_id` was applied. Once that application has
        committed, a later store failure cannot make the answer unapplied, so it is not raised as
        if it had: it is warned about, kept in `failure` (`AgentRuntime.commit_error`) and returned.
        The store then holds the run as of its last commit — the answer applied — and the run
        continues from there when restored (or when a later `flush()` gets through). Before that
        commit, a failure raises as `flush` does."""
        try:
            await self.flush()
        except StoreError as exc:
            if not self.landed(request_id):
                raise
            self.failure = exc
            warn(f"[toolnexus] agents: the answer to {request_id!r} of run {self.run_id!r} was applied, but saving "
                 f"what the run did after it failed: {exc} — the store holds the run as of its last commit (the "
                 "answer applied); it goes on from there when restored")
            return exc
        return None

    async def write_ahead(self) -> Optional[WriteAhead]:
        """Commit everything staged before a side effect. A store that can commit from any thread
        gets the commit prepared here and returned, for the thread about to run the tool to write
        first (see `toolnexus._write_ahead`); otherwise it is committed now and None returned.
        Prepared: a plain commit under the lease, or the run's creation when its id was generated
        (none can be in use); never a commit that takes the lease or gives it up."""
        if self.abandoned:
            return None
        async with self._locked():
            await self._land_ahead()
            plan = self._plan(False)
            if plan is None:
                return None
            changes, taken, creating = plan
            changes.sync = True  # the side effect comes next: this commit must survive power loss too
            prepared = None
            if creating:
                if not self.named:  # a generated id cannot be in use: the run is created with the start
                    prepared = self.store.prepare_start(self.run_id, **self._start_args(), changes=changes)
            elif not (changes.take_lease or changes.release):  # the plain case: the lease is held
                prepared = self.store.prepare_commit(self.run_id, self.holder, changes, lease_ttl=self.lease_ttl)
            if prepared is None:
                await self._commit_now(changes, taken, creating)
                return None
            self._ahead = AheadCommit(prepared, functools.partial(self._ahead_landed, changes, taken, creating))
            return self._ahead

    def _locked(self) -> asyncio.Lock:
        if self._lock is None:
            self._lock = asyncio.Lock()
        return self._lock

    def _plan(self, hold: bool) -> Optional[tuple[Changes, _Taken, bool]]:
        """What the next commit writes (taken from staging), or None when it would write nothing."""
        creating = not self.created
        if creating:
            self._state_dirty = False  # the run's state is written by the create itself
        changes, taken = self._take()
        self._restart_wait()
        changes.expect_version = self.version or None  # the version our last commit left: a fence
        if creating or not self.held:
            if not creating and _only_release(changes) and not hold:
                self._put_back(taken)
                return None  # nothing to write, and no lease to give up
            changes.take_lease = not creating
            changes.release = self._release and not hold and not self._core_busy()
        elif changes.empty():
            return None
        return changes, taken, creating

    async def _commit_now(self, changes: Changes, taken: _Taken, creating: bool) -> None:
        try:
            if creating:
                version = await self._create(changes)
            else:
                version = await self.store.commit(self.run_id, self.holder, changes, lease_ttl=self.lease_ttl)
        except BaseException as exc:
            self._not_committed(taken, exc)
            raise
        self._committed(changes, version, creating)

    def _committed(self, changes: Changes, version: int, creating: bool) -> None:
        self.version = version
        self.created, self.failure = True, None
        self._landed.update(changes.applied)
        for key, entry in changes.calls.items():
            if entry is None:
                self._live_calls.discard(key)
        if changes.release:
            self._lease_gone()
        elif changes.take_lease or creating:
            self.held = True
            self._start_renewing()
        if changes.pending and self._core is not None and self._core.on_pending is not None:
            for row in changes.pending:  # the host's `on_pending`: each request, once the store holds it
                self._core.tell_pending(row.to_pending_run())

    def _not_committed(self, taken: _Taken, exc: BaseException) -> None:
        self._put_back(taken)
        if isinstance(exc, LeaseLost):
            self._lease_gone()

    async def _after_ahead(self) -> None:
        """Before a background commit: let a call's start that a tool thread is about to write land
        first (the commit would otherwise take the write from it), but wait no longer than a
        background commit may (a tool thread queued behind busy workers is not waited for)."""
        ahead = self._ahead
        if ahead is not None and not self.abandoned:
            try:
                await asyncio.wait_for(ahead.landing(), BACKGROUND_COMMIT_DELAY)
            except asyncio.TimeoutError:
                pass  # the commit takes the write from the queued thread (see `AheadCommit.settled`)

    async def _land_ahead(self) -> None:
        """A commit prepared for a tool's thread comes before any later one: written by now (here,
        if no thread took it yet). Its failure is raised to the call it was for."""
        ahead = self._ahead
        if ahead is not None:
            await ahead.settled()

    def _ahead_landed(self, changes: Changes, taken: _Taken, creating: bool, ahead: AheadCommit,
                      version: Optional[int], error: Optional[BaseException]) -> None:
        if self._ahead is ahead:
            self._ahead = None
        if error is not None:
            self._not_committed(taken, error)
        else:
            assert version is not None
            self._committed(changes, version, creating)

    def _core_busy(self) -> bool:
        return bool(self._core is not None and self._core.busy())

    async def _create(self, changes: Changes) -> int:
        """The first commit creates the run with everything staged, in one transaction: a run
        never exists in the store without its first state."""
        return await self.store.start_run(self.run_id, **self._start_args(), changes=changes)

    def _start_args(self) -> dict[str, Any]:
        root = self._core.root if self._core is not None else None
        if self.entry_agent is None and root is not None and root.children:
            self.entry_agent = root.children[0].defn.name
        return {"kind": KIND_AGENTS, "entry_agent": self.entry_agent, "holder": self.holder,
                "lease_ttl": self.lease_ttl, "state": self.state}

    def adopt(self, version: int) -> None:
        """The runtime holds the lease of an existing run (acquired by restore)."""
        self.created = self.held = True
        self.version = version
        self._start_renewing()

    def _take(self) -> tuple[Changes, _Taken]:
        changes = Changes()
        taken = _Taken(dict(self._handles), {}, set(self._dropped), self._pending, self._applied, self._cancelled,
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
        status = self._run_status()
        if status != self._status_written:
            changes.status = status
            self._status_written = status
        if self._state_dirty:
            changes.state = dict(self.state)
            self._state_dirty = False
        changes.release = self._release and self.held
        self._handles, self._dropped = {}, set()
        self._pending, self._applied, self._cancelled, self._trace = [], [], [], []
        return changes, taken

    def _put_back(self, taken: _Taken) -> None:
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

    async def claim(self, answer: Answer, *, ours_already: bool = False) -> None:
        """Claim `answer`'s request in the store's ledger for this runtime, then make sure it holds
        the run's lease. `AnswerAlreadyApplied` / `RequestWithdrawn` when the ledger refuses;
        `RunInProgress` when another live process runs the run (the claim is given back)."""
        from dataclasses import asdict

        if not ours_already:
            await self.store.claim(answer.id, self.holder, asdict(answer), ttl=self.lease_ttl, run_id=self.run_id)
        try:
            await self.flush(hold=True)
        except BaseException:
            await self.unclaim(answer.id)
            raise

    async def refuse_unheld(self, request_id: str) -> None:
        """No handle here holds `request_id`: raise what the ledger knows (answered, withdrawn)."""
        from ..durable.rules import check_claim

        row = await self.store.find_request(request_id)
        if row is not None and row.run_id == self.run_id:
            check_claim(row, Holder("nobody", "", -1, None), epoch(), self.lease_ttl)

    async def unclaim(self, request_id: str) -> None:
        try:
            await self.store.unclaim(request_id, self.holder)
        except Exception as exc:  # the store is down: the claim expires with our lease
            warn(f"[toolnexus] agents: giving back the claim on {request_id!r} failed: {exc}")

    # -- the lease ---------------------------------------------------------------------------------

    def _start_renewing(self) -> None:
        if self._renewer is None or self._renewer.done():
            self._renewer = asyncio.get_running_loop().create_task(self._renew())

    async def _renew(self) -> None:
        while self.held:
            await asyncio.sleep(self.lease_ttl / 3)
            try:
                await self.store.renew(self.run_id, self.holder, self.lease_ttl)
            except LeaseLost as exc:
                warn(f"[toolnexus] agents: {exc}")
                self.held = False
                return
            except Exception as exc:  # the store is down: the next commit will say so
                warn(f"[toolnexus] agents: renewing the lease of run {self.run_id!r} failed: {exc}")

    def _lease_gone(self) -> None:
        self.held = False
        task, self._renewer = self._renewer, None
        if task is not None and task is not asyncio.current_task():
            task.cancel()

    async def close(self) -> None:
        """Stop background work (the lease renewal, a scheduled commit)."""
        for task in (self._scheduled, self._renewer):
            if task is not None and not task.done() and task is not asyncio.current_task():
                task.cancel()
                try:
                    await task
                except BaseException:
                    pass
        self._scheduled = self._renewer = None


def _only_release(changes: Changes) -> bool:
    """`changes` would only give the lease up (and maybe restate the status)."""
    return not (changes.handles or changes.conversations or changes.pending or changes.applied or changes.cancelled
                or changes.calls or changes.trace or changes.state is not None or changes.result is not None)


class TurnJournal:
    """The run journal of one turn's client (see `toolnexus.client._journal`).

    Without a store it only notes which call each suspension came from (`halted`); with one, it
    stages the transcript and the call's row and commits before the loop goes on.
    """

    def __init__(self, durable: Optional[DurableRun], h: "Handle", on_checkpoint: Callable[[], None],
                 idempotent: Callable[[str], bool] = lambda name: False) -> None:
        self._durable = durable
        self._conv = h.id
        self._handle = h
        self._on_checkpoint = on_checkpoint
        self._idempotent = idempotent
        self.halted: dict[str, "ToolCall"] = {}  # request id → the call that minted it

    def journal(self, conv: str) -> Optional["TurnJournal"]:
        return self if conv == self._conv else None

    async def _commit(self, messages: Optional[list[dict[str, Any]]], *, wait: bool) -> None:
        """Stage, then commit: awaited before a side effect (`wait`), otherwise in the background,
        overlapping the LLM call that follows — a crash that beats such a commit only makes the
        recovery more careful (the LLM asked again, a finished call asked about), never wrong."""
        durable = self._stage(messages)
        if wait:
            await durable.flush()
        else:
            durable.schedule(BACKGROUND_COMMIT_DELAY)

    def _stage(self, messages: Optional[list[dict[str, Any]]]) -> DurableRun:
        """Stage the transcript (if given) and this handle's checkpoint; the run they go to."""
        durable = self._durable
        assert durable is not None
        if messages is not None:
            durable.stage_conversation(self._conv, messages)
        self._on_checkpoint()
        return durable

    async def run_started(self, messages: list[dict[str, Any]]) -> None:
        if self._durable is None:
            return
        if self._handle.turn_info is not None:
            self._handle.turn_info["started"] = True
        self._durable.touch(self._handle)
        await self._commit(messages, wait=False)

    async def call_queued(self, messages: list[dict[str, Any]], call: "ToolCall", request: Request,
                          answer: Answer) -> None:
        if self._durable is None:
            return
        self._durable.stage_call(self._handle, call.id, call_entry(QUEUED, call, call.args, answer=answer,
                                                                 request=request))
        await self._commit(messages, wait=True)

    async def call_started(self, messages: list[dict[str, Any]], call: "ToolCall",
                           args: dict[str, Any]) -> Optional[WriteAhead]:
        if self._durable is None:
            return None
        self._durable.stage_call(self._handle, call.id, call_entry(STARTED, call, args))
        # Only a call that must not run twice needs its start on disk before it runs; an idempotent
        # one found without a result after a crash simply runs again.
        if self._idempotent(call.name):
            await self._commit(messages, wait=False)
            return None
        return await self._stage(messages).write_ahead()

    async def call_finished(self, call: "ToolCall", result: ToolResult) -> None:
        request = pending_of(result)
        if request is not None:
            self.halted.setdefault(request.id, call)
        if self._durable is None:
            return
        self._durable.stage_call(self._handle, call.id, call_entry(FINISHED, call, call.args, result=result))
        await self._commit(None, wait=False)

    def results_written(self, messages: list[dict[str, Any]], call_ids: list[str]) -> None:
        if self._durable is None:
            return
        self._durable.stage_conversation(self._conv, messages)
        for call_id in call_ids:
            self._durable.stage_call(self._handle, call_id, None)
        self._durable.schedule(BACKGROUND_COMMIT_DELAY)


class TurnStore:
    """The store a turn's client sees: the runtime's conversation store, plus this turn's journal."""

    def __init__(self, inner: Any, journal: TurnJournal,
                 hold: Optional[Callable[[list[dict[str, Any]]], None]] = None) -> None:
        self._inner = inner
        self._journal = journal
        self._hold = hold
        lock = getattr(inner, "lock", None)
        if callable(lock):  # otherwise the client keeps its own per-id locks
            self.lock = lock

    async def get(self, id: str) -> Any:  # noqa: A002
        return await self._inner.get(id)

    async def save(self, id: str, messages: list[dict[str, Any]]) -> None:  # noqa: A002
        """With a store, the run's final transcript is held for the turn's settle, which commits it
        together with the state change; without one it is saved at once."""
        if self._hold is not None:
            self._hold(messages)
        else:
            await self._inner.save(id, messages)

    def journal(self, id: str) -> Optional[TurnJournal]:  # noqa: A002
        return self._journal.journal(id)
