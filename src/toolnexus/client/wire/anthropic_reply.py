"""Reading Anthropic replies: usage and text of a messages response, and the streamed-turn accumulator.

Streaming keeps every content block verbatim (`thinking`, `redacted_thinking`, unknown types): a
block starts as its `content_block_start` payload and each `*_delta` appends its string fields
(`text_delta.text` → `text`, `thinking_delta.thinking` → `thinking`, `signature_delta` → `signature`;
`input_json_delta.partial_json` is parsed into `input` at the end). Usage is the final figure:
`message_delta.usage` values replace the `message_start` ones, never added twice.

Not here: the request side and the dialect object (`anthropic.py`).
"""

from __future__ import annotations

from typing import Any, Optional

from ..._shapes import as_dict
from ..sse import SseEvent, json_payloads
from .base import ToolCall, Turn, read_arguments, usage_of

__all__ = ["AnthropicStream", "reply_usage", "reply_text"]


def reply_usage(u: Any) -> dict[str, int]:
    """A reply's `usage` (`input_tokens` / `output_tokens`) as the neutral usage dict."""
    u = u if isinstance(u, dict) else {}
    return usage_of(u.get("input_tokens"), u.get("output_tokens"))


def reply_text(blocks: list[dict[str, Any]]) -> str:
    """The concatenated `text` of a reply's text blocks."""
    return "".join(b["text"] for b in blocks if b.get("type") == "text" and isinstance(b.get("text"), str))


class AnthropicStream:
    """Assembles a streamed messages turn, blocks kept verbatim (see module docstring).

    `finished` is set by `message_stop`; `complete` also by a `message_delta` carrying a
    `stop_reason`. A stream that ends with neither is truncated.
    """

    end_marker = "message_stop or a stop_reason"

    def __init__(self) -> None:
        self.finished = False
        self.complete = False
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
                msg = as_dict(data.get("message"))
                self._usage.update(msg.get("usage") or {})
            elif kind == "content_block_start":
                block = as_dict(data.get("content_block"))
                self._blocks[self._index(data)] = dict(block)
            elif kind == "content_block_delta":
                text = self._delta(self._index(data), data.get("delta"))
                if text:
                    deltas.append(text)
            elif kind == "message_delta":
                delta = as_dict(data.get("delta"))
                if delta.get("stop_reason") is not None:
                    self._stop_reason = delta["stop_reason"]
                    self.complete = True
                self._usage.update(data.get("usage") or {})
            elif kind == "message_stop":
                self.finished = self.complete = True
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
        content: list[dict[str, Any]] = []
        problems: dict[int, Optional[str]] = {}
        for index in sorted(self._blocks):
            block = self._blocks[index]
            if block.get("type") == "tool_use":
                raw = "".join(self._json.get(index, []))
                parsed, problem = read_arguments(raw if raw.strip() else block.get("input"))
                problems[len(content)] = problem
                block = {**block, "input": parsed}
            content.append(block)
        message = {"role": "assistant", "content": content}
        text = reply_text(content)
        calls = [ToolCall(str(b.get("id") or ""), str(b.get("name") or ""), b["input"], None, problems.get(i))
                 for i, b in enumerate(content) if b.get("type") == "tool_use"]
        if self._stop_reason != "tool_use":
            calls = []
        return Turn(text, calls, reply_usage(self._usage), message)
