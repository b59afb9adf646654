"""A scripted model provider on loopback for the benchmarks: HTTP/1.1 keep-alive, stdlib only.

`python model_server.py` prints its port on stdout, then serves until killed:

- `POST /v1/chat/completions` (OpenAI style) and `POST /v1/messages` (Anthropic style): the first
  call of a run answers with two parallel tool calls — `get_weather(city="Paris")` and
  `add(a=2, b=2)`, named after whichever advertised tools end with those names — and the second,
  which must carry both tool results (`Sunny, 22C` and `4`), with the final text. A request
  without both results gets an error text, so a wrong loop cannot produce a right answer.
- `GET /stats`: calls and connections seen; `POST /reset` zeroes them.

It runs as its own process so it never competes with the measured run for that process's GIL.
"""

from __future__ import annotations

import asyncio
import json
import sys
from typing import Any

FINAL = "The weather in Paris is Sunny, 22C. And 2 + 2 = 4."
USAGE_OPENAI = {"prompt_tokens": 50, "completion_tokens": 20, "total_tokens": 70}
USAGE_ANTHROPIC = {"input_tokens": 50, "output_tokens": 20}
STATS = {"calls": 0, "connections": 0}


def _names(tools: list[dict[str, Any]], anthropic: bool) -> tuple[str, str]:
    names = [t.get("name") if anthropic else (t.get("function") or {}).get("name") for t in tools or []]
    weather = next((n for n in names if n and n.endswith("get_weather")), "get_weather")
    add = next((n for n in names if n and n.endswith("add")), "add")
    return weather, add


def _results_openai(messages: list[dict[str, Any]]) -> list[str]:
    return [str(m.get("content")) for m in messages if m.get("role") == "tool"]


def _results_anthropic(messages: list[dict[str, Any]]) -> list[str]:
    out = []
    for m in messages:
        content = m.get("content")
        if m.get("role") == "user" and isinstance(content, list):
            for block in content:
                if isinstance(block, dict) and block.get("type") == "tool_result":
                    inner = block.get("content")
                    out.append(inner if isinstance(inner, str) else json.dumps(inner))
    return out


def reply(path: str, body: dict[str, Any]) -> dict[str, Any]:
    anthropic = path.endswith("/messages")
    weather, add = _names(body.get("tools") or [], anthropic)
    results = (_results_anthropic if anthropic else _results_openai)(body.get("messages") or [])
    if not results:
        calls = [("call_w", weather, {"city": "Paris"}), ("call_a", add, {"a": 2, "b": 2})]
        if anthropic:
            return {"id": "msg_1", "type": "message", "role": "assistant", "model": body.get("model"),
                    "content": [{"type": "tool_use", "id": i, "name": n, "input": a} for i, n, a in calls],
                    "stop_reason": "tool_use", "usage": USAGE_ANTHROPIC}
        return {"id": "chatcmpl-1", "object": "chat.completion", "model": body.get("model"),
                "choices": [{"index": 0, "finish_reason": "tool_calls", "message": {
                    "role": "assistant", "content": None, "tool_calls": [
                        {"id": i, "type": "function", "function": {"name": n, "arguments": json.dumps(a)}}
                        for i, n, a in calls]}}], "usage": USAGE_OPENAI}
    joined = " ".join(results)
    text = FINAL if ("Sunny, 22C" in joined and "4" in joined) else f"bad tool results: {joined[:200]}"
    if anthropic:
        return {"id": "msg_2", "type": "message", "role": "assistant", "model": body.get("model"),
                "content": [{"type": "text", "text": text}], "stop_reason": "end_turn", "usage": USAGE_ANTHROPIC}
    return {"id": "chatcmpl-2", "object": "chat.completion", "model": body.get("model"),
            "choices": [{"index": 0, "finish_reason": "stop", "message": {"role": "assistant", "content": text}}],
            "usage": USAGE_OPENAI}


async def handle(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
    STATS["connections"] += 1
    try:
        while True:
            head = await reader.readuntil(b"\r\n\r\n")
            lines = head.decode("latin-1").split("\r\n")
            method, path, _ = lines[0].split(" ", 2)
            headers = {k.strip().lower(): v.strip() for k, _, v in (line.partition(":") for line in lines[1:] if line)}
            body = await reader.readexactly(int(headers.get("content-length", "0")))
            if method == "GET" and path == "/stats":
                data = json.dumps(STATS).encode()
            elif method == "POST" and path == "/reset":
                STATS.update(calls=0, connections=1)
                data = b"{}"
            else:
                STATS["calls"] += 1
                data = json.dumps(reply(path, json.loads(body or b"{}"))).encode()
            writer.write(b"HTTP/1.1 200 OK\r\nContent-Type: application/json\r\nContent-Length: "
                         + str(len(data)).encode() + b"\r\n\r\n" + data)
            await writer.drain()
    except (asyncio.IncompleteReadError, ConnectionError):
        pass
    finally:
        writer.close()


async def main() -> None:
    server = await asyncio.start_server(handle, "127.0.0.1", int(sys.argv[1]) if len(sys.argv) > 1 else 0)
    print(server.sockets[0].getsockname()[1], flush=True)
    async with server:
        await server.serve_forever()


if __name__ == "__main__":
    asyncio.run(main())
