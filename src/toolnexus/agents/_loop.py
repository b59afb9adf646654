"""The harness loop: run one agent spec on one client, with a completion gate and guardrails.

Three pieces live here because both the harness `Loop` and the agent runtime use them:

- `run_gated(ask, prompt, completion)` re-asks until `completion.verify` accepts the answer;
- `guarded_hooks(guardrails, hooks)` folds synchronous guardrails into a `before_tool` hook;
- `all_todos_done(result)`, a ready-made `verify` that reads the last `todowrite` call.

`Loop` itself is the small, runtime-free way to run an agent spec: no handles, no inbox, no
`task`; the caller supplies the client options and the toolkit. `loop_unsupported(spec)` names
the spec fields such a loop cannot honour.

Choices of ours (deliberate):

- `run_gated` adds every attempt's `turns`, `usage` and `tool_calls` onto the result it returns
  (also for non-done results), so whoever rolls up that result counts all attempts, not only the
  last one.
- `guarded_hooks` returns a `GuardedHooks` dict that remembers its guardrails and the hooks they
  wrapped. `resolve_hooks(def_hooks, runtime_hooks)` uses that to compose a guardrail-only def
  over the runtime's hooks instead of replacing them. For a hooks *object*, its
  `__dict__` plus any of the four hook methods defined on its class are copied.
- `Completion.verify` may also return a plain `bool` (read as `Verdict(ok)`).
- `Loop` warns once (per agent name and field set) when the spec carries fields it ignores, raises
  a clear `ValueError` when no model can be resolved, and refuses a second concurrent `run` on
  the same instance (its `status` would be meaningless).

Not here: the agent runtime (`_runtime.py`), the level-1 `Agent` surface (`_surface.py`).
"""

from __future__ import annotations

import asyncio
import inspect
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any, Awaitable, Callable, Optional, Union

from .._diag import warn_once
from .._hooks import hook_of
from ..client import create_client
from ..client._result import RUN_STATUS_DONE, RUN_STATUS_PENDING
from ..errors import ToolnexusRuntimeError, ToolnexusTypeError, ToolnexusValueError
from ..types import ToolResult
from ._defs import read_soul_file
from ._vocab import HandleState, TaskStatus

LOOP_UNSUPPORTED_FIELDS = ("tools", "team", "waitFor", "onMetric")

Guardrail = Callable[[dict[str, Any]], Optional[str]]
"""A guardrail sees the `before_tool` event and returns synchronously: None, "" or "allow" to
permit, any other string to deny (the string becomes the denial reason)."""

_HOOK_NAMES = ("before_llm", "after_llm", "before_tool", "after_tool")
_PERMIT = ("", "allow")


@dataclass
class Verdict:
    """A completion check's judgement; `reason` says what is still wrong when `ok` is False."""

    ok: bool
    reason: str = ""


@dataclass
class Completion:
    """A completion gate: the run is re-asked until `verify(result)` is ok, `max_attempts` times at most.

    `max_attempts` has no usable default on purpose: the caller must decide how many attempts a
    run may burn (0 is rejected when the gate runs).
    """

    verify: Callable[[Any], Union[Verdict, Awaitable[Verdict]]]
    max_attempts: int = 0


@dataclass
class Outcome:
    """What `Loop.run` hands back: the final text, how the run ended, and what it cost."""

    text: str = ""
    status: str = "done"
    stopped_by: str = ""
    attempts: int = 0
    turns: int = 0
    result: Any = None


@dataclass
class RunOptions:
    """Per-call options of `Loop.run`; `model` overrides the model for that run only."""

    model: str = ""


# --------------------------------------------------------------------------- spec access


def _field(spec: Any, *names: str) -> Any:
    """The first non-None value among `names`, read as mapping keys or attributes."""
    for name in names:
        if isinstance(spec, Mapping):
            value = spec.get(name)
        else:
            value = getattr(spec, name, None)
        if value is not None:
            return value
    return None


def harness(**spec: Any) -> dict[str, Any]:
    """The spec as a plain dict, so `agent("x", **harness(does=...))` equals `agent("x", does=...)`."""
    return dict(spec)


def loop_unsupported(spec: Any) -> list[str]:
    """The truthy fields of `spec` (dict or object) that a single-client `Loop` cannot honour.

    A subset of `["tools", "team", "waitFor", "onMetric"]`, in that order; tools count when
    `uses["tools"]` (or a top-level `tools`) is non-empty. snake_case names are read too.
    """
    uses = _field(spec, "uses")
    present = {
        "tools": bool(_field(uses, "tools")) if uses else False,
        "team": bool(_field(spec, "team")),
        "waitFor": bool(_field(spec, "wait_for", "waitFor")),
        "onMetric": bool(_field(spec, "on_metric", "onMetric")),
    }
    present["tools"] = present["tools"] or bool(_field(spec, "tools"))
    return [name for name in LOOP_UNSUPPORTED_FIELDS if present[name]]


# --------------------------------------------------------------------------- guardrails


def _hooks_as_dict(hooks: Any) -> dict[str, Any]:
    if hooks is None:
        return {}
    if isinstance(hooks, Mapping):
        return dict(hooks)
    copied = dict(getattr(hooks, "__dict__", {}))
    for name in _HOOK_NAMES:
        found = hook_of(hooks, name)  # the client's one reading of hooks-as-mapping-or-object
        if name not in copied and found is not None:
            copied[name] = found
    return copied


def _discard_awaitable(value: Any) -> None:
    """Close an awaitable a guardrail wrongly returned, so no 'never awaited' warning leaks."""
    if inspect.iscoroutine(value):
        value.close()
    elif isinstance(value, asyncio.Future):
        value.cancel()
    elif callable(getattr(value, "close", None)):
        value.close()


def _bad_verdict(value: Any) -> TypeError:
    what = "a coroutine" if inspect.iscoroutine(value) else type(value).__name__
    _discard_awaitable(value)
    return TypeError(
        f"guardrail returned {what}: a guardrail must return a str synchronously "
        '("" or "allow" to permit, any other string to deny). '
        "Do asynchronous work in hooks.before_tool, which is awaited."
    )


class GuardedHooks(dict[str, Any]):
    """The dict `guarded_hooks` returns; it remembers the guardrails and the hooks they wrapped."""

    guardrails: list[Guardrail]
    base: Any


def guarded_hooks(guardrails: Optional[list[Guardrail]], hooks: Any) -> Any:
    """`hooks` with `guardrails` run first in `before_tool`; the first deny wins.

    With no guardrails, `hooks` itself comes back untouched. A deny short-circuits the tool with
    `ToolResult("denied: <verdict>", is_error=True)`; when every guardrail permits, the prior
    `before_tool` (if any) runs and its return value is used.
    """
    if not guardrails:
        return hooks
    rails = list(guardrails)
    prior = hook_of(hooks, "before_tool")

    async def before_tool(event: dict[str, Any]) -> Any:
        for rail in rails:
            verdict = rail(event)
            if verdict is None or (isinstance(verdict, str) and verdict in _PERMIT):
                continue
            if isinstance(verdict, str):
                return {"result": ToolResult(f"denied: {verdict}", is_error=True)}
            raise _bad_verdict(verdict)
        if prior is None:
            return None
        out = prior(event)
        return await out if inspect.isawaitable(out) else out

    composed = GuardedHooks(_hooks_as_dict(hooks))
    composed["before_tool"] = before_tool
    composed.guardrails = rails
    composed.base = hooks
    return composed


def resolve_hooks(def_hooks: Any, runtime_hooks: Any) -> Any:
    """Def over runtime, except that guardrails alone compose over the runtime's hooks.

    A def whose hooks are only its guardrails (`guarded_hooks(rails, None)`) would otherwise
    replace the runtime's hooks and silently drop e.g. a runtime-wide compactor or tracer.
    """
    if def_hooks is None:
        return runtime_hooks
    if isinstance(def_hooks, GuardedHooks) and def_hooks.base is None and runtime_hooks is not None:
        return guarded_hooks(def_hooks.guardrails, runtime_hooks)
    return def_hooks


# --------------------------------------------------------------------------- completion gate


def _todo_label(item: Any) -> str:
    if isinstance(item, Mapping):
        text = item.get("text")
        return "" if text is None else str(text)
    return str(item)


def all_todos_done(result: Any) -> Verdict:
    """Ok unless the last `todowrite` call in `result.tool_calls` left items not completed."""
    calls = _field(result, "tool_calls") or []
    last = next((c for c in reversed(calls) if isinstance(c, Mapping) and c.get("name") == "todowrite"), None)
    if last is None:
        return Verdict(True)
    meta = last.get("metadata")
    todos = meta.get("todos") if isinstance(meta, Mapping) else None
    if not isinstance(todos, list):
        return Verdict(True)
    still_open = [t for t in todos if not (isinstance(t, Mapping) and t.get("completed"))]
    if not still_open:
        return Verdict(True)
    return Verdict(False, f"{len(still_open)} item(s) still open: " + "; ".join(_todo_label(t) for t in still_open))


def _check_completion(completion: Completion) -> int:
    attempts = completion.max_attempts
    if isinstance(attempts, bool) or not isinstance(attempts, int) or attempts < 1:
        raise ToolnexusValueError("toolnexus: Completion.max_attempts must be an integer >= 1")
    if not callable(completion.verify):
        raise ToolnexusValueError("toolnexus: Completion.verify is required")
    return attempts


async def _judge(verify: Callable[[Any], Any], result: Any) -> Verdict:
    verdict = verify(result)
    if inspect.isawaitable(verdict):
        verdict = await verdict
    if isinstance(verdict, Verdict):
        return verdict
    if isinstance(verdict, bool):
        return Verdict(verdict)
    raise ToolnexusTypeError(f"toolnexus: Completion.verify must return a Verdict, got {type(verdict).__name__}")


class _Spend:
    """Running totals over gate attempts, written back onto each attempt's result."""

    def __init__(self) -> None:
        self.turns = 0
        self.usage: dict[str, float] = {}
        self.tool_calls: list[Any] = []

    def absorb(self, result: Any) -> None:
        self.turns += getattr(result, "turns", 0) or 0
        for key, value in (getattr(result, "usage", None) or {}).items():
            if isinstance(value, (int, float)):
                self.usage[key] = self.usage.get(key, 0) + value
        self.tool_calls.extend(getattr(result, "tool_calls", None) or [])
        if hasattr(result, "turns"):
            result.turns = self.turns
        if isinstance(getattr(result, "usage", None), dict):
            result.usage = {**result.usage, **self.usage}
        if hasattr(result, "tool_calls"):
            result.tool_calls = list(self.tool_calls)
        if hasattr(result, "tool_call_count"):
            result.tool_call_count = len(self.tool_calls)


async def run_gated(ask: Callable[[str], Awaitable[Any]], prompt: str, completion: Optional[Completion]) -> Any:
    """`await ask(prompt)`, re-asked with the verifier's reason until `completion.verify` is ok.

    Without a completion this is exactly one `ask`. A non-done result is returned unjudged (a
    non-pending one is annotated when an earlier attempt failed verification). Running out of
    attempts yields `status="incomplete"`, `limit="completion"`. The returned result carries the
    turns, usage and tool calls of every attempt.
    """
    if completion is None:
        return await ask(prompt)
    attempts = _check_completion(completion)
    spend = _Spend()
    reason = ""
    result: Any = None
    for attempt in range(1, attempts + 1):
        text = prompt if attempt == 1 else f"Your work did not verify: {reason}. Fix it and finish."
        result = await ask(text)
        spend.absorb(result)
        status = getattr(result, "status", RUN_STATUS_DONE)
        if status != RUN_STATUS_DONE:
            if reason and status != RUN_STATUS_PENDING:
                result.text = f"{result.text} [while verifying: attempt {attempt} last failed: {reason}]"
            return result
        verdict = await _judge(completion.verify, result)
        if verdict.ok:
            return result
        reason = verdict.reason or "unspecified"
    result.status = "incomplete"
    result.limit = "completion"
    result.text = f"completion.verify failed {attempts}x: {reason}"
    return result


# --------------------------------------------------------------------------- the loop


async def _soul_of(spec: Any) -> str:
    soul_file = _field(spec, "soul_file")
    if soul_file:
        return await asyncio.to_thread(read_soul_file, _field(spec, "name") or "agent", soul_file)
    return _field(spec, "soul") or ""


class Loop:
    """One agent spec (an `Agent` or a `harness(...)` dict) run directly on one client.

    `options` are `create_client` keyword arguments; `toolkit` is what the model may call.
    `status` goes idle → running → idle, or to the run's non-done status, or to "error";
    `turns` counts LLM round trips across every run of this loop.
    """

    def __init__(self, agent: Any, options: Optional[Mapping[str, Any]] = None, toolkit: Any = None) -> None:
        self._spec = agent
        self._options = dict(options or {})
        self._toolkit = toolkit
        self._status: str = HandleState.IDLE
        self._turns = 0
        self.error: Optional[BaseException] = None
        ignored = loop_unsupported(agent)
        if ignored:
            name = _field(agent, "name") or "agent"
            warn_once(
                f"loop-unsupported:{name}:{','.join(ignored)}",
                f"[toolnexus] Loop runs {name} on a single client and ignores: {', '.join(ignored)} "
                "(use Agent.run for those)",
            )

    @property
    def status(self) -> str:
        return self._status

    @property
    def turns(self) -> int:
        return self._turns

    async def _client_options(self, model: str) -> dict[str, Any]:
        spec = self._spec
        opts = dict(self._options)
        if opts.get("system_prompt") is None:
            soul = await _soul_of(spec)
            if soul:
                opts["system_prompt"] = soul
        spec_model = _field(spec, "model")
        if opts.get("model") in (None, "", "inherit") and spec_model:
            opts["model"] = spec_model
        if not opts.get("model"):
            raise ToolnexusValueError("toolnexus: Loop needs a model — set options['model'] or the agent's model")
        budget = _field(spec, "budget")
        max_turns = _field(budget, "max_turns") if budget is not None else None
        if opts.get("max_turns") is None and max_turns is not None:
            opts["max_turns"] = max_turns
        opts["hooks"] = guarded_hooks(_field(spec, "guardrails"), _field(spec, "hooks") or opts.get("hooks"))
        if model:
            opts["request_params"] = {**(opts.get("request_params") or {}), "model": model}
        return opts

    async def run(self, prompt: str, model: Union[str, RunOptions] = "") -> Outcome:
        """One run through the completion gate; history is threaded across its attempts only."""
        if self._status == HandleState.RUNNING:
            raise ToolnexusRuntimeError(
                "toolnexus: this Loop is already running — await its run before starting another"
            )
        if isinstance(model, RunOptions):
            model = model.model
        self._status = HandleState.RUNNING
        self.error = None
        attempts = 0
        try:
            client = create_client(**(await self._client_options(model)))
            history: list[dict[str, Any]] = []

            async def ask(text: str) -> Any:
                nonlocal history, attempts
                attempts += 1
                r = await client.run(text, self._toolkit, history=history)
                history = list(r.messages)
                self._turns += r.turns
                return r

            result = await run_gated(ask, prompt, _field(self._spec, "completion"))
        except BaseException as exc:
            self._status = TaskStatus.ERROR
            self.error = exc
            raise
        done = result.status == RUN_STATUS_DONE
        self._status = HandleState.IDLE if done else result.status
        if done:
            stopped_by = ""
        elif result.limit == "completion":
            stopped_by = result.text
        else:
            stopped_by = f"run reported {result.status}"
        return Outcome(
            text=result.text,
            status=result.status,
            stopped_by=stopped_by,
            attempts=attempts,
            turns=result.turns,
            result=result,
        )
