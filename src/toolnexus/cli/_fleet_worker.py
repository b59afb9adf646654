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

Notifications (the same flags as `toolnexus inbox`, built by `_webhooks.py`): `--webhook URL`
(`--webhook-format`, `--webhook-secret-env VAR`, `--webhook-retry SECONDS`) makes the worker tell
a webhook of each request its runs park on (their `on_pending`) and of any other new one it finds
in the store, and deliver them from the store's outbox, retried with backoff: every worker of the
fleet can carry the flag, a notification is sent by one of them, and what a stopped worker left
mid-retry the others send. `--inbox-url URL` links each message to the request's page in the web
inbox; with `--webhook-identity NAME` and the inbox's `--secret-env VAR` it carries signed
approve / reject links too (`--link-ttl`). A stopping worker finishes the delivery it is making.

stderr: one line per event (`worker NAME: serving ...`, `worker: took run R`, `worker: run R done`,
`worker: stopped`). SIGTERM or SIGINT stops it gracefully: nothing new is taken, what runs
finishes or — after `--drain-timeout` — is handed back (a second signal hands back at once).
Exit 0 after a clean stop; 1 when the store cannot be reached or has no work queue (memory:,
file:); 2 for a bad flag.
"""

from __future__ import annotations

import asyncio
import signal
from typing import Any, Optional

from ._common import CliExit, Console, number
from ._flags import Flag
from ._lifecycle import duration, llm_of, load_agents, transport_of
from ._webhooks import WEBHOOK_FLAGS, env_secret, link_signer, notifications

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
    Flag("retention", "DURATION", "delete runs that ended longer ago than this, hourly (e.g. 30d; default: the "
         "store URL's ?retention=)"),
    *WEBHOOK_FLAGS,
    Flag("inbox-url", "URL", "with --webhook: the web inbox's address, so each message links to the request's page"),
    Flag("secret-env", "VAR", "with --webhook-identity: the inbox's secret (from this environment variable) to sign "
         "answer links with"),
]


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


def _notifier(opts: dict[str, Any], console: Console, store: Any, poll: float) -> Any:
    """The webhook notifier the flags ask for (see the module docstring), or None."""
    from ..errors import ToolnexusError

    inbox_url = opts.get("inbox_url")
    if opts.get("webhook") and opts.get("webhook_identity") and not inbox_url:
        raise CliExit(2, "error: --webhook-identity puts links to the web inbox in messages: give --inbox-url URL "
                         "(the inbox's address as people reach it) too")
    try:
        links = link_signer(opts, env_secret(opts, "secret-env", console), inbox_url)
        return notifications(opts, console, store, links=links, inbox_url=inbox_url, poll=poll)
    except ToolnexusError as exc:
        raise CliExit(2, f"error: {exc}") from None


async def serve(opts: dict[str, Any], console: Console) -> int:
    from ..durable import StoreError
    from ..fleet import Worker
    from ..fleet._metrics_http import serve_metrics
    from ._inbox import open_run_store

    agents = load_agents(opts, "worker")
    llm = llm_of(opts, console, "worker")
    transport = transport_of(opts)
    address = _address(opts.get("metrics"))
    poll = number(opts, "poll", 1.0)
    store = open_run_store(opts, existing=False)  # the first worker on a fresh database creates the store
    notes = _notifier(opts, console, store, poll)
    hooks = {"on_pending": notes.on_pending} if notes is not None else {}
    worker = Worker(store, agents=agents, llm=llm, transport=transport, name=opts.get("name"),
                    concurrency=number(opts, "concurrency", 4, whole=True), limits=_limits(opts.get("limit") or []),
                    poll_interval=poll, lease_ttl=number(opts, "lease-ttl", 30.0),
                    drain_timeout=number(opts, "drain-timeout", 30.0, zero=True), listen=not opts.get("no_listen"),
                    retention=duration(opts.get("retention"), "retention"), on_event=console.err, **hooks)
    loop = asyncio.get_running_loop()
    signals = 0

    def on_signal() -> None:
        nonlocal signals
        signals += 1
        worker.stop(now=signals > 1)

    for sig in (signal.SIGINT, signal.SIGTERM):
        loop.add_signal_handler(sig, on_signal)
    server = None
    delivering: Optional[asyncio.Future[None]] = None
    try:
        async with store:
            try:
                await worker.start()
            except StoreError as exc:
                raise CliExit(1, f"error: {exc}") from None
            if address is not None:
                server = await serve_metrics(worker, *address)
                console.err(f"worker: metrics at http://{address[0]}:{address[1]}/metrics")
            if notes is not None:
                delivering = asyncio.ensure_future(notes.run())
                console.err("worker: notifying a webhook of each new waiting request")
            try:
                await worker.run()
            finally:
                # after the drain: a run that parked while draining is still added and sent
                if notes is not None:
                    notes.stop()
                if delivering is not None:
                    await asyncio.gather(delivering, return_exceptions=True)
    finally:
        for sig in (signal.SIGINT, signal.SIGTERM):
            loop.remove_signal_handler(sig)
        if server is not None:
            server.close()
            await server.wait_closed()
    return 0
