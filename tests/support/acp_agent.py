"""A small ACP agent process for the tests: JSON-RPC 2.0, one object per line on stdin/stdout.

Run as `python acp_agent.py`. It answers `initialize`, `session/new` (sessionId `sess-1`, or none
when `ACP_NO_SESSION=1`), `session/set_mode` and `session/prompt`, and behaves by the last line of
the prompt text (the `SUPERSEDES-ALL-PRIOR:` target):

- `echo ...`: stream the whole prompt text back in three `agent_message_chunk` updates (plus a
  `thought` update and an empty chunk that must be ignored), then reply `{"stopReason": "end_turn"}`;
- `permission`: ask `session/request_permission` with the options from `ACP_OPTIONS` (JSON) and
  stream back the outcome it was given;
- `callback`: send an unknown request `fs/read_text_file` and stream back its result;
- `hang`: send nothing until `session/cancel` arrives, then stream a late chunk `LATE` and reply
  `{"stopReason": "cancelled"}`;
- `error`: reply with JSON-RPC error `{code: 42, message: "bad prompt"}`;
- `exit`: exit at once (the client sees EOF);
- `cwd`: stream back the working directory and `ACP_MARK` from the environment.

Noise lines (blank, not JSON) are written before each reply, and stderr gets chatter, to prove the
client skips and discards them. Every message received is appended, as JSON, to the file named by
`ACP_LOG` (when set) so tests can check the exact wire.
"""

from __future__ import annotations

import json
import os
import sys

LOG = os.environ.get("ACP_LOG")
out_ids = iter(range(1, 1_000_000))
pending_prompt = None  # the id of a prompt waiting for session/cancel
session = "sess-1"


def log(msg):
    if LOG:
        with open(LOG, "a", encoding="utf-8") as f:
            f.write(json.dumps(msg) + "\n")


def send(obj):
    sys.stdout.write(json.dumps(obj) + "\n")
    sys.stdout.flush()


def noise():
    sys.stdout.write("\n")
    sys.stdout.write("agent: warming up (not json)\n")
    sys.stdout.flush()
    sys.stderr.write("stderr chatter that must be discarded\n")
    sys.stderr.flush()


def chunk(text, kind="agent_message_chunk"):
    send(
        {
            "jsonrpc": "2.0",
            "method": "session/update",
            "params": {
                "sessionId": session,
                "update": {"sessionUpdate": kind, "content": {"type": "text", "text": text}},
            },
        }
    )


def read():
    line = sys.stdin.readline()
    if not line:
        sys.exit(0)
    msg = json.loads(line)
    log(msg)
    return msg


def ask_client(method, params):
    """Send a request to the client and return its reply (other traffic is not expected meanwhile)."""
    rid = f"agent-{next(out_ids)}"
    send({"jsonrpc": "2.0", "id": rid, "method": method, "params": params})
    while True:
        msg = read()
        if msg.get("id") == rid and "method" not in msg:
            return msg


def on_prompt(msg):
    global pending_prompt
    text = msg["params"]["prompt"][0]["text"]
    target = text.rsplit("SUPERSEDES-ALL-PRIOR: ", 1)[-1]
    word = target.split(": ", 1)[-1].split(" ", 1)[0]
    noise()
    if word == "echo":
        chunk("thinking...", kind="agent_thought_chunk")
        third = len(text) // 3
        for part in (text[:third], "", text[third:2 * third], text[2 * third:]):
            chunk(part)
        send({"jsonrpc": "2.0", "id": msg["id"], "result": {"stopReason": "end_turn"}})
    elif word == "permission":
        options = json.loads(os.environ.get("ACP_OPTIONS", "[]"))
        reply = ask_client("session/request_permission", {"sessionId": session, "toolCall": {"toolCallId": "t1"},
                                                          "options": options})
        chunk(json.dumps(reply["result"]))
        send({"jsonrpc": "2.0", "id": msg["id"], "result": {"stopReason": "end_turn"}})
    elif word == "callback":
        reply = ask_client("fs/read_text_file", {"sessionId": session, "path": "/etc/hostname"})
        chunk(json.dumps(reply.get("result")))
        send({"jsonrpc": "2.0", "id": msg["id"], "result": {"stopReason": "end_turn"}})
    elif word == "hang":
        pending_prompt = msg["id"]
    elif word == "error":
        send({"jsonrpc": "2.0", "id": msg["id"], "error": {"code": 42, "message": "bad prompt"}})
    elif word == "exit":
        sys.exit(3)
    elif word == "cwd":
        chunk(os.getcwd() + "|" + os.environ.get("ACP_MARK", ""))
        send({"jsonrpc": "2.0", "id": msg["id"], "result": {"stopReason": "end_turn"}})
    else:
        chunk(f"unknown instruction {word!r}")
        send({"jsonrpc": "2.0", "id": msg["id"], "result": {"stopReason": "end_turn"}})


def main():
    global pending_prompt
    while True:
        msg = read()
        method = msg.get("method")
        if method == "initialize":
            if os.environ.get("ACP_SILENT_INIT") == "1":
                continue
            send({"jsonrpc": "2.0", "id": msg["id"], "result": {"protocolVersion": 1, "agentCapabilities": {}}})
        elif method == "session/new":
            result = {} if os.environ.get("ACP_NO_SESSION") == "1" else {"sessionId": session}
            send({"jsonrpc": "2.0", "id": msg["id"], "result": result})
        elif method == "session/set_mode":
            send({"jsonrpc": "2.0", "id": msg["id"], "result": {}})
        elif method == "session/prompt":
            on_prompt(msg)
        elif method == "session/cancel":
            if pending_prompt is not None:
                chunk("LATE")
                send({"jsonrpc": "2.0", "id": pending_prompt, "result": {"stopReason": "cancelled"}})
                pending_prompt = None
        elif "id" in msg:
            send({"jsonrpc": "2.0", "id": msg["id"], "error": {"code": -32601, "message": f"no method {method}"}})


if __name__ == "__main__":
    main()
