"""`toolnexus pending --store URL`: the requests durable runs are waiting on (the inbox).

stdout: one line per waiting request, oldest first, tab-separated:
`<request id>\\t<run id>\\t<kind>\\t<path>\\t<prompt>` (path as `root/agent.1`, `-` for a client
conversation; the prompt's newlines shown as `\\n`). `--json` prints one JSON array of
`{"id", "run_id", "kind", "prompt", "path", "created_at", "expires_at", "request", "tool",
"arguments", "agent_path"}` instead. An approval request's prompt already names the tool, its
arguments (secrets redacted) and the agent in one line; `--json` gives them as fields too
(`tool`, `arguments`, `agent_path`: null for other kinds), and its whole approval under
`request.data.approval` (`toolnexus.approvals`).
An empty inbox prints nothing (exit 0). No model is needed.

Paged: `--limit N` requests (default 50), oldest first; when there are more, stderr says how to
get the next page (`--after CURSOR`); `--all` prints every page. Filters: `--agent NAME` (the
run's entry agent), `--kind KIND`, `--older-than 1h` (waiting at least that long).
"""

from __future__ import annotations

import dataclasses
import json
from typing import Any

from ..approvals import approval_of
from ._common import CliExit, Console
from ._flags import Flag
from ._inbox import RUN_STORE_FLAG, open_run_store

NAME = "pending"
SUMMARY = "list the requests durable agent runs are waiting on (paged)"
FLAGS = [
    RUN_STORE_FLAG,
    Flag("agent", "NAME", "only requests of runs of this entry agent"),
    Flag("kind", "KIND", "only requests of this kind (approval, input, in_doubt, timer, ...)"),
    Flag("older-than", "DURATION", "only requests waiting at least this long (90s, 15m, 12h, 30d)"),
    Flag("limit", "N", "requests per page (default 50)", default="50"),
    Flag("after", "CURSOR", "the page after this cursor (printed with the page before)"),
    Flag("all", None, "every page, not just the first"),
    Flag("json", None, "print one JSON array instead of lines"),
]


def _approval_fields(request: Any) -> dict[str, Any]:
    a = approval_of(request) or {}
    return {"tool": a.get("tool"), "arguments": a.get("arguments"), "agent_path": a.get("agent_path")}


def _iso(value: Any) -> Any:
    return value.isoformat() if value is not None else None


async def execute(opts: dict[str, Any], console: Console) -> int:
    from ._lifecycle import duration
    from ._runs import limit_of

    older = duration(opts.get("older_than"), "older-than")
    limit = limit_of(opts)
    store = open_run_store(opts)
    waiting: list[Any] = []
    after = opts.get("after")
    async with store:
        while True:
            try:
                page = await store.pending(limit=limit, after=after, agent=opts.get("agent"), kind=opts.get("kind"),
                                           older_than=older)
            except ValueError as exc:
                raise CliExit(2, f"error: {exc}") from None
            waiting += page
            after = page.next
            if not opts.get("all") or after is None:
                break
    if after is not None:
        console.err(f"more: toolnexus pending ... --after {after}")
    if opts.get("json"):
        console.out(json.dumps([
            {"id": p.request.id, "run_id": p.run_id, "kind": p.request.kind, "prompt": p.request.prompt,
             "path": p.path, "created_at": _iso(p.created_at), "expires_at": _iso(p.expires_at),
             "request": dataclasses.asdict(p.request), **_approval_fields(p.request)} for p in waiting]))
        return 0
    for p in waiting:
        path = "/".join(p.path) if p.path else "-"
        console.out("\t".join((p.request.id, p.run_id, p.request.kind, path, p.request.prompt.replace("\n", "\\n"))))
    return 0
