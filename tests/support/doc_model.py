"""A loopback stand-in for the providers the documentation's examples talk to.

The doc examples (tests/test_docs_examples.py) run as real programs, in fresh interpreters, with
the base URLs and keys a user would set (`OPENAI_BASE_URL` / `OPENAI_API_KEY`,
`ANTHROPIC_BASE_URL` / `ANTHROPIC_API_KEY`, `TYPESAFE_BASE_URL` / `TYPESAFE_API_KEY`) pointing
here. This server answers them like a small, deterministic model would, decided by the transcript
it is shown alone (so any process, any turn, any resume gets a sensible reply):

- a key other than the one the test put in the environment is refused with 401, as a real
  provider does (the README test relies on it);
- the last message is a user turn and tools are declared: call one tool — the one the prompt
  names, else `task` (delegating to the first agent its description lists), else the last one
  declared (the caller's own tools come last in a toolkit) — with arguments filled from its
  schema (strings get the prompt's text, numbers 1, booleans true, enums their first value);
- the last messages are tool results: answer with their text (or, when a structured-output
  `final_result` tool is declared, call it with arguments filled from its schema);
- no tools: answer `You said: <prompt>`;
- `stream: true` gets the same reply as server-sent events;
- `POST …/systemone` (the classifier): every noul 0.1, every choice its first option, every score
  its lowest level, each with confidence 0.9.

`requests` records what arrived (path, headers, JSON body); `replies` what was sent.
"""

from __future__ import annotations

import json
import re
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any, Optional

__all__ = ["DocModelServer", "fill_from_schema"]

FINAL_RESULT = "final_result"


def fill_from_schema(schema: Any, prompt: str) -> Any:
    """A value that satisfies a simple JSON schema, built the way the docstring says."""
    if not isinstance(schema, dict):
        return prompt
    if "enum" in schema and schema["enum"]:
        return schema["enum"][0]
    if "const" in schema:
        return schema["const"]
    if "default" in schema:
        return schema["default"]
    for key in ("anyOf", "oneOf", "allOf"):
        if schema.get(key):
            options = [s for s in schema[key] if isinstance(s, dict) and s.get("type") != "null"]
            return fill_from_schema(options[0] if options else schema[key][0], prompt)
    kind = schema.get("type")
    if isinstance(kind, list):
        kind = next((k for k in kind if k != "null"), None)
    if kind == "object" or "properties" in schema:
        props = schema.get("properties") or {}
        return {name: fill_from_schema(props.get(name, {}), prompt) for name in schema.get("required") or []}
    if kind == "string":
        return prompt
    if kind in ("number", "integer"):
        return 1
    if kind == "boolean":
        return True
    if kind == "array":
        return []
    if kind == "null":
        return None
    return prompt


def _text_of(content: Any) -> str:
    if isinstance(content, str):
        return content
    if isinstance(content, list):
        return "\n".join(str(p.get("text", "")) for p in content
                         if isinstance(p, dict) and p.get("type") in ("text", None) and "text" in p)
    return ""


class _Tool:
    def __init__(self, name: str, description: str, schema: Any) -> None:
        self.name, self.description, self.schema = name, description, schema


def _choose_call(tools: list[_Tool], prompt: str) -> Optional[tuple[str, dict[str, Any]]]:
    callable_tools = [t for t in tools if t.name != FINAL_RESULT]
    if not callable_tools:
        return None
    named = [t for t in callable_tools if re.search(rf"\b{re.escape(t.name)}\b", prompt)]
    by_name = {t.name: t for t in callable_tools}
    tool = named[0] if named else by_name.get("task") or callable_tools[-1]
    args = fill_from_schema(tool.schema, prompt)
    if tool.name == "task" and isinstance(args, dict):
        listed = re.search(r"Available agents — ([^:;]+):", tool.description or "")
        if listed:
            args["agent"] = listed.group(1).strip()
    return tool.name, args if isinstance(args, dict) else {}


def _decide(
    tools: list[_Tool], prompt: str, tool_outputs: Optional[list[str]]
) -> tuple[str, Optional[tuple[str, dict]]]:
    """(text, call) for one turn: a call is `(name, args)`; text is used when there is no call."""
    final = next((t for t in tools if t.name == FINAL_RESULT), None)
    if tool_outputs is not None:
        if final is not None:
            return "", (FINAL_RESULT, fill_from_schema(final.schema, "\n".join(tool_outputs)))
        return "\n".join(tool_outputs), None
    call = _choose_call(tools, prompt)
    if call is not None:
        return "", call
    if final is not None:
        return "", (FINAL_RESULT, fill_from_schema(final.schema, prompt))
    return f"You said: {prompt}", None


class _Policy:
    """The replies, per wire. Each returns (status, JSON body) or (status, SSE text)."""

    def __init__(self, keys: dict[str, str]) -> None:
        self.keys = keys
        self.calls = 0
        self.lock = threading.Lock()

    def _call_id(self) -> str:
        with self.lock:
            self.calls += 1
            return f"call_doc_{self.calls}"

    # -- OpenAI chat completions ------------------------------------------------------------------

    def openai(self, headers: dict[str, str], body: dict[str, Any]) -> tuple[int, Any, bool]:
        if headers.get("authorization") != f"Bearer {self.keys['openai']}":
            return 401, {"error": {"message": "Incorrect API key provided.", "type": "invalid_request_error"}}, False
        messages = body.get("messages") or []
        tools = [_Tool(t["function"]["name"], t["function"].get("description", ""), t["function"].get("parameters"))
                 for t in body.get("tools") or [] if isinstance(t, dict) and "function" in t]
        outputs: Optional[list[str]] = None
        if messages and messages[-1].get("role") == "tool":
            outputs = []
            for m in reversed(messages):
                if m.get("role") != "tool":
                    break
                outputs.insert(0, _text_of(m.get("content")))
        prompt = next((_text_of(m.get("content")) for m in reversed(messages) if m.get("role") == "user"), "")
        text, call = _decide(tools, prompt, outputs)
        model = body.get("model", "")
        if call is None:
            message: dict[str, Any] = {"role": "assistant", "content": text}
            finish = "stop"
        else:
            message = {"role": "assistant", "content": None, "tool_calls": [
                {"id": self._call_id(), "type": "function",
                 "function": {"name": call[0], "arguments": json.dumps(call[1])}}]}
            finish = "tool_calls"
        usage = {"prompt_tokens": 10, "completion_tokens": 5, "total_tokens": 15}
        if body.get("stream"):
            delta: dict[str, Any] = {"role": "assistant"}
            if call is None:
                delta["content"] = text
            else:
                delta["tool_calls"] = [{"index": 0, **message["tool_calls"][0]}]
            chunks = [{"id": "chatcmpl-doc", "model": model, "choices": [{"index": 0, "delta": delta}]},
                      {"id": "chatcmpl-doc", "model": model, "choices": [{"index": 0, "delta": {},
                                                                          "finish_reason": finish}]},
                      {"id": "chatcmpl-doc", "model": model, "choices": [], "usage": usage}]
            return 200, "".join(f"data: {json.dumps(c)}\n\n" for c in chunks) + "data: [DONE]\n\n", True
        return 200, {"id": "chatcmpl-doc", "object": "chat.completion", "model": model,
                     "choices": [{"index": 0, "message": message, "finish_reason": finish}], "usage": usage}, False

    # -- Anthropic messages -----------------------------------------------------------------------

    def anthropic(self, headers: dict[str, str], body: dict[str, Any]) -> tuple[int, Any, bool]:
        if headers.get("x-api-key") != self.keys["anthropic"]:
            return (
                401,
                {"type": "error", "error": {"type": "authentication_error", "message": "invalid x-api-key"}},
                False,
            )
        messages = body.get("messages") or []
        tools = [_Tool(t["name"], t.get("description", ""), t.get("input_schema"))
                 for t in body.get("tools") or [] if isinstance(t, dict) and "name" in t]
        outputs: Optional[list[str]] = None
        last = messages[-1] if messages else {}
        blocks = last.get("content") if isinstance(last.get("content"), list) else []
        results = [b for b in blocks if isinstance(b, dict) and b.get("type") == "tool_result"]
        if last.get("role") == "user" and results:
            outputs = [_text_of(b.get("content")) for b in results]
        prompt = ""
        for m in reversed(messages):
            if m.get("role") == "user" and not any(
                isinstance(b, dict) and b.get("type") == "tool_result"
                for b in (m.get("content") if isinstance(m.get("content"), list) else [])
            ):
                prompt = _text_of(m.get("content"))
                break
        text, call = _decide(tools, prompt, outputs)
        if call is None:
            content: list[dict[str, Any]] = [{"type": "text", "text": text}]
            stop = "end_turn"
        else:
            content = [{"type": "tool_use", "id": self._call_id().replace("call_", "toolu_"), "name": call[0],
                        "input": call[1]}]
            stop = "tool_use"
        usage = {"input_tokens": 10, "output_tokens": 5}
        model = body.get("model", "")
        if body.get("stream"):
            events: list[tuple[str, dict[str, Any]]] = [
                ("message_start", {"type": "message_start", "message": {
                    "id": "msg_doc", "type": "message", "role": "assistant", "model": model, "content": [],
                    "usage": {"input_tokens": 10, "output_tokens": 0}}})]
            block = content[0]
            if block["type"] == "text":
                events += [("content_block_start", {"type": "content_block_start", "index": 0,
                                                    "content_block": {"type": "text", "text": ""}}),
                           ("content_block_delta", {"type": "content_block_delta", "index": 0,
                                                    "delta": {"type": "text_delta", "text": text}})]
            else:
                events += [("content_block_start", {"type": "content_block_start", "index": 0, "content_block": {
                    "type": "tool_use", "id": block["id"], "name": block["name"], "input": {}}}),
                           ("content_block_delta", {"type": "content_block_delta", "index": 0, "delta": {
                               "type": "input_json_delta", "partial_json": json.dumps(block["input"])}})]
            events += [("content_block_stop", {"type": "content_block_stop", "index": 0}),
                       ("message_delta", {"type": "message_delta", "delta": {"stop_reason": stop},
                                          "usage": {"output_tokens": 5}}),
                       ("message_stop", {"type": "message_stop"})]
            return 200, "".join(f"event: {name}\ndata: {json.dumps(data)}\n\n" for name, data in events), True
        return 200, {"id": "msg_doc", "type": "message", "role": "assistant", "model": model, "content": content,
                     "stop_reason": stop, "usage": usage}, False

    # -- the classifier (SystemOne) ---------------------------------------------------------------

    def systemone(self, headers: dict[str, str], body: dict[str, Any]) -> tuple[int, Any, bool]:
        if headers.get("authorization") != f"Bearer {self.keys['typesafe']}":
            return 401, {"error": "unauthorized"}, False
        answers: dict[str, Any] = {}
        for key, q in (body.get("questions") or {}).items():
            kind = q.get("type")
            if kind == "noul":
                answers[key] = {"type": "noul", "noul": 0.1}
            elif kind == "choice":
                options = list(q.get("criteria") or {})
                probabilities = {o: (0.9 if i == 0 else 0.1 / max(1, len(options) - 1)) for i, o in enumerate(options)}
                answers[key] = {"type": "choice", "choice": options[0], "probabilities": probabilities,
                                "confidence": 0.9}
            else:
                levels = list(q.get("criteria") or [])
                answers[key] = {"type": "score", "score": 0, "confidence": 0.9,
                                "legend": {str(i): str(level) for i, level in enumerate(levels)}}
        return 200, {"model": body.get("model", ""), "answers": answers,
                     "usage": {"input_tokens": 10, "output_tokens": 5}, "calibrated": True}, False


class DocModelServer:
    """The server (module docstring); `start()` / `stop()` or a context manager."""

    def __init__(self, keys: dict[str, str]) -> None:
        self.policy = _Policy(keys)
        self.requests: list[dict[str, Any]] = []
        self.replies: list[tuple[int, Any]] = []
        server = self

        class Handler(BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"

            def log_message(self, *args: Any) -> None:  # quiet
                pass

            def do_POST(self) -> None:
                length = int(self.headers.get("Content-Length") or 0)
                raw = self.rfile.read(length)
                headers = {k.lower(): v for k, v in self.headers.items()}
                try:
                    body = json.loads(raw or b"{}")
                except ValueError:
                    body = {}
                server.requests.append({"path": self.path, "headers": headers, "body": body})
                path = self.path.split("?", 1)[0]
                if path.endswith("/chat/completions"):
                    status, payload, sse = server.policy.openai(headers, body)
                elif path.endswith("/messages"):
                    status, payload, sse = server.policy.anthropic(headers, body)
                elif path.endswith("/systemone"):
                    status, payload, sse = server.policy.systemone(headers, body)
                else:
                    status, payload, sse = 404, {"error": f"no route {path}"}, False
                server.replies.append((status, payload))
                data = (payload if sse else json.dumps(payload)).encode()
                self.send_response(status)
                self.send_header("Content-Type", "text/event-stream" if sse else "application/json")
                self.send_header("Content-Length", str(len(data)))
                self.end_headers()
                self.wfile.write(data)

        self._httpd = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self._httpd.daemon_threads = True
        self._thread = threading.Thread(target=self._httpd.serve_forever, daemon=True)

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self._httpd.server_address[1]}"

    def start(self) -> "DocModelServer":
        self._thread.start()
        return self

    def stop(self) -> None:
        self._httpd.shutdown()
        self._httpd.server_close()
        self._thread.join(5)

    def __enter__(self) -> "DocModelServer":
        return self.start()

    def __exit__(self, *exc: Any) -> None:
        self.stop()
