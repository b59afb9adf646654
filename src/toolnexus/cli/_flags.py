"""The command line's flag grammar: one small parser shared by every subcommand.

A subcommand declares its flags as `Flag`s; `parse` turns argv into a dict keyed by the flag's
`dest`. Accepted spellings: `--flag value`, `--flag=value`, and the single-dash long forms
`-flag value` / `-flag=value`. A flag without a metavar is a switch (`--a2a`); a repeatable flag
collects every occurrence in order; a flag with `choices` rejects other values; a `positional`
flag may also be given bare, once (`toolnexus show RUN` is `toolnexus show --run RUN`; `toolnexus
answer ID` is `--id ID`). Anything else —
an unknown flag, a missing value, a stray positional argument — raises `UsageError` naming it,
which the dispatcher turns into exit code 2. argparse is not used: its error text and exit
behaviour are not ours to pin, and it would accept abbreviations. `--help` / `-h` anywhere in
flag position sets the `help` key.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Optional, Sequence

from ..errors import ToolnexusError


class UsageError(ToolnexusError):
    """The command line is wrong; the message says what and where."""


@dataclass(frozen=True)
class Flag:
    """One flag: `--name METAVAR` (or a switch when `metavar` is None)."""

    name: str
    metavar: Optional[str]
    help: str
    repeat: bool = False
    choices: Optional[tuple[str, ...]] = None
    default: Any = None
    positional: bool = False

    @property
    def dest(self) -> str:
        return self.name.replace("-", "_")

    @property
    def spelled(self) -> str:
        if self.positional:
            return f"{self.metavar} (or --{self.name} {self.metavar})"
        head = f"--{self.name}" + (f" {self.metavar}" if self.metavar else "")
        return head + (" (repeatable)" if self.repeat else "")


def _split(arg: str) -> tuple[Optional[str], Optional[str]]:
    """`--x=1` → ("x", "1"); `-x` → ("x", None); a non-flag → (None, None)."""
    if arg.startswith("--"):
        body = arg[2:]
    elif arg.startswith("-") and len(arg) > 1:
        body = arg[1:]
    else:
        return None, None
    name, eq, value = body.partition("=")
    return name, (value if eq else None)


def parse(flags: Sequence[Flag], argv: Sequence[str], *, command: str) -> dict[str, Any]:
    """argv → `{dest: value}`; every flag present as a key (its default, `[]`, or `False`)."""
    by_name = {f.name: f for f in flags}
    out: dict[str, Any] = {}
    for f in flags:
        out[f.dest] = [] if f.repeat else (False if f.metavar is None else f.default)
    out["help"] = False
    args = list(argv)
    i = 0
    while i < len(args):
        arg = args[i]
        name, inline = _split(arg)
        if name is None:
            bare = next((f for f in flags if f.positional and (f.repeat or out[f.dest] is None)), None)
            if bare is None:
                raise UsageError(f'unexpected argument "{arg}" for {command}')
            if bare.repeat:
                out[bare.dest].append(arg)
            else:
                out[bare.dest] = arg
            i += 1
            continue
        flag = by_name.get(name)
        if flag is None and name in ("help", "h") and inline is None:
            out["help"] = True
            i += 1
            continue
        if flag is None:
            raise UsageError(f"unknown flag {arg.split('=', 1)[0]} for {command}")
        if flag.metavar is None:
            if inline is not None:
                raise UsageError(f"--{flag.name} takes no value (got {arg})")
            out[flag.dest] = True
            i += 1
            continue
        if inline is None:
            if i + 1 >= len(args):
                raise UsageError(f"--{flag.name} needs a value ({flag.metavar})")
            value = args[i + 1]
            i += 2
        else:
            value = inline
            i += 1
        if flag.choices is not None and value not in flag.choices:
            raise UsageError(f"--{flag.name} must be one of {', '.join(flag.choices)} (got {value!r})")
        if flag.repeat:
            out[flag.dest].append(value)
        else:
            out[flag.dest] = value
    return out

