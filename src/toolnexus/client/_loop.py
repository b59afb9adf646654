"""THE tool-calling loop, once, as an async generator of events (run drains it, stream yields it).

One `RunLoop` is one run. Set it up with `start(prompt, history)` (a new user turn) or
`continue_from(messages)` (a prepared transcript, no new user turn — the seam durable resume uses),
then iterate `events()` (optionally with a `prelude`, e.g. resume settling the open calls of the
halted turn through `tool_turn(..., write=<rewrite that turn's results>, settled=<the answered
calls>)` before the loop):

    text* → (tool_call+ → [pending] … tool_result*)* → [usage] → done

Per turn: `before_llm` → the dialect builds the body → `Provider.shape_body` → one logical call
(whole reply or SSE stream) → usage → `after_llm` → append the assistant turn → no calls ⇒ done;
else the calls run concurrently (`ToolRunner`) and their outcomes are written back strictly in
call order, applying the suspension rule: with `wait_for`, each suspension is
resolved serially (`resolve_with_answer`); without, the run halts at the first one with a
placeholder result. Before the first LLM call, a trailing assistant turn with unanswered calls is
balanced with `no result supplied on resume for <name>` errors.

How a reply ended decides too (the neutral finish, `client/_result.py`): a reply cut at the output
limit, refused or filtered (`wire.base.STOPPED`) ends the run `incomplete` with that `limit` and its
text (a refusal's text, the partial answer) — its tool calls, complete or not, are never run and
get a `not run` error result so the transcript stays balanced. A paused reply (Anthropic
`pause_turn`) is sent back as it is for the provider to continue, each continuation one more turn
of the same run (bounded by `max_turns`); the run's text is the paused turns' text and the final
turn's, joined.

Approvals (`toolnexus.approvals`): before anyone sees a gate's approval request, the loop stamps
it with the call id, the agent path (the run's `ApprovalScope`) and its `expiresAt` by the
settings' `clock`. A request the run's `ApprovalMemory` already decides (`always`) is answered
from it at once, with or without `wait_for` (it never halts the run). An answer that yields a new suspension (one more
approval of N, an escalation, the approved body's own question) is asked again in process, or
halts the run on the new request.

`Client(resolve_concurrently=True)` (opt-in) emits all of a turn's `pending` events first and
runs their `wait_for`s concurrently (a host collecting N relay calls before answering cannot
deadlock); results are still recorded in call order. `Client(race_tools=True)` (opt-in) lets the
deadline and `cancel` also interrupt tool execution and `wait_for`; by default they bound only
LLM calls.

A loop takes its client's `Provider` (_provider.py) and reads each setting from the frozen
`ClientSettings` the provider holds (_settings.py) where it needs it, so a setting changed during a
run (`client.clock = ...` from a `wait_for`) counts from its next use, as in 0.21.

With an `output_type` (the toolkit is then an `OutputToolkit`, _structured.py) a run ends only
with a validated value: a turn whose `final_result` call validates ends it, a plain-text turn is
accepted when it is valid JSON for the type or else answered with a retry message, and running
out of turns is `incomplete`. With a tracer installed (_tracing.py) the run, each LLM call, each
tool call and each wait for an answer are reported as spans; without one nothing is.

Not here: HTTP, retries, SSE parsing (client/retry/streaming modules) or any provider JSON (wire/).
"""

from __future__ import annotations

import asyncio
import inspect
import time
from contextlib import aclosing
from typing import Any, AsyncGenerator, Awaitable, Callable, Mapping, Optional, TypeVar

from ..approvals import ApprovalScope, stamp as stamp_approval
from ..relay import no_result_text
from ..types import Answer, Request, ToolResult, pending_of
from . import _tracing as tracing
from ._errors import RunCancelled
from ._journal import IN_DOUBT_KIND, RunJournal, not_run_text
from ._parts import media_parts_summary
from ._prepared import PreparedTranscript
from ._provider import Provider
from ._result import (
    FINISH_PAUSE,
    LIMIT_MAX_TURNS,
    RUN_STATUS_DONE,
    RUN_STATUS_INCOMPLETE,
    RUN_STATUS_PENDING,
    RunResult,
    Toolset,
    zero_usage,
)
from ._retry import race
from ._settings import ClientSettings
from ._streaming import streamed_turn
from ._structured import OutputRun
from ._suspension import merge_relay_halt, stamp_relay_call
from ._tool_calls import CallOutcome, ToolRunner, gather_in_order, resolve_with_answer
from ._wire.base import STOPPED, ResultEntry, ToolCall, Turn, add_usage, unfinished_call_text

Prelude = Callable[["RunLoop"], AsyncGenerator[dict[str, Any], None]]
T = TypeVar("T")


def compose_system(system_prompt: Optional[str], toolkit: Optional[Toolset]) -> str:
    """`system_prompt` and the toolkit's skills prompt, non-empty ones joined by a blank line."""
    skills = toolkit.skills_prompt() if toolkit is not None else ""
    return "\n\n".join(p for p in (system_prompt, skills) if p)


async def _maybe_await(value: Any) -> Any:
    return await value if inspect.isawaitable(value) else value


async def drain(events: AsyncGenerator[dict[str, Any], None],
                on_text: Optional[Callable[[str], Any]] = None) -> RunResult:
    """The `done` result of an event stream (the non-streaming way to run the loop).

    `on_text` (sync or async) gets each text delta on the way (`ask(on_text=...)`); if it raises,
    the stream is closed before the error propagates.
    """
    result: Optional[RunResult] = None
    async with aclosing(events):
        async for event in events:
            if event["type"] == "done":
                result = event["result"]
            elif on_text is not None and event["type"] == "text":
                await _maybe_await(on_text(event["delta"]))
    if result is None:
        raise RunCancelled("toolnexus: run ended without a result")
    return result


class RunLoop:
    """State and turn loop of one run (see module docstring).

    `approvals` is the run's approval scope (`Keeper.scope`); `journal` the store's run journal
    for the conversation, when it keeps one."""

    def __init__(self, provider: Provider, toolkit: Optional[Toolset], cancel: Optional[asyncio.Event], *,
                 streaming: bool, approvals: ApprovalScope, journal: Optional[RunJournal] = None) -> None:
        self.provider = provider
        endpoint = provider.settings.endpoint
        self.journal = journal
        self.approvals = approvals
        self.toolkit = toolkit
        self.streaming = streaming
        self.dialect = provider.dialect
        self.api_key = provider.api_key(self.dialect)
        self.abort = provider.abort(cancel)
        self.system = compose_system(endpoint.system_prompt, toolkit)
        # Without a hook or body_transform that could edit them, the declarations and transcript
        # are sent as kept, pre-encoded lists (each part encoded once per change, see _prepared.py).
        editable = endpoint.body_transform is not None or provider.has_hook("before_llm")
        self.tools: list[dict[str, Any]] = self.dialect.declare_tools(toolkit, shared=not editable)
        kept = not editable and self.dialect.resends_transcript
        self.prepared: Optional[PreparedTranscript] = PreparedTranscript(self.dialect) if kept else None
        self.messages: list[dict[str, Any]] = []
        self.run_start = 0
        self.usage = zero_usage()
        self.turns = 0
        self.records: list[dict[str, Any]] = []
        self.model = endpoint.model
        self.output = OutputRun.of(toolkit)  # set when the run must end with an `output_type` value
        self.conversation_id: Optional[str] = None  # `ask(id=...)` / `stream(id=...)`: names the trace span
        self.span: Optional[tracing.RunSpan] = None  # set while a tracer observes this run
        self.last: Optional[Turn] = None  # the last reply read (its finish goes on the result)

    @property
    def settings(self) -> ClientSettings:
        """The client's settings as they are now."""
        return self.provider.settings

    @property
    def structured(self) -> bool:
        """The run must end with an `output_type` value."""
        return self.output is not None

    def start(self, prompt: Any, history: Optional[list[dict[str, Any]]]) -> "RunLoop":
        history = list(history or [])
        self.messages = self.dialect.start_transcript(history, self.system, prompt)
        self.run_start = len(history)
        return self

    def continue_from(self, messages: list[dict[str, Any]]) -> "RunLoop":
        """Continue a prepared transcript with no new user turn (durable resume)."""
        self.messages = list(messages)
        self.run_start = len(self.messages)
        return self

    # -- results --------------------------------------------------------------------------------

    def result(self, text: str, status: str = RUN_STATUS_DONE, *, limit: Optional[str] = None,
               pending: Optional[Request] = None, output: Any = None) -> RunResult:
        last = self.last
        return RunResult(text=text, messages=self.messages, tool_calls=list(self.records),
                         tool_call_count=len(self.records), turns=self.turns, usage=dict(self.usage),
                         model=self.model, status=status, limit=limit, pending=pending,  # type: ignore[arg-type]
                         output=output, finish_reason=last.finish_reason if last is not None else None,
                         provider_finish_reason=last.provider_finish_reason if last is not None else None)

    def _emit_run(self, started: float, error: Optional[str] = None) -> None:
        event: dict[str, Any] = {"event": "run", "model": self.model, "turns": self.turns,
                                 "tool_calls": len(self.records), "total_tokens": self.usage["total_tokens"],
                                 "ms": (time.monotonic() - started) * 1000}
        if error is not None:
            event["error"] = error
        self.provider.emit(event)

    def bounded(self, awaitable: Awaitable[T]) -> Awaitable[T]:
        """`awaitable`, raced against the run's deadline and cancel when `race_tools` is on."""
        return race(awaitable, self.abort) if self.settings.loop.race_tools else awaitable

    # -- the loop -------------------------------------------------------------------------------

    async def events(self, prelude: Optional[Prelude] = None) -> AsyncGenerator[dict[str, Any], None]:
        """The run as events; the last one is always `{"type": "done", "result": RunResult}`.

        `prelude` (durable resume) runs first, inside the run's metric/error envelope; if it yields
        a `done` event (a repeat halt) the run ends there, else the turn loop follows.
        """
        started = time.monotonic()
        span = self.span = tracing.run_span(self, resumed=prelude is not None)
        try:
            async for event in self._run(prelude):
                if event["type"] == "done":
                    self._emit_run(started)
                    if span is not None:
                        span.done(event["result"])
                yield event
        except Exception as e:
            self._emit_run(started, error=str(e))
            if span is not None:
                span.fail(e)
            raise
        finally:
            if span is not None:
                span.close()

    async def _run(self, prelude: Optional[Prelude]) -> AsyncGenerator[dict[str, Any], None]:
        if prelude is not None:
            async for event in prelude(self):
                yield event
                if event["type"] == "done":
                    return
        elif self.journal is not None:
            await self.journal.run_started(self.messages)
        async for event in self._turns():
            yield event

    async def _turns(self) -> AsyncGenerator[dict[str, Any], None]:
        self.messages = self.dialect.balance(self.messages, lambda c: no_result_text(c.name))
        paused: list[str] = []  # the text of the paused replies this answer continues
        for turn_index in range(self.settings.limits.max_turns):
            self.turns += 1
            turn: Optional[Turn] = None
            async for item in self._llm_turn(turn_index):
                if isinstance(item, Turn):
                    turn = item
                else:
                    yield item
            assert turn is not None
            self.last = turn
            self.messages.append(turn.assistant_message)
            finish = turn.finish_reason
            if finish in STOPPED:  # cut, refused or filtered: not an answer, and no call of it runs
                if turn.tool_calls:
                    native = turn.provider_finish_reason
                    self._append_results([ResultEntry(c, unfinished_call_text(c, finish, native), True)
                                          for c in turn.tool_calls])
                # no `usage` event: like a max-turns end, this is not a normal finish (the result has usage)
                yield {"type": "done", "result": self.result("".join(paused) + turn.text, RUN_STATUS_INCOMPLETE,
                                                             limit=STOPPED[finish])}
                return
            if finish == FINISH_PAUSE and not turn.tool_calls:  # the provider continues from where it paused
                paused.append(turn.text)
                continue
            if not turn.tool_calls:
                text, output = "".join(paused) + turn.text if paused else turn.text, None
                if self.output is not None:  # structured output: accept JSON text, or ask again
                    verdict = self.output.after_text(text, self.result(text))
                    if verdict.retry is not None:
                        self.messages.append({"role": "user", "content": verdict.retry})
                        paused.clear()
                        continue
                    text, output = verdict.text, verdict.value
                if self.streaming:
                    yield {"type": "usage", "usage": dict(self.usage)}
                yield {"type": "done", "result": self.result(text, output=output)}
                return
            paused.clear()
            halted = False
            recorded = len(self.records)
            async for event in self.tool_turn(turn.tool_calls, turn_index, self._append_results):
                halted = halted or event["type"] == "done"
                yield event
            if halted:
                return
            if self.output is not None:  # structured output: did this turn's final_result validate?
                accepted = self.output.after_tools(self.records[recorded:], self.result(""))
                if accepted is not None:
                    if self.streaming:
                        yield {"type": "usage", "usage": dict(self.usage)}
                    yield {"type": "done", "result": self.result(accepted.text, output=accepted.value)}
                    return
        text = self.dialect.exhausted_text(self.messages, self.run_start)
        if text and self.output is None:
            yield {"type": "done", "result": self.result(text)}
        else:
            yield {"type": "done", "result": self.result("", RUN_STATUS_INCOMPLETE, limit=LIMIT_MAX_TURNS)}

    async def _llm_turn(self, turn_index: int) -> AsyncGenerator[Any, None]:
        """One LLM round trip: yields text events (streaming) and finally the `Turn`."""
        endpoint = self.provider.settings.endpoint
        hv = await self.provider.call_hook("before_llm", {"messages": self.messages, "tools": self.tools,
                                                          "model": endpoint.model, "turn": turn_index})
        model = endpoint.model
        if hv:
            messages, tools, override = hv.get("messages"), hv.get("tools"), hv.get("model")
            if messages is not None:
                self.messages = messages
            if tools is not None:
                self.tools = tools
            if override:
                model = override
        self.model = model
        if self.prepared is not None:
            wire, media = self.prepared.prepare(self.messages)
            body = self.dialect.build_body(model, wire, self.tools, self.system, self.streaming, wired=True)
        else:
            body = self.dialect.build_body(model, self.messages, self.tools, self.system, self.streaming)
            media = media_parts_summary(self.messages)
        body = self.provider.shape_body(body)
        url = self.dialect.url(endpoint.base_url)
        headers = self.dialect.headers(self.api_key, endpoint.headers)
        call = self.provider.llm_call(model, media)
        if self.span is not None:
            call.span = self.span.llm(model, self.streaming)
        async with call:
            if self.streaming:
                async for item in streamed_turn(self.provider, url, headers, body, self.dialect, self.abort, call):
                    if isinstance(item, Turn):
                        turn = item
                    else:
                        yield {"type": "text", "delta": item}
                response: Any = None
            else:
                response = await self.provider.send(url, headers, body, self.abort, call=call,
                                                    check=self.dialect.check_reply)
                call.response = response
                turn = self.dialect.parse_response(response)
            call.usage = turn.usage
            call.finish = turn.provider_finish_reason
        add_usage(self.usage, turn.usage)
        if self.streaming:
            response = {"streamed": True, "usage": dict(self.usage)}
        await self.provider.call_hook("after_llm", {"response": response, "model": model, "turn": turn_index})
        yield turn

    async def _wait_for(self, request: Request) -> Optional[Answer]:
        if self.span is None:
            return await self._ask_host(request)
        with self.span.waiting(request) as waiting:
            answer = await self._ask_host(request)
            waiting.answered(answer)
        return answer

    async def _ask_host(self, request: Request) -> Optional[Answer]:
        wait_for = self.settings.loop.wait_for
        assert wait_for is not None  # only asked when the run has one
        reply = await self.bounded(_maybe_await(wait_for(request)))
        answer: Optional[Answer] = Answer.from_dict(reply) if isinstance(reply, Mapping) else reply
        return answer

    def _append_results(self, entries: list[ResultEntry]) -> None:
        self.messages.extend(self.dialect.result_messages(entries))

    async def tool_turn(self, calls: list[ToolCall], turn_index: int, write: Callable[[list[ResultEntry]], None],
                        settled: Optional[dict[int, CallOutcome]] = None) -> AsyncGenerator[dict[str, Any], None]:
        """Run `calls` concurrently, then settle them in call order (the suspension rule).

        `settled` maps positions in `calls` to outcomes decided already (durable resume: the calls
        the answer resolved); those are not run again. `write(entries)` stores the turn's results
        (the loop appends them; durable resume rewrites the halted turn's results). A durable halt
        ends with a `done` event.
        """
        settled = settled or {}
        todo = [c for i, c in enumerate(calls) if i not in settled]
        for c in todo:
            yield {"type": "tool_call", "id": c.id, "name": c.name, "args": c.args}
        runner = self.runner(turn_index)
        halt_write = write  # a halt's transcript is saved with the run's end, not mid-run
        if self.journal is not None:
            write = self._journaled(write)
        ran = iter(await self.bounded(runner.run_all(todo)) if todo else [])
        outcomes = [settled[i] if i in settled else next(ran) for i in range(len(calls))]
        for o in outcomes:
            if o.request is not None:
                stamp_relay_call(o.request, o.call)
                self._stamp(o)
        async for event in self._settle(runner, outcomes, write, halt_write):
            yield event

    def runner(self, turn_index: int) -> ToolRunner:
        """The tool runner of one turn (with the run's journal, if any)."""
        if self.span is not None:
            return tracing.TracedRunner(self.span, self.provider, self.toolkit, turn_index, self.model, self.journal,
                                        lambda: self.messages, abort=self.abort, memory=self.approvals.memory)
        return ToolRunner(self.provider, self.toolkit, turn_index, self.model, self.journal, lambda: self.messages,
                          abort=self.abort, memory=self.approvals.memory)

    def _stamp(self, o: CallOutcome) -> None:
        """An approval request learns its call, its agent and its expiry before anyone sees it."""
        if o.request is not None:
            stamp_approval(o.request, o.call.id, self.approvals.agent_path, self.settings.loop.clock())

    def _followed(self, o: CallOutcome, result: ToolResult) -> CallOutcome:
        """`o` resolved to `result`: settled, or suspended again on a new request (see module docstring)."""
        again = pending_of(result)
        followed = CallOutcome(o.call, o.args, result, again)
        self._stamp(followed)
        return followed

    def _journaled(self, write: Callable[[list[ResultEntry]], None]) -> Callable[[list[ResultEntry]], None]:
        """`write`, then tell the journal those calls' results are in the transcript."""

        journal = self.journal
        assert journal is not None

        def written(entries: list[ResultEntry]) -> None:
            write(entries)
            journal.results_written(self.messages, [e.call.id for e in entries])

        return written

    async def _settle(self, runner: ToolRunner, outcomes: list[CallOutcome], write: Callable[[list[ResultEntry]], None],
                      halt_write: Callable[[list[ResultEntry]], None]) -> AsyncGenerator[dict[str, Any], None]:
        """Write outcomes back in call order: resolve suspensions with `wait_for`, or halt durably."""
        durable = self.settings.loop.wait_for is None or self.toolkit is None
        memory = self.approvals.memory
        resolved: dict[int, Any] = {}
        if not durable and self.settings.loop.resolve_concurrently:
            suspended = [i for i, o in enumerate(outcomes)
                         if o.request is not None and memory.answer_for(o.request) is None]
            for i in suspended:
                yield {"type": "pending", "request": outcomes[i].request}
            results = await gather_in_order([self._resolve(runner, outcomes[i]) for i in suspended])
            resolved = dict(zip(suspended, results, strict=True))
        entries: list[ResultEntry] = []
        for position, o in enumerate(outcomes):
            if position in resolved:
                o = self._followed(o, resolved[position])
            while o.request is not None:
                remembered = memory.answer_for(o.request)  # decided `always` earlier in this run
                if remembered is None and durable:
                    async for event in self._halt(o, outcomes[position + 1 :], entries, halt_write):
                        yield event
                    return
                if remembered is None:
                    yield {"type": "pending", "request": o.request}
                o = self._followed(o, await self._resolve(runner, o, remembered))
            result = o.result
            self._record(o, result.output, bool(result.is_error), result.metadata)
            entries.append(ResultEntry.of(o.call, result))
            yield self._result_event(entries[-1])
        write(entries)

    async def _resolve(self, runner: ToolRunner, o: CallOutcome, remembered: Optional[Answer] = None) -> Any:
        """`wait_for` (or the run's remembered answer) then the resolution rule for one suspended call.

        A call in doubt (recovered after a crash) is not retried with the answer: ok runs it again
        as a new call (which may itself suspend), declined tells the model it was not run."""
        while o.request is not None and o.request.kind == IN_DOUBT_KIND:
            answer = await self._wait_for(o.request)
            if answer is None or not answer.ok:
                return ToolResult(not_run_text(o.call.name), True)
            o = await self.bounded(runner.run_one(o.call))
            if o.request is None:
                return o.result
            self._stamp(o)
        answer = remembered if remembered is not None else await self._wait_for(o.request)  # type: ignore[arg-type]
        return await self.bounded(resolve_with_answer(runner, o, answer))

    def _record(self, o: CallOutcome, output: str, is_error: bool, metadata: Any) -> None:
        self.records.append({"name": o.call.name, "args": o.args, "output": output, "is_error": is_error,
                             "metadata": metadata})

    @staticmethod
    def _result_event(entry: ResultEntry) -> dict[str, Any]:
        return {"type": "tool_result", "id": entry.call.id, "name": entry.call.name, "output": entry.output,
                "is_error": entry.is_error}

    async def _halt(self, o: CallOutcome, later: list[CallOutcome], entries: list[ResultEntry],
                    write: Callable[[list[ResultEntry]], None]) -> AsyncGenerator[dict[str, Any], None]:
        """Durable halt at `o`: placeholder result, later calls dropped, `status="pending"`."""
        assert o.request is not None  # a halt is at a suspended call
        request = merge_relay_halt(o.request, [x.request for x in later if x.request is not None])
        placeholder = ResultEntry(o.call, request.prompt, True)
        self._record(o, request.prompt, True, None)
        write(entries + [placeholder])
        yield {"type": "pending", "request": request}
        if self.dialect.halt_emits_placeholder_result:
            yield self._result_event(placeholder)
        yield {"type": "done", "result": self.result(request.prompt, RUN_STATUS_PENDING, pending=request)}
