"""What durability costs: per-turn checkpoints, restore-and-resume in a fresh process, stored bytes.

Scenarios (an agent whose model — a loopback HTTP mock with keep-alive, like a local provider —
asks for one tool call per turn, then answers):

1. **Run p50 by store** — the same 10-turn run with no store, on `memory:`, SQLite and (when
   `TOOLNEXUS_TEST_POSTGRES` is set) PostgreSQL, every round running each row once in its own
   shuffled order (seeded: a drift in the machine's speed hits all rows alike, and no row always
   runs right after the same neighbour — a rotation keeps the cyclic order, and so always ran
   `memory:` just after the store-less row, on cold durable code; `sqlite` is the default,
   `synchronous=critical` — the commits exactly-once rests on fsynced — and `sqlite normal` the
   same with `?synchronous=normal`, no fsync: the difference is what that durability costs);
   p50/p95 over the runs, the
   ratio to the memory store (of the p50s, and the median of the per-round ratios), and the
   per-turn checkpoint cost (store p50 − no-store p50) / turns; once with a side-effecting tool
   (each call's start is committed before it runs) and once with an idempotent one. Goal: SQLite
   p50 ≤ 1.25× the in-memory store's (the same durable bookkeeping, without the I/O). The row
   `memory: + hop` is `memory:` plus one no-op round trip to a worker thread per commit: what a
   store that commits on a thread of its own pays before any SQL (SQLite writes a plain-function
   tool's start on that tool's own thread instead, and so avoids it for those commits).
2. **Restore and resume in a fresh process** — a run parked on SQLite; a new process restores it,
   answers and finishes; wall time of that process (and of a process that only imports
   toolnexus.agents, for comparison).
3. **Stored bytes of a 500-turn run** on SQLite (the database file's growth, after a WAL
   checkpoint, over the same store empty — its tables and indexes take a page each whatever the
   runs) and in the file store, against the transcript's own JSON. Goal ≤ 2×.

Run: `.venv/bin/python benchmarks/durable.py [--runs N] [--json PATH]`; prints a table and writes
JSON (default `benchmarks/results/durable.json`).
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import platform
import random
import statistics
import subprocess
import sys
import tempfile
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any, Optional

from toolnexus import Answer, define_tool, pending
from toolnexus.agents import Budget, agent
from toolnexus.stores import open_store
from toolnexus.stores._memory import MemoryStore

HERE = Path(__file__).resolve().parent
HOP = "memory: + hop"  # the thread round-trip floor (see HopStore)
USAGE = {"prompt_tokens": 10, "completion_tokens": 5, "total_tokens": 15}


def _reply(payload: dict[str, Any], turns: int) -> dict[str, Any]:
    done = sum(1 for m in payload["messages"] if m.get("role") == "tool")
    if done < turns:
        call = {
            "id": f"c{done}",
            "type": "function",
            "function": {"name": "lookup", "arguments": json.dumps({"q": done})},
        }
        message = {"role": "assistant", "content": None, "tool_calls": [call]}
        return {"choices": [{"message": message, "finish_reason": "tool_calls"}], "usage": USAGE}
    return {"choices": [{"message": {"role": "assistant", "content": f"looked up {done} things"}}], "usage": USAGE}


SERVER = r"""
import json, socket, sys
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
sys.path.insert(0, sys.argv[2])
from durable import _reply
TURNS = int(sys.argv[1])

class Handler(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"

    def setup(self):
        super().setup()
        self.connection.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)  # no 40 ms delayed-ACK stall

    def do_POST(self):
        body = json.loads(self.rfile.read(int(self.headers["Content-Length"])))
        data = json.dumps(_reply(body, TURNS)).encode()
        self.send_response(200)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(data)))
        self.end_headers()
        self.wfile.write(data)

    def log_message(self, *args):
        pass

server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
print(server.server_port, flush=True)
server.serve_forever()
"""


class MockModel:
    """A keep-alive HTTP/1.1 loopback server answering OpenAI-style chat completions, in its own
    process (as a provider is), so it does not compete with the run for this process's GIL."""

    def __init__(self, turns: int) -> None:
        self.turns = turns
        self.proc: Optional[subprocess.Popen[str]] = None
        self.port = 0

    def __enter__(self) -> "MockModel":
        self.proc = subprocess.Popen([sys.executable, "-c", SERVER, str(self.turns), str(HERE)],
                                     stdout=subprocess.PIPE, text=True)
        assert self.proc.stdout is not None
        self.port = int(self.proc.stdout.readline())
        return self

    def __exit__(self, *exc: Any) -> None:
        assert self.proc is not None
        self.proc.terminate()
        self.proc.wait()

    @property
    def llm(self) -> dict[str, Any]:
        return {"base_url": f"http://127.0.0.1:{self.port}/v1", "style": "openai", "model": "m", "api_key": "bench"}


def lookup(q: int) -> str:
    """Look something up."""
    return f"result {q}"


def looker(turns: int, idempotent: bool = False) -> Any:
    return agent("looker", does="looks things up", uses={"tools": [define_tool(lookup, idempotent=idempotent)]},
                 budget=Budget(max_turns=turns + 2))


class HopStore(MemoryStore):
    """`memory:` plus one no-op round trip to a worker thread per commit — what handing a commit
    to a thread of the store's own costs before any SQL runs."""

    def __init__(self) -> None:
        super().__init__()
        self._pool = ThreadPoolExecutor(max_workers=1, thread_name_prefix="bench-hop")

    async def _hop(self) -> None:
        await asyncio.get_running_loop().run_in_executor(self._pool, _nothing)

    async def commit(self, *args: Any, **kwargs: Any) -> int:
        await self._hop()
        return await super().commit(*args, **kwargs)

    async def start_run(self, *args: Any, **kwargs: Any) -> int:
        await self._hop()
        return await super().start_run(*args, **kwargs)

    async def aclose(self) -> None:
        self._pool.shutdown()


def _nothing() -> None:
    return None


async def runs_by_store(turns: int, runs: int, pg: Optional[str]) -> dict[str, Any]:
    """p50/p95 of the same run per store, with a side-effecting tool (each call's start committed
    before it runs) and with an idempotent one (its start may ride the next commit)."""
    folder = tempfile.mkdtemp(prefix="tn-bench-")
    urls: dict[str, Optional[str]] = {"no store": None, "memory:": "memory:", HOP: "hop",
                                      "sqlite": f"sqlite:///{folder}/runs.db",
                                      "sqlite normal": f"sqlite:///{folder}/normal.db?synchronous=normal"}
    if pg:
        urls["postgresql"] = pg + ("&" if "?" in pg else "?") + "schema=tn_bench"
    agents = {"side-effecting tool": looker(turns), "idempotent tool": looker(turns, idempotent=True)}
    rows = [(store, tool) for tool in agents for store in urls]
    samples: dict[tuple[str, str], list[float]] = {row: [] for row in rows}
    with MockModel(turns) as model:
        stores = {k: HopStore() if u == "hop" else open_store(u) for k, u in urls.items() if u}
        for store in stores.values():
            await store.open()
        from toolnexus.client import Http11Transport

        transport = Http11Transport()
        for _ in range(3):  # warm-up
            for store_key, tool in rows:
                r = await agents[tool].run("go", llm=model.llm, transport=transport, store=stores.get(store_key))
                assert r.status == "done", r.text
        for i in range(runs):  # one run of every row per round, in a shuffled order (see the docstring)
            order = list(rows)
            random.Random(i).shuffle(order)
            for row in order:
                store_key, tool = row
                started = time.perf_counter()
                r = await agents[tool].run("go", llm=model.llm, transport=transport, store=stores.get(store_key))
                samples[row].append((time.perf_counter() - started) * 1000)
                assert r.status == "done"
        await transport.aclose()
        for store in stores.values():
            await store.aclose()
    if pg:
        import psycopg

        with psycopg.connect(pg, autocommit=True) as conn:
            conn.execute("DROP SCHEMA IF EXISTS tn_bench CASCADE")
    out: dict[str, Any] = {}
    for store_key, tool in rows:
        values = sorted(samples[(store_key, tool)])
        p50 = statistics.median(values)
        base = statistics.median(samples[("no store", tool)])
        mem = statistics.median(samples[("memory:", tool)])
        paired = statistics.median(
            a / b for a, b in zip(samples[(store_key, tool)], samples[("memory:", tool)], strict=True)
        )
        out[f"{store_key} / {tool}"] = {
            "store": store_key, "tool": tool, "p50_ms": round(p50, 3),
            "p95_ms": round(values[int(len(values) * 0.95) - 1], 3), "vs_no_store": round(p50 / base, 3),
            "vs_memory_store": round(p50 / mem, 3), "vs_memory_store_paired": round(paired, 3),
            "per_turn_ms": round((p50 - base) / turns, 3), "runs": len(values)}
    return out


async def _park(url: str) -> str:
    async def gate(args: Any = None, ctx: Any = None) -> Any:
        from toolnexus import ToolResult

        if ctx is not None and ctx.answer is not None and ctx.answer.ok:
            return ToolResult("through", False)
        return pending(kind="approval", prompt="ok?")

    worker = agent("worker", does="gated", uses={"tools": [define_tool(gate, name="gate", description="g")]})

    class Model:
        def post(self, url: str, headers: Any, payload: dict[str, Any], timeout: float) -> Any:
            if any(m.get("role") == "tool" for m in payload["messages"]):
                return {"choices": [{"message": {"role": "assistant", "content": "done."}}], "usage": USAGE}
            call = {"id": "c1", "type": "function", "function": {"name": "gate", "arguments": "{}"}}
            return {"choices": [{"message": {"role": "assistant", "content": None, "tool_calls": [call]}}],
                    "usage": USAGE}

    async with open_store(url) as store:
        r = await worker.run("go", transport=Model(), store=store)
        await r.runtime.aclose()
        assert r.pending is not None
        return r.pending.id


RESUME_CHILD = r'''
import asyncio, sys, time
t0 = time.perf_counter()
sys.path.insert(0, sys.argv[3])
from durable import _resume_here
asyncio.run(_resume_here(sys.argv[1], sys.argv[2]))
print((time.perf_counter() - t0) * 1000)
'''


async def _resume_here(url: str, request_id: str) -> None:
    from toolnexus import ToolResult
    from toolnexus.agents import resume

    async def gate(args: Any = None, ctx: Any = None) -> Any:
        if ctx is not None and ctx.answer is not None and ctx.answer.ok:
            return ToolResult("through", False)
        return pending(kind="approval", prompt="ok?")

    worker = agent("worker", does="gated", uses={"tools": [define_tool(gate, name="gate", description="g")]})

    class Model:
        def post(self, url: str, headers: Any, payload: dict[str, Any], timeout: float) -> Any:
            return {"choices": [{"message": {"role": "assistant", "content": "done."}}], "usage": USAGE}

    async with open_store(url) as store:
        final = await resume(store, Answer(id=request_id, ok=True), agents=[worker], transport=Model())
        assert final.status == "done", final.text


async def restore_latency(samples: int) -> dict[str, Any]:
    walls, inner, imports = [], [], []
    for _ in range(samples):
        folder = tempfile.mkdtemp(prefix="tn-bench-")
        url = f"sqlite:///{folder}/runs.db"
        request_id = await _park(url)
        started = time.perf_counter()
        done = subprocess.run([sys.executable, "-c", RESUME_CHILD, url, request_id, str(HERE)], capture_output=True,
                              text=True, check=True)
        walls.append((time.perf_counter() - started) * 1000)
        inner.append(float(done.stdout.strip().splitlines()[-1]))
        started = time.perf_counter()
        subprocess.run([sys.executable, "-c", "import toolnexus.agents, toolnexus.stores"], check=True)
        imports.append((time.perf_counter() - started) * 1000)
    return {"process_wall_p50_ms": round(statistics.median(walls), 1),
            "in_process_p50_ms": round(statistics.median(inner), 1),
            "import_only_process_p50_ms": round(statistics.median(imports), 1), "samples": samples}


async def stored_bytes(turns: int) -> dict[str, Any]:
    folder = tempfile.mkdtemp(prefix="tn-bench-")
    a = looker(turns)
    out: dict[str, Any] = {"turns": turns}
    with MockModel(turns) as model:
        for key, url in (("sqlite", f"sqlite:///{folder}/runs.db"), ("file", f"file:{folder}/fs")):
            empty = 0
            if key == "sqlite":  # what the run adds: the empty schema (a page per table and index) is not the run's
                async with open_store(url) as store:
                    empty = await asyncio.to_thread(store.stored_bytes)  # type: ignore[attr-defined]
                out["sqlite_empty_store_bytes"] = empty
            async with open_store(url) as store:
                r = await a.run("go", llm=model.llm, store=store, run_id="long")
                assert r.status == "done", r.text
                transcript = await r.runtime.conversation_store.get("root/looker.1")
                own = len(json.dumps(transcript, separators=(",", ":"), ensure_ascii=False).encode())
                await r.runtime.aclose()
                stored = await asyncio.to_thread(store.stored_bytes) if key == "sqlite" else store.stored_bytes("long")
                stored -= empty
            out["transcript_json_bytes"] = own
            out[f"{key}_bytes"] = stored
            out[f"{key}_ratio"] = round(stored / own, 3)
    return out


async def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--runs", type=int, default=60)
    parser.add_argument("--turns", type=int, default=10)
    parser.add_argument("--json", default=str(HERE / "results" / "durable.json"))
    opts = parser.parse_args()
    pg = os.environ.get("TOOLNEXUS_TEST_POSTGRES")
    result = {
        "date": time.strftime("%Y-%m-%d %H:%M"),
        "machine": f"{platform.machine()}, {os.cpu_count()} cores, Python {platform.python_version()}",
        "scenario": f"{opts.turns} tool turns + 1 final answer per run, loopback keep-alive HTTP model",
        "by_store": await runs_by_store(opts.turns, opts.runs, pg),
        "restore_and_resume": await restore_latency(7),
        "stored_500_turns": await stored_bytes(500),
    }
    print(f"\n{result['scenario']} — {result['machine']}")
    print(f"{'store':<15}{'tool':<22}{'p50 ms':>9}{'p95 ms':>9}{'× no store':>12}{'× memory:':>11}{'paired':>8}"
          f"{'ms/turn':>9}")
    for row in result["by_store"].values():
        print(f"{row['store']:<15}{row['tool']:<22}{row['p50_ms']:>9}{row['p95_ms']:>9}{row['vs_no_store']:>12}"
              f"{row['vs_memory_store']:>11}{row['vs_memory_store_paired']:>8}{row['per_turn_ms']:>9}")
    rr = result["restore_and_resume"]
    print(f"\nrestore + resume in a fresh process: {rr['process_wall_p50_ms']} ms wall "
          f"({rr['in_process_p50_ms']} ms inside; a process that only imports: {rr['import_only_process_p50_ms']} ms)")
    sb = result["stored_500_turns"]
    print(f"500-turn run: transcript {sb['transcript_json_bytes']} B; SQLite {sb['sqlite_bytes']} B "
          f"({sb['sqlite_ratio']}×); file store {sb['file_bytes']} B ({sb['file_ratio']}×)")
    Path(opts.json).parent.mkdir(parents=True, exist_ok=True)
    Path(opts.json).write_text(json.dumps(result, indent=2) + "\n")
    print(f"\nwritten to {opts.json}")


if __name__ == "__main__":
    asyncio.run(main())
