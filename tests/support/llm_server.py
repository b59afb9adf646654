"""A real loopback HTTP/1.1 server that plays an LLM provider, scripted per test.

It runs its own asyncio loop in a background thread (so a client bug that blocks the test's loop
cannot also freeze the server) on 127.0.0.1 with a free port. Each request pops the next `Step`
from the script; every request is recorded (`server.requests`) with its connection number, so
connection reuse is observable (`server.connections`).

Steps: `Json` (a JSON reply, any status and headers), `Sse` (a chunked `text/event-stream`, with
optional `gate` — a `threading.Event` the server waits on before each chunk after the first
`open_chunks` — and per-chunk delay), `Hang` (read the request, never answer; `server.arrived`
is set on arrival and `server.disconnected` when the client goes away), `Trickle` (headers, then a
byte at a time, forever), `Raw` (bytes verbatim).

Also: builders for OpenAI / Anthropic replies and SSE event lists.
"""

from __future__ import annotations

import asyncio
import json
import threading
import time
from collections import deque
from dataclasses import dataclass, field
from typing import Any, Optional, Union

__all__ = [
    "LlmServer",
    "ScriptedTransport",
    "RecordingTransport",
    "Recorded",
    "Json",
    "Sse",
    "Hang",
    "Trickle",
    "Raw",
    "openai_text",
    "openai_calls",
    "anthropic_text",
    "anthropic_calls",
    "openai_sse",
    "anthropic_sse",
    "sse_lines",
    "unbalanced_turns",
    "tool_from",
    "toolkit_of",
]


@dataclass
class Recorded:
    method: str
    path: str
    headers: dict[str, str]  # lower-cased names
    header_items: list[tuple[str, str]]  # as sent, in order
    body: bytes
    connection: int

    @property
    def json(self) -> Any:
        return json.loads(self.body)


@dataclass
class Json:
    body: Any
    status: int = 200
    headers: dict[str, str] = field(default_factory=dict)


@dataclass
class Sse:
    chunks: list[Union[str, bytes]]
    status: int = 200
    gate: Optional[threading.Event] = None
    open_chunks: int = 1
    delay: float = 0.0


@dataclass
class Hang:
    pass


@dataclass
class Trickle:
    status: int = 200
    content_type: str = "application/json"
    interval: float = 0.02


@dataclass
class Raw:
    data: bytes
    close: bool = True


Step = Union[Json, Sse, Hang, Trickle, Raw]
_REASONS = {200: "OK", 400: "Bad Request", 401: "Unauthorized", 403: "Forbidden", 404: "Not Found",
            429: "Too Many Requests", 500: "Internal Server Error", 502: "Bad Gateway", 503: "Service Unavailable",
            504: "Gateway Timeout", 529: "Overloaded"}


def _head(status: int, headers: dict[str, str]) -> bytes:
    lines = [f"HTTP/1.1 {status} {_REASONS.get(status, 'Status')}"] + [f"{k}: {v}" for k, v in headers.items()]
    return ("\r\n".join(lines) + "\r\n\r\n").encode()


class LlmServer:
    """See module docstring. Use as a context manager or call `start()` / `stop()`."""

    def __init__(self) -> None:
        self.script: deque[Step] = deque()
        self.requests: list[Recorded] = []
        self.connections = 0
        self.arrived = threading.Event()
        self.disconnected = threading.Event()
        self.disconnected_at = 0.0
        self._loop = asyncio.new_event_loop()
        self._thread = threading.Thread(target=self._loop.run_forever, daemon=True)
        self._server: Optional[asyncio.AbstractServer] = None
        self.port = 0

    # -- lifecycle ------------------------------------------------------------------------------

    def start(self) -> "LlmServer":
        self._thread.start()
        fut = asyncio.run_coroutine_threadsafe(asyncio.start_server(self._handle, "127.0.0.1", 0), self._loop)
        self._server = fut.result(5)
        self.port = self._server.sockets[0].getsockname()[1]
        return self

    def stop(self) -> None:
        async def shutdown() -> None:
            assert self._server is not None
            self._server.close()
            for task in [t for t in asyncio.all_tasks() if t is not asyncio.current_task()]:
                task.cancel()

        asyncio.run_coroutine_threadsafe(shutdown(), self._loop).result(5)
        self._loop.call_soon_threadsafe(self._loop.stop)
        self._thread.join(5)

    def __enter__(self) -> "LlmServer":
        return self.start()

    def __exit__(self, *exc: Any) -> None:
        self.stop()

    @property
    def base_url(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    def add(self, *steps: Step) -> "LlmServer":
        self.script.extend(steps)
        return self

    # -- serving --------------------------------------------------------------------------------

    async def _handle(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        self.connections += 1
        conn = self.connections
        try:
            while True:
                request = await self._read_request(reader, conn)
                if request is None:
                    return
                self.requests.append(request)
                step = self.script.popleft() if self.script else Json({"error": "script exhausted"}, status=500)
                keep = await self._reply(step, reader, writer)
                if not keep:
                    return
        except (ConnectionError, asyncio.IncompleteReadError):
            return
        finally:
            writer.close()

    async def _read_request(self, reader: asyncio.StreamReader, conn: int) -> Optional[Recorded]:
        line = await reader.readline()
        if not line:
            return None
        method, path, _ = line.decode().split(" ", 2)
        items: list[tuple[str, str]] = []
        while True:
            h = (await reader.readline()).decode().rstrip("\r\n")
            if not h:
                break
            name, _, value = h.partition(":")
            items.append((name.strip(), value.strip()))
        headers = {k.lower(): v for k, v in items}
        body = await reader.readexactly(int(headers.get("content-length", "0")))
        return Recorded(method, path, headers, items, body, conn)

    async def _reply(self, step: Step, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> bool:
        if isinstance(step, Json):
            body = step.body if isinstance(step.body, bytes) else json.dumps(step.body).encode()
            headers = {"Content-Type": "application/json", "Content-Length": str(len(body)), **step.headers}
            writer.write(_head(step.status, headers) + body)
            await writer.drain()
            return True
        if isinstance(step, Sse):
            await self._sse(step, writer)
            return True
        if isinstance(step, Hang):
            self.arrived.set()
            await reader.read()  # returns at EOF: the client closed the connection
            self.disconnected_at = time.monotonic()
            self.disconnected.set()
            return False
        if isinstance(step, Trickle):
            writer.write(_head(step.status, {"Content-Type": step.content_type, "Content-Length": "1000000"}))
            self.arrived.set()
            try:
                while True:
                    writer.write(b" ")
                    await writer.drain()
                    await asyncio.sleep(step.interval)
            except ConnectionError:
                self.disconnected.set()
                return False
        writer.write(step.data)
        await writer.drain()
        return not step.close

    async def _sse(self, step: Sse, writer: asyncio.StreamWriter) -> None:
        writer.write(_head(step.status, {"Content-Type": "text/event-stream", "Transfer-Encoding": "chunked"}))
        for i, chunk in enumerate(step.chunks):
            if step.gate is not None and i >= step.open_chunks:
                await asyncio.get_running_loop().run_in_executor(None, step.gate.wait)
            if step.delay:
                await asyncio.sleep(step.delay)
            data = chunk.encode() if isinstance(chunk, str) else chunk
            writer.write(f"{len(data):x}\r\n".encode() + data + b"\r\n")
            await writer.drain()
        writer.write(b"0\r\n\r\n")
        await writer.drain()


# -- reply builders ------------------------------------------------------------------------------


def openai_text(text: Optional[str], prompt: int = 3, completion: int = 1, total: Optional[int] = None) -> dict:
    usage = {
        "prompt_tokens": prompt,
        "completion_tokens": completion,
        "total_tokens": prompt + completion if total is None else total,
    }
    return {"choices": [{"index": 0, "message": {"role": "assistant", "content": text}, "finish_reason": "stop"}],
            "usage": usage}


def openai_calls(*calls: tuple[str, str, Any], prompt: int = 6, completion: int = 2, content: Any = None) -> dict:
    return {"choices": [{"index": 0, "message": {"role": "assistant", "content": content, "tool_calls": [
        {"id": cid, "type": "function",
         "function": {"name": name, "arguments": args if isinstance(args, str) else json.dumps(args)}}
        for cid, name, args in calls]}, "finish_reason": "tool_calls"}],
            "usage": {"prompt_tokens": prompt, "completion_tokens": completion, "total_tokens": prompt + completion}}


def anthropic_text(text: str, input_tokens: int = 3, output_tokens: int = 1) -> dict:
    return {"id": "msg_1", "type": "message", "role": "assistant", "content": [{"type": "text", "text": text}],
            "stop_reason": "end_turn", "usage": {"input_tokens": input_tokens, "output_tokens": output_tokens}}


def anthropic_calls(*calls: tuple[str, str, Any], text: Optional[str] = None, input_tokens: int = 6,
                    output_tokens: int = 2) -> dict:
    content: list[dict] = [{"type": "text", "text": text}] if text else []
    content += [{"type": "tool_use", "id": cid, "name": name, "input": args} for cid, name, args in calls]
    return {"id": "msg_2", "type": "message", "role": "assistant", "content": content, "stop_reason": "tool_use",
            "usage": {"input_tokens": input_tokens, "output_tokens": output_tokens}}


def sse_lines(*payloads: Any, event_names: Optional[list[Optional[str]]] = None) -> list[str]:
    """Each payload as one SSE event (`event:` line when named), blank-line terminated."""
    out = []
    for i, p in enumerate(payloads):
        name = event_names[i] if event_names else None
        data = p if isinstance(p, str) else json.dumps(p)
        out.append((f"event: {name}\n" if name else "") + f"data: {data}\n\n")
    return out


def openai_sse(*texts: str, calls: tuple = (), usage: Optional[dict] = None) -> list[str]:
    """Text deltas, then tool-call deltas (name and arguments split in two), usage chunk, [DONE]."""
    chunks: list[Any] = [{"choices": [{"index": 0, "delta": {"content": t}}]} for t in texts]
    for index, (cid, name, args) in enumerate(calls):
        raw = args if isinstance(args, str) else json.dumps(args)
        half = len(raw) // 2
        chunks.append({"choices": [{"index": 0, "delta": {"tool_calls": [
            {"index": index, "id": cid, "type": "function", "function": {"name": name, "arguments": raw[:half]}}]}}]})
        chunks.append({"choices": [{"index": 0, "delta": {"tool_calls": [
            {"index": index, "function": {"arguments": raw[half:]}}]}}]})
    chunks.append({"choices": [], "usage": usage or {"prompt_tokens": 5, "completion_tokens": 2, "total_tokens": 7}})
    return sse_lines(*chunks, "[DONE]")


def anthropic_sse(*texts: str, calls: tuple = (), input_tokens: int = 5, output_tokens: int = 2,
                  extra_blocks: tuple = ()) -> list[str]:
    """message_start, text block deltas, tool_use blocks (partial JSON), message_delta, message_stop."""
    events: list[dict] = [
        {
            "type": "message_start",
            "message": {
                "id": "msg",
                "role": "assistant",
                "content": [],
                "usage": {"input_tokens": input_tokens, "output_tokens": 1},
            },
        }
    ]
    index = 0
    for block, deltas in extra_blocks:
        events.append({"type": "content_block_start", "index": index, "content_block": block})
        events += [{"type": "content_block_delta", "index": index, "delta": d} for d in deltas]
        events.append({"type": "content_block_stop", "index": index})
        index += 1
    if texts:
        events.append({"type": "content_block_start", "index": index, "content_block": {"type": "text", "text": ""}})
        events += [{"type": "content_block_delta", "index": index, "delta": {"type": "text_delta", "text": t}}
                   for t in texts]
        events.append({"type": "content_block_stop", "index": index})
        index += 1
    for cid, name, args in calls:
        raw = json.dumps(args)
        events.append({"type": "content_block_start", "index": index,
                       "content_block": {"type": "tool_use", "id": cid, "name": name, "input": {}}})
        events += [{"type": "content_block_delta", "index": index, "delta": {"type": "input_json_delta",
                                                                             "partial_json": part}}
                   for part in (raw[: len(raw) // 2], raw[len(raw) // 2:])]
        events.append({"type": "content_block_stop", "index": index})
        index += 1
    events.append({"type": "message_delta", "delta": {"stop_reason": "tool_use" if calls else "end_turn"},
                   "usage": {"output_tokens": output_tokens}})
    events.append({"type": "message_stop"})
    return sse_lines(*events, event_names=[e["type"] for e in events])


class ScriptedTransport:
    """The seed page's transport, verbatim: canned OpenAI-shaped replies, popped per model."""

    def __init__(self, scripts):
        self._scripts = {k: list(v) for k, v in scripts.items()}

    def post(self, url, headers, payload, timeout):
        return self._scripts[payload.get("model")].pop(0)

    def open(self, url, headers, payload, timeout):
        raise NotImplementedError


class RecordingTransport:
    """A sync transport that records every payload (deep-copied) and replays canned replies."""

    def __init__(self, *replies: Any) -> None:
        self.replies = list(replies)
        self.payloads: list[dict] = []
        self.calls: list[tuple[str, dict, float]] = []

    def post(self, url, headers, payload, timeout):
        self.payloads.append(json.loads(json.dumps(payload)))
        self.calls.append((url, dict(headers), timeout))
        reply = self.replies.pop(0)
        if isinstance(reply, BaseException):
            raise reply
        return reply

    def open(self, url, headers, payload, timeout):
        raise NotImplementedError


def unbalanced_turns(messages: list) -> list[tuple[int, list, list]]:
    """Assistant turns (either wire) whose tool calls do not have exactly one result each, in order.

    Returns `(index, call ids, result ids)` per offending turn; `[]` means every turn is balanced.
    OpenAI results are the `tool` messages right after the turn; Anthropic results are the
    `tool_result` blocks of the next user message.
    """
    bad = []
    for i, m in enumerate(messages):
        if not isinstance(m, dict) or m.get("role") != "assistant":
            continue
        if isinstance(m.get("content"), list):
            calls = [b["id"] for b in m["content"] if isinstance(b, dict) and b.get("type") == "tool_use"]
            nxt = messages[i + 1] if i + 1 < len(messages) else {}
            blocks = nxt.get("content") if nxt.get("role") == "user" and isinstance(nxt.get("content"), list) else []
            results = [b.get("tool_use_id") for b in blocks if isinstance(b, dict) and b.get("type") == "tool_result"]
        else:
            calls = [c["id"] for c in m.get("tool_calls") or []]
            results = []
            for later in messages[i + 1:]:
                if not isinstance(later, dict) or later.get("role") != "tool":
                    break
                results.append(later.get("tool_call_id"))
        if calls and results != calls:
            bad.append((i, calls, results))
    return bad


# -- tools for loop tests ------------------------------------------------------------------------


def tool_from(name: str, fn: Any, source: str = "native") -> Any:
    """A real `Tool` named `name` whose execute awaits `fn(args or {}, ctx)` (empty object schema)."""
    from toolnexus.types import Tool

    async def execute(args: Any = None, ctx: Any = None) -> Any:
        return await fn(args or {}, ctx)

    return Tool(name, f"{name} tool", {"type": "object", "properties": {}}, source, execute)


def toolkit_of(*tools: Any) -> Any:
    """A real `Toolkit` holding just `tools` (no MCP, skills or built-ins)."""
    from toolnexus.toolkit import Toolkit

    return Toolkit(None, None, [], [], list(tools))
