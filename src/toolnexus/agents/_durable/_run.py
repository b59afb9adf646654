"""`DurableRun`: a runtime's link to its durable store, composed of the parts beside it.

- the staging (`_staging.Staging`): what changed since the last commit;
- the conversation view (`_view.ConversationView`): the runtime's conversation store over it;
- the commit scheduler (`_scheduler.CommitScheduler`): background commits, coalesced;
- the lease (`_lease.Lease`): held while working, renewed in the background.

What is left here is the commit itself. `flush()` takes everything staged and hands it to
`store.commit` as one `Changes`; a state flip and the transcript rewind that goes with it land
together or not at all. Commits are serialised; a failed one puts its changes back into staging,
so the next flush writes them (or the run is restored from the last commit). The first commit
creates the run (with a generated run id, possibly together with the first tool call's start,
written on the tool's thread); a commit while the lease is not held takes it (checking that nobody
else wrote the run meanwhile); the commit that parks the run (no live turn) gives it up.

The run is built before the runtime core it commits (the core is built with `view` as its
conversation store) and attached to it once (`attach`), through the narrow `DurableHost` protocol.
A run that is never attached commits what is staged with the status "running".
"""

from __future__ import annotations

import asyncio
import functools
from dataclasses import asdict
from typing import TYPE_CHECKING, Any, Optional

from ..._clock import Timer
from ..._diag import warn
from ..._write_ahead import WriteAhead
from ...durable import DEFAULT_LEASE_TTL, Changes, Holder, LeaseLost, RunStore, StoreError
from ...durable._model import KIND_AGENTS, epoch
from ...durable._rules import check_claim, claimed
from ...errors import ToolnexusRuntimeError
from ...types import Answer
from .._ahead import AheadCommit
from .._snapshot import registry_fingerprint
from .._vocab import HandleState
from ._host import DurableHost
from ._lease import Lease
from ._scheduler import BACKGROUND_COMMIT_DELAY, CommitScheduler
from ._staging import Staging, Taken
from ._view import ConversationView

if TYPE_CHECKING:  # pragma: no cover
    from .._handle import Handle

_Plan = tuple[Changes, Taken, bool]  # what a commit writes, what it took, whether it creates the run


class DurableRun:
    """One run's staged changes, commit writer and lease (see the module docstring).

    `clock` is the runtime's (the handles' spawn times are on it); the lease is renewed on
    `lease_timer` (real time unless given). `named`: the caller chose the run id (False: it was
    generated, so it cannot be in use yet)."""

    def __init__(self, store: RunStore, run_id: str, *, clock: Timer, lease_ttl: float = DEFAULT_LEASE_TTL,
                 named: bool = True, lease_timer: Optional[Timer] = None) -> None:
        self.store = store
        self.run_id = run_id
        self.lease_ttl = lease_ttl
        self.named = named
        self.created = False
        self.version = 0
        self.entry_agent: Optional[str] = None
        self.failure: Optional[BaseException] = None  # the last commit error not yet overcome
        self.abandoned = False  # a refused restore: this runtime never writes the run
        self.staging = Staging(run_id, clock)
        self.view = ConversationView(self.staging)
        self.lease = Lease(store, run_id, ttl=lease_ttl, timer=lease_timer)
        self.scheduler = CommitScheduler(lambda: self.flush(), before=self._after_ahead,
                                         stopped=lambda: self.abandoned, on_failure=self._background_failed)
        self._host: Optional[DurableHost] = None
        self._release = False
        self._lock: Optional[asyncio.Lock] = None
        self._ahead: Optional[AheadCommit] = None  # a commit prepared for a tool's thread, not landed yet
        self._landed: set[str] = set()  # request ids whose answer's application has committed

    def attach(self, host: DurableHost) -> None:
        """Commit `host`'s state from now on: its run status, its tree (the first commit writes
        the root), its registry's fingerprint. Once only."""
        if self._host is not None:
            raise ToolnexusRuntimeError(f"toolnexus.agents: durable run {self.run_id!r} is attached to a runtime "
                                        "already")
        self._host = host
        self.staging.state["registry"] = registry_fingerprint(host.registry)
        self.staging.touch(host.root)

    # -- the parts' state, as the runtime reads and restore sets it -------------------------------

    @property
    def holder(self) -> Holder:
        return self.lease.holder

    @holder.setter
    def holder(self, holder: Holder) -> None:
        self.lease.holder = holder

    @property
    def held(self) -> bool:
        return self.lease.held

    @property
    def state(self) -> dict[str, Any]:
        """The run-level record (see `set_state`)."""
        return self.staging.state

    @state.setter
    def state(self, state: dict[str, Any]) -> None:
        self.staging.state = state

    # -- staging (see `Staging`) -------------------------------------------------------------------

    def record_of(self, h: "Handle") -> dict[str, Any]:
        return self.staging.record_of(h)

    def touch(self, *handles: "Handle") -> None:
        self.staging.touch(*handles)

    def trace(self, line: str) -> None:
        self.staging.trace(line)

    def conversation(self, conv: str) -> Optional[list[dict[str, Any]]]:
        return self.staging.conversation(conv)

    def stage_conversation(self, conv: str, messages: list[dict[str, Any]]) -> None:
        self.staging.stage_conversation(conv, messages)

    def load_conversation(self, conv: str, messages: list[dict[str, Any]]) -> None:
        self.staging.load_conversation(conv, messages)

    def stage_call(self, h: "Handle", call_id: str, entry: Optional[dict[str, Any]]) -> None:
        self.staging.stage_call(h, call_id, entry)

    def forget_staged_handles(self) -> None:
        self.staging.forget_handles()

    def load_calls(self, rows: dict[tuple[str, str], dict[str, Any]], records: dict[str, dict[str, Any]]) -> None:
        self.staging.load_calls(rows, records)

    def calls_of(self, hid: str) -> dict[str, dict[str, Any]]:
        return self.staging.calls_of(hid)

    def drop_calls(self, h: "Handle") -> None:
        self.staging.drop_calls(h)

    def open_request(self, h: "Handle", request: dict[str, Any], path: Optional[list[str]]) -> None:
        self.staging.open_request(h, request, path)

    def applied(self, request_id: str) -> None:
        self.staging.applied(request_id)

    def cancelled(self, request_id: str) -> None:
        self.staging.cancelled(request_id)

    def set_state(self, **values: Any) -> None:
        self.staging.set_state(**values)

    def mark_status(self, status: str) -> None:
        self.staging.mark_status(status)

    # -- the run's life ----------------------------------------------------------------------------

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

    def adopt(self, version: int) -> None:
        """The runtime holds the lease of an existing run (acquired by restore)."""
        self.created = True
        self.version = version
        self.lease.taken()

    def abandon(self) -> None:
        """Never write this run from here (a restore that was refused half-way)."""
        self.abandoned = True
        self.lease.held = False

    def schedule(self, delay: float = BACKGROUND_COMMIT_DELAY) -> None:
        """Commit in the background within `delay` seconds (see `CommitScheduler.schedule`); a
        failure is kept in `failure`, the changes staged for the next commit."""
        self.scheduler.schedule(delay)

    def _background_failed(self, exc: Exception) -> None:
        self.failure = exc
        warn(f"[toolnexus] agents: committing run {self.run_id!r} failed: {exc}")

    async def close(self) -> None:
        """Stop background work (the lease renewal, a scheduled commit)."""
        await self.scheduler.close()
        await self.lease.close()

    # -- committing --------------------------------------------------------------------------------

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

    def _plan(self, hold: bool) -> Optional[_Plan]:
        """What the next commit writes (taken from staging), or None when it would write nothing."""
        creating = not self.created
        if creating:
            self.staging.state_written()  # the run's state is written by the create itself
        host = self._host
        changes, taken = self.staging.take(host.run_status() if host is not None else HandleState.RUNNING)
        changes.release = self._release and self.held
        self.scheduler.restart_wait()
        changes.expect_version = self.version or None  # the version our last commit left: a fence
        if creating or not self.held:
            if not creating and _only_release(changes) and not hold:
                self.staging.put_back(taken)
                return None  # nothing to write, and no lease to give up
            changes.take_lease = not creating
            changes.release = self._release and not hold and not (host is not None and host.busy())
        elif changes.empty():
            return None
        return changes, taken, creating

    async def _commit_now(self, changes: Changes, taken: Taken, creating: bool) -> None:
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
        self.staging.committed(changes)
        if changes.release:
            self.lease.gone()
        elif changes.take_lease or creating:
            self.lease.taken()
        host = self._host
        if changes.pending and host is not None and host.on_pending is not None:
            for row in changes.pending:  # the host's `on_pending`: each request, once the store holds it
                host.tell_pending(row.to_pending_run())

    def _not_committed(self, taken: Taken, exc: BaseException) -> None:
        self.staging.put_back(taken)
        if isinstance(exc, LeaseLost):
            self.lease.gone()

    async def _after_ahead(self) -> None:
        """Before a background commit: let a call's start that a tool thread is about to write land
        first (the commit would otherwise take the write from it), but wait no longer than a
        background commit may (a tool thread queued behind busy workers is not waited for)."""
        ahead = self._ahead
        if ahead is not None and not self.abandoned:
            try:
                await asyncio.wait_for(ahead.landing(), BACKGROUND_COMMIT_DELAY)
            except TimeoutError:
                pass  # the commit takes the write from the queued thread (see `AheadCommit.settled`)

    async def _land_ahead(self) -> None:
        """A commit prepared for a tool's thread comes before any later one: written by now (here,
        if no thread took it yet). Its failure is raised to the call it was for."""
        ahead = self._ahead
        if ahead is not None:
            await ahead.settled()

    def _ahead_landed(self, changes: Changes, taken: Taken, creating: bool, ahead: AheadCommit,
                      version: Optional[int], error: Optional[BaseException]) -> None:
        if self._ahead is ahead:
            self._ahead = None
        if error is not None:
            self._not_committed(taken, error)
        else:
            assert version is not None
            self._committed(changes, version, creating)

    async def _create(self, changes: Changes) -> int:
        """The first commit creates the run with everything staged, in one transaction: a run
        never exists in the store without its first state."""
        return await self.store.start_run(self.run_id, **self._start_args(), changes=changes)

    def _start_args(self) -> dict[str, Any]:
        root = self._host.root if self._host is not None else None
        if self.entry_agent is None and root is not None and root.children:
            self.entry_agent = root.children[0].defn.name
        return {"kind": KIND_AGENTS, "entry_agent": self.entry_agent, "holder": self.holder,
                "lease_ttl": self.lease_ttl, "state": self.state}

    # -- the answer ledger -------------------------------------------------------------------------

    async def claim(self, answer: Answer, *, ours_already: bool = False) -> None:
        """Claim `answer`'s request in the store's ledger for this runtime, then make sure it holds
        the run's lease. `AnswerAlreadyApplied` / `RequestWithdrawn` when the ledger refuses;
        `RunInProgress` when another live process runs the run (the claim is given back)."""
        taken = None if ours_already else asdict(answer)
        async with claimed(self.store, answer.id, self.holder, taken, ttl=self.lease_ttl, run_id=self.run_id):
            await self.flush(hold=True)

    async def refuse_unheld(self, request_id: str) -> None:
        """No handle here holds `request_id`: raise what the ledger knows (answered, withdrawn)."""
        row = await self.store.find_request(request_id)
        if row is not None and row.run_id == self.run_id:
            check_claim(row, Holder("nobody", "", -1, None), epoch(), self.lease_ttl)

    async def unclaim(self, request_id: str) -> None:
        try:
            await self.store.unclaim(request_id, self.holder)
        except Exception as exc:  # the store is down: the claim expires with our lease
            warn(f"[toolnexus] agents: giving back the claim on {request_id!r} failed: {exc}")


def _only_release(changes: Changes) -> bool:
    """`changes` would only give the lease up (and maybe restate the status)."""
    return not (changes.handles or changes.conversations or changes.pending or changes.applied or changes.cancelled
                or changes.calls or changes.trace or changes.state is not None or changes.result is not None)
