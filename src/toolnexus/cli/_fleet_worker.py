"""`toolnexus worker --store URL --agents MODULE:ATTR ...`: one worker of a fleet on a durable store.

Any number of these, on one PostgreSQL database (or one SQLite file on one machine), start the
runs a front-end submitted (`store.submit_run`), apply the answers it submitted
(`store.submit_answer`), take over runs whose process died, fire expiries and timers, and cancel
runs on request — with nobody else calling anything (see `toolnexus.fleet._worker`).

Flags beyond the model's (`--base-url/--style/--model/--api-key`, or `--transport MODULE:ATTR`):
`--concurrency N` items at once (default 4); `--limit AGENT=N` (repeatable) runs of that agent at
once across the whole fleet; `--poll SECONDS` (default 1) how often it scans for due expiries and
dead holders (and, without notifications, for new work); `--lease-ttl SECONDS` (default 30) how
long a dead holder on another host keeps a run; `--drain-timeout SECONDS` (default 30) how long a
stopping worker waits for what it runs before handing it back; `--no-listen` polls even on
PostgreSQL; `--name` (default host:pid); `--metrics HOST:PORT` serves `/metrics` (Prometheus);
`--retention 30d` deletes runs that ended longer ago than that, hourly.

stderr: one line per event (`worker NAME: serving ...`, `worker: took run R`, `worker: run R done`,
`worker: stopped`). SIGTERM or SIGINT stops it gracefully: nothing new is taken, what runs
finishes or — after `--drain-timeout` — is handed back (a second signal hands back at once).
Exit 0 after a clean stop; 1 when the store cannot be reached or has no work queue (memory:,
file:); 2 for a bad flag.
"""

from __future__ import annotations

import asyncio
import signal
from typing import Any

from ._common import CliExit, Console
from ._flags import Flag
from ._lifecycle import duration, llm_of, load_agents, transport_of

STORE_FLAGS = [
    Flag("store", "URL", "serve a durable store: sqlite:///runs.db or postgresql://user@host/db"),
    Flag("concurrency", "N", "items this worker works on at once (default 4)"),
    Flag("limit", "AGENT=N", "at most N runs of AGENT at once across the fleet (repeatable)", repeat=True),
    Flag("poll", "SECONDS", "how often to scan for due expiries, dead holders and (polling) new work (default 1)"),
    Flag("lease-ttl", "SECONDS", "how long a run's lease lasts unless renewed (default 30)"),
    Flag("drain-timeout", "SECONDS", "how long a stopping worker waits before handing runs back (default 30)"),
    Flag("no-listen", None, "poll even on PostgreSQL (no LISTEN/NOTIFY)"),
    Flag("name", "NAME", "this worker's name in toolnexus workers (default host:pid)"),
    Flag("metrics", "HOST:PORT", "serve Prometheus metrics at http://HOST:PORT/metrics"),
    Flag("retention", "DURATION", "delete runs that ended longer ago than this, hourly (e.g. 30d)"),
]


def _number(opts: dict[str, Any], name: str, default: float, *, whole: bool = False, zero: bool = False) -> Any:
    raw = opts.get(name.replace("-", "_"))
    if raw is None:
        return default
    try:
        value = int(raw) if whole else float(raw)
    except ValueError:
        value = -1
    if value < 0 or (value == 0 and not zero):
        kind = "a whole number >= 1" if whole else "a number of seconds > 0"
        raise CliExit(2, f"error: --{name} takes {kind} (got {raw!r})")
    return value


def _limits(specs: list[str]) -> dict[str, int]:
    limits: dict[str, int] = {}
    for spec in specs:
        agent, eq, count = spec.partition("=")
        if not eq or not agent or not count.isdigit() or int(count) < 1:
            raise CliExit(2, f"error: --limit takes AGENT=N with N >= 1 (got {spec!r})")
        limits[agent] = int(count)
    return limits


def _address(spec: Any) -> Any:
    if spec is None:
        return None
    host, _, port = str(spec).rpartition(":")
    if not host or not port.isdigit():
        raise CliExit(2, f"error: --metrics takes HOST:PORT (got {spec!r})")
    return host, int(port)


async def serve(opts: dict[str, Any], console: Console) -> int:
    from ..durable import StoreError
    from ..fleet import Worker
    from ..fleet._metrics_http import serve_metrics
    from ._inbox import open_run_store

    agents = load_agents(opts, "worker")
    llm = llm_of(opts, console, "worker")
    transport = transport_of(opts)
    address = _address(opts.get("metrics"))
    store = open_run_store(opts, existing=False)  # the first worker on a fresh database creates the store
    worker = Worker(store, agents=agents, llm=llm, transport=transport, name=opts.get("name"),
                    concurrency=_number(opts, "concurrency", 4, whole=True), limits=_limits(opts.get("limit") or []),
                    poll_interval=_number(opts, "poll", 1.0), lease_ttl=_number(opts, "lease-ttl", 30.0),
                    drain_timeout=_number(opts, "drain-timeout", 30.0, zero=True), listen=not opts.get("no_listen"),
                    retention=duration(opts.get("retention"), "retention"), on_event=console.err)
    loop = asyncio.get_running_loop()
    signals = 0

    def on_signal() -> None:
        nonlocal signals
        signals += 1
        worker.stop(now=signals > 1)

    for sig in (signal.SIGINT, signal.SIGTERM):
        loop.add_signal_handler(sig, on_signal)
    server = None
    try:
        async with store:
            try:
                await worker.start()
            except StoreError as exc:
                raise CliExit(1, f"error: {exc}") from None
            if address is not None:
                server = await serve_metrics(worker, *address)
                console.err(f"worker: metrics at http://{address[0]}:{address[1]}/metrics")
            await worker.run()
    finally:
        for sig in (signal.SIGINT, signal.SIGTERM):
            loop.remove_signal_handler(sig)
        if server is not None:
            server.close()
            await server.wait_closed()
    return 0
