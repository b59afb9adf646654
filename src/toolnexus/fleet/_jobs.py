"""One work item, done: what each kind of item means in the agent runtime, and how it ends.

- `run`: `lifecycle.start_submitted` — the submitted run starts; ends with its entry agent's
  status (done, pending, ...).
- `answer`: `lifecycle.apply_claimed` — the submitted answer (claimed for this job when it was
  taken) is applied; ends with the run's status after it.
- `recover`: `lifecycle.resume_run` without waking anything — a run whose holder died continues
  from its last commit (crash rules: a call in doubt stays in doubt).
- `expire`: `lifecycle.expire_request` — the request gets the runtime's one expiry action;
  `skipped` when it was answered meanwhile.
- `cancel`: `store.cancel_run` of a run no worker of ours holds; `cancelled`, or handed back to
  try again later while its holder is alive.

How an item ends in the queue (`classify`): finished (also when there was nothing left to do: the
run was started or answered by someone else, the request was withdrawn) → `done`; the run is held
by a live process right now → `release` (back in the queue, retried after a while); a store that is
down → `release` sooner; the definitions or the data cannot serve it (a missing agent, a run
written by a newer toolnexus) → `fail` (kept for a person, a submitted answer given back to the
inbox); anything else fails after `MAX_ATTEMPTS` tries.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Optional

from ..agents._lifecycle import apply_claimed, expire_request, resume_run, start_submitted
from ..client import ResumeError
from ..durable import (
    AnswerAlreadyApplied,
    RequestWithdrawn,
    RestoreError,
    RunExists,
    RunInProgress,
    RunNotFound,
    RunStore,
    StoreUnavailable,
    StoreVersionError,
)
from ..durable._queue import WORK_ANSWER, WORK_CANCEL, WORK_EXPIRE, WORK_RECOVER, WORK_RUN, WorkItem
from ..errors import ToolnexusValueError
from ..types import Answer

MAX_ATTEMPTS = 5  # an item failing for an unknown reason is tried this often before it is kept as failed
HELD_RETRY = 5.0  # seconds before an item whose run a live process holds is tried again


@dataclass(frozen=True)
class Verdict:
    """How an item leaves the worker: `done`, `release` (after `delay` seconds) or `fail`."""

    action: str
    outcome: str
    delay: float = 0.0
    error: Optional[str] = None


async def execute(item: WorkItem, store: RunStore, *, agents: Any, llm: Optional[dict[str, Any]], transport: Any,
                  options: dict[str, Any]) -> str:
    """Do `item`; the outcome to count (the run's status, `skipped`, `cancelled`, `requested`)."""
    common = {"agents": agents, "llm": llm, "transport": transport, **options}
    if item.kind == WORK_RUN:
        prompt = str(item.payload.get("prompt") or "")
        result = await start_submitted(store, str(item.run_id), str(item.agent), prompt, **common)
        return str(result.status)
    if item.kind == WORK_ANSWER:
        assert item.holder is not None, "an answer item is taken with the holder its claim is for"
        result = await apply_claimed(store, str(item.run_id), Answer.from_dict(item.payload), item.holder,
                                     give_back=False, **common)  # `classify` returns the claim to the queue
        return str(result.status)
    if item.kind == WORK_RECOVER:
        result = await resume_run(store, str(item.run_id), wake=False, **common)
        return str(result.status)
    if item.kind == WORK_EXPIRE:
        fired = await expire_request(store, str(item.request_id), **common)
        return "skipped" if fired is None else str(fired.status)
    if item.kind == WORK_CANCEL:
        return await store.cancel_run(str(item.run_id))
    raise ToolnexusValueError(f"toolnexus.fleet: unknown work item kind {item.kind!r} (written by a newer "
                              "toolnexus?) — upgrade this worker")


def classify(item: WorkItem, outcome: Optional[str], error: Optional[BaseException], poll: float) -> Verdict:
    """How `item` leaves the worker, given what `execute` returned or raised."""
    if error is None:
        if item.kind == WORK_CANCEL and outcome == "requested":  # its holder is alive: ask again later
            return Verdict("release", "requested", HELD_RETRY)
        return Verdict("done", outcome or "done")
    text = f"{type(error).__name__}: {error}"
    if isinstance(error, (AnswerAlreadyApplied, RequestWithdrawn, RunNotFound)):
        return Verdict("done", "skipped")  # answered, withdrawn or deleted meanwhile: nothing to do
    if isinstance(error, RunExists) and item.kind == WORK_RUN:
        return Verdict("done", "skipped")  # started already (by a worker that died): recovered as any run is
    if isinstance(error, RunInProgress):
        return Verdict("release", "held", HELD_RETRY, text)
    if isinstance(error, StoreUnavailable):
        return Verdict("release", "store-down", max(poll, 1.0), text)
    if isinstance(error, (RestoreError, StoreVersionError, ResumeError)):
        return Verdict("fail", "failed", error=text)
    if item.attempts >= MAX_ATTEMPTS:
        return Verdict("fail", "failed", error=text)
    return Verdict("release", "retry", min(60.0, poll * 2 ** item.attempts), text)
