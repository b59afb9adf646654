"""`toolnexus workers --store URL`: the worker processes of a fleet, from their heartbeat rows.

stdout: one line per worker, newest beat first, tab-separated: `<name>\\t<status>\\t<alive|dead>
\\t<host>:<pid>\\t<last beat, as an age>\\t<active>/<concurrency>\\t<agents>`. `alive`: its beat is
within the lease TTL (`--lease-ttl`, default 30 s) and, on this host, its process still runs.
`--json` prints one array of `{"id", "name", "status", "alive", "host", "pid", "agents",
"started_at", "seen_at", "info"}`. No model is needed.
"""

from __future__ import annotations

import json
from datetime import UTC, datetime
from typing import Any

from ._common import CliExit, Console
from ._flags import Flag
from ._inbox import RUN_STORE_FLAG, open_run_store
from ._lifecycle import age

NAME = "workers"
SUMMARY = "list the workers serving a durable store (toolnexus worker --store)"
FLAGS = [RUN_STORE_FLAG, Flag("lease-ttl", "SECONDS", "the fleet's lease TTL (default 30)"),
         Flag("json", None, "print one JSON array instead of lines")]


async def execute(opts: dict[str, Any], console: Console) -> int:
    from ..durable import DEFAULT_LEASE_TTL, StoreError

    try:
        ttl = float(opts.get("lease_ttl") or DEFAULT_LEASE_TTL)
    except ValueError:
        raise CliExit(2, f"error: --lease-ttl takes seconds (got {opts.get('lease_ttl')!r})") from None
    store = open_run_store(opts)
    async with store:
        try:
            rows = await store.fleet().workers(worker_ttl=ttl)
        except StoreError as exc:
            raise CliExit(1, f"error: {exc}") from None
    if opts.get("json"):
        console.out(json.dumps([{"id": w.id, "name": w.name, "status": w.status, "alive": w.alive, "host": w.host,
                                 "pid": w.pid, "agents": w.agents, "started_at": w.started_at, "seen_at": w.seen_at,
                                 "info": w.info} for w in rows]))
        return 0
    for w in rows:
        seen = datetime.fromtimestamp(w.seen_at, UTC)
        load = f"{w.info.get('active', 0)}/{w.info.get('concurrency', '?')}"
        console.out("\t".join((w.name, w.status, "alive" if w.alive else "dead", f"{w.host}:{w.pid}", age(seen), load,
                               ",".join(w.agents))))
    return 0
