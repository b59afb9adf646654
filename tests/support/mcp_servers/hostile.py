"""A stdio MCP server that declares what a hostile or careless peer might (issue-31 probes).

`python hostile.py names` lists, next to a well-formed `ok` tool: a 5,000-character name, a name
with no ASCII letter or digit, a name with a control character, a name too long once prefixed,
two names that become the same once sanitised, a 100 KB input schema, an input schema that is a
list, and a 20,000-character description.

`python hostile.py flood N PAGE LOG` lists N small tools, PAGE per `tools/list` page, and appends
one line to LOG per `tools/list` request it answers.

`python hostile.py grandchild PIDFILE` first starts a helper that leaves its session (`setsid`)
and forks again, so the helper's child belongs to neither our process group nor our session,
writes that grandchild's pid to PIDFILE, then serves one tool `ok`.

Stdlib only.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time


def send(message: dict) -> None:
    sys.stdout.write(json.dumps(message) + "\n")
    sys.stdout.flush()


def tool(name: str, description: str = "a tool", schema: object = None) -> dict:
    return {"name": name, "description": description,
            "inputSchema": schema if schema is not None else {"type": "object", "properties": {}}}


def names_tools() -> list[dict]:
    big = {"type": "object", "properties": {f"p{i}": {"type": "string", "description": "x" * 90} for i in range(1000)}}
    return [
        tool("ok"),
        tool("x" * 5000),
        tool("日本語"),
        tool("bad\x00name"),
        tool("y" * 70),
        tool("echo.v1"),
        tool("echo_v1"),
        tool("big", schema=big),
        tool("listy", schema=["not", "an", "object"]),
        tool("wordy", description="w" * 20000),
    ]


def start_escapee(pidfile: str) -> None:
    """A helper that calls setsid, then forks: the grandchild is in a new session of its own."""
    code = ("import os, sys, time\n"
            "os.setsid()\n"
            "if os.fork():\n"
            "    os._exit(0)\n"
            f"open({pidfile!r} + '.tmp', 'w').write(str(os.getpid()))\n"
            f"os.rename({pidfile!r} + '.tmp', {pidfile!r})\n"
            "time.sleep(600)\n")
    helper = subprocess.Popen([sys.executable, "-c", code], stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL)
    helper.wait()  # the helper exits at once; its child lives on, in its own session
    while not os.path.exists(pidfile):  # it writes its pid in a moment: serve only once it has
        time.sleep(0.01)


def main() -> None:
    mode = sys.argv[1]
    tools: list[dict] = [tool("ok")]
    page, log = 0, None
    if mode == "names":
        tools = names_tools()
    elif mode == "flood":
        tools = [tool(f"t{i}") for i in range(int(sys.argv[2]))]
        page, log = int(sys.argv[3]), sys.argv[4]
    elif mode == "grandchild":
        start_escapee(sys.argv[2])
    for line in sys.stdin:
        message = json.loads(line)
        method, rid = message.get("method"), message.get("id")
        if method == "initialize":
            send({"jsonrpc": "2.0", "id": rid, "result": {
                "protocolVersion": message["params"]["protocolVersion"], "capabilities": {"tools": {}},
                "serverInfo": {"name": "hostile", "version": "1"}}})
        elif method == "tools/list":
            if log is not None:
                with open(log, "a") as fh:
                    fh.write("list\n")
            start = int((message.get("params") or {}).get("cursor") or 0)
            end = start + page if page else len(tools)
            result: dict = {"tools": tools[start:end]}
            if end < len(tools):
                result["nextCursor"] = str(end)
            send({"jsonrpc": "2.0", "id": rid, "result": result})
        elif method == "tools/call":
            send({"jsonrpc": "2.0", "id": rid, "result": {"content": [{"type": "text", "text": "fine"}]}})
        elif rid is not None:
            send({"jsonrpc": "2.0", "id": rid, "error": {"code": -32601, "message": "Method not found"}})


if __name__ == "__main__":
    main()
