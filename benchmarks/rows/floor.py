"""The floor: the same work with no framework — one keep-alive HTTP connection, raw JSON-RPC to the
MCP tools server, the two tool calls run one after the other. Its time is what every row pays for
the model server, the tools server and the sockets."""

import asyncio
import http.client
import json
import subprocess
import sys
from urllib.parse import urlsplit

import _row as r  # first: starts the clock

TOOLS = [
    {"type": "function", "function": {"name": n, "parameters": {"type": "object"}}} for n in ("get_weather", "add")
]


class Tools:
    def __init__(self) -> None:
        self.proc = subprocess.Popen([sys.executable, r.TOOLS_SERVER], stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                                     text=True, bufsize=1)
        self.n = 0
        self.rpc("initialize", {"protocolVersion": "2025-06-18", "capabilities": {},
                                "clientInfo": {"name": "floor", "version": "1"}})
        self.proc.stdin.write(json.dumps({"jsonrpc": "2.0", "method": "notifications/initialized"}) + "\n")

    def rpc(self, method: str, params: dict) -> dict:
        self.n += 1
        self.proc.stdin.write(json.dumps({"jsonrpc": "2.0", "id": self.n, "method": method, "params": params}) + "\n")
        self.proc.stdin.flush()
        return json.loads(self.proc.stdout.readline())["result"]

    def close(self) -> None:
        self.proc.stdin.close()
        self.proc.wait()


async def main() -> None:
    url = urlsplit(r.model_url())
    conn = http.client.HTTPConnection(url.hostname, url.port)
    tools = Tools()

    def post(messages: list) -> dict:
        body = json.dumps({"model": r.MODEL, "messages": messages, "tools": TOOLS})
        conn.request("POST", "/v1/chat/completions", body, {"Content-Type": "application/json",
                                                            "Authorization": f"Bearer {r.API_KEY}"})
        return json.loads(conn.getresponse().read())

    async def run_once() -> str:
        messages = [{"role": "user", "content": r.QUESTION}]
        reply = post(messages)["choices"][0]["message"]
        messages.append(reply)
        for call in reply["tool_calls"]:
            out = tools.rpc("tools/call", {"name": call["function"]["name"],
                                           "arguments": json.loads(call["function"]["arguments"])})
            messages.append({"role": "tool", "tool_call_id": call["id"], "content": out["content"][0]["text"]})
        return post(messages)["choices"][0]["message"]["content"]

    try:
        result = await r.bench("floor (no framework)", sys.version.split()[0], run_once, 0.0)
    finally:
        tools.close()
        conn.close()
    r.finish(result)


asyncio.run(main())
