"""The level-1 surface: `agent(...)` / `Agent` — declare an agent, run it, or hand it out as a Tool.

An `Agent` is a declaration (soul, tools, team, limits). `registry()` turns the team graph into
`AgentDef`s; `run(prompt)` builds a fresh `AgentRuntime`, spawns the agent under root, wakes it
and waits; `as_tool()` makes the whole agent one tool of another loop. The persona helpers build
on this module: `compose_soul` and `memory_tool` (_persona.py, re-exported here), `agent_from_dir`
and `start_agent` (_launch.py).

Choices of ours, each deliberate:

- `rt_opts` are validated up front: an unknown key raises `TypeError` naming the accepted ones;
  `in_process` is accepted; so are `on_budget`, `on_transition`, `resume_mode` (see
  `_defs.py`) and `trace_limit` (`_trace.py`; through `rt_opts` `None` means the default bound, so
  pass `math.inf` for an unbounded trace).
- `Agent(on_transition=..., resume_mode=..., approvals=...)` set the def-level values (def over
  runtime); `approvals` (`toolnexus.approvals`) names the agent's tools that wait for a human.
- `soul_file` is read on a worker thread by `run` / `as_tool`, never on the event loop.
- `as_tool` surfaces a suspension: a pending run returns an error `ToolResult` with
  `metadata["pending"]`, so the outer loop escalates or halts; the suspended runtime stays
  parked, and the retry with `ctx.answer` resumes it (and then closes it). At most
  `MAX_PARKED_RUNS` runs stay parked per tool; the call that parks one more closes the oldest
  before it returns.
- If `run` is cancelled, its runtime is closed before the cancellation propagates.
- `output_type=` is checked when the agent is declared; `run` returns the parsed value as
  `result.output` (`TaskResult.output`) and its JSON as `result.text`. A model that never
  produces a valid value within `output_retries` gives an `error` result naming the problems.
"""

from __future__ import annotations

import asyncio
import copy
import dataclasses
import inspect
from collections import OrderedDict
from typing import Any, Callable, Concatenate, Optional, ParamSpec

from ..approvals import ApprovalPolicy
from ..client._structured import DEFAULT_OUTPUT_RETRIES, output_spec
from ..errors import ToolnexusTypeError, ToolnexusValueError
from ..types import Tool, ToolContext, ToolResult
from ._budget import Budget
from ._defs import AgentDef, check_resume_mode, read_soul_file
from ._handle import Handle, SpawnError, TaskResult
from ._loop import Completion, Loop, guarded_hooks
from ._persona import (  # re-exported: see __all__
    HEARTBEAT_PROMPT as HEARTBEAT_PROMPT,
    MAX_BOOTSTRAP_FILE_BYTES as MAX_BOOTSTRAP_FILE_BYTES,
)
from ._runtime import AgentRuntime
from ._vocab import TaskStatus

RT_OPTS = (
    "transport",
    "llm",
    "inbox_cap",
    "max_concurrent_turns",
    "shutdown_ms",
    "store",
    "clock",
    "hooks",
    "on_metric",
    "in_process",
    "on_budget",
    "on_transition",
    "trace_limit",
    "resume_mode",
    "run_id",
    "lease_ttl",
    "approvals",
    "on_pending",
)
MAX_PARKED_RUNS = 64

_AS_TOOL_SCHEMA = {"type": "object", "properties": {"prompt": {"type": "string"}}, "required": ["prompt"]}


def _checked_rt_opts(rt_opts: dict[str, Any]) -> dict[str, Any]:
    """Reject unknown runtime options; drop `None` values (None means "the default")."""
    unknown = sorted(set(rt_opts) - set(RT_OPTS))
    if unknown:
        raise ToolnexusTypeError(
            f"toolnexus.agents: unknown runtime option(s) {', '.join(map(repr, unknown))} — "
            f"accepted: {', '.join(RT_OPTS)}"
        )
    return {k: v for k, v in rt_opts.items() if v is not None}


def build_runtime(
    a: "Agent", rt_opts: dict[str, Any], *, registry: Optional[dict[str, AgentDef]] = None
) -> AgentRuntime:
    """A fresh runtime for `a`'s team graph, configured by `rt_opts` (shared by run/as_tool/start_agent)."""
    opts = _checked_rt_opts(rt_opts)
    return AgentRuntime(registry=registry if registry is not None else a.registry(), **opts)


class Agent:
    """A declared agent: what it does, its soul, its tools (`uses["tools"]`), its team, its limits."""

    def __init__(
        self,
        name: str,
        *,
        does: str,
        uses: Optional[dict[str, Any]] = None,
        soul: Optional[str] = None,
        soul_file: Optional[str] = None,
        team: Optional[list["Agent"]] = None,
        budget: Optional[Budget] = None,
        model: Optional[str] = None,
        wait_for: Any = None,
        on_spawn: Any = None,
        on_close: Any = None,
        hooks: Any = None,
        on_metric: Optional[Callable[[dict[str, Any]], None]] = None,
        guardrails: Optional[list[Any]] = None,
        completion: Optional[Completion] = None,
        on_budget: Optional[Callable[[Any, str], Any]] = None,
        on_transition: Optional[Callable[[dict[str, Any]], Any]] = None,
        resume_mode: Optional[str] = None,
        output_type: Any = None,
        output_retries: int = DEFAULT_OUTPUT_RETRIES,
        approvals: Any = None,
    ) -> None:
        if not isinstance(name, str) or not name:
            raise ToolnexusValueError(f"toolnexus.agents: an agent needs a non-empty name, got {name!r}")
        if not isinstance(does, str):
            raise ToolnexusTypeError(
                f"toolnexus.agents: agent {name!r}: `does` must be a str, got {type(does).__name__}"
            )
        if uses is not None and not isinstance(uses, dict):
            raise ToolnexusTypeError(
                f"toolnexus.agents: agent {name!r}: `uses` must be a dict, got {type(uses).__name__}"
            )
        for member in team or []:
            if not isinstance(member, Agent):
                raise ToolnexusTypeError(
                    f"toolnexus.agents: agent {name!r}: team members must be Agents, got {type(member).__name__}"
                )
        if budget is not None and not isinstance(budget, Budget):
            raise ToolnexusTypeError(
                f"toolnexus.agents: agent {name!r}: `budget` must be a Budget, got {type(budget).__name__}"
            )
        self.name = name
        self.does = does
        self.uses: dict[str, Any] = dict(uses or {})
        self.soul = soul
        self.soul_file = soul_file
        self.team: list[Agent] = list(team or [])
        self.budget = budget
        self.model = model
        self.wait_for = wait_for
        self.on_spawn = on_spawn
        self.on_close = on_close
        self.hooks = hooks
        self.on_metric = on_metric
        self.guardrails: list[Any] = list(guardrails or [])
        self.completion = completion
        self.on_budget = on_budget
        self.on_transition = on_transition
        self.resume_mode = check_resume_mode(resume_mode, f"agent {name!r}")
        if output_type is not None:
            output_spec(output_type, output_retries)  # an unusable type fails here, not in the first turn
        self.output_type = output_type
        self.output_retries = output_retries
        self.approvals = ApprovalPolicy.of(approvals)  # a malformed policy fails here, naming the agent

    def __repr__(self) -> str:
        return f"Agent({self.name!r})"

    def registry(self, acc: Optional[dict[str, AgentDef]] = None) -> dict[str, AgentDef]:
        """`AgentDef`s of the transitive team graph, pre-order; on a name collision the first wins."""
        acc = {} if acc is None else acc
        if self.name in acc:
            return acc
        acc[self.name] = AgentDef(
            name=self.name,
            description=self.does,
            system_prompt=read_soul_file(self.name, self.soul_file) if self.soul_file else (self.soul or ""),
            model=self.model or "inherit",
            budget=self.budget,
            tools=self.uses.get("tools"),
            wait_for=self.wait_for,
            on_spawn=self.on_spawn,
            on_close=self.on_close,
            task_targets=[member.name for member in self.team],
            hooks=guarded_hooks(self.guardrails, self.hooks),
            on_metric=self.on_metric,
            completion=self.completion,
            on_budget=self.on_budget,
            on_transition=self.on_transition,
            resume_mode=self.resume_mode,
            output_type=self.output_type,
            output_retries=self.output_retries,
            approvals=self.approvals,
        )
        for member in self.team:
            member.registry(acc)
        return acc

    def _reads_files(self, seen: Optional[set[int]] = None) -> bool:
        """Some agent of the team graph has a soul file (reading it is file I/O)."""
        seen = set() if seen is None else seen
        if id(self) in seen:
            return False
        seen.add(id(self))
        return bool(self.soul_file) or any(member._reads_files(seen) for member in self.team)

    async def _runtime(self, rt_opts: dict[str, Any]) -> AgentRuntime:
        _checked_rt_opts(rt_opts)
        # Soul files are read on a worker thread; without any, the registry is plain Python and is
        # built here (no thread round trip per run, nor a wait behind tools that fill the workers).
        registry = await asyncio.to_thread(self.registry) if self._reads_files() else self.registry()
        return build_runtime(self, rt_opts, registry=registry)

    async def run(self, prompt: str, **rt_opts: Any) -> TaskResult:
        """Spawn under a fresh runtime, wake with `prompt`, wait. A pending runtime stays parked
        on `result.runtime` for `resume`; otherwise the runtime is closed before returning."""
        rt = await self._runtime(rt_opts)
        return await self._run_on(rt, prompt)

    async def _run_on(self, rt: AgentRuntime, prompt: str) -> TaskResult:
        durable = rt.run_state.durable
        if durable is not None:
            durable.entry_agent = self.name
        h = rt.spawn(rt.root, self.name)
        if isinstance(h, SpawnError):
            if durable is not None:
                try:
                    await self._first_commit(rt, None, prompt)
                except BaseException:
                    await rt.aclose()
                    raise
            return TaskResult(h.error, True, TaskStatus.ERROR, runtime=rt, run_id=rt.run_id)
        try:
            if durable is None:
                rt.wake(h, prompt)
                result = await rt.wait(h)
                if result.status != TaskStatus.PENDING:
                    await rt.close(rt.root)
                return dataclasses.replace(result, runtime=rt, run_id=rt.run_id)
            await self._first_commit(rt, h, prompt)
            result = await rt.run_state.wait(h, commit=False)
            if result.status != TaskStatus.PENDING:
                await rt.close(rt.root)  # one commit: the result, the closed tree, the lease given up
            await durable.flush()  # a result is reported once it is durable (raises if that commit failed)
        except BaseException:
            await rt.close(rt.root, force=True)
            raise
        return dataclasses.replace(result, runtime=rt, run_id=rt.run_id)

    @staticmethod
    async def _first_commit(rt: AgentRuntime, h: Optional[Handle], prompt: str) -> None:
        """Create the run in the store with the entry agent woken by `prompt`, in one commit.

        A caller-chosen run id may be in use already: the agent's turn is held until that commit
        lands, so a used id (or a failing store) is refused before anything is spent. A generated
        id cannot be in use: the store is opened now (an unreachable one is said before any model
        call) and the run is created in the background while the first LLM call is out, or with
        the first tool call's start if that comes first (on the tool's thread: no round trip of
        its own); either way before any tool runs and before any result is reported."""
        core = rt.run_state
        durable = core.durable
        assert durable is not None
        if h is not None and not durable.named:
            try:
                await durable.store.open()
            except Exception:
                durable.abandon()  # nothing was written: nothing more will be
                raise
            rt.wake(h, prompt)
            durable.schedule()
            return
        hold: asyncio.Future[None] = asyncio.get_running_loop().create_future()
        core.turn_hold = hold
        try:
            if h is not None:
                rt.wake(h, prompt)
            await durable.flush()
        except Exception as exc:
            if not durable.created:
                durable.abandon()  # nothing was written: nothing more will be
            hold.set_exception(exc)
            hold.exception()  # retrieved here; the held turn (if any) still raises it
            raise
        except BaseException:
            hold.cancel()
            raise
        else:
            hold.set_result(None)
        finally:
            core.turn_hold = None

    def as_tool(self, **rt_opts: Any) -> Tool:
        """This agent as one native tool (`prompt` in, final text + `{agent, turns, totalTokens}` out)."""
        _checked_rt_opts(rt_opts)
        parked: "OrderedDict[str, AgentRuntime]" = OrderedDict()

        async def park(request_id: str, rt: AgentRuntime) -> None:
            parked[request_id] = rt
            while len(parked) > MAX_PARKED_RUNS:
                _, oldest = parked.popitem(last=False)
                await oldest.close(oldest.root, force=True)

        async def execute(args: Any = None, ctx: Optional[ToolContext] = None) -> ToolResult:
            answer = ctx.answer if ctx is not None else None
            if answer is not None:
                rt = parked.pop(answer.id, None)
                if rt is None:
                    return ToolResult(
                        f"agent {self.name}: no suspended run holds request {answer.id!r} — ask again", True
                    )
                handle = rt.root.children[0]
                try:
                    await rt.resume(answer)
                    result = await rt.wait(handle)
                except BaseException:
                    await rt.close(rt.root, force=True)
                    raise
                if result.status != TaskStatus.PENDING:
                    await rt.close(rt.root)
            else:
                prompt = str((args if isinstance(args, dict) else {}).get("prompt"))
                result = await self.run(prompt, **rt_opts)
                rt = result.runtime if isinstance(result.runtime, AgentRuntime) else None
            meta: dict[str, Any] = {"agent": self.name, "turns": result.turns, "totalTokens": result.total_tokens}
            if result.status == TaskStatus.PENDING and result.pending is not None and rt is not None:
                await park(result.pending.id, rt)
                return ToolResult(result.pending.prompt, True, {"pending": result.pending, **meta})
            return ToolResult(result.text, result.is_error, meta)

        return Tool(
            name=self.name,
            description=self.does,
            input_schema=copy.deepcopy(_AS_TOOL_SCHEMA),
            source="native",
            execute=execute,
        )

    def loop(self, options: dict[str, Any], toolkit: Any) -> Loop:
        """This agent on a single client (no runtime, no team): see `loop.Loop`."""
        return Loop(self, options, toolkit)


_P = ParamSpec("_P")


def _signature_of(init: Callable[Concatenate[Any, _P], None]) -> Callable[[Callable[..., Agent]], Callable[_P, Agent]]:
    """Give `agent` the parameters of `Agent.__init__`, for type checkers and `help()`."""

    def apply(factory: Callable[..., Agent]) -> Callable[_P, Agent]:
        params = list(inspect.signature(init).parameters.values())[1:]
        factory.__signature__ = inspect.Signature(params, return_annotation=Agent)  # type: ignore[attr-defined]
        return factory

    return apply


@_signature_of(Agent.__init__)
def agent(name: str, **spec: Any) -> Agent:
    """Declare an agent: `agent("researcher", does="finds sources", uses={"tools": [...]})`.

    `output_type=` (a pydantic model, dataclass or JSON Schema dict) makes each run end with a
    validated value: `result.output` (see `toolnexus.client._structured`)."""
    return Agent(name, **spec)
