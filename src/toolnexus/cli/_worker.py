"""`toolnexus worker`: host agent definitions until stopped — on a durable store (`--store URL`: one
worker of a fleet sharing a PostgreSQL database or a SQLite file, see `_fleet_worker.py`) or on a
Temporal task queue (`--temporal HOST:PORT`, below). Exactly one of the two.

`toolnexus worker --temporal HOST:PORT --agents MODULE:ATTR [--agents ...] [--task-queue Q]
[--namespace NS] [--base-url URL --style S --model ID --api-key KEY] [--transport MODULE:ATTR]`

`--agents` names an `Agent`, an `AgentDef`, a list of them or a registry dict (repeatable; all are
hosted). The model flags are the worker's `llm` (the key, as for `run`, may come from the
environment; it is never printed and never enters workflow history). `--transport` names an
`HttpTransport` object, or a zero-argument factory returning one, to use instead of the default
HTTP client (a scripted or in-house model). Every worker of a task queue must host the same
agents. When the worker polls, stderr gets one line, `worker: polling <queue> on <addr> (agents:
...)`; SIGINT/SIGTERM stop it gracefully (exit 0). An unreachable server or a bad `--agents`
is exit 1 / 2 with one line saying why.

`--heartbeat-timeout` (seconds, default 30) is how soon a dead worker's activities are handed to
another worker; `--sticky-timeout` (seconds) how soon its workflows are.

Run as the `toolnexus` program, the command leaves with `os._exit` once it has talked to Temporal
(after flushing stdout, stderr and logging): the SDK's native runtime can crash while the
interpreter finalizes, which would turn a clean exit 0 or 1 into an abort. The store worker
leaves the same way once it has stopped (everything it wrote is committed by then): a tool's
thread still blocked in a run it handed back would otherwise hold the process open. Called
in-process (`toolnexus.cli.main([...])`), it returns normally.
"""

from __future__ import annotations

import asyncio
import logging
import os
import signal
import sys
from typing import Any

from ._common import MODEL_FLAGS, CliExit, Console, apply_model_settings, load_object, number, resolve_key
from ._flags import Flag
from ._fleet_worker import STORE_FLAGS, serve

NAME = "worker"
SUMMARY = ("host agents: on a durable store (--store URL) or a Temporal task queue (--temporal HOST:PORT), "
           "with --agents MODULE:ATTR")
FLAGS = [
    *STORE_FLAGS,
    Flag("temporal", "HOST:PORT", "the Temporal frontend to connect to (e.g. 127.0.0.1:7233)"),
    Flag("agents", "MODULE:ATTR", "the agent definitions to host: an Agent, AgentDefs, a list or a dict (repeatable)",
         repeat=True),
    Flag("task-queue", "NAME", "the task queue to poll (default toolnexus)", default="toolnexus"),
    Flag("namespace", "NS", "the Temporal namespace (default default)", default="default"),
    *(f for f in MODEL_FLAGS if f.name in ("base-url", "style")),
    Flag("model", "ID", "the model id for agents whose model is inherit"),
    *(f for f in MODEL_FLAGS if f.name == "api-key"),
    Flag("transport", "MODULE:ATTR", "an HttpTransport (or a factory of one) to call the model through"),
    Flag("heartbeat-timeout", "SECONDS", "how soon a dead worker's activities move to another worker (default 30)"),
    Flag("sticky-timeout", "SECONDS", "how soon a dead worker's workflows move to another worker (default 10)"),
]


def _load(spec: str, flag: str) -> Any:
    try:
        return load_object(spec)
    except ValueError as exc:
        raise CliExit(2, "error: " + str(exc).replace("--tools-from", f"--{flag}")) from None


def _transport(spec: Any) -> Any:
    if spec is None:
        return None
    obj = _load(spec, "transport")
    if not hasattr(obj, "post") and callable(obj):
        obj = obj()
    if not callable(getattr(obj, "post", None)):
        raise CliExit(2, f"error: --transport {spec!r} is not an HttpTransport (it has no post method)")
    return obj


def _as_program() -> bool:
    main = sys.modules.get("__main__")
    return getattr(main, "__package__", None) == "toolnexus" or os.path.basename(sys.argv[0] or "") == "toolnexus"


def _leave(code: int) -> None:
    """The program's exit once the Temporal runtime exists (see the module docstring)."""
    if not _as_program():
        return
    for stream in (sys.stdout, sys.stderr):
        try:
            stream.flush()
        except (OSError, ValueError):
            pass
    logging.shutdown()
    os._exit(code)


async def execute(opts: dict[str, Any], console: Console) -> int:
    if opts.get("store") and opts.get("temporal"):
        raise CliExit(2, "error: toolnexus worker takes --store URL or --temporal HOST:PORT, not both")
    if opts.get("store"):
        try:
            code = await serve(opts, console)
        except CliExit as exc:
            code = exc.code
            if exc.message:
                console.err(exc.message)
        _leave(code)  # a tool's thread still stuck in a handed-back run must not keep the process alive
        return code
    code = 1
    try:
        code = await _execute(opts, console)
    except CliExit as exc:
        code = exc.code
        if exc.message:
            console.err(exc.message)
    except Exception as exc:
        console.err(f"error: {type(exc).__name__}: {exc}")
    if "temporalio.bridge.runtime" in sys.modules or "temporalio.runtime" in sys.modules:
        _leave(code)
    return code


async def _execute(opts: dict[str, Any], console: Console) -> int:
    from datetime import timedelta

    address = opts.get("temporal")
    specs = opts.get("agents") or []
    if not address or not specs:
        raise CliExit(2, "error: toolnexus worker needs --store URL (a fleet on a durable store) or --temporal "
                         "HOST:PORT, and at least one --agents MODULE:ATTR")
    if opts.get("webhook"):
        raise CliExit(2, "error: --webhook is for toolnexus worker --store URL: a Temporal worker keeps no outbox to "
                         "deliver notifications from")
    try:
        from ..temporal import TemporalOptions, connect, create_worker
    except ImportError as exc:
        raise CliExit(1, f"error: {exc}") from None
    agents: list[Any] = []
    for spec in specs:
        found = _load(spec, "agents")
        agents.extend(found if isinstance(found, (list, tuple)) else [found])
    apply_model_settings(opts)  # the environment's OPENAI_BASE_URL / TOOLNEXUS_MODEL where no flag is given
    llm = {k: opts[k] for k in ("base_url", "model") if opts.get(k)}
    llm["style"] = opts.get("style") or "openai"
    key = resolve_key(opts)
    if key is not None:
        console.add_secret(key)
        llm["api_key"] = key
    heartbeat = number(opts, "heartbeat-timeout", None)
    sticky = number(opts, "sticky-timeout", None)
    options = TemporalOptions(heartbeat_timeout=heartbeat) if heartbeat else TemporalOptions()
    extra: dict[str, Any] = {}
    if sticky:
        extra["sticky_queue_schedule_to_start_timeout"] = timedelta(seconds=sticky)
    modules = sorted({spec.partition(":")[0] for spec in specs})
    queue = opts.get("task_queue") or "toolnexus"
    client = await connect(address, namespace=opts.get("namespace") or "default")
    try:
        worker = await create_worker(client, agents=agents, llm=llm, transport=_transport(opts.get("transport")),
                                     task_queue=queue, options=options, passthrough=modules, **extra)
    except (TypeError, ValueError) as exc:
        raise CliExit(2, f"error: {exc}") from None
    stop = asyncio.Event()
    loop = asyncio.get_running_loop()
    for sig in (signal.SIGINT, signal.SIGTERM):
        loop.add_signal_handler(sig, stop.set)
    async with worker:
        names = ", ".join(sorted(worker._hosted.registry))
        console.err(f"worker: polling {queue} on {address} (agents: {names})")
        await stop.wait()
    console.err("worker: stopped")
    return 0
