"""`Worker`: one process of a fleet that runs a store's runs with nobody calling anything.

Any number of workers (processes, on any number of hosts) point at one PostgreSQL database — or
at one SQLite file on one machine — and between them, with no other process involved:

- start runs a front-end submitted (`store.submit_run`) and apply answers it submitted
  (`store.submit_answer`), taken from the store's work queue oldest first, round-robin across
  agents, with per-agent limits held across the whole fleet (`limits={"support": 4}`);
- take over runs whose holder died — a process gone on this host at once, any other once its
  lease has expired — and continue them from their last commit under the crash rules (a
  side-effecting call that started and recorded nothing becomes an `in_doubt` request), and
  apply answers a dead process had claimed;
- fire request expiry while nothing runs (the runtime's one expiry action: a decline, or a
  tool's timer firing) — `toolnexus.agents.timer(...)`;
- deliver `cancel` to a run this worker is running (checked each poll, and at once on PostgreSQL,
  where the cancel's notification wakes it);
- write a heartbeat row (`toolnexus workers`), and report metrics (`metrics()`, `on_metric`,
  OpenTelemetry spans per item);
- with `retention=` (seconds) — or, without it, the store's own (`?retention=30d` in its URL) —
  delete runs that ended longer ago than that, hourly (`store.prune`), so a fleet keeps its
  store trim with no cron job.

Wake-ups: on PostgreSQL every transaction that queues work notifies (`LISTEN/NOTIFY`, per schema),
so submitted work starts at once; the poll (`poll_interval`, default 1 s) is the fallback, and
what finds due expiries and dead holders (their time has to pass). SQLite workers poll.

Stopping (`stop()`, SIGTERM/SIGINT in the CLI): the worker takes nothing more and waits up to
`drain_timeout` seconds for what it runs to finish (or park); what is still running then is
handed back (`lifecycle.hand_back`: its lease given up, the run left `running` from its last
commit) and its item returned to the queue — another worker continues it at once. Nothing is
lost either way; `stop(now=True)` hands back at once.

One item per run at a time, fleet-wide: a second answer to a run that is being worked on waits
in the queue until the first is done.
"""

from __future__ import annotations

import asyncio
import time
from dataclasses import dataclass, field, replace
from typing import Any, Callable, Mapping, Optional

from .._diag import warn
from ..agents._restore import registry_of
from ..agents.clock import AsyncioClock, Clock, wall_now
from ..client import _tracing as tracing
from ..durable import DEFAULT_LEASE_TTL, RunStore
from ..durable._model import Holder, epoch
from ..durable._queue import WORK_CANCEL, WORK_RECOVER, FleetBackend, WorkerInfo, WorkItem, WorkListener
from ..errors import ToolnexusValueError
from . import _jobs as jobs
from ._metrics import FleetMetrics

PRUNE_EVERY = 3600.0  # seconds between a worker's retention passes (`retention=`)


@dataclass
class _Job:
    item: WorkItem
    task: "asyncio.Task[None]"
    started: float
    cancel_run: bool = False  # someone asked to cancel the run: hand it back, then cancel it


@dataclass
class _Counters:
    taken: int = 0
    finished: dict[str, int] = field(default_factory=dict)


class Worker:
    """One worker of a fleet (see the module docstring). `await worker.run()` serves until
    `stop()`; `await worker.step()` does one pass (for hosts that schedule it themselves)."""

    def __init__(self, store: RunStore, *, agents: Any, llm: Optional[dict[str, Any]] = None, transport: Any = None,
                 name: Optional[str] = None, concurrency: int = 4, limits: Optional[Mapping[str, int]] = None,
                 poll_interval: float = 1.0, lease_ttl: float = DEFAULT_LEASE_TTL, listen: bool = True,
                 drain_timeout: float = 30.0, retention: Optional[float] = None, clock: Optional[Clock] = None,
                 on_metric: Optional[Callable[[dict[str, Any]], Any]] = None,
                 on_event: Optional[Callable[[str], Any]] = None, **runtime_options: Any) -> None:
        if isinstance(concurrency, bool) or not isinstance(concurrency, int) or concurrency < 1:
            raise ToolnexusValueError(f"toolnexus.fleet: concurrency must be an integer >= 1, got {concurrency!r}")
        for agent, limit in (limits or {}).items():
            if isinstance(limit, bool) or not isinstance(limit, int) or limit < 1:
                raise ToolnexusValueError(f"toolnexus.fleet: the limit of {agent!r} must be an integer >= 1, "
                                          f"got {limit!r}")
        if retention is None:  # the worker's own wins; else the store's (`?retention=` in its URL)
            retention = store.retention
        if retention is not None and (isinstance(retention, bool) or not isinstance(retention, (int, float))
                                      or retention <= 0):
            raise ToolnexusValueError(f"toolnexus.fleet: retention must be a number of seconds > 0, got {retention!r}")
        for label, value in (("poll_interval", poll_interval), ("lease_ttl", lease_ttl),
                             ("drain_timeout", drain_timeout)):
            if isinstance(value, bool) or not isinstance(value, (int, float)) or value < 0 or \
                    (value == 0 and label != "drain_timeout"):
                raise ToolnexusValueError(f"toolnexus.fleet: {label} must be a number of seconds > 0, got {value!r}")
        self.store = store
        self.agents = agents
        self.llm = llm
        self.transport = transport
        self.concurrency = concurrency
        self.limits = dict(limits or {})
        self.poll_interval = float(poll_interval)
        self.lease_ttl = float(lease_ttl)
        self.heartbeat = self.lease_ttl / 3
        self.listen = listen
        self.drain_timeout = float(drain_timeout)
        self.retention = float(retention) if retention is not None else None
        self.clock: Clock = clock if clock is not None else AsyncioClock()
        self.metrics_registry = FleetMetrics(on_metric)
        self._on_event = on_event
        self._options = dict(runtime_options, lease_ttl=self.lease_ttl)
        me = Holder.here()
        self.info = WorkerInfo(me.id, name or f"{me.host}:{me.pid}", me.host, me.pid, [],
                               epoch(), epoch(), "starting", {}, me.started)
        self._registry: Optional[dict[str, Any]] = None
        self._fleet: Optional[FleetBackend] = None
        self._listener: Optional[WorkListener] = None
        self._listening: Optional[asyncio.Task[None]] = None
        self._jobs: dict[int, _Job] = {}
        self._unsettled: list[tuple[WorkItem, jobs.Verdict]] = []
        self._wake: Optional[asyncio.Event] = None
        self._stopping = False
        self._hard_stop = False
        self._next_beat = 0.0
        self._next_scan = 0.0
        self._next_cancels = 0.0
        self._next_prune = 0.0
        self._notified = False  # a notification woke the worker since its last pass (a cancel may be in it)
        self._counters = _Counters()

    # -- the public surface ------------------------------------------------------------------------

    @property
    def id(self) -> str:
        return self.info.id

    @property
    def active(self) -> int:
        """Items this worker is working on now."""
        return len(self._jobs)

    def metrics(self) -> str:
        """This worker's metrics as Prometheus text (see `fleet.metrics`)."""
        return self.metrics_registry.render()

    def stop(self, *, now: bool = False) -> None:
        """Stop taking work; `run()` returns once what runs has finished or, after
        `drain_timeout` (at once with `now=True`), been handed back. Safe from a signal handler."""
        self._stopping = True
        self._hard_stop = self._hard_stop or now
        if self._wake is not None:
            self._wake.set()

    async def run(self) -> None:
        """Serve until `stop()`: beat, scan, take and run work, wake on notifications or the poll."""
        await self.start()
        try:
            while not self._stopping:
                await self.step()
                await self._idle()
        finally:
            await self.drain()

    async def start(self) -> None:
        """Connect, register (the first heartbeat), start listening. `run()` calls it."""
        if self._fleet is not None:
            return
        self._wake = asyncio.Event()
        self._registry = await registry_of(self.agents)
        self._fleet = self.store.fleet()  # a store without a queue says so here
        await self.store.open()
        self.info = replace(self.info, agents=sorted(self._registry), status="running")
        await self._beat()
        if self.listen:
            self._listener = self._fleet.listener()
            if self._listener is not None:
                # LISTEN before the first scan: work submitted after that scan always notifies us
                # (a listener started in the background could miss what lands before it connects)
                if await self._listener.wait(0.0):
                    self._wake.set()
                self._listening = asyncio.ensure_future(self._listen())
        self._say(f"worker {self.info.name}: serving {self.store.url} (agents: {', '.join(self.info.agents)}; "
                  f"concurrency {self.concurrency}; {'listening' if self._listening else 'polling'})")

    async def step(self, *, scan: Optional[bool] = None) -> int:
        """One pass: beat, scan and deliver cancels when due (`scan=True`: scan and deliver now),
        take what fits. How many items it took (they run as tasks: `wait_idle()` waits for them)."""
        fleet = self._fleet
        assert fleet is not None, "start() first"
        await self._settle_pending()
        now = self.clock.now()
        if now >= self._next_beat:
            await self._beat()
        if (scan if scan is not None else now >= self._next_scan) and not self._stopping:
            self._next_scan = now + self.poll_interval
            try:
                found = await fleet.scan(worker_ttl=self.lease_ttl, claim_ttl=self.lease_ttl)
                if any(found.values()):
                    self._say("worker: queued " + ", ".join(f"{n} {k}" for k, n in found.items() if n))
            except Exception as exc:  # the store is down: said once per pass, tried again next pass
                warn(f"[toolnexus] fleet: scanning {self.store.url} failed: {exc}")
        if self.retention is not None and now >= self._next_prune and not self._stopping:
            self._next_prune = now + PRUNE_EVERY
            try:
                pruned = await self.store.prune(older_than=self.retention)
                if pruned:
                    self._say(f"worker: pruned {pruned} run(s) that ended over {self.retention:g}s ago")
            except Exception as exc:
                warn(f"[toolnexus] fleet: pruning {self.store.url} failed: {exc}")
        if self._jobs and (scan or now >= self._next_cancels or self._notified):
            self._next_cancels = now + self.poll_interval
            await self._deliver_cancels()
        self._notified = False
        free = self.concurrency - len(self._jobs)
        if free <= 0 or self._stopping:
            return 0
        try:
            items = await fleet.take(self.info, capacity=free, limits=self.limits, agents=self.info.agents,
                                     claim_ttl=self.lease_ttl)
        except Exception as exc:
            warn(f"[toolnexus] fleet: taking work from {self.store.url} failed: {exc}")
            return 0
        for item in items:
            self._start_job(item)
        return len(items)

    async def wait_idle(self) -> None:
        """Until no item is being worked on (for a host that drives `step()` itself)."""
        while self._jobs:
            await asyncio.gather(*(job.task for job in list(self._jobs.values())), return_exceptions=True)
        await self._settle_pending()

    async def drain(self) -> None:
        """Stop: finish or hand back what runs (see the module docstring), then say goodbye."""
        self._stopping = True
        if self._fleet is None:
            return
        if self._jobs:
            self.info = replace(self.info, status="draining")
            await self._beat()
            self._say(f"worker: draining {len(self._jobs)} item(s) (up to {self.drain_timeout:g}s)")
            await self._wait_jobs(0.0 if self._hard_stop else self.drain_timeout)
            for job in list(self._jobs.values()):
                job.task.cancel()
            await asyncio.gather(*(job.task for job in list(self._jobs.values())), return_exceptions=True)
        await self._settle_pending()
        if self._listening is not None:
            self._listening.cancel()
            await asyncio.gather(self._listening, return_exceptions=True)
        if self._listener is not None:
            await self._listener.aclose()
        self.info = replace(self.info, status="stopped")
        try:
            await self._beat()
        except Exception as exc:
            warn(f"[toolnexus] fleet: the last heartbeat failed: {exc}")
        self._say("worker: stopped")

    # -- the loop ----------------------------------------------------------------------------------

    async def _idle(self) -> None:
        """Wait for a notification, a finished job, `stop()`, or the next beat or poll."""
        assert self._wake is not None
        due = min(self._next_scan, self._next_beat) - self.clock.now()
        if due > 0 and not self._wake.is_set():
            sleeper = asyncio.ensure_future(self.clock.sleep(due))
            waker = asyncio.ensure_future(self._wake.wait())
            try:
                await asyncio.wait({sleeper, waker}, return_when=asyncio.FIRST_COMPLETED)
            finally:
                sleeper.cancel()
                waker.cancel()
        self._wake.clear()

    async def _listen(self) -> None:
        assert self._listener is not None and self._wake is not None
        while not self._stopping:
            if await self._listener.wait(max(self.poll_interval, 1.0)):
                self._notified = True
                self._wake.set()

    async def _beat(self) -> None:
        assert self._fleet is not None
        self._next_beat = self.clock.now() + self.heartbeat
        self.info = replace(self.info, seen_at=epoch(), info=self._info())
        try:
            await self._fleet.beat(self.info)
            self.metrics_registry.store(await self._fleet.stats(worker_ttl=self.lease_ttl,
                                                                now=wall_now(self.clock).timestamp()))
        except Exception as exc:
            warn(f"[toolnexus] fleet: the heartbeat to {self.store.url} failed: {exc}")

    def _info(self) -> dict[str, Any]:
        return {"concurrency": self.concurrency, "limits": dict(self.limits), "active": len(self._jobs),
                "working": [{"kind": j.item.kind, "run_id": j.item.run_id} for j in self._jobs.values()],
                "taken": self._counters.taken, "finished": dict(self._counters.finished)}

    async def _deliver_cancels(self) -> None:
        assert self._fleet is not None
        held = {j.item.run_id: j for j in self._jobs.values() if j.item.run_id and j.item.kind != WORK_CANCEL}
        if not held:
            return
        try:
            asked = await self._fleet.cancels(list(held))
        except Exception as exc:
            warn(f"[toolnexus] fleet: reading cancel requests failed: {exc}")
            return
        for run_id in asked:
            job = held[run_id]
            if not job.cancel_run:
                job.cancel_run = True
                self._say(f"worker: cancelling run {run_id}")
                job.task.cancel()

    async def _wait_jobs(self, timeout: float) -> None:
        tasks = [job.task for job in self._jobs.values()]
        if not tasks or timeout <= 0:
            return
        deadline = asyncio.ensure_future(self.clock.sleep(timeout))
        everything = asyncio.ensure_future(asyncio.wait(tasks))
        try:
            await asyncio.wait({deadline, everything}, return_when=asyncio.FIRST_COMPLETED)
        finally:
            deadline.cancel()
            everything.cancel()

    # -- one item ----------------------------------------------------------------------------------

    def _start_job(self, item: WorkItem) -> None:
        self._counters.taken += 1
        task = asyncio.ensure_future(self._job(item))
        self._jobs[item.id] = _Job(item, task, self.clock.now())
        self.metrics_registry.active(len(self._jobs))
        self._say(f"worker: took {item.kind} {item.run_id or ''}".rstrip())

    async def _job(self, item: WorkItem) -> None:
        started = time.perf_counter()
        takeover = item.kind == WORK_RECOVER and bool(item.payload.get("takeover"))
        attributes = {"toolnexus.run.id": item.run_id or "",
                      "toolnexus.fleet.worker": self.info.name,  # a span attribute, not a module path
                      "toolnexus.fleet.queued_ms": max(0.0, (epoch() - item.created_at) * 1000),
                      "toolnexus.fleet.takeover": takeover}
        outcome: Optional[str] = None
        error: Optional[BaseException] = None
        verdict: Optional[jobs.Verdict] = None
        try:
            with tracing.job_span(f"toolnexus.fleet.{item.kind}", attributes):
                outcome = await jobs.execute(item, self.store, agents=self._registry, llm=self.llm,
                                             transport=self.transport, options=self._options)
        except asyncio.CancelledError:
            job = self._jobs.get(item.id)
            verdict = await self._stopped(item, job is not None and job.cancel_run)
        except Exception as exc:
            error = exc
        try:
            if verdict is None:
                verdict = jobs.classify(item, outcome, error, self.poll_interval)
            ms = (time.perf_counter() - started) * 1000
            self.metrics_registry.job(item.kind, verdict.outcome, ms, takeover=takeover)
            counts = self._counters.finished
            counts[verdict.outcome] = counts.get(verdict.outcome, 0) + 1
            detail = f": {verdict.error}" if verdict.error and verdict.action == "fail" else ""
            self._say(f"worker: {item.kind} {item.run_id or ''} {verdict.outcome}{detail}".replace("  ", " "))
            if verdict.action == "fail":
                warn(f"[toolnexus] fleet: {item.kind} of run {item.run_id!r} failed and is kept as failed: "
                     f"{verdict.error}")
            await self._settle(item, verdict)
        finally:
            self._jobs.pop(item.id, None)
            self.metrics_registry.active(len(self._jobs))
            if self._wake is not None:
                self._wake.set()

    async def _stopped(self, item: WorkItem, cancel_run: bool) -> jobs.Verdict:
        """The job was cancelled: the run was handed back (`lifecycle.finish`). A cancel request
        now cancels the run; a stopping worker returns the item to the queue."""
        if cancel_run and item.run_id:
            try:
                await self.store.cancel_run(item.run_id, force=True)
                return jobs.Verdict("done", "cancelled")
            except Exception as exc:
                warn(f"[toolnexus] fleet: cancelling run {item.run_id!r} failed: {exc}")
        return jobs.Verdict("release", "released")

    async def _settle(self, item: WorkItem, verdict: jobs.Verdict) -> None:
        assert self._fleet is not None
        try:
            if verdict.action == "done":
                await self._fleet.done(item)
            elif verdict.action == "release":
                await self._fleet.release(item, delay=verdict.delay, error=verdict.error)
            else:
                await self._fleet.fail(item, verdict.error or verdict.outcome)
        except Exception as exc:  # kept, and tried again each pass: the item stays ours until then
            warn(f"[toolnexus] fleet: recording the end of {item.kind} {item.run_id!r} failed (tried again): {exc}")
            self._unsettled.append((item, verdict))

    async def _settle_pending(self) -> None:
        waiting, self._unsettled = self._unsettled, []
        for item, verdict in waiting:
            await self._settle(item, verdict)

    def _say(self, line: str) -> None:
        if self._on_event is not None:
            try:
                self._on_event(line)
            except Exception:
                pass
