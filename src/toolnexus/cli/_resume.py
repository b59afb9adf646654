"""`toolnexus resume RUN --store URL --agents MODULE:ATTR ...`: continue a run nobody is running.

For a run whose process died or was stopped (Ctrl-C in `toolnexus answer`, a worker stopped mid-
run: status `running`, no live holder), the run is restored here and what was running continues
from its last commit under the crash rules (a side-effecting tool call that started and recorded
nothing becomes an `in_doubt` request, asked of a person rather than run again). For a run whose
entry agent was interrupted (status `interrupted`), that agent is woken again with `--prompt`
(default `continue`). A run waiting on a request is left waiting (answer it with `toolnexus
answer`); a run that ended is printed as it ended. `--takeover` takes a run whose holder is
alive (it gets `LeaseLost` at its next write): use it only when you know that process is stuck.

stdout: the entry agent's text (`--json`: `{"status", "text", "run_id", "turns", "total_tokens",
"pending"}`). Exit 0 when the run finished; 3 when it waits on a request (its prompt printed) or
ended incomplete; 1 when a live process is running it, for an unknown run or a store that is
down; 2 for a bad flag or missing agents. Ctrl-C hands the run back as it was (exit 130).
"""

from __future__ import annotations

import asyncio
import dataclasses
import json
from typing import Any

from ._common import CliExit, Console
from ._flags import Flag
from ._inbox import EXIT_WAITING, RUN_STORE_FLAG, open_run_store
from ._lifecycle import AGENTS_FLAG, RUN_FLAG, RUN_MODEL_FLAGS, llm_of, load_agents, transport_of

NAME = "resume"
SUMMARY = "continue an interrupted or crashed durable run"
FLAGS = [
    RUN_FLAG,
    RUN_STORE_FLAG,
    AGENTS_FLAG,
    *RUN_MODEL_FLAGS,
    Flag("prompt", "TEXT", "what an interrupted entry agent is woken with (default continue)"),
    Flag("takeover", None, "take the run even from a live process"),
    Flag("json", None, "print the result as one JSON object"),
]


def result_out(final: Any, opts: dict[str, Any], console: Console) -> int:
    """Print a run's result the way `answer` does; the exit code."""
    if opts.get("json"):
        console.out(json.dumps({"status": final.status, "text": final.text, "run_id": final.run_id,
                                "turns": final.turns, "total_tokens": final.total_tokens,
                                "pending": dataclasses.asdict(final.pending) if final.pending else None}))
    else:
        console.out(final.text)
        if final.status != "done":
            console.err(f"status: {final.status}")
    return 0 if final.status == "done" else EXIT_WAITING


async def execute(opts: dict[str, Any], console: Console) -> int:
    from ..agents import resume_run
    from ..durable import RestoreError, RunInProgress, RunNotFound

    run_id = opts.get("run")
    if not run_id:
        raise CliExit(2, "error: toolnexus resume needs the run id: toolnexus resume RUN --store URL --agents ...")
    agents = load_agents(opts, NAME)
    llm = llm_of(opts, console, NAME)
    transport = transport_of(opts)
    store = open_run_store(opts)
    try:
        async with store:
            final = await resume_run(store, run_id, agents=agents, llm=llm, transport=transport,
                                     takeover=bool(opts.get("takeover")), prompt=opts.get("prompt") or "continue")
    except (RunInProgress, RunNotFound, RestoreError) as exc:
        raise CliExit(1, f"error: {exc}") from None
    except asyncio.CancelledError:
        console.err(f"interrupted: run {run_id} was handed back as it was (status running); continue it with "
                    f"toolnexus resume {run_id}, or let a worker do it")
        raise
    return result_out(final, opts, console)
