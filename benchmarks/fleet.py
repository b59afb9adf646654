"""The worker fleet and the inbox at scale, on SQLite and PostgreSQL, side by side in one run.

1. **Listings with 100,000 parked runs** — `pending(limit=50)` (first page, a page deep in via its
   cursor, by kind, by agent) and `runs(limit=50)` (newest, by status, by agent): p50 over
   `--lists` calls each. The store is filled by cloning the rows one real parked run wrote (its
   run row and its ledger row; new ids, spread creation times, four agents, a tenth of requests of
   another kind) in bulk, because parking 100,000 runs through the runtime would take most of an
   hour and the listings read only those two tables. For contrast, one 0.21-style `pending()`
   (everything at once). PostgreSQL's plans are printed. Goal: p50 ≤ 10 ms.
2. **Stateless enqueue** — `submit_run` and `submit_answer` (to requests of the 100,000) in a
   process that has the store open: p50 / p95. Goal: p50 ≤ 5 ms.
3. **Answers applied per second with 1, 2 and 4 workers** — `--answers` runs parked for real, an
   answer submitted to each, then K `toolnexus worker --store` processes (concurrency 4 each) apply
   them; from the first item taken to the last applied, timed on the workers' own output.
4. **Takeover** — a worker (claiming to be on another machine, so its death can only be seen by
   its lease running out) is SIGKILLed inside a tool; another worker (default poll, 1 s) finishes
   the run. Measured: kill → the run finished, against the lease TTL (`--ttl`, default 10 s) +
   1 s. Also the same with the dead worker on this machine (seen dead at once).

Run: `.venv/bin/python benchmarks/fleet.py [--only listings,enqueue,throughput,takeover]
[--parked 100000] [--answers 200] [--ttl 10] [--json PATH]`; PostgreSQL rows need
`TOOLNEXUS_TEST_POSTGRES` (each row runs in a schema of its own, dropped afterwards). Prints
tables and writes JSON (default `benchmarks/results/fleet.json`).
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import platform
import signal
import sqlite3
import statistics
import subprocess
import sys
import tempfile
import time
import uuid
from pathlib import Path
from typing import Any, Callable, Optional

from toolnexus import Answer
from toolnexus.durable._paging import PendingQuery
from toolnexus.stores import open_store

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))
from fleet_agents import GATEKEEPER, LLM, MODEL  # noqa: E402

TOOLNEXUS = str(Path(sys.executable).with_name("toolnexus"))
PG = os.environ.get("TOOLNEXUS_TEST_POSTGRES")
AGENT_NAMES = ("gatekeeper", "billing", "support", "ops")


def p50(xs: list[float]) -> float:
    return statistics.median(xs)


def p95(xs: list[float]) -> float:
    return sorted(xs)[max(0, int(len(xs) * 0.95) - 1)]


class Backend:
    """One store URL for a scenario (a SQLite file in a temp folder, or a fresh PostgreSQL schema)."""

    def __init__(self, kind: str, folder: Path) -> None:
        self.kind = kind
        self.schema = f"tn_bench_{uuid.uuid4().hex[:10]}"
        self.path = folder / f"{self.schema}.db"
        self.url = (
            f"sqlite:///{self.path}" if kind == "sqlite" else f"{PG}{'&' if '?' in PG else '?'}schema={self.schema}"
        )

    def drop(self) -> None:
        if self.kind == "postgres":
            import psycopg

            with psycopg.connect(PG, autocommit=True) as conn:  # type: ignore[arg-type]
                conn.execute(f'DROP SCHEMA IF EXISTS "{self.schema}" CASCADE')

    def sql(self, statement: str, rows: Optional[list[tuple[Any, ...]]] = None) -> list[Any]:
        """Run one statement (many rows: executemany) with a connection of its own."""
        if self.kind == "sqlite":
            conn = sqlite3.connect(self.path)
            try:
                with conn:
                    if rows is not None:
                        conn.executemany(statement, rows)
                        return []
                    return conn.execute(statement).fetchall()
            finally:
                conn.close()
        import psycopg

        with psycopg.connect(PG, options=f"-c search_path={self.schema}") as conn:  # type: ignore[arg-type]
            with conn.cursor() as cur:
                if rows is not None:
                    cur.executemany(statement.replace("?", "%s"), rows)
                    return []
                cur.execute(statement)
                return cur.fetchall() if cur.description else []


async def park(store: Any, n: int, prefix: str) -> list[str]:
    """`n` runs parked for real on an approval; their request ids."""
    ids = []
    for i in range(n):
        r = await GATEKEEPER.run(f"{prefix}{i}", store=store, run_id=f"{prefix}{i}", llm=LLM, transport=MODEL)
        await r.runtime.aclose()
        ids.append(r.pending.id)
    return ids


# --------------------------------------------------------------------------- 1 + 2: listings, enqueue


def clone_parked(backend: Backend, n: int) -> None:
    """`n` copies of the one real parked run's run row and ledger row (see the module docstring)."""
    [run] = backend.sql("SELECT run_id, kind, entry_agent, status, created_at, updated_at, version, format, state, "
                        "result, lease, lease_expires, trace_seq, lease_id FROM tn_runs WHERE run_id = 'template0'")
    [row] = backend.sql("SELECT request_id, run_id, handle_id, request, path, created_at, expires_at, status, claim, "
                        "answer, answered_at FROM tn_pending WHERE run_id = 'template0'")
    request = json.loads(row[3])
    base = time.time() - 86400 * 30
    runs, pend = [], []
    for i in range(n):
        rid, req_id = f"p{i:06d}", f"req-{i:06d}"
        at = base + i * (86400 * 30 / n)
        agent_name = AGENT_NAMES[i % len(AGENT_NAMES)]
        kind = "input" if i % 10 == 0 else "approval"
        runs.append(
            (rid, run[1], agent_name, run[3], at, at, run[6], run[7], run[8], run[9], None, None, run[12], None)
        )
        req = dict(request, id=req_id, kind=kind)
        pend.append((req_id, rid, row[2], json.dumps(req), row[4], at, None, "open", None, None, None))
    for chunk in range(0, n, 20000):
        backend.sql("INSERT INTO tn_runs (run_id, kind, entry_agent, status, created_at, updated_at, version, format, "
                    "state, result, lease, lease_expires, trace_seq, lease_id) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, "
                    "?, ?, ?, ?)", runs[chunk:chunk + 20000])
        backend.sql("INSERT INTO tn_pending (request_id, run_id, handle_id, request, path, created_at, expires_at, "
                    "status, claim, answer, answered_at) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)",
                    pend[chunk:chunk + 20000])
    if backend.kind == "postgres":
        backend.sql("ANALYZE")


async def timed(fn: Callable[[], Any], times: int) -> list[float]:
    out = []
    for _ in range(times):
        started = time.perf_counter()
        await fn()
        out.append((time.perf_counter() - started) * 1000)
    return out


async def listings_and_enqueue(backend: Backend, parked: int, lists: int) -> dict[str, Any]:
    async with open_store(backend.url) as store:
        await park(store, 1, "template")
    started = time.perf_counter()
    clone_parked(backend, parked)
    fill_s = time.perf_counter() - started
    out: dict[str, Any] = {"parked": parked, "fill_s": round(fill_s, 1), "list_ms": {}}
    async with open_store(backend.url) as store:
        first = await store.pending(limit=50)
        [(at, rid)] = backend.sql(f"SELECT created_at, request_id FROM tn_pending WHERE request_id = "
                                  f"'req-{parked // 2:06d}'")
        deep_after = PendingQuery().cursor(at, rid)  # the page half-way into the inbox
        page = await store.runs(limit=50)
        cases = {
            "pending(limit=50)": lambda: store.pending(limit=50),
            "pending(limit=50, after=<half-way>)": lambda: store.pending(limit=50, after=deep_after),
            "pending(limit=50, kind='input')": lambda: store.pending(limit=50, kind="input"),
            "pending(limit=50, agent='ops')": lambda: store.pending(limit=50, agent="ops"),
            "runs(limit=50)": lambda: store.runs(limit=50),
            "runs(limit=50, after=<page 1>)": lambda: store.runs(limit=50, after=page.next),
            "runs('pending', limit=50)": lambda: store.runs("pending", limit=50),
            "runs(limit=50, agent='ops')": lambda: store.runs(limit=50, agent="ops"),
        }
        for name, fn in cases.items():
            samples = await timed(fn, lists)
            out["list_ms"][name] = {"p50": round(p50(samples), 3), "p95": round(p95(samples), 3)}
        assert len(first) == 50
        started = time.perf_counter()
        everything = await store.pending()
        out["pending()_all_ms"] = round((time.perf_counter() - started) * 1000, 1)
        out["pending()_all_items"] = len(everything)
        if backend.kind == "postgres":
            out["plans"] = _pg_plans(backend)
        ids = [p.request.id for p in first]
        runs_ms = await timed(lambda: store.submit_run("gatekeeper", "queued work"), lists)
        answers = iter(ids + [p.request.id for p in await store.pending(limit=lists, after=first.next)])
        answer_ms = await timed(lambda: store.submit_answer(Answer(id=next(answers), ok=True)), min(lists, 50))
        out["enqueue_ms"] = {"submit_run": {"p50": round(p50(runs_ms), 3), "p95": round(p95(runs_ms), 3)},
                             "submit_answer": {"p50": round(p50(answer_ms), 3), "p95": round(p95(answer_ms), 3)}}
    return out


def _pg_plans(backend: Backend) -> dict[str, str]:
    from toolnexus.durable._paging import PendingQuery, RunsQuery
    from toolnexus.stores._fleet_sql import pending_steps, runs_steps

    plans = {}
    for name, steps in (("pending(limit=50)", pending_steps(PendingQuery(limit=50), "postgres", time.time())),
                        ("pending(limit=50, kind)", pending_steps(PendingQuery(limit=50, kind="input"), "postgres",
                                                                   time.time())),
                        ("runs(limit=50)", runs_steps(RunsQuery(limit=50), time.time(), "postgres")),
                        ("runs('pending', limit=50)", runs_steps(RunsQuery(("pending",), limit=50), time.time(),
                                                                  "postgres"))):
        query = steps.send(None)
        sql = "EXPLAIN " + query.sql
        for value in query.params:
            sql = sql.replace("?", repr(value) if isinstance(value, str) else str(value), 1)
        plans[name] = " / ".join(r[0].strip() for r in backend.sql(sql)[:4])
    return plans


# --------------------------------------------------------------------------- 3 + 4: worker processes


class Worker:
    """A `toolnexus worker --store` process; its output lines, each with the time it was read."""

    def __init__(self, url: str, name: str, *extra: str, env: Optional[dict[str, str]] = None) -> None:
        environ = dict(os.environ, PYTHONPATH=str(HERE) + os.pathsep + os.environ.get("PYTHONPATH", ""), **(env or {}))
        self.name = name
        self.proc = subprocess.Popen([TOOLNEXUS, "worker", "--store", url, "--agents", "fleet_agents:AGENTS",
                                      "--transport", "fleet_agents:MODEL", "--name", name, *extra],
                                     stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, env=environ)
        self.lines: list[tuple[float, str]] = []

    async def until(self, test: Callable[[str], bool], timeout: float = 120) -> float:
        """Read lines until one passes `test`; when it was read."""
        loop = asyncio.get_running_loop()
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            line = await loop.run_in_executor(None, self.proc.stdout.readline)  # type: ignore[union-attr]
            if not line:
                raise RuntimeError(f"{self.name} exited: {self.lines[-10:]}")
            at = time.monotonic()
            self.lines.append((at, line.rstrip("\n")))
            if test(line.rstrip("\n")):
                return at
        raise RuntimeError(f"{self.name}: no such line within {timeout}s")

    def stop(self) -> None:
        if self.proc.poll() is None:
            self.proc.send_signal(signal.SIGTERM)
        try:
            self.proc.wait(30)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            self.proc.wait()


async def throughput(kind: str, folder: Path, n: int, workers: int) -> dict[str, Any]:
    backend = Backend(kind, folder)
    try:
        async with open_store(backend.url) as store:
            ids = await park(store, n, "a")
            for rid in ids:
                await store.submit_answer(Answer(id=rid, ok=True))
        procs = [Worker(backend.url, f"w{k}") for k in range(workers)]
        try:
            done: list[float] = []
            taken: list[float] = []

            async def follow(w: Worker) -> None:
                while len(done) < n:
                    at = await w.until(lambda line: line.startswith("worker: ") and "answer" in line)
                    line = w.lines[-1][1]
                    if line.startswith("worker: took answer"):
                        taken.append(at)
                    elif line.startswith("worker: answer") and line.endswith(" done"):
                        done.append(at)

            followers = [asyncio.ensure_future(follow(w)) for w in procs]
            while len(done) < n:
                await asyncio.wait(followers, timeout=1.0, return_when=asyncio.FIRST_EXCEPTION)
                for f in followers:
                    if f.done() and f.exception() is not None:
                        raise f.exception()  # type: ignore[misc]
            for f in followers:
                f.cancel()
        finally:
            for w in procs:
                w.stop()
        span = max(done) - min(taken)
        return {"workers": workers, "answers": n, "seconds": round(span, 3), "per_second": round(n / span, 1)}
    finally:
        backend.drop()


async def takeover(kind: str, folder: Path, ttl: float, same_host: bool) -> dict[str, Any]:
    backend = Backend(kind, folder)
    env = {"FLEET_HANG": "1"}
    if not same_host:
        env["TOOLNEXUS_HOST"] = "another-machine"  # its death cannot be seen by its pid: only its lease ends
    first = Worker(backend.url, "doomed", "--lease-ttl", str(ttl), env=env)
    second: Optional[Worker] = None
    try:
        await first.until(lambda line: "serving" in line)
        async with open_store(backend.url) as store:
            await store.submit_run("stepper", "t1", run_id="t1")
        await first.until(lambda line: line == "IN_TOOL t1")
        second = Worker(backend.url, "rescuer", "--lease-ttl", str(ttl))
        await second.until(lambda line: "serving" in line)
        killed = time.monotonic()
        first.proc.kill()
        first.proc.wait()
        finished = await second.until(lambda line: line == "worker: recover t1 done", timeout=ttl * 3 + 30)
        took = finished - killed
        return {"ttl": ttl, "same_host": same_host, "seconds": round(took, 3), "goal_seconds": ttl + 1,
                "within_goal": took <= ttl + 1}
    finally:
        for w in (first, second):
            if w is not None:
                w.stop()
        backend.drop()


# --------------------------------------------------------------------------- main


async def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--only", default="listings,enqueue,throughput,takeover")
    parser.add_argument("--parked", type=int, default=100_000)
    parser.add_argument("--lists", type=int, default=50)
    parser.add_argument("--answers", type=int, default=200)
    parser.add_argument("--ttl", type=float, default=10.0)
    parser.add_argument("--json", default=str(HERE / "results" / "fleet.json"))
    opts = parser.parse_args()
    only = set(opts.only.split(","))
    kinds = ["sqlite"] + (["postgres"] if PG else [])
    result: dict[str, Any] = {"machine": {"python": platform.python_version(), "cpus": os.cpu_count(),
                                          "platform": platform.platform()}, "when": time.strftime("%Y-%m-%d %H:%M")}
    with tempfile.TemporaryDirectory() as tmp:
        folder = Path(tmp)
        if only & {"listings", "enqueue"}:
            result["listings"] = {}
            for kind in kinds:
                backend = Backend(kind, folder)
                try:
                    result["listings"][kind] = await listings_and_enqueue(backend, opts.parked, opts.lists)
                finally:
                    backend.drop()
            print(f"\n## Listings and enqueue with {opts.parked:,} parked runs (p50 / p95 ms)\n")
            print("| call | " + " | ".join(kinds) + " |\n|---|" + "---:|" * len(kinds))
            for name in result["listings"][kinds[0]]["list_ms"]:
                cells = [
                    f"{result['listings'][k]['list_ms'][name]['p50']} / {result['listings'][k]['list_ms'][name]['p95']}"
                    for k in kinds
                ]
                print(f"| `{name}` | " + " | ".join(cells) + " |")
            for name in ("submit_run", "submit_answer"):
                cells = [
                    "{p50} / {p95}".format(**result["listings"][k]["enqueue_ms"][name])
                    for k in kinds
                ]
                print(f"| `{name}` | " + " | ".join(cells) + " |")
            print("| 0.21-style `pending()` (all, once) | "
                  + " | ".join(f"{result['listings'][k]['pending()_all_ms']}" for k in kinds) + " |")
            for k in kinds:
                for name, plan in (result["listings"][k].get("plans") or {}).items():
                    print(f"\n{k} plan of {name}: {plan}")
        if "throughput" in only:
            result["throughput"] = {}
            for kind in kinds:
                result["throughput"][kind] = [await throughput(kind, folder, opts.answers, k) for k in (1, 2, 4)]
            print("\n## Answers applied per second (concurrency 4 per worker)\n")
            print("| workers | " + " | ".join(kinds) + " |\n|---:|" + "---:|" * len(kinds))
            for i, k in enumerate((1, 2, 4)):
                print(
                    f"| {k} | " + " | ".join(f"{result['throughput'][kind][i]['per_second']}" for kind in kinds) + " |"
                )
        if "takeover" in only:
            result["takeover"] = {}
            for kind in kinds:
                result["takeover"][kind] = [await takeover(kind, folder, opts.ttl, same) for same in (False, True)]
            print(f"\n## Takeover of a run whose worker was SIGKILLed (lease TTL {opts.ttl:g} s, poll 1 s)\n")
            print("| store | other host: kill → finished (goal ≤ TTL + 1 s) | same host |\n|---|---:|---:|")
            for kind in kinds:
                other, same = result["takeover"][kind]
                print(f"| {kind} | {other['seconds']} s ({'within' if other['within_goal'] else 'OVER'}) | "
                      f"{same['seconds']} s |")
    Path(opts.json).parent.mkdir(parents=True, exist_ok=True)
    Path(opts.json).write_text(json.dumps(result, indent=2) + "\n")
    print(f"\nwritten: {opts.json}")


if __name__ == "__main__":
    asyncio.run(main())
