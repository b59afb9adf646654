"""The fleet with real processes on SQLite and PostgreSQL: `toolnexus worker --store` processes,
killed with SIGKILL and stopped with SIGTERM mid-run, another worker finishing the run with no
call made by the test; an expiry fired while no process but a worker is alive; three workers
draining queued runs with no run executed twice and the per-agent limits held; the run
lifecycle through the installed CLI (`runs`, `show`, `answer` interrupted by Ctrl-C, `resume`,
`cancel`, `prune`); a worker's `--metrics` endpoint scraped; and the two wake-ups on PostgreSQL:
a worker whose poll would take an hour picks up a submitted run at once (`LISTEN/NOTIFY`), and
one with `--no-listen` picks it up by its poll.

The test only writes to the store what a front-end would (`submit_run`, a parked run); it waits
on the workers' own stderr lines and the tools' stdout markers, never on time.

These are `make test-fleet` (run by `.ci/run`), not `make test`: set `TOOLNEXUS_FLEET=1` to run
them here. `TOOLNEXUS_FLEET_RUNS` scales the drain test (default 300).
"""

from __future__ import annotations

import asyncio
import json
import os
import re
import signal
import socket
import subprocess
from pathlib import Path
from typing import Any, Callable, Iterator, Optional

import pytest

from support.cli_run import TOOLNEXUS, cli_env, run_cli
from support.fleet_agents import GATEKEEPER, LLM, MODEL, effects, max_overlap
from support.stores import _url
from toolnexus.stores import open_store

pytestmark = pytest.mark.skipif(os.environ.get("TOOLNEXUS_FLEET") != "1",
                                reason="the fleet's process tests run in `make test-fleet` (TOOLNEXUS_FLEET=1)")

WORKER_FLAGS = ("--agents", "fleet_agents:AGENTS", "--transport", "fleet_agents:MODEL", "--poll", "0.2")


@pytest.fixture(params=["sqlite", "postgres"])
def fleet_url(request: Any, tmp_path: Path) -> Iterator[str]:
    yield from _url(request.param, tmp_path)


class Proc:
    """A child process whose stdout and stderr lines are collected as they come, so a test can
    wait for a line (an event), bounded, with what it printed in the failure message."""

    def __init__(self, proc: asyncio.subprocess.Process, name: str) -> None:
        self.proc = proc
        self.name = name
        self.lines: list[tuple[str, str]] = []
        self._changed = asyncio.Event()
        self._readers = [asyncio.ensure_future(self._read(s, n)) for s, n in ((proc.stdout, "out"),
                                                                               (proc.stderr, "err"))]

    async def _read(self, stream: Any, which: str) -> None:
        while True:
            line = await stream.readline()
            if not line:
                break
            self.lines.append((which, line.decode().rstrip("\n")))
            self._changed.set()
        self._changed.set()

    async def until(self, test: Callable[[str], bool], timeout: float = 60) -> str:
        async def scan() -> str:
            seen = 0
            while True:
                for _, line in self.lines[seen:]:
                    if test(line):
                        return line
                seen = len(self.lines)
                if self.proc.returncode is not None and all(r.done() for r in self._readers):
                    raise AssertionError(f"{self.name} exited ({self.proc.returncode}) first: {self.lines}")
                self._changed.clear()
                await self._changed.wait()

        try:
            return await asyncio.wait_for(scan(), timeout)
        except TimeoutError:
            raise AssertionError(f"{self.name} did not print the line in {timeout}s: {self.lines[-40:]}") from None

    def count(self, test: Callable[[str], bool]) -> int:
        return sum(1 for _, line in self.lines if test(line))

    async def wait(self) -> int:
        code = await asyncio.wait_for(self.proc.wait(), 60)
        await asyncio.gather(*self._readers)
        return code

    async def stop(self) -> None:
        if self.proc.returncode is None:
            self.proc.send_signal(signal.SIGTERM)
        try:
            await asyncio.wait_for(self.proc.wait(), 30)
        except TimeoutError:
            self.proc.kill()
            await self.proc.wait()
        await asyncio.gather(*self._readers, return_exceptions=True)


async def start(name: str, *args: str, env: Optional[dict[str, str]] = None) -> Proc:
    proc = await asyncio.create_subprocess_exec(TOOLNEXUS, *args, env=env or cli_env(), stdout=subprocess.PIPE,
                                                stderr=subprocess.PIPE)
    return Proc(proc, name)


async def worker(url: str, name: str, *extra: str, **env: str) -> Proc:
    proc = await start(name, "worker", "--store", url, *WORKER_FLAGS, "--name", name, *extra, env=cli_env(**env))
    await proc.until(lambda line: line.startswith(f"worker {name}: serving"))
    return proc


async def test_a_worker_killed_mid_run_is_replaced_by_another_with_no_call(fleet_url, tmp_path):
    fx = str(tmp_path / "fx.jsonl")
    async with open_store(fleet_url) as store:
        await store.submit_run("alpha", "k1", run_id="k1")
    first = await worker(fleet_url, "first", FLEET_EFFECTS=fx, FLEET_HANG="1")
    second = None
    try:
        await first.until(lambda line: line == "IN_TOOL k1")
        first.proc.kill()  # SIGKILL: nothing of it runs any more, its lease stays behind
        await first.wait()
        second = await worker(fleet_url, "second", FLEET_EFFECTS=fx)
        await second.until(lambda line: line == "worker: recover k1 done")
        listed = run_cli("workers", "--store", fleet_url, env=cli_env())
        rows = {line.split("\t")[0]: line.split("\t") for line in listed.stdout.splitlines()}
        assert rows["second"][1:3] == ["running", "alive"] and rows["first"][2] == "dead", listed.stdout
    finally:
        for proc in (first, second):
            if proc is not None:
                await proc.stop()
    async with open_store(fleet_url) as store:
        [run] = await store.runs()
        assert run.status == "done"
        loaded = await store.load("k1")
        assert loaded.conversations["root/alpha.1"][-1]["content"] == "done k1: worked on k1"
    lines = effects(fx)
    assert [e["event"] for e in lines] == ["enter", "enter", "exit"]  # cut by the kill, then run again (idempotent)
    assert lines[0]["pid"] == first.proc.pid and lines[2]["pid"] == second.proc.pid  # type: ignore[union-attr]


async def test_an_expiry_fires_with_no_process_alive_but_a_worker(fleet_url, tmp_path, monkeypatch):
    fx = str(tmp_path / "fx.jsonl")
    monkeypatch.setenv("FLEET_EXPIRES_S", "0.5")
    async with open_store(fleet_url) as store:
        r = await GATEKEEPER.run("late", store=store, run_id="late", llm=LLM, transport=MODEL)
        await r.runtime.aclose()  # parked: nothing holds it any more
        assert r.pending.expiresAt
    only = await worker(fleet_url, "only", FLEET_EFFECTS=fx)
    try:
        await only.until(lambda line: line == "worker: expire late done")
    finally:
        await only.stop()
    async with open_store(fleet_url) as store:
        loaded = await store.load("late")
        assert loaded.status == "done"
        assert [(p.status, p.answer["reason"]) for p in loaded.pending] == [("applied", "expired")]
        assert "declined/expired: open the gate for late?" in json.dumps(loaded.conversations)
    assert effects(fx) == []  # the gated code never ran


async def test_three_workers_drain_the_queue_once_each_within_the_limits(fleet_url, tmp_path):
    n = int(os.environ.get("TOOLNEXUS_FLEET_RUNS") or 300)
    fx = str(tmp_path / "fx.jsonl")
    limits = ("--limit", "alpha=2", "--limit", "beta=1", "--concurrency", "4")
    workers = list(await asyncio.gather(*(worker(fleet_url, f"w{k}", *limits, FLEET_EFFECTS=fx, FLEET_WORK_MS="5")
                                          for k in range(3))))
    async with open_store(fleet_url) as store:  # a front-end submits while the fleet serves
        for i in range(n):
            await store.submit_run("alpha" if i % 3 else "beta", f"t{i}", run_id=f"t{i}")

    def finished(line: str) -> bool:
        return line.startswith("worker: run t") and line.endswith(" done")

    try:
        await asyncio.wait_for(_until_total(workers, finished, n), 300)
    finally:
        for w in workers:
            await w.stop()
    lines = effects(fx)
    entered = [e["tag"] for e in lines if e["event"] == "enter"]
    assert sorted(entered) == sorted(f"t{i}" for i in range(n))  # every run once, none twice
    assert max_overlap(lines, "alpha") <= 2 and max_overlap(lines, "beta") <= 1
    # (which workers took the runs is up to the queue: under load one fast worker may take every free slot)
    async with open_store(fleet_url) as store:
        statuses = {s.status for s in await store.runs()}
        assert statuses == {"done"}


async def _until_total(workers: list[Proc], test: Callable[[str], bool], n: int) -> None:
    """Until the workers together printed `n` lines passing `test` (waiting on their output)."""
    while sum(w.count(test) for w in workers) < n:
        waits = [asyncio.ensure_future(w._changed.wait()) for w in workers]
        for w in workers:
            w._changed.clear()
        if sum(w.count(test) for w in workers) >= n:
            for t in waits:
                t.cancel()
            break
        done, rest = await asyncio.wait(waits, return_when=asyncio.FIRST_COMPLETED)
        for t in rest:
            t.cancel()
        for w in workers:
            if w.proc.returncode is not None:
                raise AssertionError(f"{w.name} exited ({w.proc.returncode}): {w.lines[-20:]}")


async def test_a_worker_stopped_with_sigterm_mid_run_hands_the_run_over(fleet_url, tmp_path):
    fx = str(tmp_path / "fx.jsonl")
    async with open_store(fleet_url) as store:
        await store.submit_run("alpha", "s1", run_id="s1")
    first = await worker(fleet_url, "first", "--drain-timeout", "0.2", FLEET_EFFECTS=fx, FLEET_HANG="1")
    second = None
    try:
        await first.until(lambda line: line == "IN_TOOL s1")
        first.proc.send_signal(signal.SIGTERM)
        assert await first.wait() == 0
        assert first.count(lambda line: line == "worker: run s1 released") == 1
        assert first.count(lambda line: line == "worker: stopped") == 1
        async with open_store(fleet_url) as store:
            [run] = await store.runs()
            assert (run.status, run.holder) == ("running", None)  # handed back: nobody waits for a lease to expire
        second = await worker(fleet_url, "second", FLEET_EFFECTS=fx)
        await second.until(lambda line: line == "worker: recover s1 done")
    finally:
        for proc in (first, second):
            if proc is not None:
                await proc.stop()
    async with open_store(fleet_url) as store:
        assert [s.status for s in await store.runs()] == ["done"]


async def test_the_run_lifecycle_through_the_cli(fleet_url, tmp_path):
    fx = str(tmp_path / "fx.jsonl")
    async with open_store(fleet_url) as store:
        for i in range(3):
            r = await GATEKEEPER.run(f"c{i}", store=store, run_id=f"c{i}", llm=LLM, transport=MODEL)
            await r.runtime.aclose()
        request = (await store.pending())[0].request.id
    env = cli_env(FLEET_EFFECTS=fx)
    listed = run_cli("runs", "--store", fleet_url, "--limit", "2", "--json", env=env)
    page = json.loads(listed.stdout)
    assert listed.returncode == 0 and [r["run_id"] for r in page["runs"]] == ["c2", "c1"] and page["next"]
    rest = json.loads(run_cli("runs", "--store", fleet_url, "--limit", "2", "--json", "--after", page["next"],
                              env=env).stdout)
    assert [r["run_id"] for r in rest["runs"]] == ["c0"] and rest["next"] is None
    lines = run_cli("runs", "--store", fleet_url, "--status", "pending", env=env)
    assert [line.split("\t")[:3] for line in lines.stdout.splitlines()] == \
        [["c2", "pending", "gatekeeper"], ["c1", "pending", "gatekeeper"], ["c0", "pending", "gatekeeper"]]

    shown = run_cli("show", "c0", "--store", fleet_url, env=env)
    assert shown.returncode == 0
    for part in ("run c0 — pending (entry agent gatekeeper", "root/gatekeeper.1  suspended",
                 f"{request}  approval  open", "transcript root/gatekeeper.1", "user: c0", "→ gate(", "trace (last"):
        assert part in shown.stdout, shown.stdout

    # Ctrl-C while `toolnexus answer` runs the approved tool: the run is handed back, listed, continued.
    answering = await start("answer", "answer", "--store", fleet_url, "--id", request, "--ok", "--agents",
                            "fleet_agents:AGENTS", "--base-url", "http://127.0.0.1:9/v1", "--model", "fleet-model",
                            "--api-key", "unused", env=cli_env(FLEET_EFFECTS=fx, FLEET_HANG="1"))
    await answering.until(lambda line: line == "IN_TOOL c0")
    answering.proc.send_signal(signal.SIGINT)
    assert await answering.wait() == 130
    assert answering.count(lambda line: "handed back" in line and "toolnexus resume" in line) == 1
    running = run_cli("runs", "--store", fleet_url, "--status", "running", env=env)
    assert running.stdout.split("\t")[:2] == ["c0", "running"] and running.stdout.rstrip().endswith("-")
    resumed = run_cli("resume", "c0", "--store", fleet_url, *WORKER_FLAGS[:4], "--json", env=env)
    assert resumed.returncode == 3, resumed.stderr  # the cut call is in doubt: a person decides
    out = json.loads(resumed.stdout)
    assert (out["status"], out["pending"]["kind"], out["pending"]["data"]["tool"]) == ("pending", "in_doubt", "gate")
    shown = run_cli("show", "c0", "--store", fleet_url, "--json", env=env)
    answered = [r for r in json.loads(shown.stdout)["requests"] if r["id"] == request]
    assert answered[0]["status"] == "applied" and answered[0]["answer"]["ok"] is True

    cancelled = run_cli("cancel", "c1", "--store", fleet_url, env=env)
    assert (cancelled.returncode, cancelled.stdout) == (0, "cancelled\n")
    assert run_cli("cancel", "nope", "--store", fleet_url, env=env).returncode == 1
    assert run_cli("runs", "--store", fleet_url, "--status", "cancelled", env=env).stdout.startswith("c1\tcancelled")
    pruned = run_cli("prune", "--store", fleet_url, "--older-than", "0s", env=env)
    assert (pruned.returncode, pruned.stdout) == (0, "pruned 1 run(s)\n")
    assert run_cli("prune", "--store", fleet_url, env=env).returncode == 2
    left = json.loads(run_cli("runs", "--store", fleet_url, "--json", env=env).stdout)
    assert sorted(r["run_id"] for r in left["runs"]) == ["c0", "c2"]
    workers_out = run_cli("workers", "--store", fleet_url, env=env)
    assert workers_out.returncode == 0 and workers_out.stdout == ""


def _free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


async def _get(port: int, path: str) -> tuple[str, dict[str, str], str]:
    """One HTTP/1.1 GET over loopback: the status line, the headers, the body."""
    reader, writer = await asyncio.open_connection("127.0.0.1", port)
    try:
        writer.write(f"GET {path} HTTP/1.1\r\nHost: 127.0.0.1\r\nConnection: close\r\n\r\n".encode())
        await writer.drain()
        raw = (await asyncio.wait_for(reader.read(), 30)).decode()
    finally:
        writer.close()
    head, _, body = raw.partition("\r\n\r\n")
    status, *lines = head.split("\r\n")
    return status, {k.lower(): v.strip() for k, _, v in (line.partition(":") for line in lines)}, body


async def test_a_worker_process_serves_its_metrics_at_the_address_it_was_given(fleet_url):
    async with open_store(fleet_url) as store:
        for i in range(2):
            r = await GATEKEEPER.run(f"m{i}", store=store, run_id=f"m{i}", llm=LLM, transport=MODEL)
            await r.runtime.aclose()
    port = _free_port()
    scraped = await worker(fleet_url, "scraped", "--metrics", f"127.0.0.1:{port}")
    try:
        await scraped.until(lambda line: line == f"worker: metrics at http://127.0.0.1:{port}/metrics")
        status, headers, body = await _get(port, "/metrics")
        assert status == "HTTP/1.1 200 OK" and headers["content-type"].startswith("text/plain; version=0.0.4")
        assert int(headers["content-length"]) == len(body.encode())
        assert "\ntoolnexus_fleet_waiting_requests 2\n" in body and "\ntoolnexus_fleet_workers_alive 1\n" in body
        oldest = re.search(r"\ntoolnexus_fleet_oldest_pending_seconds (\S+)\n", body)
        assert oldest is not None and float(oldest.group(1)) > 0, body
        assert 'toolnexus_fleet_jobs_total{kind="run"' not in body
        async with open_store(fleet_url) as store:
            await store.submit_run("alpha", "counted", run_id="counted")
        await scraped.until(lambda line: line == "worker: run counted done")
        _, _, body = await _get(port, "/metrics")
        assert '\ntoolnexus_fleet_jobs_total{kind="run",outcome="done"} 1\n' in body, body
        missing, _, _ = await _get(port, "/other")
        assert missing == "HTTP/1.1 404 Not Found"
    finally:
        await scraped.stop()
    assert scraped.proc.returncode == 0


@pytest.fixture
def pg_url(tmp_path: Path) -> Iterator[str]:
    yield from _url("postgres", tmp_path)


PG_WORKER = ("--agents", "fleet_agents:AGENTS", "--transport", "fleet_agents:MODEL")


async def _listening(url: str) -> None:
    """Until the server shows a connection listening on the store's channel (another process's
    state: polled, bounded)."""
    import psycopg

    statement = f'LISTEN "{open_store(url).channel}"'  # type: ignore[attr-defined]
    async with await psycopg.AsyncConnection.connect(url.split("?")[0], autocommit=True) as conn:
        for _ in range(600):
            cur = await conn.execute("SELECT count(*) FROM pg_stat_activity WHERE query = %s", (statement,))
            row = await cur.fetchone()
            if row and row[0]:
                return
            await asyncio.sleep(0.05)
    raise AssertionError(f"no connection ran {statement} within 30 s")


async def test_notify_wakes_a_worker_process_whose_poll_and_beat_never_come(pg_url):
    """An hour's poll and a 20-minute heartbeat: nothing but a notification can wake this worker
    in the test's time, and a run submitted once it listens is taken at once."""
    listener = await start("listener", "worker", "--store", pg_url, *PG_WORKER, "--poll", "3600", "--lease-ttl",
                           "3600", "--name", "listener")
    try:
        serving = await listener.until(lambda line: line.startswith("worker listener: serving"))
        assert serving.endswith("; listening)"), serving
        await _listening(pg_url)
        async with open_store(pg_url) as store:
            await store.submit_run("alpha", "woken", run_id="woken")
        await listener.until(lambda line: line == "worker: took run woken", timeout=30)
        await listener.until(lambda line: line == "worker: run woken done", timeout=30)
    finally:
        await listener.stop()
    assert listener.proc.returncode == 0


async def test_a_worker_process_with_no_listen_finds_the_run_by_its_poll(pg_url):
    poller = await start("poller", "worker", "--store", pg_url, *PG_WORKER, "--poll", "0.2", "--no-listen", "--name",
                         "poller")
    try:
        serving = await poller.until(lambda line: line.startswith("worker poller: serving"))
        assert serving.endswith("; polling)"), serving
        async with open_store(pg_url) as store:
            await store.submit_run("alpha", "polled", run_id="polled")
        await poller.until(lambda line: line == "worker: run polled done", timeout=30)
    finally:
        await poller.stop()
    assert poller.proc.returncode == 0
