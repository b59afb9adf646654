"""`toolnexus run`: one prompt (`--once`) or an interactive session with the agent.

`--once PROMPT` runs `client.run(PROMPT, toolkit)` and prints the answer on stdout; a run that
raised prints `error: <message>` (exit 1); one that ended `pending` or `incomplete` still prints
its text, then `status: <status>` on stderr (exit 3). `--json` prints one JSON object instead:
`{"text", "status", "turns", "usage", "limit", "pending"}` (the pending `Request` as plain JSON,
or null). An empty `--once ""` starts the REPL.

The REPL keeps one conversation (`client.ask` with a session id) until `/reset` starts a new one;
`exit`, `quit` or end of input leaves (exit 0), Ctrl-C leaves with 130. When stdin and stderr are
a terminal, a tool that suspends asks its question right there (see `cli.interactive`) and the
run goes on; otherwise the run stops `pending`, its text is printed and `status: pending` noted.
An error prints `error: <message>` and the REPL continues. The toolkit is always closed.

Approvals (`cli.approvals`): `bash`, `write`, `edit` and `apply_patch` ask before they run unless
`--no-approve` says otherwise (`--approve TOOL` asks about more). On a terminal the question is
asked right there (`--once` too); without one, `--once` stops `pending` (exit 3) with nothing
run, and with `--store URL` (or `$TOOLNEXUS_STORE`) the run is parked in that durable store,
where `toolnexus pending` lists it and `toolnexus answer ID --approve` (or `--reject`) resumes it
with the same flags; stderr then says so after `status: pending`.
"""

from __future__ import annotations

import dataclasses
import json
import os
import uuid
from typing import Any

from .approvals import APPROVAL_FLAGS, RUN_RECORD, RUN_RECORD_KEYS, cli_policy
from .common import MODEL_FLAGS, TOOLKIT_FLAGS, CliExit, Console, build_toolkit, make_client, require_key, require_model
from .flags import Flag
from .inbox import STORE_ENV, open_run_store
from .interactive import LineReader, Progress, TtyAnswerer, is_interactive

NAME = "run"
SUMMARY = "run the agent on one prompt (--once) or in an interactive session"
FLAGS = [
    *TOOLKIT_FLAGS,
    *MODEL_FLAGS,
    Flag("once", "PROMPT", "run this one prompt and exit (an empty prompt starts the interactive session)"),
    Flag("json", None, "with --once: print the result as one JSON object"),
    *APPROVAL_FLAGS,
    Flag("store", "URL", "with --once and no terminal: park a run that waits for an answer in this durable store "
         f"(sqlite:///runs.db, ...; else ${STORE_ENV}) for toolnexus answer"),
]

BANNER = "toolnexus agent ready. Type a prompt (Ctrl-D or 'exit' to quit)."
EXIT_PENDING = 3


def _result_json(result: Any) -> str:
    pending = getattr(result, "pending", None)
    return json.dumps({
        "text": result.text,
        "status": result.status,
        "turns": result.turns,
        "usage": result.usage,
        "limit": getattr(result, "limit", None),
        "pending": dataclasses.asdict(pending) if dataclasses.is_dataclass(pending) and not isinstance(pending, type) else pending,
    })


async def execute(opts: dict[str, Any], console: Console) -> int:
    require_model(opts)
    require_key(opts, console)
    once = opts.get("once")
    if once:
        return await _once(opts, console, once)
    return await _repl(opts, console)


async def _once(opts: dict[str, Any], console: Console, prompt: str) -> int:
    policy = cli_policy(opts)
    interactive = is_interactive()
    progress = Progress(console)
    wait_for = TtyAnswerer(console, LineReader(), progress) if interactive else None
    toolkit = await build_toolkit(opts, approvals=policy)
    store = open_run_store(opts) if not interactive and (opts.get("store") or os.environ.get(STORE_ENV)) else None
    client = make_client(opts, hooks=progress.hooks(), wait_for=wait_for,
                         **({"store": store} if store is not None else {}))
    try:
        try:
            if store is not None:
                await store.open()
                result = await _parked_run(client, toolkit, store, opts, prompt)
            else:
                result = await client.run(prompt, toolkit)
        except CliExit:
            raise
        except Exception as exc:  # noqa: BLE001 - the pinned one-line error, no traceback
            raise CliExit(1, f"error: {exc}") from None
        finally:
            progress.stop()
        if opts.get("json"):
            console.out(_result_json(result))
        else:
            console.out(result.text)
        if result.status in ("pending", "incomplete"):
            if not opts.get("json"):
                console.err(f"status: {result.status}")
                if store is not None and result.pending is not None:
                    console.err(f"waiting in the store: toolnexus answer {result.pending.id} --approve "
                                "(or --reject --message TEXT); toolnexus pending lists it")
            return EXIT_PENDING
        return 0
    finally:
        await client.aclose()
        await toolkit.close()
        if store is not None:
            await store.aclose()


async def _parked_run(client: Any, toolkit: Any, store: Any, opts: dict[str, Any], prompt: str) -> Any:
    """`--once` on a durable store: one conversation, kept with the flags `toolnexus answer` needs."""
    conversation = f"run-{uuid.uuid4()}"
    result = await client.ask(prompt, toolkit, id=conversation)
    if result.status == "pending":
        await store.put_record(RUN_RECORD, conversation, {k: opts.get(k) for k in RUN_RECORD_KEYS})
    return result


async def _repl(opts: dict[str, Any], console: Console) -> int:
    lines = LineReader()
    progress = Progress(console)
    wait_for = TtyAnswerer(console, lines, progress) if is_interactive() else None
    toolkit = await build_toolkit(opts, wait_for=wait_for, approvals=cli_policy(opts))
    client = make_client(opts, hooks=progress.hooks(), wait_for=wait_for)
    session = str(uuid.uuid4())
    try:
        console.err(BANNER)
        while True:
            console.err("> ", end="")
            line = await lines.readline()
            if line is None:
                console.err()
                return 0
            line = line.strip()
            if not line:
                continue
            if line in ("exit", "quit"):
                return 0
            if line == "/reset":
                session = str(uuid.uuid4())
                console.err("(new conversation)")
                continue
            try:
                result = await client.ask(line, toolkit, id=session)
            except Exception as exc:  # noqa: BLE001 - report and keep the session going
                progress.stop()
                console.err(f"error: {exc}")
                continue
            progress.stop()
            console.out(result.text)
            if result.status != "done":
                console.err(f"status: {result.status}")
    finally:
        progress.stop()
        await client.aclose()
        await toolkit.close()
