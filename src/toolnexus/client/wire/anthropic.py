"""The Anthropic messages wire: URL, headers, bodies, replies and streams as neutral turns.

Content parts (canonical form in `client/parts.py`) on this wire:
- user messages: `text` → text block, `image` → `{"type":"image","source":{base64 | url}}`,
  `file` with `application/pdf` (or `text/plain`) → `{"type":"document","source":…}`; audio and other
  files are unsupported.
- tool results: a `tool_result` block holding stored `parts` is sent with
  `content = [{"type":"text","text": output}, *mapped parts]`; the stored `parts` key is stripped.

Streaming keeps every content block verbatim (`thinking`, `redacted_thinking`, unknown types): a
block starts as its `content_block_start` payload and each `*_delta` appends its string fields
(`text_delta.text` → `text`, `thinking_delta.thinking` → `thinking`, `signature_delta` → `signature`;
`input_json_delta.partial_json` is parsed into `input` at the end). Usage is the final figure:
`message_delta.usage` values replace the `message_start` ones, never added twice.

Not here: retries, hooks, tool execution (loop), and translate's message conversion.
"""

from __future__ import annotations

import json
from typing import Any, Callable, Optional

from ..sse import SseEvent, json_payloads
from .base import DialectBase, ResultEntry, ToolCall, Turn, malformed, usage_of

__all__ = ["AnthropicWire"]

WIRE = "anthropic"
ANTHROPIC_VERSION = "2023-06-01"
MAX_TOKENS = 4096
_DOCUMENT_TYPES = ("application/pdf", "text/plain")


def _usage(u: Any) -> dict[str, int]:
    u = u if isinstance(u, dict) else {}
    return usage_of(u.get("input_tokens"), u.get("output_tokens"))


def _source(part: dict[str, Any]) -> dict[str, Any]:
    if part.get("data"):
        return {"type": "base64", "media_type": part["mimeType"], "data": part["data"]}
    return {"type": "url", "url": part["url"]}


class AnthropicWire(DialectBase):
    """The `style="anthropic"` dialect."""

    name = WIRE
    halt_emits_placeholder_result = True

    # -- request side ---------------------------------------------------------------------------

    def url(self, base_url: str) -> str:
        b = base_url.rstrip("/")
        return b + "/messages" if b.endswith("/v1") else b + "/v1/messages"

    def headers(self, api_key: str, extra: dict[str, str]) -> dict[str, str]:
        return {"x-api-key": api_key, "anthropic-version": ANTHROPIC_VERSION,
                "Content-Type": "application/json", **extra}

    def start_transcript(self, history: list[dict], system: str, prompt: Any) -> list[dict]:
        return list(history) + [{"role": "user", "content": prompt}]

    def declare_tools(self, toolkit: Any) -> list[dict]:
        return toolkit.to_anthropic() if toolkit is not None else []

    def build_body(self, model: str, messages: list[dict], tools: list[dict], system: str, stream: bool) -> dict:
        body: dict[str, Any] = {"model": model, "max_tokens": MAX_TOKENS, "system": system,
                                "messages": self.wire_messages(messages)}
        if stream:
            body["stream"] = True
        if tools:
            body["tools"] = tools
        return body

    def map_media(self, part: dict[str, Any]) -> Optional[dict[str, Any]]:
        if part["type"] == "image":
            return {"type": "image", "source": _source(part)}
        if part["type"] == "file" and part["mimeType"] in _DOCUMENT_TYPES:
            return {"type": "document", "source": _source(part)}
        return None

    def _wire_block(self, block: Any) -> Any:
        if isinstance(block, dict) and block.get("type") == "tool_result" and "parts" in block:
            mapped = [self.map_part(p, user=False) for p in block.get("parts") or []
                      if isinstance(p, dict) and p.get("type") != "text"]
            out = {k: v for k, v in block.items() if k != "parts"}
            if mapped:
                out["content"] = [{"type": "text", "text": block.get("content", "")}, *mapped]
            return out
        return self.map_part(block, user=True)

    def wire_messages(self, messages: list[dict]) -> list[dict]:
        """The canonical transcript as sent (parts mapped; unchanged messages reused as-is)."""
        out = []
        for m in messages:
            if isinstance(m, dict) and m.get("role") == "user" and isinstance(m.get("content"), list):
                m = {**m, "content": [self._wire_block(b) for b in m["content"]]}
            out.append(m)
        return out

    def result_messages(self, entries: list[ResultEntry]) -> list[dict]:
        if not entries:
            return []
        blocks = []
        for e in entries:
            block: dict[str, Any] = {"type": "tool_result", "tool_use_id": e.call.id, "content": e.output,
                                     "is_error": e.is_error}
            if e.parts:
                block["parts"] = e.parts
            blocks.append(block)
        return [{"role": "user", "content": blocks}]

    # -- reply side -----------------------------------------------------------------------------

    def parse_response(self, data: Any) -> Turn:
        if not isinstance(data, dict):
            raise malformed(WIRE, "expected a JSON object", data)
        content = data.get("content")
        if not isinstance(content, list):
            raise malformed(WIRE, "missing `content` list", data)
        for i, block in enumerate(content):
            if not isinstance(block, dict):
                raise malformed(WIRE, f"`content[{i}]` is not an object", data)
            if block.get("type") == "tool_use" and not isinstance(block.get("name"), str):
                raise malformed(WIRE, f"`content[{i}]` tool_use block has no `name`", block)
        message = {"role": "assistant", "content": content}
        return Turn(self._text(content), self.assistant_calls(message), _usage(data.get("usage")), message, raw=data)

    @staticmethod
    def _text(content: list) -> str:
        return "".join(b["text"] for b in content if b.get("type") == "text" and isinstance(b.get("text"), str))

    def assistant_calls(self, message: Any) -> list[ToolCall]:
        content = message.get("content") if isinstance(message, dict) else None
        if not isinstance(content, list):
            return []
        return [
            ToolCall(str(b.get("id") or ""), b["name"], b.get("input") if isinstance(b.get("input"), dict) else {})
            for b in content
            if isinstance(b, dict) and b.get("type") == "tool_use" and isinstance(b.get("name"), str)
        ]

    def new_stream(self) -> "AnthropicStream":
        return AnthropicStream()

    def exhausted_text(self, messages: list[dict], run_start: int) -> str:
        return ""

    def balance(self, messages: list[dict], text_for: Callable[[ToolCall], str]) -> list[dict]:
        i, calls = self.trailing_calls(messages)
        if not calls:
            return messages
        nxt = messages[i + 1] if i + 1 < len(messages) else None
        blocks = nxt.get("content") if isinstance(nxt, dict) and nxt.get("role") == "user" else None
        holds_results = isinstance(blocks, list) and any(
            isinstance(b, dict) and b.get("type") == "tool_result" for b in blocks)
        answered = {b.get("tool_use_id") for b in blocks if isinstance(b, dict)} if holds_results else set()
        missing = [c for c in calls if c.id not in answered]
        if not missing:
            return messages
        fill = self.result_messages([ResultEntry(c, text_for(c), True) for c in missing])[0]
        if holds_results:
            merged = {**nxt, "content": list(blocks) + fill["content"]}
            return messages[: i + 1] + [merged] + messages[i + 2 :]
        return messages[: i + 1] + [fill] + messages[i + 1 :]


class AnthropicStream:
    """Assembles a streamed messages turn, blocks kept verbatim (see module docstring)."""

    def __init__(self) -> None:
        self.finished = False
        self._blocks: dict[int, dict[str, Any]] = {}
        self._json: dict[int, list[str]] = {}
        self._usage: dict[str, Any] = {}
        self._stop_reason: Optional[str] = None

    def feed(self, event: SseEvent) -> list[str]:
        deltas: list[str] = []
        for data in json_payloads(event):
            if not isinstance(data, dict):
                continue
            kind = data.get("type") or event.event
            if kind == "message_start":
                msg = data.get("message") if isinstance(data.get("message"), dict) else {}
                self._usage.update(msg.get("usage") or {})
            elif kind == "content_block_start":
                block = data.get("content_block") if isinstance(data.get("content_block"), dict) else {}
                self._blocks[self._index(data)] = dict(block)
            elif kind == "content_block_delta":
                text = self._delta(self._index(data), data.get("delta"))
                if text:
                    deltas.append(text)
            elif kind == "message_delta":
                delta = data.get("delta") if isinstance(data.get("delta"), dict) else {}
                if delta.get("stop_reason") is not None:
                    self._stop_reason = delta["stop_reason"]
                self._usage.update(data.get("usage") or {})
            elif kind == "message_stop":
                self.finished = True
        return deltas

    @staticmethod
    def _index(data: dict) -> int:
        index = data.get("index", 0)
        return index if isinstance(index, int) else 0

    def _delta(self, index: int, delta: Any) -> Optional[str]:
        if not isinstance(delta, dict):
            return None
        block = self._blocks.setdefault(index, {"type": "text", "text": ""})
        if delta.get("type") == "input_json_delta":
            self._json.setdefault(index, []).append(str(delta.get("partial_json") or ""))
            return None
        for key, value in delta.items():
            if key != "type" and isinstance(value, str):
                block[key] = (block.get(key) or "") + value
        if delta.get("type") == "text_delta" and isinstance(delta.get("text"), str):
            return delta["text"]
        return None

    def turn(self) -> Turn:
        content = []
        for index in sorted(self._blocks):
            block = self._blocks[index]
            if block.get("type") == "tool_use":
                raw = "".join(self._json.get(index, []))
                try:
                    parsed = json.loads(raw) if raw.strip() else block.get("input")
                except ValueError:
                    parsed = None
                block = {**block, "input": parsed if isinstance(parsed, dict) else {}}
            content.append(block)
        message = {"role": "assistant", "content": content}
        text = "".join(b["text"] for b in content if b.get("type") == "text" and isinstance(b.get("text"), str))
        calls = [ToolCall(str(b.get("id") or ""), str(b.get("name") or ""), b["input"])
                 for b in content if b.get("type") == "tool_use"]
        if self._stop_reason != "tool_use":
            calls = []
        return Turn(text, calls, _usage(self._usage), message)
