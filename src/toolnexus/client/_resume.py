"""Durable resume: answer a halted run's `Request` later, possibly in a fresh process.

A run without `wait_for` halts at its first suspension and hands back plain JSON: the transcript
(`RunResult.messages`, or the store under `ask(id=)`) and the `Request`. `run_with_answer` takes
those plus the host's `Answer` and carries on:

- **A. Validation** (`ResumeError`, before anything runs, is sent or is saved), in order: answer id
  vs request id; empty history; no assistant turn with tool calls (the last one is **H**); H not
  open (after H only results for an in-order prefix of its calls, as `tool` messages or one user
  message of `tool_result` blocks); the halted slot's placeholder is not `pending.prompt` (relay:
  `calls[0]` is the halted call and every call is an open call of H); a relay `output` that is not
  a `str`; the request id is in the client's answer ledger.
- **B. Expiry**: a parseable `expiresAt` not after the client's `clock()` turns the answer into
  `Answer(id, ok=False, reason="expired")`.
- **C. Filling H**: earlier results are kept byte for byte and the placeholder is replaced. Relay:
  every relayed call gets its `results` entry / the shorthand (first call) / `no result supplied
  on resume for <name>`, or `relay declined for <name>: <reason>` when not ok. Non-relay: the suspension
  rule (`resolve_with_answer`: one retry with `ctx.answer`, `after_tool`, metric; `unresolved:` /
  `declined/expired:`). H's calls that have no slot yet are re-executed through the loop's own
  `tool_turn` (given the answered calls as settled), which settles them all in order — so with no
  `wait_for` the resume may **halt again** (relay merge included) with a new `Request`, `turns=0`
  and no LLM call. The results are written back through the dialect (`rewrite_results`), and H is
  read through it too (`split_results`), so nothing here branches on the wire.
- **D. Continuation**: `RunLoop.continue_from` + `events(prelude=…)`: once H is full the one loop
  runs with no new user turn; `turns`, `usage`, metrics and `tool_calls` count this call only.

Choices of ours:
- **Answer schema** (`pending.data["schema"]`, flat JSON Schema): checked after expiry, only for an
  `ok` answer (`data=None` is checked as `{}`). Durable: a mismatch raises `ResumeError` — nothing
  runs and nothing is saved, so the host can ask again. In process (`wait_for`) the tool does not
  run either and the call's result is the error `invalid answer for <prompt>: <detail>`.
- **Relay answers** are checked strictly: `results` must be a list of objects, each naming one of
  the relayed calls, each `output` a `str` (also the shorthand `output`); otherwise `ResumeError`.
- **Halted tool must resolve**: an `ok` answer to a non-relay halt whose tool is missing from the
  given toolkit raises `ResumeError` (instead of telling the model "Unknown tool").
- **One answer at a time**: while a resume of request X is in flight on a client, a second one for
  X raises `ResumeError`; the ledger (last 4096 ids) records X only when the resume returned
  normally (for `ask_with_answer`: after the save).
- The halted call's retry runs first; the calls re-executed after it run concurrently. Hooks see
  `turn=0` for them. A `cancel` already set raises `RunCancelled` before anything runs.

Limits: the transcript does not carry request ids, so a non-relay answer is bound to its halt by
the placeholder text and, within one client, by the ledger. Across processes a durable store's
ledger (`store=` a `RunStore`) tells a stale answer from a live one; without one, the host's own
record of open requests has to.

What a resume is given: the client's `Provider` (the wire, the settings, the model calls) and what
its `Keeper` holds about stored conversations (`Conversations`: the store, the lock, the journal,
the approval scope, the answer ledger) — values, never the `Client` itself.

Not here: the turn loop (_loop.py), the suspension rule (_tool_calls.py), the relay tool itself (relay.py),
and a streaming resume (none is offered; one would reuse this prelude with `streaming=True`).
"""

from __future__ import annotations

import asyncio
from collections import OrderedDict
from collections.abc import Mapping
from contextlib import AbstractAsyncContextManager, contextmanager
from dataclasses import MISSING, asdict, dataclass, fields
from typing import Any, AsyncGenerator, Iterator, Optional, Protocol, TypeVar, Union

from ..approvals import RUN, ApprovalScope, decide, is_approval_request
from ..durable import DEFAULT_LEASE_TTL, Holder, RunStore
from ..durable._model import CONVERSATION_PREFIX, epoch
from ..durable._rules import check_claim, claimed
from ..errors import ToolnexusValueError
from ..relay import is_relay_request, relay_calls_of, relay_declined_text, relay_output_of
from ..types import Answer, Request, ToolResult, pending_of
from ._errors import ResumeError
from ._journal import IN_DOUBT_KIND, RunJournal, not_run_text
from ._loop import Prelude, RunLoop, drain
from ._memory import ConversationStore
from ._provider import Provider
from ._result import RunResult, Toolset
from ._tool_calls import CallOutcome, answer_refusal, late_answer, resolve_with_answer
from ._wire.base import ResultEntry, ToolCall, WireDialect

RESUME_PREFIX = "toolnexus: cannot resume — "
NEEDS_ID = "toolnexus: ask_with_answer needs a conversation id"
LEDGER_SIZE = 4096

RequestLike = Union[Request, Mapping[str, Any]]
AnswerLike = Union[Answer, Mapping[str, Any]]
_Shape = TypeVar("_Shape", Request, Answer)


def _fail(why: str) -> ResumeError:
    return ResumeError(RESUME_PREFIX + why)


def _short(value: object, limit: int = 80) -> str:
    text = repr(value)
    return text if len(text) <= limit else text[: limit - 1] + "…"


class AnswerLedger:
    """Request ids this client has answered (the last `size`), plus those being answered right now."""

    def __init__(self, size: int = LEDGER_SIZE) -> None:
        self.size = size
        self._done: OrderedDict[str, None] = OrderedDict()
        self._busy: set[str] = set()

    def __contains__(self, request_id: object) -> bool:
        return request_id in self._done

    def __len__(self) -> int:
        return len(self._done)

    def record(self, request_id: str) -> None:
        self._done[request_id] = None
        self._done.move_to_end(request_id)
        while len(self._done) > self.size:
            self._done.popitem(last=False)

    def check(self, request_id: str) -> None:
        """Raise if `request_id` was answered here, or is being answered right now."""
        if request_id in self._done:
            raise _fail(f"request {request_id!r} was already answered by this client")
        if request_id in self._busy:
            raise _fail(f"request {request_id!r} is being resumed right now by this client")

    @contextmanager
    def claim(self, request_id: str) -> Iterator[None]:
        self.check(request_id)
        self._busy.add(request_id)
        try:
            yield
        finally:
            self._busy.discard(request_id)


# -- validation ------------------------------------------------------------------------------------


def _coerce(value: object, cls: type[_Shape], what: str) -> _Shape:
    if isinstance(value, cls):
        return value
    if isinstance(value, Mapping):
        missing = [f.name for f in fields(cls)
                   if f.default is MISSING and f.default_factory is MISSING and f.name not in value]
        if missing:
            raise _fail(f"the {what} mapping has no {', '.join(repr(m) for m in missing)}")
        return cls.from_dict(value)
    article = "an" if cls.__name__[0] in "AEIOU" else "a"
    raise _fail(f"the {what} must be {article} {cls.__name__} or a mapping, got {type(value).__name__}")


@dataclass
class _HaltedTurn:
    """H (the last assistant turn with tool calls) and the results written after it so far."""

    index: int
    calls: list[ToolCall]
    results: list[dict[str, Any]]  # in the wire's shape: `tool` messages, or `tool_result` blocks

    @property
    def slot(self) -> int:
        """Position of the halted call (its placeholder is the last result)."""
        return len(self.results) - 1

    def open_calls(self) -> list[ToolCall]:
        """The halted call and every later call of H."""
        return self.calls[self.slot :]


def _describe(message: object) -> str:
    role = message.get("role") if isinstance(message, dict) else None
    return f"a message with role {role!r}" if role else f"a {type(message).__name__}"


def _find_halted(dialect: WireDialect, history: list[dict[str, Any]]) -> _HaltedTurn:
    """Locate H, the halted turn, and check that it is open."""
    for index in range(len(history) - 1, -1, -1):
        message = history[index]
        if isinstance(message, dict) and message.get("role") == "assistant":
            calls = dialect.assistant_calls(message)
            if calls:
                break
    else:
        raise _fail("the history has no assistant turn with tool calls (nothing was halted)")
    after = history[index + 1 :]
    where = f"the last tool-call turn (message {index})"
    if not after:
        raise _fail(f"{where} has no results after it — the run did not halt there")
    results, rest = dialect.split_results(after)
    if rest:
        raise _fail(f"{where} is closed: it is followed by {_describe(rest[0])}, not only its results "
                    "(already resumed, or continued with a new prompt)")
    got = [r.get(dialect.result_id_key) for r in results]
    ids = [c.id for c in calls]
    if len(got) > len(ids) or got != ids[: len(got)]:
        raise _fail(f"the results after {where} answer {got!r}, which is not an in-order prefix of its calls {ids!r}")
    return _HaltedTurn(index, calls, results)


def _check_placeholder(turn: _HaltedTurn, pending: Request) -> None:
    """The halted slot holds this request's placeholder (relay: and its calls are H's open calls)."""
    call = turn.calls[turn.slot]
    content = turn.results[turn.slot].get("content")
    if content != pending.prompt:
        raise _fail(f"the halted call {call.id!r} ({call.name}) holds {_short(content)}, not the pending "
                    f"request's prompt {_short(pending.prompt)} — the answer belongs to another halt")
    if not is_relay_request(pending):
        return
    relayed = [c.id for c in relay_calls_of(pending)]
    if not relayed or relayed[0] != call.id:
        first = relayed[0] if relayed else None
        raise _fail(f"the relay request's first call {first!r} is not the halted call {call.id!r}")
    open_ids = [c.id for c in turn.open_calls()]
    stray = [i for i in relayed if i not in open_ids]
    if stray:
        raise _fail(f"relay call {stray[0]!r} is not an open call of the last tool-call turn (open: {open_ids!r})")


def _check_relay_outputs(pending: Request, answer: Answer) -> None:
    """Relay outputs must be strings, results must name relayed calls."""
    if not is_relay_request(pending) or not answer.ok or answer.data is None:
        return
    data = answer.data
    if not isinstance(data, Mapping):
        raise _fail(f"the relay answer's data must be an object, got {type(data).__name__}")
    results = data.get("results")
    if results is None:
        if "output" in data and not isinstance(data["output"], str):
            raise _fail(f"the relay answer's output must be a str, got {type(data['output']).__name__}")
        return
    if not isinstance(results, list):
        raise _fail(f"the relay answer's results must be a list, got {type(results).__name__}")
    relayed = [c.id for c in relay_calls_of(pending)]
    for j, entry in enumerate(results):
        if not isinstance(entry, Mapping):
            raise _fail(f"the relay answer's results[{j}] must be an object, got {type(entry).__name__}")
        if not isinstance(entry.get("output"), str):
            raise _fail(f"the relay answer's results[{j}] (call {entry.get('id')!r}) output must be a str, "
                        f"got {type(entry.get('output')).__name__}")
        if entry.get("id") not in relayed:
            raise _fail(f"the relay answer's results[{j}] names call {entry.get('id')!r}, which the request does "
                        f"not relay (calls: {relayed!r})")


@dataclass
class _Plan:
    """A validated resume: H, the request and the effective answer (after expiry)."""

    history: list[dict[str, Any]]
    turn: _HaltedTurn
    pending: Request
    answer: Answer


def _prepare(provider: Provider, keeper: "Conversations", toolkit: Optional[Toolset], history: object,
             pending: RequestLike, answer: AnswerLike) -> _Plan:
    """Every check before anything runs: ids match, the history holds an open halted turn with this
    request's placeholder, the answer is not a repeat, expiry (an expired answer is declined), the
    answer schema, and a tool to run the halted call."""
    request = _coerce(pending, Request, "pending request")
    reply = _coerce(answer, Answer, "answer")
    if reply.id != request.id:
        raise _fail(f"answer id {reply.id!r} does not match the pending request {request.id!r}")
    if history is not None and not isinstance(history, list):
        raise _fail(f"the history must be a list of messages, got {type(history).__name__}")
    if not history:
        raise _fail("the history is empty (load the transcript the halted run returned)")
    turn = _find_halted(provider.dialect, history)
    _check_placeholder(turn, request)
    _check_relay_outputs(request, reply)
    if keeper.durable is None:  # a durable store's ledger is checked when the answer is claimed
        keeper.answers.check(request.id)
    reply = late_answer(request, reply, provider.settings.loop.clock())
    refused = answer_refusal(request, reply)
    if refused is not None:
        raise _fail(refused)
    call = turn.calls[turn.slot]
    if reply.ok and not is_relay_request(request) and toolkit is not None and toolkit.get(call.name) is None:
        raise _fail(f"the toolkit has no tool {call.name!r} for the halted call {call.id!r}")
    return _Plan(history, turn, request, reply)


# -- filling H ----------------------------------------------------------------------------------------


def _relay_result(call: ToolCall, first: bool, answer: Answer) -> ToolResult:
    if not answer.ok:
        return ToolResult(relay_declined_text(call.name, answer.reason), True)
    return relay_output_of(call.name, call.id, answer.data, first=first)


async def _answered(loop: RunLoop, plan: _Plan) -> dict[int, CallOutcome]:
    """The outcomes the answer decides, by position among H's open calls: the relayed calls, or the
    halted call's retry (position 0). A call in doubt answered ok decides nothing: it runs again
    as a new call with the other open calls."""
    open_calls, pending, journal = plan.turn.open_calls(), plan.pending, loop.journal
    out: dict[int, CallOutcome] = {}
    if is_relay_request(pending):
        positions = {c.id: pos for pos, c in reversed(list(enumerate(open_calls)))}
        for n, relayed in enumerate(relay_calls_of(pending)):
            pos = positions[relayed.id]
            call = open_calls[pos]
            out[pos] = CallOutcome(call, call.args, _relay_result(call, n == 0, plan.answer))
    elif pending.kind == IN_DOUBT_KIND:
        if plan.answer.ok:
            return {}
        call = open_calls[0]
        out[0] = CallOutcome(call, call.args, ToolResult(not_run_text(call.name), True))
    else:
        call = open_calls[0]
        if journal is not None and plan.answer.ok and _runs(loop, pending, plan.answer):
            await journal.call_queued(loop.messages, call, pending, plan.answer)
        halted = CallOutcome(call, call.args, ToolResult(pending.prompt, True, {"pending": pending}), pending)
        result = await loop.bounded(resolve_with_answer(loop.runner(0), halted, plan.answer))
        if pending_of(result) is not None:  # asked again (N-of-M, escalation, the body's own question)
            if journal is not None:
                await journal.call_finished(call, result)
            return {0: CallOutcome(call, call.args, result, pending_of(result))}
        return {0: CallOutcome(call, call.args, result)}
    if journal is not None:  # decided without running anything: recorded so a crash keeps them
        for outcome in out.values():
            await journal.call_finished(outcome.call, outcome.result)
    return out


def _runs(loop: RunLoop, pending: Request, answer: Answer) -> bool:
    """Whether this answer runs the halted tool (an approval may decline or ask again instead)."""
    return not is_approval_request(pending) or decide(pending, answer, loop.settings.loop.clock()).kind == RUN


def _prelude(plan: _Plan) -> Prelude:
    """Fill H inside the run's envelope: the loop's own `tool_turn` runs the open calls the answer
    did not decide and settles them all in order (so it may halt again)."""
    turn = plan.turn

    async def prelude(loop: RunLoop) -> AsyncGenerator[dict[str, Any], None]:
        loop.abort.check()
        answered = await _answered(loop, plan)

        def write(entries: list[ResultEntry]) -> None:
            loop.messages = loop.dialect.rewrite_results(loop.messages, turn.index, turn.results[: turn.slot],
                                                         entries)

        async for event in loop.tool_turn(turn.open_calls(), 0, write, settled=answered):
            yield event

    return prelude


# -- the public entry points -------------------------------------------------------------------------


class Conversations(Protocol):
    """What a resume needs of its client's `Keeper` (_keeper.py, which takes `AnswerLedger` from here)."""

    answers: AnswerLedger
    durable: Optional[RunStore]

    @property
    def store(self) -> ConversationStore: ...

    @property
    def holder(self) -> Holder: ...

    def lock(self, id: str) -> AbstractAsyncContextManager[None]: ...

    def journal(self, id: str) -> Optional[RunJournal]: ...

    def scope(self, id: Optional[str]) -> ApprovalScope: ...

    async def save(self, id: str, result: RunResult) -> None: ...


async def _resume(provider: Provider, keeper: Conversations, toolkit: Optional[Toolset], plan: _Plan,
                  cancel: Optional[asyncio.Event], journal: Optional[RunJournal] = None,
                  conversation: Optional[str] = None) -> RunResult:
    loop = RunLoop(provider, toolkit, cancel, streaming=False, journal=journal,
                   approvals=keeper.scope(conversation)).continue_from(plan.history)
    return await drain(loop.events(prelude=_prelude(plan)))


async def _ledger_check(store: RunStore, holder: Holder, pending: RequestLike) -> None:
    """With a durable store, a request its ledger knows as answered is refused before anything else
    (`AnswerAlreadyApplied` tells the host more than "the transcript is closed")."""
    request = _coerce(pending, Request, "pending request")
    row = await store.find_request(request.id)
    if row is not None:
        check_claim(row, holder, epoch(), DEFAULT_LEASE_TTL)


async def run_with_answer(provider: Provider, keeper: Conversations, toolkit: Optional[Toolset],
                          history: list[dict[str, Any]], pending: RequestLike, answer: AnswerLike, *,
                          cancel: Optional[asyncio.Event] = None) -> RunResult:
    """Resume `history` (halted on `pending`) with `answer`; see the module docstring."""
    store = keeper.durable
    if store is not None:
        await _ledger_check(store, keeper.holder, pending)
    plan = _prepare(provider, keeper, toolkit, history, pending, answer)
    if store is not None:
        holder = keeper.holder
        async with claimed(store, plan.pending.id, holder, asdict(plan.answer)):
            result = await _resume(provider, keeper, toolkit, plan, cancel)
        await store.mark_applied(plan.pending.id, holder)
        return result
    with keeper.answers.claim(plan.pending.id):
        result = await _resume(provider, keeper, toolkit, plan, cancel)
        keeper.answers.record(plan.pending.id)
    return result


async def ask_with_answer(provider: Provider, keeper: Conversations, toolkit: Optional[Toolset], id: str,
                          pending: RequestLike, answer: AnswerLike, *,
                          cancel: Optional[asyncio.Event] = None) -> RunResult:
    """Under the conversation's lock: load `id`, resume, save (on any status; nothing on an exception).

    With a durable store the answer is claimed in the store's ledger first (a second client or
    process answering the same request gets `AnswerAlreadyApplied`), and the save marks it applied
    in the same transaction; a resume that fails gives the claim back."""
    if not id:
        raise ToolnexusValueError(NEEDS_ID)
    async with keeper.lock(id):
        store = keeper.durable
        if store is not None:
            await _ledger_check(store, keeper.holder, pending)
        history = await keeper.store.get(id) or []
        plan = _prepare(provider, keeper, toolkit, history, pending, answer)
        if store is not None:
            holder = keeper.holder
            async with claimed(store, plan.pending.id, holder, asdict(plan.answer), run_id=CONVERSATION_PREFIX + id):
                result = await _resume(provider, keeper, toolkit, plan, cancel, conversation=id)
                again = asdict(result.pending) if result.pending is not None else None
                await store.save_applied(id, result.messages, plan.pending.id, holder, new_request=again)
            return result
        with keeper.answers.claim(plan.pending.id):
            result = await _resume(provider, keeper, toolkit, plan, cancel, keeper.journal(id), conversation=id)
            await keeper.store.save(id, result.messages)
            keeper.answers.record(plan.pending.id)
    return result
