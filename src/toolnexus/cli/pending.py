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
"""

from __future__ import annotations

import dataclasses
import json
from typing import Any

from ..approvals import approval_of
from .common import Console
from .flags import Flag
from .inbox import RUN_STORE_FLAG, open_run_store

NAME = "pending"
SUMMARY = "list the requests durable agent runs are waiting on"
FLAGS = [RUN_STORE_FLAG, Flag("json", None, "print one JSON array instead of lines")]


def _approval_fields(request: Any) -> dict[str, Any]:
    a = approval_of(request) or {}
    return {"tool": a.get("tool"), "arguments": a.get("arguments"), "agent_path": a.get("agent_path")}


def _iso(value: Any) -> Any:
    return value.isoformat() if value is not None else None


async def execute(opts: dict[str, Any], console: Console) -> int:
    store = open_run_store(opts)
    async with store:
        waiting = await store.pending()
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
