"""The approval request: what a human is shown, as plain JSON, and its one-line prompt.

An approval request is an ordinary `Request` of kind `"approval"` whose `data["approval"]` says
everything a person (or an inbox, `toolnexus pending`, an A2A caller, an MCP client) needs to
judge the call without reading code:

```text
{"approval": {
   "tool": "bash", "source": "builtin", "origin": null,       # what would run
   "description": "Run a shell command ...",
   "arguments": {"command": "rm -rf build"},                  # as the model sent them, secrets redacted
   "input_schema": {...},                                     # what an edit must satisfy
   "agent_path": ["root", "coder.1"], "call_id": "call_7",    # who asked, which call
   "required": 1, "approvals": [],                            # N-of-M: who approved so far
   "group": null, "expires_in": null, "on_expiry": null,      # whom to ask, until when, then what
   "escalated_from": null}}                                   # the request this one re-asks
```

The prompt says the same in one line: `Approve bash {"command": "rm -rf build"}? (builtin, agent
root/coder.1) Run a shell command ...`, with `[1 of 2 approvals: alice]` or `[escalated to
oncall]` when they apply. Arguments are redacted by the rules every other place uses: a value
whose key looks like a credential (`toolnexus._redact.is_credential_header`: `token`,
`password`, `api_key`, ...) is shown as `«redacted»`; an edit that leaves it so keeps the
original value. The tool gets the model's real arguments, never the redacted copy.

`call_id`, `agent_path` and (for a rule with `expires_in`) `expiresAt` are filled in by whoever
knows them (`stamp`): the client loop before anyone sees the request.

Pure functions; nothing here runs a tool.
"""

from __future__ import annotations

import copy
import json
from datetime import datetime, timedelta
from typing import Any, Optional

from .._redact import REDACTED, is_credential_header
from ..types import Request, Tool, new_request_id
from ._rules import ApprovalRule, Escalate

APPROVAL_KIND = "approval"
_ARGS_SHOWN = 200
_DESCRIPTION_SHOWN = 120


def is_approval_request(request: Any) -> bool:
    """A request an approval gate minted (kind `approval` with a `data["approval"]` object)."""
    return (isinstance(request, Request) and request.kind == APPROVAL_KIND and isinstance(request.data, dict)
            and isinstance(request.data.get("approval"), dict))


def approval_of(request: Any) -> Optional[dict[str, Any]]:
    """`request.data["approval"]` of a gate's request, else None."""
    return request.data["approval"] if is_approval_request(request) else None


def iso(when: datetime) -> str:
    """RFC 3339 in UTC with a `Z`, to the second."""
    return when.strftime("%Y-%m-%dT%H:%M:%SZ") if when.utcoffset() in (None, timedelta(0)) else when.isoformat()


def redact_arguments(value: Any) -> Any:
    """A copy with the value of every credential-looking key masked (nested objects too)."""
    if isinstance(value, dict):
        return {k: (REDACTED if is_credential_header(k) and v is not None else redact_arguments(v))
                for k, v in value.items()}
    if isinstance(value, list):
        return [redact_arguments(v) for v in value]
    return value


def restore_redacted(edited: Any, original: Any) -> Any:
    """`edited` with each `«redacted»` left in place put back to the original value at that path."""
    if edited == REDACTED:
        return original
    if isinstance(edited, dict) and isinstance(original, dict):
        return {k: restore_redacted(v, original.get(k)) if k in original else v for k, v in edited.items()}
    if isinstance(edited, list) and isinstance(original, list):
        return [restore_redacted(v, original[i]) if i < len(original) else v for i, v in enumerate(edited)]
    return edited


def _one_line(text: str, limit: int) -> str:
    line = " ".join(str(text or "").strip().splitlines()[:1]).strip()
    return line if len(line) <= limit else line[: limit - 1] + "…"


def _shown_args(arguments: Any) -> str:
    try:
        text = json.dumps(arguments, ensure_ascii=False, sort_keys=True, default=repr)
    except (TypeError, ValueError):
        text = repr(arguments)
    return text if len(text) <= _ARGS_SHOWN else text[: _ARGS_SHOWN - 1] + "…"


def render_prompt(a: dict[str, Any]) -> str:
    """The one-line prompt of approval data `a` (see the module docstring)."""
    where = [f"{a.get('source')}:{a['origin']}" if a.get("origin") else str(a.get("source") or "tool")]
    path = a.get("agent_path")
    if isinstance(path, list) and path:
        where.append("agent " + "/".join(str(p) for p in path))
    text = f"Approve {a.get('tool')} {_shown_args(a.get('arguments'))}? ({', '.join(where)})"
    description = _one_line(a.get("description") or "", _DESCRIPTION_SHOWN)
    if description:
        text += " " + description
    required = a.get("required") or 1
    approvals = [x for x in a.get("approvals") or [] if isinstance(x, dict)]
    if required > 1:
        who = ", ".join(str(x.get("by")) for x in approvals)
        text += f" [{len(approvals)} of {required} approvals" + (f": {who}]" if who else "]")
    if a.get("escalated_from"):
        text += f" [escalated to {a.get('group')}]"
    elif a.get("group"):
        text += f" [for {a['group']}]"
    return text


def _on_expiry(rule: ApprovalRule) -> Optional[dict[str, Any]]:
    if isinstance(rule.on_expiry, Escalate):
        return {"escalate": rule.on_expiry.group, "expires_in": rule.on_expiry.expires_in}
    return None


def approval_request(tool: Tool, args: dict[str, Any], rule: ApprovalRule, now: Optional[datetime] = None) -> Request:
    """The request a gate suspends `tool`'s call on (its prompt rendered from the data)."""
    a: dict[str, Any] = {
        "tool": tool.name,
        "source": tool.source,
        "origin": tool.origin,
        "description": tool.description,
        "arguments": redact_arguments(args),
        "input_schema": copy.deepcopy(tool.input_schema),
        "agent_path": None,
        "call_id": None,
        "required": rule.approvals,
        "approvals": [],
        "group": rule.group,
        "expires_in": rule.expires_in,
        "on_expiry": _on_expiry(rule),
        "escalated_from": None,
    }
    expires = iso(now + timedelta(seconds=rule.expires_in)) if now is not None and rule.expires_in else None
    return Request(id=new_request_id(), kind=APPROVAL_KIND, prompt=render_prompt(a), data={"approval": a},
                   expiresAt=expires)


def stamp(request: Request, call_id: Optional[str], agent_path: Optional[list[str]],
          now: Optional[datetime] = None) -> None:
    """Fill in the call id and agent path (and, the first time, `expiresAt` by `now`), in place."""
    a = approval_of(request)
    if a is None:
        return
    first = a.get("call_id") is None
    if call_id:  # a re-asked request in a replayed turn belongs to the call the model made this time
        a["call_id"] = call_id
    if agent_path and not a.get("agent_path"):
        a["agent_path"] = list(agent_path)
    if first and now is not None and a.get("expires_in") and not a.get("escalated_from"):
        request.expiresAt = iso(now + timedelta(seconds=float(a["expires_in"])))
    request.prompt = render_prompt(a)


def reissued(request: Request, *, approved_by: Optional[dict[str, Any]] = None, escalate_to: Optional[str] = None,
             expires_in: Optional[float] = None, now: Optional[datetime] = None) -> Request:
    """The same approval asked again under a new id: with one more approval collected, or escalated
    to `escalate_to` (open `expires_in` seconds from `now`, or with no expiry)."""
    a = copy.deepcopy(approval_of(request) or {})
    expires = request.expiresAt
    tag = "esc"
    if approved_by is not None:
        a["approvals"] = [*(a.get("approvals") or []), approved_by]
        tag = f"a{len(a['approvals'])}"
    if escalate_to is not None:
        a["group"] = escalate_to
        a["escalated_from"] = request.id
        a["on_expiry"] = None  # one escalation; when that expires too, it is declined
        a["expires_in"] = expires_in
        expires = iso(now + timedelta(seconds=expires_in)) if now is not None and expires_in else None
    # The new id is derived, not drawn: the same answer re-issues the same request in any process
    # (a Temporal replay, a restored run), and the ids of one call's approvals read as a family.
    return Request(id=f"{request.id}.{tag}", kind=APPROVAL_KIND, prompt=render_prompt(a), data={"approval": a},
                   expiresAt=expires)
