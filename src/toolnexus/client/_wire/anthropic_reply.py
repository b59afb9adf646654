"""Reading Anthropic replies: usage, text and finish of a messages response, and the streamed-turn
accumulator.

Streaming keeps every content block verbatim (`thinking`, `redacted_thinking`, `server_tool_use`,
`web_search_tool_result`, unknown types): a block starts as its `content_block_start` payload and
each delta adds to it — `text_delta.text` → `text`, `thinking_delta.thinking` → `thinking`,
`signature_delta.signature` → `signature` (string fields of an unknown delta likewise),
`citations_delta.citation` appended to `citations`, and `input_json_delta.partial_json` collected
and parsed into `input` at the end, for any block that streams its input (`tool_use`,
`server_tool_use`, `mcp_tool_use`). So what is sent back is what a non-streamed reply would have
held. Usage is the final figure: `message_delta.usage` values replace the `message_start` ones,
never added twice. An `error` event (e.g. `overloaded_error` after the 200) raises `ProviderError`
naming its type and message.

Usage: `prompt_tokens` counts ALL input — `input_tokens` + `cache_read_input_tokens` +
`cache_creation_input_tokens` (Anthropic's `input_tokens` is only the uncached part) — with the
cache figures as `cached_tokens` / `cache_creation_tokens` details.

Finish: `end_turn` / `stop_sequence` → `stop` (`tool_calls` when the reply holds `tool_use`
blocks), `tool_use` → `tool_calls`, `max_tokens` / `model_context_window_exceeded` → `length`,
`refusal` → `refusal`, `pause_turn` → `pause`.

Not here: the request side and the dialect object (`anthropic.py`).
"""

from __future__ import annotations

from typing import Any, Optional

from ..._shapes import as_dict
from .._result import FINISH_LENGTH, FINISH_PAUSE, FINISH_REFUSAL, FINISH_STOP, FINISH_TOOL_CALLS
from .._sse import SseEvent, json_payloads
from .base import ToolCall, Turn, finish_of, provider_error, read_arguments, usage_of

WIRE = "anthropic"
FINISHES = {"end_turn": FINISH_STOP, "stop_sequence": FINISH_STOP, "tool_use": FINISH_TOOL_CALLS,
            "max_tokens": FINISH_LENGTH, "model_context_window_exceeded": FINISH_LENGTH,
            "refusal": FINISH_REFUSAL, "pause_turn": FINISH_PAUSE}


def _count(value: Any) -> int:
    return value if isinstance(value, int) and not isinstance(value, bool) and value > 0 else 0


def reply_usage(u: Any) -> dict[str, int]:
    """A reply's `usage` as the neutral usage dict (all input counted, see module docstring)."""
    u = u if isinstance(u, dict) else {}
    read, written = _count(u.get("cache_read_input_tokens")), _count(u.get("cache_creation_input_tokens"))
    uncached = u.get("input_tokens")
    prompt = (uncached if isinstance(uncached, int) and not isinstance(uncached, bool) else 0) + read + written
    return usage_of(prompt if uncached is not None or read or written else None, u.get("output_tokens"),
                    cached=read, cache_creation=written)


def reply_text(blocks: list[dict[str, Any]]) -> str:
    """The concatenated `text` of a reply's text blocks."""
    return "".join(b["text"] for b in blocks if b.get("type") == "text" and isinstance(b.get("text"), str))


def reply_finish(stop_reason: Any, has_calls: bool) -> str:
    """A `stop_reason` in the neutral vocabulary."""
    return finish_of(stop_reason, FINISHES, has_calls)


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
            if kind == "content_block_delta":
                text = self._delta(self._index(data), data.get("delta"))
                if text:
                    deltas.append(text)
            elif kind == "content_block_start":
                block = as_dict(data.get("content_block"))
                self._blocks[self._index(data)] = dict(block)
            elif kind == "message_start":
                msg = as_dict(data.get("message"))
                self._usage.update(msg.get("usage") or {})
            elif kind == "message_delta":
                delta = as_dict(data.get("delta"))
                if delta.get("stop_reason") is not None:
                    self._stop_reason = delta["stop_reason"]
                    self.complete = True
                self._usage.update(data.get("usage") or {})
            elif kind == "message_stop":
                self.finished = self.complete = True
            elif kind == "error":
                raise provider_error(WIRE, data, data.get("error"), in_stream=True)
        return deltas

    @staticmethod
    def _index(data: dict[str, Any]) -> int:
        index = data.get("index", 0)
        return index if isinstance(index, int) else 0

    def _delta(self, index: int, delta: Any) -> Optional[str]:
        if not isinstance(delta, dict):
            return None
        block = self._blocks.setdefault(index, {"type": "text", "text": ""})
        kind = delta.get("type")
        if kind == "text_delta":
            text = delta.get("text")
            if isinstance(text, str):
                block["text"] = (block.get("text") or "") + text
                return text
            return None
        if kind == "input_json_delta":
            self._json.setdefault(index, []).append(str(delta.get("partial_json") or ""))
            return None
        if kind == "citations_delta":
            citations = block.get("citations")
            block["citations"] = [*(citations if isinstance(citations, list) else []), delta.get("citation")]
            return None
        for key, value in delta.items():
            if key != "type" and isinstance(value, str):
                block[key] = (block.get(key) or "") + value
        return None

    def turn(self) -> Turn:
        content: list[dict[str, Any]] = []
        problems: dict[int, Optional[str]] = {}
        for index in sorted(self._blocks):
            block = self._blocks[index]
            is_call = block.get("type") == "tool_use"
            if is_call or index in self._json:
                raw = "".join(self._json.get(index, ()))
                parsed, problem = read_arguments(raw if raw.strip() else block.get("input"))
                if is_call:
                    problems[len(content)] = problem
                block = {**block, "input": parsed}
            content.append(block)
        message = {"role": "assistant", "content": content}
        text = reply_text(content)
        calls = [ToolCall(str(b.get("id") or ""), str(b.get("name") or ""), b["input"], None, problems.get(i))
                 for i, b in enumerate(content) if b.get("type") == "tool_use"]
        return Turn(text, calls, reply_usage(self._usage), message,
                    finish_reason=reply_finish(self._stop_reason, bool(calls)),
                    provider_finish_reason=self._stop_reason)
