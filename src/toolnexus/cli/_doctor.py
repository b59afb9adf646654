"""`toolnexus doctor --store URL`: find the stored runs that cannot be read, and take them out of service.

Reads every run and the whole answer ledger of the store (`store.check()`), each row on its own,
and lists what cannot be read — cut mid-JSON, not JSON, the wrong shape.

stdout: one line per damaged row, `<run id>\\t<damaged|quarantined>\\t<request id or ->\\t<row>\\t<why>`
(`--json`: one array of `{"run_id", "quarantined", "rows": [{"request_id", "part", "reason"}]}`).
Exit 0 when nothing is damaged (or everything damaged is quarantined), 1 when a damaged run is
still in service.

`--quarantine` takes every damaged run out of service (`store.quarantine`): its status and its
waiting requests' become `quarantined` — the inbox stops listing them, an answer or a restore is
refused — and nothing is deleted: every row stays as it was, the damaged raw text included (a
file store moves an unreadable file, unchanged, under `quarantine/`). `--release RUN` puts one
back exactly as it was, after you repaired it. No model is needed.
"""

from __future__ import annotations

import json
from typing import Any

from ._common import Console
from ._flags import Flag
from ._inbox import RUN_STORE_FLAG, open_run_store

NAME = "doctor"
SUMMARY = "list stored runs that cannot be read; quarantine them (nothing is deleted)"
FLAGS = [RUN_STORE_FLAG,
         Flag("quarantine", None, "take every damaged run out of service (its rows are kept as they are)"),
         Flag("release", "RUN_ID", "put a quarantined run back in service, as it was"),
         Flag("json", None, "print one JSON array instead of lines")]


async def execute(opts: dict[str, Any], console: Console) -> int:
    store = open_run_store(opts)
    async with store:
        if opts.get("release"):
            await store.unquarantine(opts["release"])
            console.out(f"released {opts['release']}")
            return 0
        found = await store.check()
        if opts.get("quarantine"):
            for run in found:
                if not run.quarantined and run.run_id:
                    await store.quarantine(run.run_id)
                    console.out(f"quarantined {run.run_id}")
            found = await store.check()
    if opts.get("json"):
        console.out(json.dumps([{"run_id": run.run_id, "quarantined": run.quarantined,
                                 "rows": [{"request_id": r.request_id, "part": r.part, "reason": r.reason}
                                          for r in run.rows]} for run in found]))
    elif not opts.get("quarantine"):
        for run in found:
            state = "quarantined" if run.quarantined else "damaged"
            for row in run.rows:
                console.out("\t".join((run.run_id, state, row.request_id or "-", row.part, row.reason)))
            if not run.rows:  # quarantined with nothing damaged (an operator's choice)
                console.out("\t".join((run.run_id, state, "-", "-", "-")))
    return 1 if any(not run.quarantined for run in found) else 0
