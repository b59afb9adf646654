"""A hand-written stdio MCP server for the protocol-edge tests of our own stdio session.

`python scripted.py LOG` answers `initialize` and `tools/list` (tools `echo`, `slow`, `ask`,
`pinger`, `odd`, `noisy`), appends every message it receives to LOG as one JSON line, and per tool:

- `echo`   — replies with the text;
- `slow`   — sends a log notification that it got the call, then never replies;
- `pinger` — sends the client a `ping` and an unknown request first, then replies with both answers;
- `noisy`  — writes a junk line and a reply for an unknown id first, then the real reply;
- `odd`    — replies with a result that is not an object;
- `ask`    — sends `elicitation/create` and replies with its answer; with `{"give_up": true}`
             it waits for the client's next call instead, then sends `notifications/cancelled`
             for the elicitation, replies "gave up", and goes on with that next call.

Stdlib only, so the test controls every byte the client sees.
"""

from __future__ import annotations

import json
import sys

LOG = open(sys.argv[1], "a", buffering=1)
TOOLS = [{"name": n, "description": n, "inputSchema": {"type": "object", "properties": {}}}
         for n in ("echo", "slow", "ask", "pinger", "odd", "noisy")]
pending: dict[object, tuple[object, str]] = {}  # our request id -> (the call it belongs to, what)


def send(message: dict) -> None:
    sys.stdout.write(json.dumps(message) + "\n")
    sys.stdout.flush()


def text(rid: object, value: str) -> None:
    send({"jsonrpc": "2.0", "id": rid, "result": {"content": [{"type": "text", "text": value}]}})


answers: dict[object, list[str]] = {}
giving_up: list[object] = []  # an `ask` call whose elicitation we will abandon
for line in sys.stdin:
    message = json.loads(line)
    LOG.write(json.dumps(message) + "\n")
    method, rid = message.get("method"), message.get("id")
    if method == "initialize":
        send({"jsonrpc": "2.0", "id": rid, "result": {
            "protocolVersion": message["params"]["protocolVersion"], "capabilities": {"tools": {}},
            "serverInfo": {"name": "scripted", "version": "1"}}})
    elif method == "tools/list":
        send({"jsonrpc": "2.0", "id": rid, "result": {"tools": TOOLS}})
    elif method == "tools/call":
        name, args = message["params"]["name"], message["params"].get("arguments") or {}
        if giving_up:
            send({"jsonrpc": "2.0", "method": "notifications/cancelled",
                  "params": {"requestId": "e2", "reason": "user walked away"}})
            text(giving_up.pop(), "gave up")
        if name == "echo":
            text(rid, str(args.get("text")))
        elif name == "odd":
            send({"jsonrpc": "2.0", "id": rid, "result": ["not", "an", "object"]})
        elif name == "noisy":
            sys.stdout.write("a log line on the wrong stream\n")
            send({"jsonrpc": "2.0", "id": 999999, "result": {"content": []}})
            text(rid, "after the noise")
        elif name == "pinger":
            answers[rid] = []
            pending["p1"] = (rid, "ping")
            pending["p2"] = (rid, "unknown")
            send({"jsonrpc": "2.0", "id": "p1", "method": "ping"})
            send({"jsonrpc": "2.0", "id": "p2", "method": "sampling/createMessage", "params": {}})
        elif name == "ask":
            eid = "e2" if args.get("give_up") else "e1"
            send({"jsonrpc": "2.0", "id": eid, "method": "elicitation/create",
                  "params": {"message": "Your name?", "requestedSchema": {"type": "object", "properties": {}}}})
            if args.get("give_up"):
                giving_up.append(rid)
            else:
                pending["e1"] = (rid, "elicit")
        elif name == "slow":  # no reply at all; just say it arrived
            send({"jsonrpc": "2.0", "method": "notifications/message",
                  "params": {"level": "info", "data": f"got slow call {rid}"}})
    elif rid in pending and method is None:  # a reply to one of our requests
        call, what = pending.pop(rid)
        if what == "elicit":
            text(call, json.dumps(message.get("result")))
        else:
            answers[call].append(json.dumps(message.get("result", message.get("error"))))
            if len(answers[call]) == 2:
                text(call, " | ".join(answers.pop(call)))
