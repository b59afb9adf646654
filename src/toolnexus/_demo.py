"""`make demo`: a durable agent run that parks in one process and is answered from another.

A `release-manager` delegates to a `deployer` through the `task` tool. The deployer's `deploy`
tool needs a human's approval and nobody in the team has a `wait_for`, so the run parks.

- **Process 1** (`python -m toolnexus._demo start --store URL`) runs the team on a SQLite store
  until the deployer's tool asks for approval, prints the pending request, and exits. Nothing is
  kept in memory: everything the run needs is in the store.
- **Process 2** (`python -m toolnexus._demo answer --store URL`) lists the store's inbox
  (`store.pending()`), answers the request, and `AgentRuntime.restore` + `resume` continues the
  deployer at the halted call (the model is not asked to repeat it) and cascades up to the
  release manager, whose `task` call reattaches to the same child. It prints the trace, the
  counters and the final text.

`python -m toolnexus._demo` runs both steps as two real processes on a temporary SQLite file (or
on `TOOLNEXUS_DEMO_STORE` if set). The model is a scripted function behind the in-process
transport — no server, no API key, no network. It is stateless: each reply is decided by the
transcript it is shown, exactly like a real model, so any process can serve any step.
"""

from __future__ import annotations

import argparse
import asyncio
import os
import subprocess
import sys
import tempfile
from typing import Any, Optional

from .agents import AgentRuntime, agent
from .types import Answer, Tool, ToolContext, ToolResult, pending

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


DEPLOY = Tool(
    name="deploy",
    description="Deploy a build to an environment (needs approval).",
    input_schema={"type": "object", "properties": {"build": {"type": "number"}, "env": {"type": "string"}},
                  "required": ["build", "env"]},
    source="native",
    execute=deploy,
)
DEPLOYER = agent("deployer", does="deploys builds", model="demo-deployer", uses={"tools": [DEPLOY]})
TEAM = agent("release-manager", does="runs releases", model="demo-release-manager", team=[DEPLOYER])
RUN_ID = "release-42"


async def start(url: str, out: Any = print) -> None:
    """Process 1: run the team until it parks; everything it needs is in the store."""
    from .stores import open_store

    async with open_store(url) as store:
        first = await TEAM.run("Ship build 42.", in_process=scripted_model, store=store, run_id=RUN_ID)
        out(f"status: {first.status} (run {first.run_id!r} parked in {store.url})")
        assert first.pending is not None and first.runtime is not None
        out(f"the host is asked: {first.pending.prompt!r}  (from {'/'.join((first.pending.data or {})['path'])})")
        out(f"tokens so far: {first.total_tokens}")
        await first.runtime.aclose()  # the lease is given back; this process can go


async def answer(url: str, out: Any = print) -> str:
    """Process 2: read the inbox, answer, restore and resume; print what happened."""
    from .stores import open_store

    async with open_store(url) as store:
        inbox = await store.pending()
        for item in inbox:
            out(f"inbox: run {item.run_id!r} asks {item.request.prompt!r} (kind {item.request.kind}, "
                f"from {'/'.join(item.path or [])})")
        request = inbox[0].request
        rt = await AgentRuntime.restore(store, inbox[0].run_id, agents=[TEAM], in_process=scripted_model)
        final = await rt.resume(Answer(id=request.id, ok=True, data={"by": "demo operator"}))
        out(f"status: {final.status} | turns: {final.turns} | total tokens: {final.total_tokens}")
        out("\n== transition trace (both processes, from the store)")
        for line in rt.trace:
            out(f"  {line}")
        await rt.close(rt.root)
        out(f"\nruns: {[(s.run_id, s.status) for s in await store.runs()]}  pending: {len(await store.pending())}")
        out("\n== final text")
        out(final.text)
        return final.text


def _step(command: str, url: str) -> None:
    """Run one step as its own process and relay its output."""
    done = subprocess.run([sys.executable, "-m", "toolnexus._demo", command, "--store", url],
                          capture_output=True, text=True, timeout=120)
    sys.stdout.write(done.stdout)
    if done.returncode != 0:
        sys.stderr.write(done.stderr)
        raise SystemExit(f"demo step {command!r} failed with exit code {done.returncode}")


def run_demo() -> None:
    """Both steps, as two processes sharing one store."""
    with tempfile.TemporaryDirectory(prefix="toolnexus-demo-") as folder:
        url = os.environ.get("TOOLNEXUS_DEMO_STORE") or f"sqlite:///{os.path.join(folder, 'runs.db')}"
        print(f"== process 1: run the team (release-manager delegates to deployer) on {url}")
        _step("start", url)
        print("\n== process 2: a new process lists the inbox, answers, and the run resumes from the store")
        _step("answer", url)


def main(argv: Optional[list[str]] = None) -> None:
    parser = argparse.ArgumentParser(prog="python -m toolnexus._demo", description=__doc__.split("\n")[0])
    parser.add_argument("command", nargs="?", choices=["start", "answer"], help="one step (default: both)")
    parser.add_argument("--store", help="store URL for a single step, e.g. sqlite:///runs.db")
    opts = parser.parse_args(argv)
    if opts.command is None:
        run_demo()
        return
    if not opts.store:
        parser.error("a single step needs --store URL")
    asyncio.run(start(opts.store) if opts.command == "start" else answer(opts.store))



if __name__ == "__main__":
    main()
