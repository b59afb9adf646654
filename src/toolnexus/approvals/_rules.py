"""What needs an approval: `ApprovalRule` (one tool's rule) and `ApprovalPolicy` (rules by name).

A rule says *whether* a call waits (`when`: `True`, or a predicate over the call's arguments and
context, sync or async), *how many* distinct people must approve it (`approvals`, the two-person
rule is `2`), *whom* to ask (`group`, a label the host routes on), *how long* the request stays
open (`expires_in` seconds) and what an expiry does (`on_expiry`: `"decline"`, or
`Escalate(group)`: ask another group instead). Everything a rule decides at answer time is copied
into the request it mints, so it is store state and survives a restart.

A policy names tools: an exact name (`"bash"`), a glob over names (`"github_*"`), or a glob over
`<source>:<origin>` — the source kind and, for tools that come from a server or an agent, that
server's name and the tool's own name (`"mcp:github/*"`, `"mcp:*"`, `"builtin:*"`, `"a2a:*"`).
Each name maps to `True` (approve every call), `False` (never: exempt it from a wider glob), a
predicate, or a rule. An exact name wins over any glob; among globs the first listed wins.

Choices, deliberate:
- A predicate that raises, or returns something that is not a bool, *requires* the approval (it
  fails closed) and says so once on the `toolnexus` logger.
- A tool's own `needs_approval` always applies; a policy only adds approvals to tools that do not
  declare one (`False` in a policy cannot switch off an approval its author asked for).

Nothing here runs a tool or does I/O.
"""

from __future__ import annotations

import fnmatch
import inspect
import math
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import Any, Callable, Optional, Union

from .._diag import warn_once
from ..errors import ToolnexusTypeError, ToolnexusValueError
from ..types import Tool, ToolContext

#: The built-ins `toolnexus run` and `toolnexus serve` ask about unless told otherwise.
DEFAULT_APPROVAL_TOOLS = ("bash", "write", "edit", "apply_patch")

Predicate = Callable[[dict[str, Any], Optional[ToolContext]], Any]


def _seconds(value: Any, what: str) -> Optional[float]:
    if value is None:
        return None
    if isinstance(value, bool) or not isinstance(value, (int, float)) or not math.isfinite(value) or value <= 0:
        raise ToolnexusValueError(f"toolnexus: {what} must be a number of seconds above 0, got {value!r}")
    return float(value)


@dataclass(frozen=True)
class Escalate:
    """`on_expiry=Escalate("oncall")`: an expired request is asked again of `group` (for
    `expires_in` more seconds, or with no expiry); if that one expires too, it is declined."""

    group: str
    expires_in: Optional[float] = None

    def __post_init__(self) -> None:
        if not isinstance(self.group, str) or not self.group.strip():
            raise ToolnexusValueError(f"toolnexus: Escalate needs a group name, got {self.group!r}")
        object.__setattr__(self, "expires_in", _seconds(self.expires_in, "Escalate expires_in"))


@dataclass(frozen=True)
class ApprovalRule:
    """How one tool's calls are approved (see the module docstring)."""

    when: Union[bool, Predicate] = True
    approvals: int = 1
    group: Optional[str] = None
    expires_in: Optional[float] = None
    on_expiry: Union[str, Escalate] = "decline"

    def __post_init__(self) -> None:
        if not isinstance(self.when, bool) and not callable(self.when):
            raise ToolnexusTypeError("toolnexus: ApprovalRule when must be True, False or a predicate "
                                     f"(args, ctx) -> bool, got {type(self.when).__name__}")
        if isinstance(self.approvals, bool) or not isinstance(self.approvals, int) or self.approvals < 1:
            raise ToolnexusValueError(f"toolnexus: ApprovalRule approvals must be a whole number of at least 1, "
                                      f"got {self.approvals!r}")
        if self.group is not None and (not isinstance(self.group, str) or not self.group.strip()):
            raise ToolnexusValueError(f"toolnexus: ApprovalRule group must be a non-empty name, got {self.group!r}")
        object.__setattr__(self, "expires_in", _seconds(self.expires_in, "ApprovalRule expires_in"))
        if self.on_expiry != "decline" and not isinstance(self.on_expiry, Escalate):
            raise ToolnexusValueError('toolnexus: ApprovalRule on_expiry must be "decline" or Escalate(group), '
                                      f"got {self.on_expiry!r}")

    async def applies(self, tool_name: str, args: dict[str, Any], ctx: Optional[ToolContext]) -> bool:
        """Whether this call waits for an approval; a failing predicate says yes (fails closed)."""
        if isinstance(self.when, bool):
            return self.when
        try:
            verdict = self.when(args, ctx)
            if inspect.isawaitable(verdict):
                verdict = await verdict
        except Exception as exc:
            warn_once(f"approval-predicate:{tool_name}:{type(exc).__name__}",
                      f'[toolnexus] the approval predicate of "{tool_name}" raised {type(exc).__name__}: {exc} '
                      "— the call waits for an approval")
            return True
        if not isinstance(verdict, bool):
            warn_once(f"approval-predicate:{tool_name}:type",
                      f'[toolnexus] the approval predicate of "{tool_name}" returned {type(verdict).__name__}, '
                      "not a bool — the call waits for an approval")
            return True
        return verdict


NeedsApproval = Union[bool, Predicate, ApprovalRule, None]


def rule_of(value: Any, where: str) -> Optional[ApprovalRule]:
    """`needs_approval` / a policy value as a rule: None for `False`/`None` (no approval)."""
    if value is None or value is False:
        return None
    if value is True:
        return ApprovalRule()
    if isinstance(value, ApprovalRule):
        return value
    if callable(value):
        return ApprovalRule(when=value)
    raise ToolnexusTypeError(f"toolnexus: {where} must be True, False, a predicate (args, ctx) -> bool or an "
                             f"ApprovalRule, got {type(value).__name__}")


def qualified_name(tool: Tool) -> str:
    """`<source>:<origin>` (`mcp:github/create_issue`), or `<source>:<name>` for a tool with no origin."""
    return f"{tool.source}:{tool.origin or tool.name}"


def _is_glob(pattern: str) -> bool:
    return any(ch in pattern for ch in "*?[")


@dataclass(frozen=True)
class _Entry:
    pattern: str
    rule: Optional[ApprovalRule]  # None: never
    quiet: bool

    def matches(self, tool: Tool) -> bool:
        subject = qualified_name(tool) if ":" in self.pattern else tool.name
        return fnmatch.fnmatchcase(subject, self.pattern)


class ApprovalPolicy:
    """Approval rules by tool name, glob or source (see the module docstring).

    `ApprovalPolicy({"bash": True, "mcp:github/*": True, "mcp:github/list_*": False})`, or a list of
    names that all need approval. `quiet` names patterns that stay silent when they match no tool
    (defaults applied on a user's behalf); every other pattern that matches nothing is a warning.
    """

    def __init__(self, rules: Union[Mapping[str, Any], Iterable[str], None] = None, *,
                 quiet: Iterable[str] = ()) -> None:
        quiet_set = set(quiet)
        items: list[tuple[str, Any]]
        if rules is None:
            items = []
        elif isinstance(rules, Mapping):
            items = list(rules.items())
        elif isinstance(rules, (str, bytes)):
            raise ToolnexusTypeError(f"toolnexus: approvals must be a mapping or a list of tool names, got the "
                                     f"string {rules!r} (write [{rules!r}])")
        else:
            items = [(name, True) for name in rules]
        entries = []
        for pattern, value in items:
            if not isinstance(pattern, str) or not pattern:
                raise ToolnexusTypeError(f"toolnexus: an approvals key must be a tool name or glob, got {pattern!r}")
            entries.append(_Entry(pattern, rule_of(value, f"approvals[{pattern!r}]"), pattern in quiet_set))
        # exact names first (they win), then globs in the order given
        self._entries = [e for e in entries if not _is_glob(e.pattern)] + [e for e in entries if _is_glob(e.pattern)]

    @classmethod
    def of(cls, value: Any) -> Optional["ApprovalPolicy"]:
        """An `approvals=` argument as a policy: a policy, a mapping, a list of names, or None."""
        if value is None or isinstance(value, ApprovalPolicy):
            return value
        return cls(value)

    def __bool__(self) -> bool:
        return bool(self._entries)

    def __repr__(self) -> str:
        shown = {e.pattern: (e.rule is not None) for e in self._entries}
        return f"ApprovalPolicy({shown!r})"

    @property
    def patterns(self) -> list[str]:
        return [e.pattern for e in self._entries]

    def rule_for(self, tool: Tool) -> Optional[ApprovalRule]:
        """The rule the policy gives `tool`, or None (not named, or named `False`)."""
        for entry in self._entries:
            if entry.matches(tool):
                return entry.rule
        return None

    def unmatched(self, tools: Iterable[Tool]) -> list[str]:
        """The patterns (not quiet) that match none of `tools`: likely typos."""
        listed = list(tools)
        return [e.pattern for e in self._entries if not e.quiet and not any(e.matches(t) for t in listed)]
