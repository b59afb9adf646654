"""Small builders for agent-runtime tests: a scripted model, defs, tools and a runtime on a
virtual clock. Everything real except the model behind the transport seam."""

from __future__ import annotations

from typing import Any

from toolnexus.agents import AgentDef, AgentRuntime
from toolnexus.agents.clock import VirtualClock
from toolnexus.types import Tool, ToolResult, pending

from .agent_fixture import fixture_tools
from .mock_llm import MockLLM

__all__ = [
    "USAGE",
    "scripted",
    "make_runtime",
    "secret_tool",
    "lookup_tool",
    "gate_tool",
    "delegate",
    "text",
    "calls",
    "until",
]

USAGE = {"prompt_tokens": 30, "completion_tokens": 10, "total_tokens": 40}


def scripted(scripts: dict[str, list[dict[str, Any]]], **kw: Any) -> MockLLM:
    return MockLLM({"style": "openai", "usagePerCall": USAGE, "scripts": scripts}, **kw)


def make_runtime(defs: list[AgentDef], transport: Any = None, **opts: Any) -> AgentRuntime:
    opts.setdefault("clock", VirtualClock())
    return AgentRuntime(registry={d.name: d for d in defs}, transport=transport, **opts)


def secret_tool() -> Tool:
    return fixture_tools({"check_secret": {"inputSchema": {"type": "object", "properties": {}}}})["check_secret"]


def lookup_tool() -> Tool:
    return fixture_tools({"lookup": {"inputSchema": {"type": "object", "properties": {"q": {"type": "string"}}}}})[
        "lookup"
    ]


def gate_tool(log: list[Any] | None = None) -> Tool:
    """`gate(x)`: suspends with "approve <x>?" until answered; records every execution."""

    async def execute(args: Any = None, ctx: Any = None) -> ToolResult:
        x = (args or {}).get("x")
        answer = getattr(ctx, "answer", None)
        if log is not None:
            log.append((x, answer.id if answer is not None else None))
        if answer is not None and answer.ok:
            return ToolResult(f"gated {x} ok", False)
        return pending(kind="approval", prompt=f"approve {x}?")

    schema = {"type": "object", "properties": {"x": {"type": "number"}}}
    return Tool(name="gate", description="a gated action", input_schema=schema, source="native", execute=execute)


def calls(*pairs: tuple[str, dict[str, Any]]) -> list[dict[str, Any]]:
    return [{"name": n, "args": a} for n, a in pairs]


def delegate(agent: str, prompt: str, final: str) -> list[dict[str, Any]]:
    """A parent script: delegate once with `task`, then answer `final` (a template)."""
    return [
        {"whenToolMsgs": 0, "toolCalls": calls(("task", {"agent": agent, "prompt": prompt}))},
        {"whenToolMsgs": ">=1", "text": final},
    ]


def text(value: str) -> list[dict[str, Any]]:
    return [{"always": True, "text": value}]


async def until(predicate: Any, *, max_yields: int = 1000) -> None:
    """Yield to the event loop (no time passes) until `predicate()` holds; fail loudly otherwise."""
    import asyncio

    for _ in range(max_yields):
        if predicate():
            return
        await asyncio.sleep(0)
    raise AssertionError(f"condition never held after {max_yields} loop iterations: {predicate}")
