"""Approvals on the command line: the `--approve` / `--no-approve` flags of `run` and `serve`, the
interactive approval prompt, and the record that lets `toolnexus answer` resume a parked `run`.

Safe by default: `toolnexus run` and `toolnexus serve` ask before every call of `bash`, `write`,
`edit` and `apply_patch` (`DEFAULT_APPROVAL_TOOLS`). `--approve TOOL` (repeatable: a name, a glob,
or `source:glob` such as `mcp:github/*`) asks about more; `--no-approve TOOL` about less
(`--no-approve '*'` turns the defaults off). A name that matches no tool is warned about (the
defaults stay quiet, e.g. under `--no-builtins`).

`approval_prompt` is what `TtyAnswerer` asks for an approval request on a terminal: the tool, its
source and agent, the arguments, then `approve? [y/N/e(dit)/a(lways)]` — `y` approves, `a`
approves for the rest of the session, `e` edits the arguments (a JSON object, checked against the
tool's schema: an invalid edit is refused and asked again), anything else rejects and asks why
(`n too much` says it at once); the answer says `by` (the login name) and `via="cli"`.

Who may answer a group's request (`ApprovalRule(group=...)`): `--groups-file PATH` (a JSON object
`{group: [identity, ...]}`) and `--admin NAME` (`answerers_of`), the same flags for `toolnexus
inbox` and `toolnexus answer`; without them every group is empty, so only an admin answers a
group's request.

A `run --once` that parks in a durable store writes a record of the flags it ran with (never the
key; namespace `RUN_RECORD`, keyed by its conversation id), so `toolnexus answer ID --approve`
can rebuild the same toolkit and client without repeating them. The run's sticky decisions
(`--always`) are kept in that record too (`STICKY_KEY`), so an answer given in a later process
still knows them: the client keeps a conversation's decisions only while it lives.
"""

from __future__ import annotations

import fnmatch
import getpass
import json
from typing import Any, Optional

from ..approvals import (
    DEFAULT_APPROVAL_TOOLS,
    Answerers,
    ApprovalMemory,
    ApprovalPolicy,
    answer_problem,
    approval_of,
)
from ..errors import ToolnexusError
from ..types import Answer, Request
from ._common import CliExit, Console
from ._flags import Flag

APPROVAL_FLAGS = [
    Flag("approve", "TOOL", "ask before every call of TOOL (a name, a glob, or source:glob such as mcp:github/*)",
         repeat=True),
    Flag("no-approve", "TOOL", "do not ask before TOOL (bash, write, edit, apply_patch are asked about by default; "
         "--no-approve '*' turns that off)", repeat=True),
]
ANSWERER_FLAGS = [
    Flag("groups-file", "PATH", "who may answer each group's requests: a JSON object {group: [identity, ...]}"),
    Flag("admin", "NAME", "may answer every request (repeatable)", repeat=True),
]
RUN_RECORD = "toolnexus.cli.run"  # not a module path: a store namespace, kept as stored
# the flags a parked `run --once` keeps for `toolnexus answer` (never the key)
RUN_RECORD_KEYS = ("config", "skills", "no_builtins", "disable_tool", "tools_from", "base_url", "style", "model",
                   "system", "approve", "no_approve")
STICKY_KEY = "approval_memory"  # beside the flags: the run's sticky decisions, as `ApprovalMemory.to_record()`


def cli_policy(opts: dict[str, Any]) -> ApprovalPolicy:
    """The approval policy `--approve` / `--no-approve` describe, over the safe defaults."""
    approve = list(opts.get("approve") or [])
    exempt = list(opts.get("no_approve") or [])
    both = sorted(set(approve) & set(exempt))
    if both:
        raise CliExit(2, f"error: --approve and --no-approve both name {both[0]!r}")
    rules: dict[str, bool] = {name: False for name in exempt}
    defaults = [name for name in DEFAULT_APPROVAL_TOOLS
                if not any(fnmatch.fnmatchcase(name, pattern) for pattern in exempt) and name not in approve]
    rules.update({name: True for name in defaults})
    rules.update({name: True for name in approve})
    return ApprovalPolicy(rules, quiet=defaults)


def sticky_decisions(record: dict[str, Any]) -> tuple[ApprovalMemory, list[bool]]:
    """The sticky decisions a parked run's record holds, and a list that gets an entry when they change."""
    changed: list[bool] = []
    memory = ApprovalMemory.from_record(record.get(STICKY_KEY))
    memory.on_change = lambda: changed.append(True)
    return memory, changed


def json_file(opts: dict[str, Any], flag: str) -> Any:
    """The JSON object in the file `--flag` names (None without the flag); exit 2 for anything else."""
    path = opts.get(flag.replace("-", "_"))
    if not path:
        return None
    try:
        with open(path, encoding="utf-8") as fh:
            value = json.load(fh)
    except (OSError, ValueError) as exc:
        raise CliExit(2, f"error: --{flag} {path}: {exc}") from None
    if not isinstance(value, dict):
        raise CliExit(2, f"error: --{flag} {path} must hold a JSON object")
    return value


def answerers_of(opts: dict[str, Any]) -> Answerers:
    """Who is in which group, from `--groups-file` and `--admin` (none given: every group is empty)."""
    try:
        return Answerers(json_file(opts, "groups-file"), admins=opts.get("admin") or [])
    except ToolnexusError as exc:
        raise CliExit(2, f"error: --groups-file {opts.get('groups_file')}: {exc}") from None


def answerer() -> str:
    """Who answers from this terminal: the login name (a two-person rule needs two of them)."""
    try:
        return getpass.getuser()
    except Exception:
        return "cli"


def _describe(console: Console, req: Request) -> None:
    a = approval_of(req) or {}
    console.err(f"? {req.prompt}")
    where = f"{a.get('source')}" + (f" ({a['origin']})" if a.get("origin") else "")
    path = "/".join(a.get("agent_path") or []) or "-"
    console.err(f"  tool: {a.get('tool')}   source: {where}   agent: {path}")
    console.err("  arguments: " + json.dumps(a.get("arguments"), ensure_ascii=False, sort_keys=True))


async def approval_prompt(console: Console, lines: Any, req: Request) -> Answer:
    """Ask at the terminal (see the module docstring); end of input rejects."""
    _describe(console, req)
    by = answerer()
    while True:
        console.err("  approve? [y/N/e(dit)/a(lways)] ", end="")
        line = await lines.readline()
        if line is None:
            return Answer(id=req.id, ok=False, reason="declined", by=by, via="cli")
        word, _, rest = line.strip().partition(" ")
        choice = word.lower()
        if choice in ("y", "yes"):
            return Answer(id=req.id, ok=True, by=by, via="cli")
        if choice in ("a", "always"):
            answer = Answer(id=req.id, ok=True, always=True, by=by, via="cli")
        elif choice in ("e", "edit"):
            edited = await _edit(console, lines, req)
            if edited is None:
                continue
            answer = Answer(id=req.id, ok=True, arguments=edited, by=by, via="cli")
        else:
            message = rest.strip()
            if not message:
                console.err("  why? (sent to the model; Enter for no reason) ", end="")
                message = (await lines.readline() or "").strip()
            return Answer(id=req.id, ok=False, reason="declined", message=message or None, by=by, via="cli")
        problem = answer_problem(req, answer)
        if problem is None:
            return answer
        console.err(f"  refused: {problem}")


async def _edit(console: Console, lines: Any, req: Request) -> Optional[dict[str, Any]]:
    """One line of JSON: the edited arguments (None: back to the question)."""
    shown = json.dumps((approval_of(req) or {}).get("arguments"), ensure_ascii=False)
    console.err(f"  edited arguments as one JSON object (Enter to go back), now: {shown}")
    console.err("  > ", end="")
    line = await lines.readline()
    if line is None or not line.strip():
        return None
    try:
        value = json.loads(line)
    except ValueError as exc:
        console.err(f"  refused: not JSON ({exc})")
        return None
    if not isinstance(value, dict):
        console.err(f"  refused: the arguments must be a JSON object, got {type(value).__name__}")
        return None
    return value
