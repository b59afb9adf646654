"""A host in a process of its own: find a run's parked request through visibility and answer it.

`python -m support.temporal_host ADDRESS TASK_QUEUE RUN_ID` (from `tests/`): lists the fleet's
pending requests (`TemporalHost.pending()`, polling with a bound until the run's request shows),
answers it ok and prints one JSON line — the listed item and the result the answer returned.
It knows no agent definitions and no model: the workers have them.
"""

from __future__ import annotations

import asyncio
import dataclasses
import json
import os
import sys
import time

from toolnexus import Answer
from toolnexus.temporal import TemporalHost


async def main(address: str, queue: str, run_id: str) -> None:
    host = await TemporalHost.connect(address, task_queue=queue)
    deadline = time.monotonic() + 20
    while True:
        mine = [p for p in await host.pending() if p.run_id == run_id]
        if mine or time.monotonic() > deadline:
            break
        await asyncio.sleep(0.1)
    if not mine:
        print(json.dumps({"error": f"no pending request listed for {run_id}"}))
        return
    item = mine[0]
    result = await host.answer(Answer(id=item.request.id, ok=True))
    print(json.dumps({"listed": {"run_id": item.run_id, "request": dataclasses.asdict(item.request),
                                 "path": item.path},
                      "result": {**result.to_record(), "run_id": result.run_id}}))


if __name__ == "__main__":
    code = 0
    try:
        asyncio.run(main(*sys.argv[1:4]))
    except BaseException:
        import traceback

        traceback.print_exc()
        code = 1
    # A short-lived process that used a Temporal client can crash in interpreter finalization
    # (temporalio's Rust runtime threads outlive the interpreter: temporalio/sdk-python#300), as
    # `toolnexus worker` knows too: leave without finalizing, once the output is flushed.
    sys.stdout.flush()
    sys.stderr.flush()
    os._exit(code)
