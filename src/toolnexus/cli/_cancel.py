"""`toolnexus cancel RUN --store URL [--force]`: cancel a durable run.

Its waiting requests are withdrawn (an answer to them is refused as withdrawn) and it does
nothing more; it stays listed with status `cancelled` until pruned. A run queued but not started
is simply cancelled. A run a live process is running right now is asked to stop: a worker of the
fleet stops it at its next heartbeat (stdout `requested`); `--force` takes it from that process
at once instead (its next write fails with `LeaseLost`). No model and no agent definitions are
needed.

stdout: the status the run is left in (`cancelled`, `requested`, or the final status of a run
that had already ended). Exit 0; 1 for an unknown run or a store that is down.
"""

from __future__ import annotations

from typing import Any

from ._common import CliExit, Console
from ._flags import Flag
from ._inbox import RUN_STORE_FLAG, open_run_store
from ._lifecycle import RUN_FLAG

NAME = "cancel"
SUMMARY = "cancel a durable run (withdraw its requests; stop it if a worker runs it)"
FLAGS = [RUN_FLAG, RUN_STORE_FLAG, Flag("force", None, "take the run from the live process running it")]


async def execute(opts: dict[str, Any], console: Console) -> int:
    from ..durable import RunNotFound

    if not opts.get("run"):
        raise CliExit(2, "error: toolnexus cancel needs the run id: toolnexus cancel RUN --store URL")
    store = open_run_store(opts)
    async with store:
        try:
            status = await store.cancel_run(opts["run"], force=bool(opts.get("force")))
        except RunNotFound as exc:
            raise CliExit(1, f"error: {exc}") from None
    console.out(status)
    if status == "requested":
        console.err(f"run {opts['run']} is running in a live process: a worker stops it at its next heartbeat "
                    "(--force takes it now)")
    return 0
