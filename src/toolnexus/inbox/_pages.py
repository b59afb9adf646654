"""The inbox's HTML, server-rendered: every value a model, a tool or a person wrote goes through
`esc` (HTML-escaped, quotes included), so a prompt holding `<script>` is shown as text. No inline
script or style anywhere (the CSP forbids both): behaviour is `static/inbox.js`, looks are
`static/inbox.css`. Forms carry their CSRF field; every control has a label; the pages read on
a phone (one column below 40em).
"""

from __future__ import annotations

import html
import json
from datetime import UTC, datetime
from typing import Any, Optional, Sequence
from urllib.parse import quote, urlencode

from ..approvals import approval_of, group_of
from ..durable import PendingRun
from ._forms import Field, fields_of, pretty

_MESSAGE_CUT = 4000


def esc(value: Any) -> str:
    return html.escape("" if value is None else str(value), quote=True)


def age_text(when: Optional[datetime], now: Optional[datetime] = None) -> str:
    if when is None:
        return "-"
    seconds = max(0.0, ((now or datetime.now(UTC)) - when).total_seconds())
    for unit, size in (("d", 86400), ("h", 3600), ("m", 60)):
        if seconds >= size:
            return f"{int(seconds // size)}{unit}"
    return f"{int(seconds)}s"


def layout(base: str, title: str, body: str, *, who: Optional[str] = None, csrf: Optional[str] = None,
           page: str = "page", data: Optional[dict[str, str]] = None) -> str:
    attrs = "".join(f' data-{esc(k)}="{esc(v)}"' for k, v in (data or {}).items())
    user = ""
    if who:
        logout = (f'<form method="post" action="{esc(base)}/logout" class="inline">'
                  f'<input type="hidden" name="csrf" value="{esc(csrf)}">'
                  '<button type="submit" class="link">Log out</button></form>') if csrf else ""
        user = f'<p class="who">Signed in as <strong>{esc(who)}</strong> {logout}</p>'
    return ("<!doctype html>\n<html lang=\"en\"><head><meta charset=\"utf-8\">"
            '<meta name="viewport" content="width=device-width, initial-scale=1">'
            f"<title>{esc(title)}</title>"
            f'<link rel="stylesheet" href="{esc(base)}/static/inbox.css">'
            f'<script src="{esc(base)}/static/inbox.js" defer></script></head>'
            f'<body class="{esc(page)}"{attrs}><header><p class="brand"><a href="{esc(base)}/">toolnexus inbox</a></p>'
            f"{user}</header><main id=\"main\">{body}</main></body></html>")


def _prompt_of(p: PendingRun) -> str:
    a = approval_of(p.request)
    if a is not None:
        return f"{a.get('tool')} {json.dumps(a.get('arguments'), ensure_ascii=False, sort_keys=True)}"
    return p.request.prompt


def _agent_of(p: PendingRun) -> str:
    a = approval_of(p.request)
    path = a.get("agent_path") if a is not None else None
    if not path:
        path = p.path
    return "/".join(str(x) for x in path) if path else "-"


def rows_html(base: str, items: Sequence[PendingRun], now: datetime) -> str:
    """The list's rows (also what the live update fetches)."""
    if not items:
        return '<tr class="empty"><td colspan="6">Nothing is waiting.</td></tr>'
    rows = []
    for p in items:
        href = f"{base}/r/{quote(p.request.id, safe='')}"
        group = group_of(p.request)
        status = {"open": "waiting", "queued": "answered, applying", "claimed": "answered, applying"}.get(p.status,
                                                                                                          p.status)
        rows.append(
            f'<tr data-id="{esc(p.request.id)}"><td data-label="Waiting">{esc(age_text(p.created_at, now))}</td>'
            f'<td data-label="Asks"><a href="{esc(href)}">{esc(_prompt_of(p)[:160])}</a>'
            f'<span class="sub">{esc(p.request.kind)}</span></td>'
            f'<td data-label="Agent">{esc(_agent_of(p))}</td>'
            f'<td data-label="For">{esc(group or "anyone")}</td>'
            f'<td data-label="Status">{esc(status)}</td>'
            f'<td data-label="Run"><code>{esc(p.run_id)}</code></td></tr>')
    return "".join(rows)


def list_page(base: str, *, who: str, csrf: str, items: Sequence[PendingRun], now: datetime, filters: dict[str, str],
              next_cursor: Optional[str], kinds: Sequence[str], notice: Optional[str] = None) -> str:
    query = {k: v for k, v in filters.items() if v}
    ages = [("", "any age"), ("5m", "5 minutes"), ("1h", "an hour"), ("1d", "a day")]
    age_opts = "".join(f'<option value="{esc(v)}"{" selected" if filters.get("older_than") == v else ""}>{esc(t)}'
                       "</option>" for v, t in ages)
    kind_opts = '<option value="">any kind</option>' + "".join(
        f'<option value="{esc(k)}"{" selected" if filters.get("kind") == k else ""}>{esc(k)}</option>' for k in kinds)
    mine = " checked" if filters.get("mine") else ""
    form = (
        f'<form method="get" action="{esc(base)}/" class="filters" role="search" aria-label="Filter requests">'
        f'<label for="f-agent">Agent</label><input id="f-agent" name="agent" value="{esc(filters.get("agent"))}" '
        'placeholder="entry agent">'
        f'<label for="f-kind">Kind</label><select id="f-kind" name="kind">{kind_opts}</select>'
        f'<label for="f-age">Waiting at least</label><select id="f-age" name="older_than">{age_opts}</select>'
        f'<label for="f-group">For group</label><input id="f-group" name="assignee" '
        f'value="{esc(filters.get("assignee"))}" placeholder="any group">'
        f'<span class="check"><input type="checkbox" id="f-mine" name="mine" value="1"{mine}>'
        '<label for="f-mine">Only what I may answer</label></span>'
        '<button type="submit">Filter</button></form>')
    more = ""
    if next_cursor:
        href = f"{esc(base)}/?{esc(urlencode({**query, 'after': next_cursor}))}"
        more = f'<p class="paging"><a href="{href}">Next page</a></p>'
    if filters.get("after"):
        first = {k: v for k, v in query.items() if k != "after"}
        more += f'<p class="paging"><a href="{esc(base)}/?{esc(urlencode(first))}">First page</a></p>'
    notice_html = f'<p class="notice" role="status">{esc(notice)}</p>' if notice else ""
    fragment = urlencode({**query, "fragment": "rows"})
    body = (f"<h1>Waiting for a person</h1>{notice_html}{form}"
            '<p id="live" class="live" role="status" aria-live="polite"></p>'
            '<table class="requests"><caption class="visually-hidden">Requests waiting for an answer</caption>'
            '<thead><tr><th scope="col">Waiting</th><th scope="col">Asks</th><th scope="col">Agent</th>'
            '<th scope="col">For</th><th scope="col">Status</th><th scope="col">Run</th></tr></thead>'
            f'<tbody id="rows">{rows_html(base, items, now)}</tbody></table>{more}')
    return layout(base, "Inbox — toolnexus", body, who=who, csrf=csrf, page="list",
                  data={"events": f"{base}/events", "rows": f"{base}/?{fragment}"})


def _field_html(f: Field, prefix: str, disabled: bool = False) -> str:
    fid = f"{prefix}{f.name}".replace(".", "-")
    name = esc(prefix + f.name)
    dis = " disabled" if disabled else ""
    req = " required" if f.required and f.kind not in ("boolean",) else ""
    desc = f'<span class="hint" id="{esc(fid)}-hint">{esc(f.description)}</span>' if f.description else ""
    described = f' aria-describedby="{esc(fid)}-hint"' if f.description else ""
    label = f'<label for="{esc(fid)}">{esc(f.label)}</label>'
    if f.kind == "boolean":
        checked = " checked" if f.value is True else ""
        return (f'<div class="field check"><input type="checkbox" id="{esc(fid)}" name="{name}"{checked}{dis}'
                f"{described}>{label}{desc}</div>")
    if f.kind == "enum":
        opts = "".join(f'<option value="{esc(o)}"{" selected" if o == f.value else ""}>{esc(o)}</option>'
                       for o in f.options)
        select = f'<select id="{esc(fid)}" name="{name}"{dis}{described}>{opts}</select>'
        return f'<div class="field">{label}{select}{desc}</div>'
    if f.kind in ("integer", "number"):
        step = "1" if f.kind == "integer" else "any"
        value = "" if f.value is None else f.value
        return (f'<div class="field">{label}<input type="number" step="{step}" id="{esc(fid)}" name="{name}" '
                f'value="{esc(value)}"{req}{dis}{described}>{desc}</div>')
    if f.kind == "string":
        value = "" if f.value is None else f.value
        return (f'<div class="field">{label}<input type="text" id="{esc(fid)}" name="{name}" value="{esc(value)}"'
                f"{req}{dis}{described}>{desc}</div>")
    text = f.value if f.kind == "text" and isinstance(f.value, str) else ("" if f.value is None else pretty(f.value))
    return (f'<div class="field">{label}<textarea id="{esc(fid)}" name="{name}" rows="4"{req}{dis}{described}>'
            f"{esc(text)}</textarea>{desc}</div>")


def _message_text(message: Any) -> tuple[str, str]:
    if not isinstance(message, dict):
        return "?", json.dumps(message, ensure_ascii=False)
    role = str(message.get("role") or "?")
    content = message.get("content")
    parts: list[str] = []
    if isinstance(content, str):
        parts.append(content)
    elif isinstance(content, list):
        for part in content:
            if isinstance(part, dict) and isinstance(part.get("text"), str):
                parts.append(part["text"])
            elif isinstance(part, dict) and part.get("type") == "tool_use":
                parts.append(f"→ {part.get('name')}({json.dumps(part.get('input'), ensure_ascii=False)})")
            elif isinstance(part, dict) and part.get("type") == "tool_result":
                inner = part.get("content")
                parts.append(f"[result] {inner if isinstance(inner, str) else json.dumps(inner, ensure_ascii=False)}")
    for call in message.get("tool_calls") or [] if isinstance(message.get("tool_calls"), list) else []:
        fn = call.get("function") or {} if isinstance(call, dict) else {}
        parts.append(f"→ {fn.get('name')}({fn.get('arguments')})")
    text = "\n".join(parts)
    if len(text) > _MESSAGE_CUT:
        text = text[:_MESSAGE_CUT] + f"… ({len(text)} characters)"
    return role, text


def transcript_html(conv: Optional[str], messages: Sequence[Any], total: int) -> str:
    if not messages:
        return '<p class="sub">No transcript is stored for this request.</p>'
    items = []
    for m in messages:
        role, text = _message_text(m)
        items.append(f'<li class="msg {esc(role)}"><span class="role">{esc(role)}</span><pre>{esc(text)}</pre></li>')
    shown = f"the last {len(messages)} of {total} messages" if total > len(messages) else f"{total} messages"
    return (f'<details class="transcript" open><summary>Transcript of {esc(conv or "the run")} ({esc(shown)})'
            f'</summary><ol>{"".join(items)}</ol></details>')


def request_page(base: str, *, who: str, csrf: str, pending: Optional[PendingRun], request: Any, run_id: str,
                 status: str, answer: Optional[dict[str, Any]], answered_at: Optional[str], transcript: str,
                 may_answer: Optional[str], notice: Optional[str] = None, error: Optional[str] = None,
                 form: Optional[dict[str, str]] = None) -> str:
    a = approval_of(request)
    rid = request.id
    facts = [
        ("Request", f"<code>{esc(rid)}</code>"),
        ("Kind", esc(request.kind)),
        ("Run", f"<code>{esc(run_id)}</code>"),
    ]
    if a is not None:
        where = f"{a.get('source')}:{a.get('origin')}" if a.get("origin") else str(a.get("source") or "")
        facts += [("Tool", f"<strong>{esc(a.get('tool'))}</strong> <span class=\"sub\">{esc(where)}</span>"),
                  ("Agent", esc("/".join(str(x) for x in a.get("agent_path") or []) or "-")),
                  ("Call", f"<code>{esc(a.get('call_id') or '-')}</code>")]
        required = int(a.get("required") or 1)
        if required > 1:
            got = [x for x in a.get("approvals") or [] if isinstance(x, dict)]
            names = ", ".join(str(x.get("by")) for x in got) or "none yet"
            facts.append(("Approvals", esc(f"{len(got)} of {required} ({names})")))
    group = group_of(request)
    facts.append(("For", esc(group or "anyone")))
    if pending is not None:
        facts.append(("Waiting", esc(age_text(pending.created_at))))
    if request.expiresAt:
        facts.append(("Expires", esc(request.expiresAt)))
    dl = "".join(f"<dt>{k}</dt><dd>{v}</dd>" for k, v in facts)
    desc = f'<p class="description">{esc(a.get("description"))}</p>' if a is not None and a.get("description") else ""
    args = (f'<h2>Arguments</h2><pre class="args">{esc(pretty(a.get("arguments")))}</pre>' if a is not None else "")
    notice_html = f'<p class="notice" role="status">{esc(notice)}</p>' if notice else ""
    error_html = f'<p class="error" role="alert">{esc(error)}</p>' if error else ""
    if status not in ("open",):
        decided = ""
        if isinstance(answer, dict):
            verdict = "approved" if answer.get("ok") else "rejected"
            by = f" by {answer.get('by')}" if answer.get("by") else ""
            via = f" via {answer.get('via')}" if answer.get("via") else ""
            when = f" at {answered_at}" if answered_at else ""
            decided = f"{verdict}{by}{via}{when}"
            if answer.get("message"):
                decided += f' — "{answer.get("message")}"'
        state = {"queued": "answered; a worker applies the answer now", "claimed": "answered; being applied",
                 "applied": "answered", "cancelled": "withdrawn (the run was cancelled or interrupted)"}.get(status,
                                                                                                             status)
        form_html = f'<section class="answered" aria-label="Outcome"><p>This request is {esc(state)}' + (
            f": <strong>{esc(decided)}</strong>" if decided else "") + ".</p></section>"
    elif may_answer is not None:
        form_html = f'<p class="error" role="alert">You cannot answer this request: {esc(may_answer)}.</p>'
    else:
        form_html = _answer_form(base, rid, request, csrf, form)
    body = (f'<p><a href="{esc(base)}/">← All waiting requests</a></p>'
            f"<h1>{esc(request.prompt)}</h1>{notice_html}{error_html}{desc}<dl class=\"facts\">{dl}</dl>{args}"
            f"{form_html}{transcript}")
    return layout(base, f"{rid} — toolnexus inbox", body, who=who, csrf=csrf, page="request")


def _answer_form(base: str, rid: str, request: Any, csrf: str, posted: Optional[dict[str, str]]) -> str:
    a = approval_of(request)
    action = f"{base}/r/{quote(rid, safe='')}"
    parts = [f'<form method="post" action="{esc(action)}" class="answer" aria-label="Your answer">'
             f'<input type="hidden" name="csrf" value="{esc(csrf)}">']
    if a is not None:
        required = int(a.get("required") or 1)
        if required <= 1:
            values = a.get("arguments") if isinstance(a.get("arguments"), dict) else {}
            fields = fields_of(a.get("input_schema"), values)
            if posted:
                for f in fields:
                    if f"arg.{f.name}" in posted:
                        f.value = posted[f"arg.{f.name}"]
            if fields:
                parts.append('<fieldset class="edit"><legend>Arguments (change them to approve an edited call)'
                             "</legend>" + "".join(_field_html(f, "arg.") for f in fields) + "</fieldset>")
        parts.append('<div class="field"><label for="message">Message to the agent (optional; say why when you '
                     'reject)</label><textarea id="message" name="message" rows="3">'
                     f'{esc((posted or {}).get("message", ""))}</textarea></div>')
        if required <= 1:
            parts.append('<div class="field check"><input type="checkbox" id="always" name="always">'
                         f'<label for="always">Always decide so for {esc(a.get("tool"))} in this run</label></div>')
        parts.append('<div class="decisions"><button type="submit" name="decision" value="approve" class="approve">'
                     'Approve</button><button type="submit" name="decision" value="reject" class="reject">Reject'
                     "</button></div>")
    else:
        schema = request.data.get("schema") if isinstance(request.data, dict) else None
        if isinstance(schema, dict) and schema:
            fields = fields_of(schema, None)
            parts.append('<fieldset class="edit"><legend>Your answer</legend>'
                         + "".join(_field_html(f, "data.") for f in fields) + "</fieldset>")
        parts.append('<div class="field"><label for="message">Message (optional)</label>'
                     '<textarea id="message" name="message" rows="3"></textarea></div>')
        parts.append('<div class="decisions"><button type="submit" name="decision" value="submit" class="approve">'
                     'Submit</button><button type="submit" name="decision" value="decline" class="reject">Decline'
                     "</button></div>")
    parts.append("</form>")
    return "".join(parts)


def login_page(base: str, *, csrf: str, asks_name: bool, next_path: str, error: Optional[str] = None) -> str:
    name = ('<div class="field"><label for="name">Your name</label><input id="name" name="name" autocomplete="username"'
            ' required></div>') if asks_name else ""
    err = f'<p class="error" role="alert">{esc(error)}</p>' if error else ""
    body = (f"<h1>Log in</h1>{err}<form method=\"post\" action=\"{esc(base)}/login\" class=\"login\">"
            f'<input type="hidden" name="csrf" value="{esc(csrf)}"><input type="hidden" name="next" '
            f'value="{esc(next_path)}">{name}<div class="field"><label for="token">Access token</label>'
            '<input id="token" name="token" type="password" autocomplete="current-password" required></div>'
            '<div class="decisions"><button type="submit">Log in</button></div></form>')
    return layout(base, "Log in — toolnexus inbox", body, page="login")


def message_page(base: str, title: str, text: str, *, who: Optional[str] = None, csrf: Optional[str] = None) -> str:
    body = f'<h1>{esc(title)}</h1><p class="outcome" role="status">{esc(text)}</p>'
    return layout(base, f"{title} — toolnexus inbox", body, who=who, csrf=csrf, page="message")


def link_page(base: str, *, action: str, csrf: str, decision: str, identity: str, request: Any,
              expires: str) -> str:
    a = approval_of(request)
    verb = "Approve" if decision == "approve" else "Reject"
    what = esc(request.prompt)
    args = f'<pre class="args">{esc(pretty(a.get("arguments")))}</pre>' if a is not None else ""
    message = ('<div class="field"><label for="message">Message to the agent (optional)</label>'
               '<textarea id="message" name="message" rows="3"></textarea></div>') if decision == "reject" else ""
    body = (f"<h1>{esc(verb)} this request?</h1><p>{what}</p>{args}"
            f'<p>You are answering as <strong>{esc(identity)}</strong>. Nothing has been done yet: '
            f"this link answers only when you press the button below. It works once, until {esc(expires)}.</p>"
            f'<form method="post" action="{esc(action)}" class="answer"><input type="hidden" name="csrf" '
            f'value="{esc(csrf)}">{message}<div class="decisions"><button type="submit" '
            f'class="{"approve" if decision == "approve" else "reject"}">{esc(verb)}</button></div></form>')
    return layout(base, f"{verb} — toolnexus inbox", body, page="link")
