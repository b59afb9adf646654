"""The `toolnexus` command: `main(argv) -> exit code`, and the dispatcher over its subcommands.

Each subcommand is one module (`run`, `tools`, `serve`, `worker`) exposing `NAME`, `SUMMARY`, `FLAGS`
(`cli.flags.Flag`s) and `async execute(opts, console) -> int`; adding one is a new module plus
one entry in `COMMANDS` (a task-store command reuses `common.STORE_FLAG` and `common.open_store`,
which accept every selector `toolnexus.serve.resolve_store` knows). The dispatcher owns what every subcommand shares:
usage and help text (built from the modules' flags), `--version`, flag parsing, the exit codes, and the rule that no
traceback and no secret ever reaches the terminal.

Exit codes: 0 success / help / version / clean stop; 1 runtime failure (toolkit build, bind, a
`--once` run that raised; `doctor` found a damaged run in service); 2 usage (no or unknown
subcommand, bad flag or value, missing required flag or key, nothing to serve, unsafe exposure);
3 a `--once` run (or an answered durable run) that ended `pending` or `incomplete`; 4 `answer` of
a request already answered; 130 interrupted (Ctrl-C in `run`; in `answer` / `resume` the run is
handed back as it was).

An unknown command close to a real one (`toolnexus runn`) gets one line naming it — `unknown
command "runn"; did you mean "run"?` — and a pointer to `--help`, not the whole usage text, which
would scroll the one line that matters off the screen; one that resembles nothing keeps the
pinned 0.21 output (`unknown command "x"`, an empty line, the usage on stdout). `-V` is
`--version`.

Which verbs may create a store (`open_run_store(opts, existing=...)`): only those that write a
run of their own — `run --store`, and `worker --store` (a fleet worker may be the first process
on a fresh database: it creates the schema and waits for work). Every other verb names runs that
must already be there, so a store that does not exist is an error naming it, never an empty one
made on the spot by a typo: the read-only `pending`, `runs`, `show`, `workers`, `doctor`, and
`answer`, `resume`, `cancel`, `prune`.
"""

from __future__ import annotations

import asyncio
import difflib
import sys
from types import ModuleType
from typing import Optional

from . import (
    _answer,
    _cancel,
    _doctor,
    _pending,
    _prune,
    _resume,
    _run,
    _runs,
    _serve,
    _show,
    _tools,
    _web_inbox,
    _worker,
    _workers,
)
from ._common import API_KEY_ENV, MODEL_FLAGS, TOOLKIT_FLAGS, CliExit, Console
from ._flags import Flag, UsageError, parse

__all__ = ["COMMANDS", "main", "usage"]

COMMANDS: dict[str, ModuleType] = {m.NAME: m for m in (_run, _tools, _serve, _pending, _answer, _worker, _runs, _show,
                                                      _resume, _cancel, _prune, _workers, _doctor,
                                                      _web_inbox)}
EXIT_USAGE = 2
EXIT_INTERRUPTED = 130


def _version() -> str:
    from .._version import VERSION as __version__

    return __version__


def _flag_lines(flags: list[Flag]) -> list[str]:
    width = max(len(f.spelled) for f in flags)
    return [f"  {f.spelled.ljust(width)}  {f.help}" for f in flags]


def command_help(module: ModuleType) -> str:
    lines = [f"usage: toolnexus {module.NAME} [flags]", "", module.SUMMARY, "", "flags:", *_flag_lines(module.FLAGS)]
    lines += ["", "Flags take --flag value or --flag=value; -flag works too. The API key is read from --api-key, else",
              "the environment: " + ", ".join(API_KEY_ENV) + "."]
    return "\n".join(lines)


def usage() -> str:
    """The top-level usage text: every subcommand and its flags, and the API-key variables."""
    lines = ["usage: toolnexus <command> [flags]", "       toolnexus --help | --version (-V)", "", "commands:"]
    width = max(len(name) for name in COMMANDS)
    lines += [f"  {name.ljust(width)}  {m.SUMMARY}" for name, m in COMMANDS.items()]
    shared = {f.name for f in TOOLKIT_FLAGS + MODEL_FLAGS}
    for title, group in (
        ("toolkit flags (run, tools, serve)", TOOLKIT_FLAGS),
        ("model flags (run, serve, answer)", MODEL_FLAGS),
    ):
        lines += ["", title + ":", *_flag_lines(group)]
    for name, module in COMMANDS.items():
        own = [f for f in module.FLAGS if f.name not in shared]
        lines += ["", f"{name} flags:", *_flag_lines(own)]
    lines += [
        "",
        "Flags take --flag value or --flag=value; -flag works too; repeatable flags add up.",
        "API key: --api-key KEY, else " + API_KEY_ENV[0] + ", then " + API_KEY_ENV[1] + " (--style openai) or "
        + API_KEY_ENV[2] + " (--style anthropic), then the other of the two. It is never printed; a loopback",
        "--base-url (127.0.0.1, ::1, localhost) needs none.",
        "Model: --base-url / --style / --model, else the --config file's llm block, else OPENAI_BASE_URL",
        "(ANTHROPIC_BASE_URL with --style anthropic) and TOOLNEXUS_MODEL.",
        'Run "toolnexus <command> --help" for one command.',
    ]
    return "\n".join(lines)


def _dispatch(module: ModuleType, argv: list[str], console: Console) -> int:
    try:
        opts = parse(module.FLAGS, argv, command=module.NAME)
    except UsageError as exc:
        console.err(f"error: {exc}")
        console.err(f'run "toolnexus {module.NAME} --help" to see its flags')
        return EXIT_USAGE
    if opts.get("help"):
        console.out(command_help(module))
        return 0
    console.add_secret(opts.get("api_key"))
    try:
        return asyncio.run(module.execute(opts, console))
    except CliExit as exc:
        if exc.message:
            console.err(exc.message)
        return exc.code
    except KeyboardInterrupt:
        return EXIT_INTERRUPTED
    except Exception as exc:
        console.err(f"error: {type(exc).__name__}: {exc}")
        return 1


def main(argv: Optional[list[str]] = None) -> int:
    """Run the command line `argv` (default `sys.argv[1:]`); returns the exit code."""
    args = list(sys.argv[1:] if argv is None else argv)
    console = Console()
    if not args:
        console.out(usage())
        return EXIT_USAGE
    head = args[0]
    if head in ("--help", "-h", "-help", "help"):
        console.out(usage())
        return 0
    if head in ("--version", "-version", "-V"):
        console.out(f"toolnexus {_version()}")
        return 0
    module = COMMANDS.get(head)
    if module is None:
        near = difflib.get_close_matches(head.lower(), list(COMMANDS), n=1, cutoff=0.6)
        if near:
            console.err(f'unknown command "{head}"; did you mean "{near[0]}"?')
            console.err('run "toolnexus --help" to see every command')
            return EXIT_USAGE
        console.err(f'unknown command "{head}"')
        console.err()
        console.out(usage())
        return EXIT_USAGE
    return _dispatch(module, args[1:], console)
