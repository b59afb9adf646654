"""`toolnexus run`: one prompt (`--once`) or an interactive session with the agent.

`--once PROMPT` runs `client.run(PROMPT, toolkit)` and prints the answer on stdout; a run that
raised prints `error: <message>` (exit 1); one that ended `pending` or `incomplete` still prints
its text, then `status: <status>` on stderr (exit 3). `--json` prints one JSON object instead:
`{"text", "status", "turns", "usage", "limit", "pending"}` (the pending `Request` as plain JSON,
or null). An empty `--once ""` starts the REPL.

The REPL keeps one conversation (`client.ask` with a session id) until `/reset` starts a new one;
`exit`, `quit` or end of input (Ctrl-D) leaves (exit 0). When stdin is a terminal, Ctrl-C while
a turn runs cancels that turn — its prompt and whatever it did so far are dropped, the
conversation before it is kept — and the prompt comes back; Ctrl-C at an idle prompt says how to
leave, and a second one in a row leaves (exit 130). With `--once`, or with input from a pipe,
Ctrl-C leaves at once (exit 130). When stdin and stderr are a
terminal, a tool that suspends asks its question right there (see `cli.interactive`) and the run
goes on; otherwise the run stops `pending`, its text is printed and `status: pending` noted. An
error prints `error: <message>` and the REPL continues. The toolkit is always closed.

`--verbose` prints a line on stderr as each tool call starts and ends (see `cli._activity`); on
a terminal the spinner names the tool running.

Approvals (`cli.approvals`): `bash`, `write`, `edit` and `apply_patch` ask before they run unless
`--no-approve` says otherwise (`--approve TOOL` asks about more). On a terminal the question is
asked right there (`--once` too); without one, `--once` stops `pending` (exit 3) with nothing
run, and with `--store URL` (or `$TOOLNEXUS_STORE`) the run is parked in that durable store,
where `toolnexus pending` lists it and `toolnexus answer ID --approve` (or `--reject`) resumes it
with the same flags; stderr then says so after `status: pending`.
"""

from __future__ import annotations

import asyncio
import dataclasses
import json
import os
import signal
import sys
import uuid
from typing import Any, Optional

from ._activity import Activity
from ._approvals import APPROVAL_FLAGS, RUN_RECORD, RUN_RECORD_KEYS, cli_policy
from ._common import (
    MODEL_FLAGS,
    TOOLKIT_FLAGS,
    CliExit,
    Console,
    apply_model_settings,
    build_toolkit,
    load_config,
    make_client,
    require_key,
    require_model,
)
from ._flags import Flag
from ._inbox import STORE_ENV, open_run_store
from ._interactive import LineReader, Progress, TtyAnswerer, is_interactive

NAME = "run"
SUMMARY = "run the agent on one prompt (--once) or in an interactive session"
FLAGS = [
    *TOOLKIT_FLAGS,
    *MODEL_FLAGS,
    Flag("once", "PROMPT", "run this one prompt and exit (an empty prompt starts the interactive session)"),
    Flag("json", None, "with --once: print the result as one JSON object"),
    Flag("verbose", None, "print a line on stderr as each tool call starts and ends"),
    *APPROVAL_FLAGS,
    Flag("store", "URL", "with --once and no terminal: park a run that waits for an answer in this durable store "
         f"(sqlite:///runs.db, ...; else ${STORE_ENV}) for toolnexus answer"),
]

BANNER = "toolnexus agent ready. Type a prompt (Ctrl-D or 'exit' to quit)."
EXIT_PENDING = 3
EXIT_INTERRUPTED = 130
CANCELLED = "(cancelled — the conversation so far is kept)"
LEAVE_HINT = "(Ctrl-C again or Ctrl-D to leave)"


def _result_json(result: Any) -> str:
    pending = getattr(result, "pending", None)
    return json.dumps(
        {
            "text": result.text,
            "status": result.status,
            "turns": result.turns,
            "usage": result.usage,
            "limit": getattr(result, "limit", None),
            "pending": dataclasses.asdict(pending)
            if dataclasses.is_dataclass(pending) and not isinstance(pending, type)
            else pending,
        }
    )


async def execute(opts: dict[str, Any], console: Console) -> int:
    config = await load_config(opts)
    apply_model_settings(opts, config)
    require_model(opts)
    require_key(opts, console)
    once = opts.get("once")
    if once:
        return await _once(opts, console, once, config)
    return await _repl(opts, console, config)


async def _once(opts: dict[str, Any], console: Console, prompt: str, config: Optional[dict[str, Any]]) -> int:
    policy = cli_policy(opts)
    interactive = is_interactive()
    progress = Progress(console)
    wait_for = TtyAnswerer(console, LineReader(), progress) if interactive else None
    toolkit = await build_toolkit(opts, config=config, approvals=policy)
    parks = not interactive and (opts.get("store") or os.environ.get(STORE_ENV))
    store = open_run_store(opts, existing=False) if parks else None  # a run may start a new store
    client = make_client(opts, hooks=Activity(console, progress, bool(opts.get("verbose"))).hooks(), wait_for=wait_for,
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
        except Exception as exc:
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


def _stdin_is_a_terminal() -> bool:
    try:
        return sys.stdin.isatty()
    except (AttributeError, ValueError):
        return False


class _Interrupts:
    """Ctrl-C in the REPL: cancel the running turn, else arm, else leave (see the module docstring)."""

    def __init__(self, console: Console) -> None:
        self._console = console
        self.turn: Optional[asyncio.Future[Any]] = None
        self.armed = False
        self.leave = asyncio.Event()

    def install(self) -> bool:
        try:
            asyncio.get_running_loop().add_signal_handler(signal.SIGINT, self._fire)
        except (NotImplementedError, RuntimeError, ValueError):  # no signal handlers here: Ctrl-C stays fatal
            return False
        return True

    @staticmethod
    def remove() -> None:
        try:
            asyncio.get_running_loop().remove_signal_handler(signal.SIGINT)
        except (NotImplementedError, RuntimeError, ValueError):
            pass

    def _fire(self) -> None:
        if self.turn is not None and not self.turn.done():
            self.turn.cancel()
        elif self.armed:
            self.leave.set()
        else:
            self.armed = True
            self._console.err()
            self._console.err(LEAVE_HINT)
            self._console.err("> ", end="")

    async def readline(self, lines: LineReader) -> Optional[str]:
        """The next line, or None at end of input; raises `CliExit(130)` on a second idle Ctrl-C."""
        reading = asyncio.ensure_future(lines.readline())
        leaving = asyncio.ensure_future(self.leave.wait())
        try:
            await asyncio.wait({reading, leaving}, return_when=asyncio.FIRST_COMPLETED)
        finally:
            leaving.cancel()
            if not reading.done():
                reading.cancel()
        if not reading.done() or reading.cancelled():
            self._console.err()
            raise CliExit(EXIT_INTERRUPTED)
        self.armed = False
        return reading.result()


async def _repl(opts: dict[str, Any], console: Console, config: Optional[dict[str, Any]]) -> int:
    lines = LineReader()
    progress = Progress(console)
    wait_for = TtyAnswerer(console, lines, progress) if is_interactive() else None
    toolkit = await build_toolkit(opts, config=config, wait_for=wait_for, approvals=cli_policy(opts))
    client = make_client(opts, hooks=Activity(console, progress, bool(opts.get("verbose"))).hooks(),
                         wait_for=wait_for)
    session = str(uuid.uuid4())
    interrupts = _Interrupts(console)
    installed = _stdin_is_a_terminal() and interrupts.install()  # piped input keeps the plain exit 130
    try:
        console.err(BANNER)
        while True:
            console.err("> ", end="")
            line = await interrupts.readline(lines)
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
            turn = interrupts.turn = asyncio.ensure_future(client.ask(line, toolkit, id=session))
            try:
                await asyncio.wait({turn})
            finally:
                interrupts.turn = None
                progress.stop()
            if turn.cancelled():
                console.err(CANCELLED)
                continue
            if turn.exception() is not None:  # report and keep the session going
                console.err(f"error: {turn.exception()}")
                continue
            result = turn.result()
            console.out(result.text)
            if result.status != "done":
                console.err(f"status: {result.status}")
    finally:
        if installed:
            interrupts.remove()
        progress.stop()
        await client.aclose()
        await toolkit.close()
