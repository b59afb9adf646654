"""`toolnexus runs --store URL`: the runs in a durable store, a page at a time.

Filters: `--status S` (repeatable: `running`, `pending`, `done`, `interrupted`, `queued`,
`cancelled`, ...), `--agent NAME` (the entry agent), `--older-than 1h` (created at least that
long ago), `--kind agents|conversation`. Paged by default: `--limit N` runs (default 50), newest
created first; when there are more, stderr says how to get the next page (`--after CURSOR`);
`--all` prints every page.

stdout: one line per run, tab-separated: `<run id>\\t<status>\\t<entry agent>\\t<updated>\\t<holder>`
(`updated` as an age, `12s`/`5m`/`3h`/`2d`; `holder` the process running it, `-` for none).
`--json` prints one object, `{"runs": [{"run_id", "status", "entry_agent", "kind", "created_at",
"updated_at", "holder", "lease_expires"}], "next": CURSOR|null}` (with `--all`: every run, `next`
null). An empty store prints nothing (exit 0). No model is needed.
"""

from __future__ import annotations

import json
from typing import Any

from ._common import CliExit, Console
from ._flags import Flag
from ._inbox import RUN_STORE_FLAG, open_run_store
from ._lifecycle import age, duration, iso

NAME = "runs"
SUMMARY = "list the runs of a durable store (filter by status, agent, age; paged)"
FLAGS = [
    RUN_STORE_FLAG,
    Flag("status", "STATUS", "only runs in this status (repeatable)", repeat=True),
    Flag("agent", "NAME", "only runs of this entry agent"),
    Flag("kind", "KIND", "only runs of this kind", choices=("agents", "conversation")),
    Flag("older-than", "DURATION", "only runs created at least this long ago (90s, 15m, 12h, 30d)"),
    Flag("limit", "N", "runs per page (default 50)", default="50"),
    Flag("after", "CURSOR", "the page after this cursor (printed with the page before)"),
    Flag("all", None, "every page, not just the first"),
    Flag("json", None, "print one JSON object instead of lines"),
]


def limit_of(opts: dict[str, Any]) -> int:
    try:
        limit = int(opts.get("limit") or 50)
    except ValueError:
        limit = 0
    if limit < 1:
        raise CliExit(2, f"error: --limit takes a whole number >= 1 (got {opts.get('limit')!r})")
    return limit


def summary_json(s: Any) -> dict[str, Any]:
    return {"run_id": s.run_id, "status": s.status, "entry_agent": s.entry_agent, "kind": s.kind,
            "created_at": iso(s.created_at), "updated_at": iso(s.updated_at), "holder": s.holder,
            "lease_expires": iso(s.lease_expires)}


async def execute(opts: dict[str, Any], console: Console) -> int:
    older = duration(opts.get("older_than"), "older-than")
    limit = limit_of(opts)
    store = open_run_store(opts)
    statuses = list(opts.get("status") or []) or None
    found: list[Any] = []
    after = opts.get("after")
    async with store:
        while True:
            try:
                page = await store.runs(statuses, limit=limit, after=after, agent=opts.get("agent"),
                                        kind=opts.get("kind"), older_than=older)
            except ValueError as exc:
                raise CliExit(2, f"error: {exc}") from None
            if not opts.get("json"):
                for s in page:
                    console.out("\t".join((s.run_id, s.status, s.entry_agent or "-", age(s.updated_at),
                                           s.holder or "-")))
            found += page
            after = page.next
            if not opts.get("all") or after is None:
                break
    if opts.get("json"):
        console.out(json.dumps({"runs": [summary_json(s) for s in found], "next": after}))
    elif after is not None:
        console.err(f"more: toolnexus runs ... --after {after}")
    return 0
