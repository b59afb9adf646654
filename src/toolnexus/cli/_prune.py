"""`toolnexus prune --store URL --older-than 30d`: delete runs that ended long ago.

Deletes every run in a final status (`done`, `error`, `incomplete`, `interrupted`, `closed`,
`timeout`, `cancelled`; `--status` to narrow it, repeatable) whose last update is at least
`--older-than` old, with all it holds — transcripts, records, answered requests, trace — plus
failed work items and silent worker rows as old. A parked or running run is never pruned.
Without `--older-than`, the store's retention (`?retention=30d` in its URL) is the age.

stdout: `pruned N run(s)`. Exit 0; 2 without `--older-than` on a store with no retention.
"""

from __future__ import annotations

from typing import Any

from ._common import CliExit, Console
from ._flags import Flag
from ._inbox import RUN_STORE_FLAG, open_run_store
from ._lifecycle import duration

NAME = "prune"
SUMMARY = "delete runs that ended at least --older-than ago (e.g. 30d; default the store's ?retention=)"
FLAGS = [
    RUN_STORE_FLAG,
    Flag("older-than", "DURATION", "how long ago a run must have ended (90s, 15m, 12h, 30d, 2w; default the store's "
         "?retention=)"),
    Flag("status", "STATUS", "only runs in this final status (repeatable; default every final one)", repeat=True),
]


async def execute(opts: dict[str, Any], console: Console) -> int:
    from ..durable import FINAL_STATUSES

    older = duration(opts.get("older_than"), "older-than")
    statuses = list(opts.get("status") or []) or list(FINAL_STATUSES)
    live = sorted(set(statuses) - set(FINAL_STATUSES))
    if live:
        raise CliExit(2, f"error: --status {', '.join(live)} is not a final status; prune deletes only runs in "
                         f"{', '.join(FINAL_STATUSES)}")
    store = open_run_store(opts)
    if older is None and store.retention is None:
        raise CliExit(2, "error: toolnexus prune needs --older-than DURATION (e.g. --older-than 30d), or a store "
                         "URL with a retention (?retention=30d)")
    async with store:
        deleted = await store.prune(older_than=older, statuses=statuses)
    console.out(f"pruned {deleted} run(s)")
    return 0
