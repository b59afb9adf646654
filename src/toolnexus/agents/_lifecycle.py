"""The run lifecycle verbs a host (or a worker of the fleet) uses on runs in a store: start a
submitted run, apply a claimed answer, fire an expiry, continue an interrupted or crashed run, and
hand a run back when the process must stop.

- `start_submitted(store, run_id, agent, prompt, agents=...)`: start a run `store.submit_run`
  queued (its `queued` row is taken over by the run's first commit; a run already started —
  by a worker that died after starting it — is `RunExists`, and the fleet recovers it instead).
- `apply_claimed(store, run_id, answer, holder, agents=...)`: restore the run under the holder
  that claimed `answer` and apply it (a worker's take did the claim); `claim_and_apply` claims
  first (`resume`, `expire_request`). Either way the claim is held through `durable.rules.claimed`:
  a restore that fails gives it back.
- `expire_request(store, request_id, agents=...)`: a request whose `expiresAt` passed gets the
  runtime's one expiry action (`answering.expiry_answer`), claimed like any answer, so a human's
  answer racing it is applied or refused exactly once.
- `resume_run(store, run_id, agents=...)`: continue a run nobody is running — one whose process
  died (its running turns continue from the last commit, under the crash rules: a call in
  doubt stays in doubt), or whose entry agent was interrupted (it is woken again with `prompt`).
  A parked run is left waiting for its answer; an ended one is returned as it ended.
- `hand_back(rt)`: the process is stopping (Ctrl-C, SIGTERM, a cancelled request handler): stop
  writing the run at once and give its lease up, leaving it exactly as a crash would — status
  `running`, continued by the next `resume_run` or any worker — instead of recording the stop
  as an interruption of the agent (which needs a person to continue it, and loses an applied
  answer's work).

Every verb returns the entry agent's `TaskResult` with `run_id` set once nothing in the run is
running: closing the run when it ended, leaving it parked when it waits on a request.
"""

from __future__ import annotations

import asyncio
import contextlib
import dataclasses
from typing import Any, AsyncContextManager, Awaitable, Callable, Optional

from .._diag import warn
from ..client._tool_calls import is_expired, utc_now
from ..durable import DEFAULT_LEASE_TTL, RunStore, StoreError
from ..durable._model import OPEN, Holder
from ..durable._rules import claimed
from ..durable.errors import RestoreError
from ..types import Answer, Request
from ._answering import apply_answer, expiry_answer
from ._handle import SpawnError, TaskResult, live_turn
from ._restore import registry_of, restore_run
from ._runtime import AgentRuntime
from ._vocab import HandleState, TaskStatus


async def hand_back(rt: AgentRuntime, work: Optional["asyncio.Future[Any]"] = None) -> None:
    """Stop writing `rt`'s run now and give its lease up (see the module docstring). `work`, the
    task driving the run, is cancelled once nothing of its stop can reach the store."""
    durable = rt.run_state.durable
    if durable is None:
        await rt.aclose()
        return
    held = durable.created and not durable.abandoned
    durable.abandon()  # from here on nothing this runtime does is written
    if work is not None and not work.done():
        work.cancel()
        await asyncio.gather(work, return_exceptions=True)
    if held:
        try:
            await durable.store.release(durable.run_id, durable.holder)
        except Exception as exc:  # the lease then ends with its TTL (or with this process, on this host)
            warn(f"[toolnexus] agents: giving up the lease of run {durable.run_id!r} failed: {exc}")
    await rt.aclose()


async def finish(rt: AgentRuntime, work: Callable[[], Awaitable[Any]], run_id: Optional[str], *,
                 applied: Optional[str] = None) -> TaskResult:
    """Run `work` (what moves the run on), then wait for the run's result; close the run when it
    ended, leave it parked when it waits. Cancelled: the run is handed back (`hand_back`).

    `applied`: the id of the answer `work` applies. Once that application has committed, a later
    store failure does not make this raise (`DurableRun.flush_applied`): the answer *was* applied.
    The result is returned, the failure is a warning naming run and request, and the store holds
    the run as of its last commit, continued from there by the next restore."""

    core = rt.run_state
    durable = core.durable

    async def drive() -> tuple[TaskResult, Optional[StoreError]]:
        await work()
        final = await core.wait(core.root, commit=False)  # committed below, with what ends or parks it
        if applied is not None and durable is not None:
            return final, await durable.flush_applied(applied)  # raises only while the answer is not applied
        return final, None

    task = asyncio.ensure_future(drive())
    try:
        final, unsaved = await asyncio.shield(task)
    except asyncio.CancelledError:
        if not task.done():
            await hand_back(rt, task)
        else:
            await rt.aclose()
        raise
    except BaseException:
        await rt.aclose()
        raise
    try:
        if final.status == TaskStatus.PENDING or unsaved is not None:
            await rt.aclose()  # one commit: the parked state and the lease given up
        else:
            await rt.close(rt.root)  # one commit: the result, the closed tree, the lease given up
        if durable is not None and unsaved is None:
            await durable.flush()  # the result is reported once it is durable (raises if that commit failed)
    except StoreError as exc:
        if applied is None or durable is None or not durable.landed(applied):
            raise
        if unsaved is None:
            warn(f"[toolnexus] agents: the answer to {applied!r} of run {durable.run_id!r} was applied, but saving "
                 f"the run's end failed: {exc} — the store holds the run as of its last commit (the answer "
                 "applied); it goes on from there when restored")
    return dataclasses.replace(final, runtime=None, run_id=run_id)


async def _nothing() -> None:
    return None


async def apply_claimed(store: RunStore, run_id: str, answer: Answer, holder: Holder, *, agents: Any,
                        transport: Any = None, llm: Optional[dict[str, Any]] = None, takeover: bool = False,
                        give_back: bool = True, **options: Any) -> TaskResult:
    """Restore `run_id` under `holder`, which claimed `answer` in the store's ledger, and apply it.
    A restore that fails gives the claim back (`give_back=False`: the caller does — a worker
    returns a submitted answer's claim to the queue, not to the inbox)."""
    held = claimed(store, answer.id, holder) if give_back else contextlib.nullcontext()
    return await _restore_and_apply(held, store, run_id, answer, holder, agents=agents, transport=transport, llm=llm,
                                    takeover=takeover, **options)


async def claim_and_apply(store: RunStore, run_id: str, answer: Answer, *, agents: Any, transport: Any = None,
                          llm: Optional[dict[str, Any]] = None, takeover: bool = False, **options: Any) -> TaskResult:
    """Claim `answer` in the store's ledger for this process, then restore `run_id` and apply it
    (`apply_claimed`); a restore that fails gives the claim back."""
    holder = Holder.here()
    ttl = float(options.get("lease_ttl") or DEFAULT_LEASE_TTL)
    held = claimed(store, answer.id, holder, dataclasses.asdict(answer), ttl=ttl, run_id=run_id)
    return await _restore_and_apply(held, store, run_id, answer, holder, agents=agents, transport=transport, llm=llm,
                                    takeover=takeover, **options)


async def _restore_and_apply(held: AsyncContextManager[Any], store: RunStore, run_id: str, answer: Answer,
                             holder: Holder, **options: Any) -> TaskResult:
    """Restore under `held` (the claim, given back if the restore fails), then apply the answer:
    from there a failure gives the claim back through the runtime (`answering.apply_answer`)."""
    async with held:
        rt = await restore_run(AgentRuntime, store, run_id, holder=holder, **options)
    return await finish(rt, lambda: apply_answer(rt.run_state, answer, claimed=True), run_id, applied=answer.id)


async def expire_request(store: RunStore, request_id: str, *, agents: Any, transport: Any = None,
                         llm: Optional[dict[str, Any]] = None, **options: Any) -> Optional[TaskResult]:
    """Fire the expiry of `request_id` if it is still waiting and due; None when there is nothing
    to do (answered meanwhile, or not due). `AnswerAlreadyApplied` when an answer won the race."""

    row = await store.find_request(request_id)
    if row is None or row.request is None or row.status != OPEN or not row.run_id:
        return None
    request = Request.from_dict(row.request)
    if not is_expired(request, utc_now()):
        return None
    answer = expiry_answer(request)
    return await claim_and_apply(store, row.run_id, answer, agents=agents, transport=transport, llm=llm, **options)


async def start_submitted(store: RunStore, run_id: str, agent: str, prompt: str, *, agents: Any,
                          transport: Any = None, llm: Optional[dict[str, Any]] = None,
                          **options: Any) -> TaskResult:
    """Start the submitted run `run_id` of `agent` with `prompt` (see the module docstring)."""
    registry = await registry_of(agents)
    if agent not in registry:
        raise RestoreError(f"toolnexus.agents: cannot start run {run_id!r} — it needs the agent definition {agent!r}, "
                           f"which agents= does not give (given: {', '.join(sorted(registry)) or 'none'})")
    rt = AgentRuntime(registry=registry, store=store, run_id=run_id, transport=transport, llm=llm, **options)
    core = rt.run_state
    durable = core.durable
    assert durable is not None
    durable.entry_agent = agent
    h = rt.spawn(rt.root, agent)
    hold: asyncio.Future[None] = asyncio.get_running_loop().create_future()
    core.turn_hold = hold  # the turn waits until the run is stored: a run started twice never calls the model twice
    try:
        if not isinstance(h, SpawnError):
            rt.wake(h, prompt)
        await durable.flush()
    except BaseException as exc:
        if not durable.created:
            durable.abandon()
        if isinstance(exc, Exception):
            hold.set_exception(exc)
            hold.exception()
        else:
            hold.cancel()
        await rt.aclose()
        raise
    else:
        hold.set_result(None)
    finally:
        core.turn_hold = None
    if isinstance(h, SpawnError):
        await rt.close(rt.root)
        return TaskResult(h.error, True, TaskStatus.ERROR, run_id=run_id)
    return await finish(rt, _nothing, run_id)


async def resume_run(store: RunStore, run_id: str, *, agents: Any, transport: Any = None,
                     llm: Optional[dict[str, Any]] = None, takeover: bool = False, prompt: str = "continue",
                     wake: bool = True, holder: Optional[Holder] = None, **options: Any) -> TaskResult:
    """Continue `run_id` (see the module docstring). `RunInProgress` when a live process runs it
    (unless `takeover`). `wake=False`: only what a crash left running continues (a worker's
    recovery); an interrupted entry agent stays as it is."""
    rt = await restore_run(AgentRuntime, store, run_id, agents=agents, transport=transport, llm=llm,
                           takeover=takeover, holder=holder, **options)

    async def wake_interrupted() -> None:
        entry = rt.entry
        if (wake and entry is not None and entry.state == HandleState.IDLE and live_turn(entry) is None
                and entry.last_result is not None and entry.last_result.status == TaskStatus.INTERRUPTED):
            rt.wake(entry, prompt)

    return await finish(rt, wake_interrupted, run_id)
