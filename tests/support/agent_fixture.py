"""Drive a `toolnexus-subagent-fixture/v1` file against a real `AgentRuntime` (agents.md §15).

`FixtureRun` builds the registry and the fixture tools from the JSON, plugs the scripted
`MockLLM` in at the transport seam, runs on a `VirtualClock`, and resolves the fixture's handle
names (def name, full id, or def path from `tree`). It only *drives*; each test asserts the
expectations it names.
"""

from __future__ import annotations

import asyncio
import copy
import re
from typing import Any, Optional

from toolnexus.agents import AgentDef, AgentRuntime, Budget, Handle, InboxItem, SpawnError, TaskResult
from toolnexus.agents.clock import VirtualClock
from toolnexus.types import Answer, Tool, ToolResult, pending

from .mock_llm import MockLLM

__all__ = ["FixtureRun", "fixture_tools", "transitions_of", "budget_from", "deep_merge", "auto_approve"]

_TRANSITION = re.compile(r"^(?P<id>.+?): (?P<src>idle|running|suspended|closed)→(?P<dst>idle|running|suspended|closed)")
_BUDGET_KEYS = {
    "maxTurns": "max_turns",
    "maxTokens": "max_tokens",
    "maxToolCalls": "max_tool_calls",
    "maxWallMs": "max_wall_ms",
    "maxChildren": "max_children",
    "maxConcurrent": "max_concurrent",
    "maxDepth": "max_depth",
}
_RUNTIME_KEYS = {"inboxCap": "inbox_cap", "maxConcurrentTurns": "max_concurrent_turns"}


def budget_from(spec: Optional[dict[str, Any]]) -> Optional[Budget]:
    if not spec:
        return None
    return Budget(**{_BUDGET_KEYS[k]: v for k, v in spec.items()})


def deep_merge(base: dict[str, Any], over: dict[str, Any]) -> dict[str, Any]:
    out = copy.deepcopy(base)
    for key, value in over.items():
        if isinstance(value, dict) and isinstance(out.get(key), dict):
            out[key] = deep_merge(out[key], value)
        else:
            out[key] = copy.deepcopy(value)
    return out


def auto_approve(request: Any) -> Answer:
    return Answer(id=request.id, ok=True)


def fixture_tools(spec: dict[str, Any]) -> dict[str, Tool]:
    """The fixtures' prose tools: `lookup` → `data(<q>)`; `check_secret` suspends until approved."""

    async def lookup(args: Any = None, ctx: Any = None) -> ToolResult:
        return ToolResult(f"data({(args or {}).get('q')})", False)

    async def check_secret(args: Any = None, ctx: Any = None) -> ToolResult:
        if ctx is not None and ctx.answer is not None and ctx.answer.ok:
            return ToolResult("secret-token", False)
        return pending(kind="approval", prompt="approve secret access?")

    impl = {"lookup": lookup, "check_secret": check_secret}
    return {
        name: Tool(
            name=name,
            description=entry.get("behavior", name),
            input_schema=entry["inputSchema"],
            source="native",
            execute=impl[name],
        )
        for name, entry in spec.items()
    }


def transitions_of(trace: list[str], handle_id: str) -> list[str]:
    """The ordered `from→to` pairs of one handle's trace lines."""
    out = []
    for line in trace:
        m = _TRANSITION.match(line)
        if m and m["id"] == handle_id:
            out.append(f"{m['src']}→{m['dst']}")
    return out


def assert_transitions(trace: list[str], expected: dict[str, list[str]]) -> None:
    for handle_id, want in expected.items():
        got = transitions_of(trace, handle_id)
        assert len(got) == len(want), f"{handle_id}: {got} != {want}"
        for g, w in zip(got, want, strict=True):
            assert g.endswith(w) if w.startswith("→") else g == w, f"{handle_id}: {got} != {want}"


class FixtureRun:
    """One fixture (or one scenario of it) wired to a runtime on a virtual clock."""

    def __init__(
        self,
        fx: dict[str, Any],
        scenario: Optional[dict[str, Any]] = None,
        *,
        rendezvous: Optional[dict[str, int]] = None,
        **runtime_opts: Any,
    ) -> None:
        scenario = scenario or {}
        self.fx = fx
        self.mock = MockLLM(fx["mockLLM"], rendezvous=rendezvous)
        self.clock = VirtualClock()
        self.close_order: list[str] = []
        self.waiters: dict[str, asyncio.Future[TaskResult]] = {}
        registry_spec = deep_merge(fx["registry"], scenario.get("registryOverride") or {})
        tools = fixture_tools(fx.get("tools") or {})
        registry = {
            name: AgentDef(
                name=name,
                description=entry.get("does", ""),
                system_prompt=entry.get("soul", ""),
                model=entry["model"],
                budget=budget_from(entry.get("budget")),
                tools=[tools[t] for t in entry.get("tools", [])] or None,
                wait_for=auto_approve if entry.get("waitFor") else None,
                task_targets=list(entry.get("team", [])),
                on_close=lambda h, reason: self.close_order.append(h.id),
            )
            for name, entry in registry_spec.items()
        }
        opts = {_RUNTIME_KEYS[k]: v for k, v in (scenario.get("runtime") or {}).items()}
        opts.update(runtime_opts)
        self.rt = AgentRuntime(
            registry=registry,
            transport=self.mock,
            clock=self.clock,
            llm={"style": fx["mockLLM"].get("style", "openai")},
            **opts,
        )
        self.named: dict[str, Handle] = {"root": self.rt.root}

    # -- handles

    def find(self, handle_id: str) -> Optional[Handle]:
        """A handle by full id; failing that, by the fixture's per-def numbering.

        The spec pins ids to ONE seq counter per parent shared by all defs (`root/peer.1`,
        `root/slow.2`); the subagent-budgets fixture names its second root child
        `root/looper.1`, i.e. it numbers per def. An id that does not exist is therefore read
        as "the n-th child of that def" at each level.
        """
        stack = [self.rt.root]
        while stack:
            h = stack.pop()
            if h.id == handle_id:
                return h
            stack.extend(h.children)
        node: Optional[Handle] = self.rt.root
        for segment in handle_id.split("/")[1:]:
            name, _, nth = segment.rpartition(".")
            same_def = [c for c in node.children if c.defn.name == name] if node else []
            node = same_def[int(nth) - 1] if nth.isdigit() and 0 < int(nth) <= len(same_def) else None
        return node

    def handle(self, ref: str, parent: Optional[str] = None) -> Handle:
        if ref in self.named:
            return self.named[ref]
        if ref.startswith("root/"):
            found = self.find(ref)
            assert found is not None, f"no handle {ref}"
            return found
        spawned = self.rt.spawn(self.handle(parent or "root"), ref)
        assert not isinstance(spawned, SpawnError), spawned
        self.named[ref] = spawned
        return spawned

    def build_tree(self, paths: list[str]) -> None:
        for path in paths:
            *up, name = path.split("/")
            parent = self.named["/".join(up)] if up else self.rt.root
            spawned = self.rt.spawn(parent, name)
            assert not isinstance(spawned, SpawnError), spawned
            self.named[path] = spawned

    # -- driving

    async def run_entry(self, entry: str, prompt: str) -> TaskResult:
        h = self.handle(entry)
        assert self.rt.wake(h, prompt).ok
        return await self.rt.wait(h)

    def _blocks(self, h: Handle) -> bool:
        return any(rule.get("blocksUntil") for rule in self.mock.scripts.get(h.defn.model, []))

    async def step(self, step: dict[str, Any]) -> Any:
        """Run one fixture step; returns what its `expect` should be checked against."""
        if "spawn" in step:
            s = step["spawn"]
            spawned = self.rt.spawn(self.handle(s.get("parent", "root")), s["def"], budget_from(s.get("budget")))
            if isinstance(spawned, Handle):
                self.named.setdefault(s["def"], spawned)
            return spawned
        if "post" in step:
            s = step["post"]
            item = InboxItem(s.get("from", "external"), s.get("channel", "external"), s["text"])
            return self.rt.post(self.handle(s["handle"]), item)
        if "wake" in step:
            s = step["wake"]
            h = self.handle(s["handle"])
            outcome = self.rt.wake(h, s.get("prompt"))
            self.waiters[h.id] = asyncio.ensure_future(self.rt.wait(h))
            await asyncio.sleep(0)  # one loop iteration: the new waiter task starts and registers
            return outcome
        if "wakeWait" in step:
            s = step["wakeWait"]
            h = self.handle(s["handle"])
            assert self.rt.wake(h, s.get("prompt")).ok
            return await self.rt.wait(h)
        if "awaitState" in step:
            s = step["awaitState"]
            h = self.handle(s["handle"])
            assert h.state == s["state"], f"{h.id} is {h.state}, expected {s['state']}"
            if s["state"] == "running" and self._blocks(h):
                # The handle's model blocks: wait until its LLM request is really in flight.
                assert await asyncio.to_thread(self.mock.blocked.wait, 10)
            return h
        if "interrupt" in step:
            h = self.handle(step["interrupt"]["handle"])
            self.rt.interrupt(h)
            return h
        if "closeRoot" in step:
            self.trace_before_close = list(self.rt.trace)
            await self.rt.close(self.rt.root, force=True)
            return None
        raise AssertionError(f"unknown fixture step {step}")

    async def teardown(self) -> None:
        self.mock.release()
        await self.rt.close(self.rt.root, force=True)
