"""`RunStore`: what the client and the agent runtime need from a durable store.

A store keeps *runs* (an agent tree, or a client conversation) as plain records: handle rows,
transcripts (append-only), the tool-call journal, pending requests (the answer ledger) and trace
lines, plus a lease naming the one live process allowed to write each run. Every write a runtime
makes goes through `commit`, one transaction per call, fenced by the lease. The implementations
live in `toolnexus.stores` (memory, file, SQLite, PostgreSQL) and share one conformance suite.

The store also is a `ConversationStore` (`get` / `save` / `lock`), so `Client(store=...)` keeps
`ask(id=...)` transcripts in it, and records halts and claims answers through the same ledger
(`save_halt`, `claim`, `save_applied`), so a second client or process cannot apply an answer
twice.

This module defines the interface only; it does no I/O.
"""

from __future__ import annotations

import abc
from typing import TYPE_CHECKING, Any, AsyncContextManager, Optional, Protocol, Sequence, Union

from ..errors import ToolnexusValueError
from ._model import Changes, DamagedRun, Holder, LoadedRun, PendingRow, PendingRun, RunSummary, epoch
from ._paging import FINAL_STATUSES, Age, Page, seconds_of
from .errors import StoreError

if TYPE_CHECKING:  # pragma: no cover
    from ._outbox import OutboxBackend
    from ._queue import FleetBackend, Queued

DEFAULT_LEASE_TTL = 30.0  # seconds; a live runtime renews its lease every third of this


class RunStore(abc.ABC):
    """A durable home for runs. Async-first; use as `async with open_store(url) as store:`."""

    #: a printable description of where the store is (never a password)
    url: str = ""
    #: seconds: how long an ended run is kept. `prune()` called without `older_than` deletes runs
    #: that ended longer ago than this, and a worker serving the store does so hourly unless given
    #: a retention of its own. Set by a SQL store's URL (`?retention=30d`); None keeps every run.
    retention: Optional[float] = None

    # -- lifecycle ---------------------------------------------------------------------------------

    async def open(self) -> None:  # noqa: B027 - optional: a store with nothing to open keeps this
        """Connect and create or check the schema (idempotent; every method calls it on first use)."""

    @abc.abstractmethod
    async def aclose(self) -> None:
        """Release connections and threads. The store may be opened again."""

    async def __aenter__(self) -> "RunStore":
        await self.open()
        return self

    async def __aexit__(self, *exc: Any) -> None:
        await self.aclose()

    def __repr__(self) -> str:
        return f"{type(self).__name__}({self.url!r})"

    # -- what a host reads -------------------------------------------------------------------------

    @abc.abstractmethod
    async def pending(self, *, limit: Optional[int] = None, after: Optional[str] = None, agent: Optional[str] = None,
                      kind: Optional[str] = None, older_than: Optional[Age] = None) -> Page[PendingRun]:
        """Requests still waiting for an answer, oldest first. With no argument, every one (a
        `Page` is a `list`); `limit=` pages (`page.next` is the cursor to pass as `after=` for the
        next page); `agent=` (the run's entry agent), `kind=` and `older_than=` (seconds or a
        `timedelta` waited at least) filter."""

    @abc.abstractmethod
    async def runs(self, status: Union[None, str, Sequence[str]] = None, *, limit: Optional[int] = None,
                   after: Optional[str] = None, agent: Optional[str] = None, kind: Optional[str] = None,
                   older_than: Optional[Age] = None) -> Page[RunSummary]:
        """Run summaries. With no paging argument, every run, newest update first; `limit=` /
        `after=` page them newest *created* first (see `durable.paging`). `status` (one or
        several), `agent=` (entry agent), `kind=` and `older_than=` (created at least that long
        ago) filter."""

    # -- the run lifecycle and the work queue (SQL stores; see `durable.queue`) -------------------

    async def submit_run(self, agent: str, prompt: str, *, run_id: Optional[str] = None) -> "Queued":
        """Queue a new run of `agent` with `prompt` for a worker to start, and return at once; the
        run is listed with status `queued` until then. `RunExists` when `run_id` is taken."""
        raise StoreError(f"toolnexus: {type(self).__name__} has no work queue — use a SQLite or PostgreSQL store "
                         "for workers (toolnexus worker --store ...)")

    async def submit_answer(self, answer: Any) -> "Queued":
        """Queue an answer for a worker to apply, and return at once. The answer is checked and
        claimed now, exactly once: a second answer to the request gets `AnswerAlreadyApplied`."""
        raise StoreError(f"toolnexus: {type(self).__name__} has no work queue — use a SQLite or PostgreSQL store "
                         "for workers (toolnexus worker --store ...)")

    def fleet(self) -> "FleetBackend":
        """What a worker process needs from this store (`toolnexus.fleet.Worker`)."""
        raise StoreError(f"toolnexus: {type(self).__name__} cannot host workers — use a SQLite file (one machine) or "
                         "a PostgreSQL database")

    def outbox(self) -> "OutboxBackend":
        """The notifications waiting for delivery (`durable.outbox`; `toolnexus.inbox.Notifications`)."""
        raise StoreError(f"toolnexus: {type(self).__name__} has no outbox for notifications — use a SQLite file or a "
                         "PostgreSQL database")

    async def cancel_run(self, run_id: str, *, force: bool = False) -> str:
        """Cancel a run: its waiting requests are withdrawn and it does nothing more. Returns the
        status it is left in (`cancelled`, or its final status if it had ended), or `requested`
        when a live process holds it: that process stops it (a worker does so at its next beat);
        `force=True` takes the run from that process instead (it gets `LeaseLost`)."""
        raise StoreError(f"toolnexus: {type(self).__name__} cannot cancel runs")

    async def prune(self, *, older_than: Optional[Age] = None, statuses: Sequence[str] = FINAL_STATUSES) -> int:
        """Delete runs in a final status whose last update is at least `older_than` (seconds or a
        `timedelta`; default the store's `retention`) old, with everything they hold; how many
        were deleted. A parked or running run is never pruned."""
        cutoff = epoch() - self._prune_age(older_than)
        deleted = 0
        for summary in await self.runs(list(statuses)):
            if summary.updated_at.timestamp() <= cutoff:
                await self.delete_run(summary.run_id)
                deleted += 1
        return deleted

    def _prune_age(self, older_than: Optional[Age]) -> float:
        """The age `prune` deletes from: `older_than` if given, else the store's `retention`."""
        age = seconds_of(older_than, "older_than")
        if age is None:
            age = self.retention
        if age is None:
            raise ToolnexusValueError(f"toolnexus: prune needs older_than= — {self.url or type(self).__name__} has no "
                                      "retention (a SQL store's URL sets one: ?retention=30d)")
        return age

    @abc.abstractmethod
    async def delete_run(self, run_id: str) -> None:
        """Forget a run and everything it holds (its answered requests included)."""

    # -- damaged rows (`toolnexus doctor`) ----------------------------------------------------------

    async def check(self) -> list[DamagedRun]:
        """Every run with a stored row that cannot be read (cut mid-JSON, not JSON, the wrong
        shape), each row named; runs already quarantined are listed too, flagged. Reads only.
        The bundled stores implement it; the default says this store cannot."""
        raise StoreError(f"toolnexus: {type(self).__name__} cannot check its rows")

    async def quarantine(self, run_id: str) -> None:
        """Take a damaged run out of service without losing anything: its status and its waiting
        requests' become `quarantined` (the inbox stops listing them; a restore or an answer is
        refused with `RunDamaged`), and every stored row stays as it was. `unquarantine` undoes it."""
        raise StoreError(f"toolnexus: {type(self).__name__} cannot quarantine runs")

    async def unquarantine(self, run_id: str) -> None:
        """Put a quarantined run back exactly as it was (after repairing its rows, say)."""
        raise StoreError(f"toolnexus: {type(self).__name__} cannot quarantine runs")

    # -- what a runtime writes ---------------------------------------------------------------------

    @abc.abstractmethod
    async def create_run(self, run_id: str, *, kind: str, entry_agent: Optional[str], holder: Holder,
                         lease_ttl: float, state: Optional[dict[str, Any]] = None) -> None:
        """Create a run leased to `holder`; `RunExists` when the id is taken."""

    async def start_run(self, run_id: str, *, kind: str, entry_agent: Optional[str], holder: Holder,
                        lease_ttl: float, state: Optional[dict[str, Any]], changes: Changes) -> int:
        """Create a run and apply its first `changes`; the new version. The bundled stores do both
        in one transaction (a run never exists without its first state); a store that does not
        override this gets the two steps in order."""
        await self.create_run(run_id, kind=kind, entry_agent=entry_agent, holder=holder, lease_ttl=lease_ttl,
                              state=state)
        return await self.commit(run_id, holder, changes, lease_ttl=lease_ttl)

    @abc.abstractmethod
    async def acquire(self, run_id: str, holder: Holder, *, lease_ttl: float, takeover: bool = False) -> int:
        """Take the run's lease (free, expired, held by a dead process on this host, ours, or
        `takeover`); returns the run's version. `RunInProgress` / `RunNotFound` otherwise."""

    @abc.abstractmethod
    async def renew(self, run_id: str, holder: Holder, lease_ttl: float) -> None:
        """Extend our lease; `LeaseLost` if someone else holds it now."""

    @abc.abstractmethod
    async def release(self, run_id: str, holder: Holder) -> None:
        """Give our lease up (no-op when we do not hold it)."""

    @abc.abstractmethod
    async def load(self, run_id: str) -> LoadedRun:
        """The run as last committed; `RunNotFound`, or `StoreVersionError` for a newer format."""

    @abc.abstractmethod
    async def commit(self, run_id: str, holder: Holder, changes: Changes, *, lease_ttl: float) -> int:
        """Apply `changes` in one transaction if `holder` holds the lease (renewing it); the new
        version. `LeaseLost` when the lease is someone else's; nothing is written then. With
        `changes.take_lease` the lease is taken in the same transaction instead (`RunInProgress`
        if a live holder has it). Either way `RunChanged` if `changes.expect_version` is set and
        the run is not at it (a holder passes the version its last commit returned, so a write it
        did not make — another runtime's, under the same lease — is never overwritten)."""

    def prepare_commit(self, run_id: str, holder: Holder, changes: Changes, *,
                       lease_ttl: float) -> Optional["PreparedCommit"]:
        """`commit`, prepared on the event loop to be run once later, from a worker thread if need
        be — the thread about to run a tool writes the tool call's start itself, instead of a round
        trip to the store's own thread first. None (the default): this store commits only through
        `commit`. Nothing is written until the prepared commit runs."""
        return None

    def prepare_start(self, run_id: str, *, kind: str, entry_agent: Optional[str], holder: Holder,
                      lease_ttl: float, state: Optional[dict[str, Any]],
                      changes: Changes) -> Optional["PreparedCommit"]:
        """`start_run`, prepared like `prepare_commit` (a run whose first commit is a tool call's
        start). None (the default): this store starts runs only through `start_run`."""
        return None

    # -- the answer ledger -------------------------------------------------------------------------

    @abc.abstractmethod
    async def find_request(self, request_id: str) -> Optional[PendingRow]:
        """The ledger row of a request id, in any state, or None."""

    @abc.abstractmethod
    async def claim(self, request_id: str, holder: Holder, answer: dict[str, Any], *, ttl: float,
                    run_id: Optional[str] = None) -> PendingRow:
        """Compare-and-set: mark the request answered-in-progress by `holder` with `answer`.

        Succeeds for an open request, for one `holder` claimed already, and for one whose claimer
        died or whose claim is older than `ttl` without being applied. A request the ledger has
        never seen gets a row (a history-only halt, claimed by id). `AnswerAlreadyApplied`
        otherwise (applied, or claimed by a live process)."""

    @abc.abstractmethod
    async def unclaim(self, request_id: str, holder: Holder) -> None:
        """Give a claim back (the resume failed)."""

    @abc.abstractmethod
    async def mark_applied(self, request_id: str, holder: Holder) -> None:
        """Our claimed request is done: later answers to it get `AnswerAlreadyApplied`."""

    # -- plain records (what else a host keeps next to its runs: served A2A tasks, ...) -------------

    @abc.abstractmethod
    async def get_record(self, namespace: str, key: str) -> Optional[dict[str, Any]]:
        """The JSON object stored under (`namespace`, `key`), or None."""

    @abc.abstractmethod
    async def put_record(self, namespace: str, key: str, value: dict[str, Any]) -> None:
        """Insert or replace the JSON object under (`namespace`, `key`), atomically."""

    @abc.abstractmethod
    async def list_records(self, namespace: str) -> list[dict[str, Any]]:
        """Every object of `namespace`, oldest write first."""

    async def swap_record(self, namespace: str, key: str, expected: Optional[dict[str, Any]],
                          value: dict[str, Any]) -> bool:
        """Compare-and-set: write `value` under (`namespace`, `key`) only if the object stored there
        now equals `expected` (None: nothing is stored there); True when written. One transaction, so
        of two processes swapping from the same `expected`, exactly one wins (what served A2A tasks
        use to change state once). The bundled stores implement it; this default refuses."""
        from ..errors import UnsupportedOperation

        raise UnsupportedOperation(f"toolnexus: {type(self).__name__} cannot compare-and-set its records")

    # -- client conversations (ConversationStore) --------------------------------------------------

    @abc.abstractmethod
    async def get(self, id: str) -> Optional[list[dict[str, Any]]]:
        """A client conversation's transcript, or None."""

    @abc.abstractmethod
    async def save(self, id: str, messages: list[dict[str, Any]]) -> None:
        """Store a client conversation's transcript (only the new messages are written)."""

    @abc.abstractmethod
    def lock(self, id: str) -> AsyncContextManager[None]:
        """Serialise load → run → save for one conversation in this process."""

    @abc.abstractmethod
    async def save_halt(self, id: str, messages: list[dict[str, Any]], request: dict[str, Any]) -> None:
        """`save`, plus the halt's request opened in the ledger, in one transaction."""

    @abc.abstractmethod
    async def save_applied(self, id: str, messages: list[dict[str, Any]], request_id: str, holder: Holder,
                           new_request: Optional[dict[str, Any]] = None) -> None:
        """`save`, plus our claimed request marked applied (and a new halt's request opened)."""


class PreparedCommit(Protocol):
    """One `commit` made ready on the event loop (its JSON encoded); run it exactly once."""

    def run(self) -> int:
        """Commit now, blocking the calling thread (never the event loop's); the new version."""

    async def run_async(self) -> int:
        """Commit from the event loop (the store's own way); the new version."""

    def landed(self) -> None:
        """On the event loop, after a successful run: what the store learns from it."""


def is_run_store(value: Any) -> bool:
    """True for a durable `RunStore` (as opposed to a plain `ConversationStore`)."""
    return isinstance(value, RunStore)
