"""`toolnexus show RUN --store URL`: everything a durable run holds, for a person to read.

Sections: the run (status, entry agent, times, who holds its lease), its handle tree (each
handle's state, turns, tokens, and the request it waits on), its requests (waiting ones and
answered ones — ok or declined, with the reason and the human's message, the edited arguments,
and who answered through what and when: its `by` / `via`, and the time the answer was accepted), each handle's
transcript (message by message; long texts cut at 300 characters unless `--full`; `--handle ID` for one handle only),
and the newest trace lines (`--trace N`, default 20). A run still queued shows its prompt.

`--json` prints one object: `{"run": {...}, "handles": {id: record}, "requests": [{"id", "kind",
"prompt", "status", "handle", "created_at", "expires_at", "answer", "answered_at"}], "transcripts": {handle:
[messages]}, "trace": [lines]}`. No model is needed. Exit 0; 1 for an unknown run.
"""

from __future__ import annotations

import json
from datetime import UTC, datetime
from typing import Any, Optional

from ._common import CliExit, Console
from ._flags import Flag
from ._inbox import RUN_STORE_FLAG, open_run_store
from ._lifecycle import RUN_FLAG, age

NAME = "show"
SUMMARY = "show a durable run: status, handle tree, requests and answers, transcripts, trace"
FLAGS = [
    RUN_FLAG,
    RUN_STORE_FLAG,
    Flag("handle", "ID", "only this handle's transcript (e.g. root/support.1)"),
    Flag("trace", "N", "how many of the newest trace lines (default 20)", default="20"),
    Flag("full", None, "do not cut long message texts"),
    Flag("json", None, "print one JSON object"),
]
CUT = 300


def _when(epoch_seconds: Optional[float]) -> Optional[datetime]:
    return datetime.fromtimestamp(epoch_seconds, UTC) if epoch_seconds is not None else None


def _iso(epoch_seconds: Optional[float]) -> Optional[str]:
    when = _when(epoch_seconds)
    return when.isoformat() if when is not None else None


def _cut(text: str, full: bool) -> str:
    text = text.replace("\n", "\\n")
    return text if full or len(text) <= CUT else text[:CUT] + f"… ({len(text)} chars)"


def _content(value: Any) -> str:
    """A message's content as text (a list of parts: their texts; other parts by type)."""
    if value is None:
        return ""
    if isinstance(value, str):
        return value
    if isinstance(value, list):
        out = []
        for part in value:
            if isinstance(part, dict) and isinstance(part.get("text"), str):
                out.append(part["text"])
            elif isinstance(part, dict):
                kind = part.get("type") or "part"
                if kind == "tool_use":
                    out.append(f"→ {part.get('name')}({json.dumps(part.get('input'), ensure_ascii=False)})")
                elif kind == "tool_result":
                    out.append(f"[result {part.get('tool_use_id')}] {_content(part.get('content'))}")
                else:
                    out.append(f"[{kind}]")
        return " ".join(out)
    return json.dumps(value, ensure_ascii=False)


def message_line(message: Any, full: bool) -> str:
    if not isinstance(message, dict):
        return _cut(json.dumps(message, ensure_ascii=False), full)
    role = str(message.get("role") or "?")
    text = _content(message.get("content"))
    calls = message.get("tool_calls") or []
    for call in calls if isinstance(calls, list) else []:
        fn = call.get("function") or {} if isinstance(call, dict) else {}
        text += f" → {fn.get('name')}({fn.get('arguments')})"
    if role == "tool":
        role = f"tool ({message.get('tool_call_id')})"
    return f"{role}: {_cut(text.strip(), full)}"


def answer_text(answer: Optional[dict[str, Any]], at: Optional[str] = None) -> str:
    """How a stored answer reads: `ok` or `declined (reason)`, the human's message, who, how and when."""
    if not isinstance(answer, dict):
        return ""
    text = "ok" if answer.get("ok") else f"declined ({answer.get('reason') or 'declined'})"
    if answer.get("message"):
        text += f": {answer['message']}"
    if answer.get("arguments") is not None and answer.get("ok"):
        text += f" arguments={json.dumps(answer['arguments'], ensure_ascii=False)}"
    if answer.get("always"):
        text += " always"
    if answer.get("data") and answer.get("ok"):
        text += f" data={json.dumps(answer['data'], ensure_ascii=False)}"
    when = answer.get("at") if isinstance(answer.get("at"), str) else at
    who = [f"by {answer['by']}" if answer.get("by") else "", f"via {answer['via']}" if answer.get("via") else "",
           f"at {when}" if when else ""]
    who_text = " ".join(w for w in who if w)
    return f"{text} ({who_text})" if who_text else text


def _answered_at(answer: Any, answered_at: Optional[float]) -> Optional[str]:
    """When the answer was given: the time its front-end stamped (`at`, the queue's submit time), else
    when the ledger took it."""
    if isinstance(answer, dict) and isinstance(answer.get("at"), str):
        return str(answer["at"])
    when = _when(answered_at) if isinstance(answer, dict) else None
    return when.strftime("%Y-%m-%dT%H:%M:%SZ") if when is not None else None


def _tree(handles: dict[str, Any]) -> list[tuple[int, dict[str, Any]]]:
    out: list[tuple[int, dict[str, Any]]] = []
    stack = [(0, hid) for hid in reversed((handles.get("root") or {}).get("children") or [])]
    seen: set[str] = set()
    while stack:
        depth, hid = stack.pop()
        rec = handles.get(hid)
        if rec is None or hid in seen:
            continue
        seen.add(hid)
        out.append((depth, rec))
        stack.extend((depth + 1, c) for c in reversed(rec.get("children") or []))
    return out


def _handle_line(depth: int, rec: dict[str, Any]) -> str:
    line = f"  {'  ' * depth}{rec.get('id')}  {rec.get('state')}  turns {rec.get('turns_total', 0)}  " \
           f"tokens {rec.get('usage_total', 0)}"
    suspension = rec.get("suspension") or {}
    request = suspension.get("request") if isinstance(suspension, dict) else None
    if isinstance(request, dict):
        line += f"  waiting on {request.get('id')} ({request.get('kind')})"
    last = rec.get("last_result")
    if not isinstance(request, dict) and isinstance(last, dict) and last.get("status"):
        line += f"  last: {last.get('status')}"
    return line


async def execute(opts: dict[str, Any], console: Console) -> int:
    from ..durable import RunDamaged, RunNotFound

    run_id = opts.get("run")
    if not run_id:
        raise CliExit(2, "error: toolnexus show needs the run id: toolnexus show RUN --store URL")
    try:
        keep = int(opts.get("trace") or 20)
    except ValueError:
        raise CliExit(2, f"error: --trace takes a number of lines (got {opts.get('trace')!r})") from None
    store = open_run_store(opts)
    async with store:
        try:
            run = await store.load(run_id)
        except (RunNotFound, RunDamaged) as exc:  # a damaged or quarantined run: `toolnexus doctor` says more
            raise CliExit(1, f"error: {exc}") from None
    conversations = run.conversations
    if opts.get("handle"):
        conversations = {k: v for k, v in conversations.items() if k == opts["handle"]}
    requests = [{"id": p.request_id, "kind": (p.request or {}).get("kind"), "prompt": (p.request or {}).get("prompt"),
                 "status": p.status, "handle": p.handle_id, "created_at": _iso(p.created_at),
                 "expires_at": _iso(p.expires_at), "answer": p.answer,
                 "answered_at": _answered_at(p.answer, p.answered_at)} for p in run.pending]
    if opts.get("json"):
        console.out(json.dumps({
            "run": {"run_id": run.run_id, "kind": run.kind, "status": run.status, "entry_agent": run.entry_agent,
                    "version": run.version, "created_at": _iso(run.created_at), "updated_at": _iso(run.updated_at),
                    "lease": run.lease, "lease_expires": _iso(run.lease_expires), "state": run.state,
                    "result": run.result},
            "handles": run.handles, "requests": requests, "transcripts": conversations,
            "trace": run.trace[-keep:] if keep > 0 else []}, ensure_ascii=False))
        return 0
    full = bool(opts.get("full"))
    console.out(f"run {run.run_id} — {run.status} (entry agent {run.entry_agent or '-'}, {run.kind})")
    console.out(f"created {_iso(run.created_at)}, updated {age(_when(run.updated_at))} ago, version {run.version}")
    if run.lease:
        holder = f"process {run.lease.get('pid')} on {run.lease.get('host')}"
        expires = run.lease_expires - datetime.now(UTC).timestamp() if run.lease_expires else None
        when = f"lease ends in {expires:.0f}s unless renewed" if expires and expires > 0 else "lease expired"
        console.out(f"held by {holder} ({when})")
    queued = (run.state or {}).get("queued") if isinstance(run.state, dict) else None
    if isinstance(queued, dict) and not run.handles:
        console.out(f"queued: {queued.get('agent')} ← {_cut(str(queued.get('prompt') or ''), full)}")
    if run.handles:
        console.out("")
        console.out("handles:")
        for depth, rec in _tree(run.handles):
            console.out(_handle_line(depth, rec))
    if requests:
        console.out("")
        console.out("requests:")
        for r in requests:
            answered = answer_text(r["answer"], r["answered_at"])
            console.out(f"  {r['id']}  {r['kind']}  {r['status']}  {r['handle'] or '-'}  "
                        f"{_cut(str(r['prompt'] or ''), full)}" + (f"  → {answered}" if answered else ""))
    for conv, messages in conversations.items():
        console.out("")
        console.out(f"transcript {conv} ({len(messages)} message(s)):")
        for i, message in enumerate(messages):
            console.out(f"  [{i}] {message_line(message, full)}")
    if keep > 0 and run.trace:
        console.out("")
        console.out(f"trace (last {min(keep, len(run.trace))} of {len(run.trace)}):")
        for line in run.trace[-keep:]:
            console.out(f"  {line}")
    return 0
