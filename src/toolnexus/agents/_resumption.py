"""`resume(store, answer, agents=...)`: the stateless host verb — answer a parked run from any process.

It routes the answer by request id to its run, claims it exactly once (the loser of a race gets
`AnswerAlreadyApplied`), restores the run here (`_restore.py`), applies the answer, waits for the
run and returns the entry agent's `TaskResult` — closing the run when it is over, or leaving it
parked in the store when it waits on another request (`lifecycle.apply_claimed`). Cancelled
(Ctrl-C, a request handler given up), it hands the run back as a crash would leave it: still
`running`, continued by `toolnexus resume RUN` or any worker, the answer not lost.

What it raises means the answer was not applied (its claim is given back; answer again). Once the
answer's application has committed — before the answered tool runs — it is reported as applied:
a store failure after that (the store went down while the run went on) does not make `resume`
raise. It returns what the run did, and the failure is a warning on the `toolnexus` logger naming
run and request; the store holds the run as of its last commit, the answer applied, and a restore
(`AgentRuntime.restore`, `toolnexus resume RUN`, any worker, once the store is back) continues it
from there (`lifecycle.finish`).
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any, Optional

from ..client import ResumeError
from ..client._resume import RESUME_PREFIX
from ..durable import RunStore
from ..durable._model import CONVERSATION_PREFIX
from ..errors import ToolnexusTypeError
from ..types import Answer, Request
from ._answering import checked_answer
from ._handle import TaskResult
from ._lifecycle import claim_and_apply


async def resume(store: RunStore, answer: Any, *, agents: Any, transport: Any = None,
                 llm: Optional[dict[str, Any]] = None, takeover: bool = False, **options: Any) -> TaskResult:
    """Answer one pending request of `store` from any process, exactly once (see the module docstring).

    Returns the entry agent's result with `run_id` set: `done` (or another final status) once the
    run finished — its runtime closed — or `pending` when it now waits on another request."""
    if isinstance(answer, Mapping):
        answer = Answer.from_dict(answer)
    if not isinstance(answer, Answer):
        raise ToolnexusTypeError(f"toolnexus.agents: resume() takes an Answer, got {type(answer).__name__}")
    row = await store.find_request(answer.id)
    if row is None or row.request is None:
        raise ResumeError(RESUME_PREFIX + f"no request {answer.id!r} is pending in {store.url}")
    if row.run_id and row.run_id.startswith(CONVERSATION_PREFIX):
        conv = row.run_id[len(CONVERSATION_PREFIX):]
        raise ResumeError(RESUME_PREFIX + f"request {answer.id!r} belongs to the client conversation "
                          f"{conv!r}, not an agent run; answer it with client.ask_with_answer(toolkit, {conv!r}, ...)")
    answer = checked_answer(Request.from_dict(row.request), answer)
    return await claim_and_apply(store, str(row.run_id), answer, agents=agents, transport=transport, llm=llm,
                                 takeover=takeover, **options)
