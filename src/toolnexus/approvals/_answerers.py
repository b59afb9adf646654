"""Who may answer what: a request's group, and the host's mapping of people to groups.

A rule names the group its requests are for (`ApprovalRule(group="finance")`, per tool in a
policy; a whole agent's tools with `approvals={"*": ApprovalRule(group="finance")}` on that agent);
an escalation re-asks another group (`Escalate("oncall")`). Any other request may name one in
`data["group"]`. `Answerers` is the host's side: which identities are in which group
(`Answerers({"finance": ["alice", "bob"], "oncall": ["carol"]})`, or a callable `identity ->
groups` for a directory). Its `refusal(request, identity)` says why `identity` may not answer
(None: they may).

`answerer_problem(request, answer, answerers)` is the rule every answer meets, on every path: a
group's request is answered only by an answer that says who gives it (`Answer.by`) — whoever
the path cannot name is refused, so a restricted request is never approved anonymously — and,
where the path knows who is in which group (`answerers`), only by a member or an admin. The
front-ends toolnexus ships ask it with their `Answerers` and the identity they authenticated
(the web inbox and its links, `toolnexus answer --by`, a served A2A or MCP endpoint; one that was
given none treats every group as empty, so only its admins answer a group's request); every resume
path asks it without (`answer_problem`), which holds the `by` rule for answers that come from a
host's own code (`rt.resume`, the client, Temporal), whose membership check is the host's:
`answer_problem(request, answer, answerers)`.

Choices: a request with no group may be answered by anyone the front-end let in; `admins` may
answer every request; an expiry (`reason="expired"`: the request's own clock, whoever reports it)
is not a person's answer and is never refused. Identities and group names are compared exactly
(no case folding: an identity provider's names are taken as they come).

Pure functions over plain data; no I/O.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping
from dataclasses import replace
from typing import Any, Optional, Union

from ..errors import ToolnexusTypeError
from ..types import Answer, Request
from ._requests import approval_of

GroupsOf = Callable[[str], Iterable[str]]


def group_of(request: Any) -> Optional[str]:
    """The group `request` is for: its approval's `group` (escalated: the new group), else a
    `data["group"]` string, else None (anyone may answer)."""
    a = approval_of(request)
    if a is not None:
        group = a.get("group")
    else:
        data = request.data if isinstance(request, Request) and isinstance(request.data, dict) else {}
        group = data.get("group")
    return group if isinstance(group, str) and group else None


class Answerers:
    """Which identities belong to which group (see the module docstring).

    `groups`: `{group: [identity, ...]}`, or a callable `identity -> iterable of groups`;
    `admins`: identities that may answer any request."""

    def __init__(self, groups: Union[Mapping[str, Iterable[str]], GroupsOf, None] = None, *,
                 admins: Iterable[str] = ()) -> None:
        if groups is not None and not callable(groups) and not isinstance(groups, Mapping):
            raise ToolnexusTypeError("toolnexus: Answerers groups must be a mapping {group: [identity, ...]} or a "
                                     f"callable identity -> groups, got {type(groups).__name__}")
        self._lookup: Optional[GroupsOf] = groups if callable(groups) else None
        self._members: dict[str, set[str]] = {}
        if isinstance(groups, Mapping):
            for group, people in groups.items():
                if isinstance(people, str):
                    raise ToolnexusTypeError(f"toolnexus: Answerers group {group!r} must list identities, got the "
                                             f"string {people!r} (write [{people!r}])")
                self._members[str(group)] = {str(p) for p in people}
        self.admins = frozenset(str(a) for a in admins)

    def groups_of(self, identity: str) -> set[str]:
        """The groups `identity` is in."""
        if self._lookup is not None:
            try:
                return {str(g) for g in self._lookup(identity) or ()}
            except Exception:
                return set()
        return {g for g, people in self._members.items() if identity in people}

    def refusal(self, request: Any, identity: Optional[str]) -> Optional[str]:
        """Why `identity` may not answer `request`, or None when they may."""
        if not identity:
            return "who answers is not known (log in first)"
        group = group_of(request)
        if group is None or identity in self.admins or group in self.groups_of(identity):
            return None
        return f"this request is for the group {group!r}, and {identity} is not in it"

    def may_answer(self, request: Any, identity: Optional[str]) -> bool:
        return self.refusal(request, identity) is None


def answerer_problem(request: Any, answer: Optional[Answer], answerers: Optional[Answerers] = None) -> Optional[str]:
    """Why who gave `answer` may not answer `request`, or None (see the module docstring).

    Without `answerers` only the `by` rule is checked (a group's request needs an answer that says
    who gives it); with them, that `answer.by` is a member of the request's group or an admin."""
    group = group_of(request)
    if group is None or answer is None or (not answer.ok and answer.reason == "expired"):
        return None
    if not answer.by:
        return (f"this request is for the group {group!r}: only its members may answer it, and this answer does not "
                "say who gives it (Answer.by; --by NAME on the command line; a login in the inbox)")
    return answerers.refusal(request, answer.by) if answerers is not None else None


def caller_problem(request: Request, answer: Answer, identity: Optional[str], answerers: Answerers,
                   where: str) -> Optional[str]:
    """Why the caller a served `where` endpoint let in as `identity` (None: nobody known) may not give
    `answer` to `request`: a group's request takes only an authenticated member (or an admin). The
    one rule the served A2A and MCP endpoints apply; `where` names the endpoint in the message."""
    group = group_of(request)
    if group is None:
        return None
    if identity is None:
        how = "stdio, or HTTP without an auth_token" if where == "MCP" else "no auth_token"
        return (f"this request is for the group {group!r}, and this {where} connection does not say who is "
                f"answering ({how}): answer it where you are known (the inbox, toolnexus answer --by NAME)")
    return answerer_problem(request, replace(answer, by=identity), answerers)
