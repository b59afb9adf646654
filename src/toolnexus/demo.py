"""`make demo`: an agent team whose child suspends for approval, answered by the host, then resumed.

A `release-manager` delegates to a `deployer` through the `task` tool. The deployer's `deploy`
tool needs a human's approval and nobody in the team has a `wait_for`, so the suspension travels
up to the root: `Agent.run` returns `status="pending"` with the prompt and the live runtime. The
demo plays the human, answers, and `runtime.resume(answer)` replays the deployer's turn from its
checkpoint and cascades up to the release manager, whose `task` call reattaches to the same
child. The transition trace and the final text are printed.

The model is a scripted function behind the in-process transport: no network, no API key. It is
stateless — each reply is decided by the transcript it is shown, exactly like a real model.
"""

from __future__ import annotations

import asyncio
import dataclasses
import json
from typing import Any, Optional

from .agents import agent
from .types import Answer, Tool, ToolContext, ToolResult, pending

__all__ = ["main", "run_demo"]

USAGE = {"prompt_tokens": 12, "completion_tokens": 4}


def _tool_results(messages: list[dict[str, Any]]) -> list[str]:
    return [m.get("content") or "" for m in messages if m.get("role") == "tool"]


def scripted_model(request: dict[str, Any]) -> dict[str, Any]:
    """The demo's model: one tool call, then a final answer built from the tool's result."""
    results = _tool_results(request["messages"])
    if request["model"] == "demo-release-manager":
        if not results:
            call = {"name": "task", "arguments": {"agent": "deployer", "prompt": "deploy build 42 to production"}}
            return {"tool_calls": [call], "usage": USAGE}
        return {"content": f"Release finished. Deployer reports: {results[-1]}", "usage": USAGE}
    if not any(r.startswith("deployed") for r in results):
        return {"tool_calls": [{"name": "deploy", "arguments": {"build": 42, "env": "production"}}], "usage": USAGE}
    return {"content": f"Build 42 is live ({results[-1]}).", "usage": USAGE}


async def deploy(args: Optional[dict[str, Any]] = None, ctx: Optional[ToolContext] = None) -> ToolResult:
    """Deploy a build — only after a human said yes (suspend before the irreversible step)."""
    args = args or {}
    answer = ctx.answer if ctx is not None else None
    if answer is None:
        return pending(kind="approval", prompt=f"Deploy build {args.get('build')} to {args.get('env')}?")
    if not answer.ok:
        return ToolResult("deployment declined", is_error=True)
    approver = (answer.data or {}).get("by", "someone")
    return ToolResult(f"deployed build {args.get('build')} to {args.get('env')}, approved by {approver}", False)


async def run_demo(out: Any = print) -> str:
    """Run the scenario, printing as it goes; returns the final text."""
    deploy_tool = Tool(
        name="deploy",
        description="Deploy a build to an environment (needs approval).",
        input_schema={"type": "object", "properties": {"build": {"type": "number"}, "env": {"type": "string"}},
                      "required": ["build", "env"]},
        source="native",
        execute=deploy,
    )
    deployer = agent("deployer", does="deploys builds", model="demo-deployer", uses={"tools": [deploy_tool]})
    manager = agent("release-manager", does="runs releases", model="demo-release-manager", team=[deployer])

    out("== 1. run the team: release-manager delegates to deployer")
    first = await manager.run("Ship build 42.", in_process=scripted_model)
    out(f"status: {first.status}")
    assert first.pending is not None and first.runtime is not None
    out(f"pending request: {json.dumps(dataclasses.asdict(first.pending))}")
    out(f"the host is asked: {first.pending.prompt!r}  (from {'/'.join(first.pending.data['path'])})")

    out("\n== 2. the host answers; resume replays from the checkpoint and cascades up")
    answer = Answer(id=first.pending.id, ok=True, data={"by": "demo operator"})
    final = await first.runtime.resume(answer)
    out(f"status: {final.status} | turns: {final.turns} | total tokens: {final.total_tokens}")

    out("\n== 3. transition trace")
    for line in first.runtime.trace:
        out(f"  {line}")
    await first.runtime.close(first.runtime.root)

    out("\n== final text")
    out(final.text)
    return final.text


def main() -> None:
    asyncio.run(run_demo())


if __name__ == "__main__":
    main()
