"""Deciding an approval request's answer: run (maybe with edited arguments), decline, or ask again.

`decide(request, answer, now)` is the one place an answer to a gate's approval request becomes an
outcome, on every path (in process, durable resume, agent replay, MCP, A2A, Temporal):

| answer | outcome |
|---|---|
| `None`, or `ok=False` | `decline`: the model receives `declined/expired: <prompt>` and the message, if any |
| expired, and the rule escalates | `reask`: the same approval, asked of the escalation group (new id) |
| `ok`, fewer approvals than required so far | `reask`: the same approval with this approver counted, under a new id |
| `ok`, refused by `answer_problem` | `invalid`: nothing runs |
| `ok`, enough approvals | `run`, with `answer.arguments` when the approver edited them |

`answer_problem` is checked wherever an answer is accepted (before the store claims it, so a
refused answer changes nothing): a group's request takes only an answer that says who gives it
(`answerer_problem`; with `answerers`, only from a member); edited arguments must satisfy the
tool's input schema; under a two-person rule (`required > 1`) every approval must name a
different `by`, an edit is refused (each approver must approve the same call) and so is `always`.

`answer_from_text` reads a reply typed by a person (an A2A follow-up message, a chat): `yes` /
`approve`, `always`, `no: <message>` / `reject <message>`, `edit {json}`, or a JSON object with
the `Answer` fields. Anything it cannot read is a decline carrying the text as its message: an
unclear reply never approves anything.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from datetime import datetime
from typing import Any, Optional

from .._schema import schema_error
from ..errors import ToolnexusValueError
from ..types import Answer, Request, declined_text
from ._answerers import Answerers, answerer_problem
from ._requests import approval_of, iso, redact_arguments, reissued

# one assignment each (the API reference reads module-level names assigned one by one)
RUN = "run"
DECLINE = "decline"
REASK = "reask"
INVALID = "invalid"


@dataclass(frozen=True)
class Decision:
    """What an answer does: `kind` is run / decline / reask / invalid (see the module docstring)."""

    kind: str
    text: str = ""  # decline / invalid: what the model receives
    request: Optional[Request] = None  # reask: the request to ask now
    arguments: Optional[dict[str, Any]] = None  # run: the approver's edited arguments (None: as sent)


def _approved(a: dict[str, Any]) -> list[dict[str, Any]]:
    return [x for x in a.get("approvals") or [] if isinstance(x, dict)]


def answer_problem(request: Request, answer: Optional[Answer], answerers: Optional[Answerers] = None) -> Optional[str]:
    """Why `answer` to `request` cannot be accepted, or None: who gave it (a group's request, see
    `answerer_problem`), then the rules for an `ok` answer to an approval request."""
    refused = answerer_problem(request, answer, answerers)
    if refused is not None:
        return refused
    a = approval_of(request)
    if a is None or answer is None or not answer.ok:
        return None
    required = int(a.get("required") or 1)
    if required > 1:
        got = _approved(a)
        if answer.always:
            return (f"this call needs {required} approvals from different people: an approval cannot be made "
                    "'always' (approve this call only)")
        if answer.arguments is not None:
            return (f"this call needs {required} approvals from different people, who must all approve the same "
                    "arguments: reject it with a message instead of editing")
        if not answer.by:
            return (f"this call needs {required} approvals from different people: say who approves "
                    "(Answer.by, e.g. --by NAME)")
        if any(x.get("by") == answer.by for x in got):
            return (f"{answer.by} already approved this call; it needs {required - len(got)} more approval(s) "
                    "from someone else")
    if answer.arguments is not None:
        problem = schema_error(a.get("input_schema") or None, answer.arguments)
        if problem:
            return f"the edited arguments do not match the tool's input schema: {problem}"
    return None


def decide(request: Request, answer: Optional[Answer], now: datetime) -> Decision:
    """The outcome of `answer` to the approval `request` (see the module docstring)."""
    a = approval_of(request) or {}
    if answer is None or not answer.ok:
        escalation = a.get("on_expiry")
        if (answer is not None and answer.reason == "expired" and isinstance(escalation, dict)
                and escalation.get("escalate") and not a.get("escalated_from")):
            again = reissued(request, escalate_to=str(escalation["escalate"]), expires_in=escalation.get("expires_in"),
                             now=now)
            return Decision(REASK, request=again)
        return Decision(DECLINE, text=declined_text(request.prompt, answer))
    problem = answer_problem(request, answer)
    if problem is not None:
        return Decision(INVALID, text=f"invalid answer for {request.prompt}: {problem}")
    required = int(a.get("required") or 1)
    if len(_approved(a)) + 1 < required:
        by = {"by": answer.by, "at": iso(now)}
        if answer.via:
            by["via"] = answer.via
        return Decision(REASK, request=reissued(request, approved_by=by))
    return Decision(RUN, arguments=answer.arguments)


def edited_note(arguments: dict[str, Any]) -> str:
    """The line the model reads before the result of a call a human edited."""
    shown = json.dumps(redact_arguments(arguments), ensure_ascii=False, sort_keys=True, default=repr)
    return f"note: a human changed this call's arguments before approving it; it ran with {shown}"


_YES = {"y", "yes", "approve", "approved", "ok", "allow", "accept"}
_ALWAYS = {"a", "always"}
_NO = {"n", "no", "reject", "rejected", "decline", "declined", "deny", "denied"}


def _from_object(request: Request, obj: dict[str, Any], by: Optional[str], via: Optional[str]) -> Answer:
    ok = obj.get("approve", obj.get("ok"))
    if not isinstance(ok, bool):
        raise ToolnexusValueError('an answer object needs "approve": true or false')
    return Answer(id=request.id, ok=ok, reason=None if ok else "declined", message=obj.get("message"),
                  arguments=obj.get("arguments"), always=bool(obj.get("always", False)),
                  by=obj.get("by") if isinstance(obj.get("by"), str) else by, via=via)


def answer_from_text(request: Request, text: str, *, by: Optional[str] = None, via: Optional[str] = None) -> Answer:
    """A person's typed reply to an approval request as an `Answer` (see the module docstring)."""
    body = (text or "").strip()
    if body.startswith("{"):
        try:
            obj = json.loads(body)
            if isinstance(obj, dict):
                return _from_object(request, obj, by, via)
        except (ValueError, TypeError):
            pass
    head, _, rest = body.partition(" ")
    word = head.rstrip(":,.!").lower()
    rest = (body[len(head):] if head.endswith(":") else rest).strip().lstrip(":").strip()
    if word == "edit":
        try:
            arguments = json.loads(rest)
        except ValueError:
            arguments = None
        if isinstance(arguments, dict):
            return Answer(id=request.id, ok=True, arguments=arguments, by=by, via=via)
    elif word in _YES:
        return Answer(id=request.id, ok=True, message=rest or None, by=by, via=via)
    elif word in _ALWAYS:
        return Answer(id=request.id, ok=True, always=True, message=rest or None, by=by, via=via)
    elif word in _NO:
        return Answer(id=request.id, ok=False, reason="declined", message=rest or None, by=by, via=via)
    return Answer(id=request.id, ok=False, reason="declined", message=body or None, by=by, via=via)
