"""Reading OpenAI Responses API replies: a response object, or its stream of semantic events, as a `Turn`.

A reply is a list of output items, kept verbatim as the assistant turn's `content` (reasoning
items with their `encrypted_content`, messages, `function_call`s, hosted-tool calls such as
`web_search_call`, unknown types): what goes back on the next request is what the provider sent.
The turn's `response_id` (the response's `id`) rides on the assistant message for
`previous_response_id` chaining; it never goes on the wire as an item field.

- text: the `output_text` parts of the message items, joined; a `refusal` part is a refusal and its
  text is the turn's text.
- calls: the `function_call` items (`call_id`, `name`, `arguments` as a JSON string).
- finish: `completed` → `stop` / `tool_calls` (`refusal` with a refusal part); `incomplete` →
  `length` for `max_output_tokens`, `content_filter` for `content_filter`; the provider's own value
  is the incomplete reason, else the status. A `failed` response raises `ProviderError` with its
  `error.code` and message.
- usage: `input_tokens` (cached input included, as OpenAI counts it), `output_tokens`,
  `total_tokens`; `input_tokens_details.cached_tokens` and `output_tokens_details.reasoning_tokens`
  as details.

Streaming: `response.output_text.delta` and `response.refusal.delta` are the text deltas; the
final response (`response.completed` / `response.incomplete`) is read as a whole reply, its output
items being authoritative. A server whose final event carries no output gets the items as they
were assembled from `response.output_item.added` / `.done`, content-part and argument deltas.
`error` and `response.failed` raise `ProviderError`. A stream that ends before a final event is
truncated.

Not here: the request side and the dialect object (`responses.py`).
"""

from __future__ import annotations

from typing import Any, Optional

from ..._shapes import as_dict
from .._result import FINISH_CONTENT_FILTER, FINISH_LENGTH, FINISH_REFUSAL, FINISH_STOP, FINISH_TOOL_CALLS
from .._sse import SseEvent, json_payloads
from .base import ToolCall, Turn, malformed, provider_error, read_arguments, usage_of

WIRE = "responses"
_INCOMPLETE = {"max_output_tokens": FINISH_LENGTH, "content_filter": FINISH_CONTENT_FILTER}
_FINAL_EVENTS = ("response.completed", "response.incomplete")


def response_usage(u: Any) -> dict[str, int]:
    """A response's `usage` as the neutral usage dict."""
    if not isinstance(u, dict):
        return usage_of(None, None)
    inp, out = as_dict(u.get("input_tokens_details")), as_dict(u.get("output_tokens_details"))
    return usage_of(u.get("input_tokens"), u.get("output_tokens"), u.get("total_tokens"),
                    cached=inp.get("cached_tokens"), reasoning=out.get("reasoning_tokens"))


def response_calls(items: Any) -> list[ToolCall]:
    """The `function_call` items of an output list as calls (`id` is the item's `call_id`)."""
    calls = []
    for item in items if isinstance(items, list) else []:
        if isinstance(item, dict) and item.get("type") == "function_call" and isinstance(item.get("name"), str):
            arguments = item.get("arguments")
            args, problem = read_arguments(arguments)
            calls.append(ToolCall(str(item.get("call_id") or item.get("id") or ""), item["name"], args,
                                  arguments if isinstance(arguments, str) else None, problem))
    return calls


def _texts(items: list[Any]) -> tuple[str, str]:
    """`(output text, refusal text)` of the message items."""
    text: list[str] = []
    refusal: list[str] = []
    for item in items:
        if not isinstance(item, dict) or item.get("type", "message") != "message":
            continue
        for part in item.get("content") or ():
            if not isinstance(part, dict):
                continue
            if part.get("type") == "output_text" and isinstance(part.get("text"), str):
                text.append(part["text"])
            elif part.get("type") == "refusal" and isinstance(part.get("refusal"), str):
                refusal.append(part["refusal"])
    return "".join(text), "".join(refusal)


def failed_error(data: dict[str, Any], *, in_stream: bool) -> Any:
    """The `ProviderError` of a failed response (its `error` object), or None if it did not fail."""
    if data.get("status") != "failed" and not isinstance(data.get("error"), dict):
        return None
    error = data.get("error") if isinstance(data.get("error"), dict) else {"code": "server_error",
                                                                          "message": "the response failed"}
    return provider_error(WIRE, data, error, in_stream=in_stream)


def read_response(data: Any, items: Optional[list[Any]] = None) -> Turn:
    """A response object as a `Turn`; `items` (a stream's assembled output) stands in for a missing `output`."""
    if not isinstance(data, dict):
        raise malformed(WIRE, "expected a JSON object", data)
    output = data.get("output")
    if not isinstance(output, list) or (not output and items):
        if items is None:
            raise malformed(WIRE, "missing `output` list", data)
        output = items
    content = [dict(item) for item in output if isinstance(item, dict)]
    text, refusal = _texts(content)
    calls = response_calls(content)
    status = data.get("status")
    reason = as_dict(data.get("incomplete_details")).get("reason")
    native: Optional[str]
    if status == "incomplete":
        finish = _INCOMPLETE.get(reason, FINISH_LENGTH) if isinstance(reason, str) else FINISH_LENGTH
        native = reason if isinstance(reason, str) else "incomplete"
    else:
        finish = FINISH_TOOL_CALLS if calls else (FINISH_REFUSAL if refusal and not text else FINISH_STOP)
        native = status if isinstance(status, str) else None
    message: dict[str, Any] = {"role": "assistant", "content": content}
    if isinstance(data.get("id"), str):
        message["response_id"] = data["id"]
    return Turn(text or refusal, calls, response_usage(data.get("usage")), message, raw=data, finish_reason=finish,
                provider_finish_reason=native)


class ResponsesStream:
    """Assembles a streamed Responses turn (see module docstring).

    `finished` and `complete` are set by `response.completed` / `response.incomplete`.
    """

    end_marker = "response.completed, response.incomplete or response.failed"

    def __init__(self) -> None:
        self.finished = False
        self.complete = False
        self._final: Optional[dict[str, Any]] = None
        self._items: dict[int, dict[str, Any]] = {}

    def feed(self, event: SseEvent) -> list[str]:
        deltas: list[str] = []
        for data in json_payloads(event):
            if not isinstance(data, dict):
                continue
            kind = data.get("type") or event.event
            if kind == "response.output_text.delta" or kind == "response.refusal.delta":
                delta = data.get("delta")
                if isinstance(delta, str) and delta:
                    self._part_text(data, "output_text" if kind == "response.output_text.delta" else "refusal", delta)
                    deltas.append(delta)
            elif kind == "response.function_call_arguments.delta":
                item = self._items.get(self._index(data))
                if item is not None and isinstance(data.get("delta"), str):
                    item["arguments"] = str(item.get("arguments") or "") + data["delta"]
            elif kind in ("response.output_item.added", "response.output_item.done"):
                item = data.get("item")
                if isinstance(item, dict):
                    self._items[self._index(data)] = dict(item)
            elif kind == "response.content_part.added":
                item = self._items.get(self._index(data))
                part = data.get("part")
                if item is not None and isinstance(part, dict):
                    self._content(item).append(dict(part))
            elif kind in _FINAL_EVENTS:
                response = data.get("response")
                self._final = response if isinstance(response, dict) else {}
                self.finished = self.complete = True
            elif kind == "response.failed":
                response = as_dict(data.get("response"))
                raise failed_error(response, in_stream=True) or provider_error(WIRE, data, {}, in_stream=True)
            elif kind == "error":
                raise provider_error(WIRE, data, data, in_stream=True)
        return deltas

    @staticmethod
    def _index(data: dict[str, Any]) -> int:
        index = data.get("output_index", 0)
        return index if isinstance(index, int) else 0

    @staticmethod
    def _content(item: dict[str, Any]) -> list[Any]:
        content = item.get("content")
        if not isinstance(content, list):
            content = item["content"] = []
        return content

    def _part_text(self, data: dict[str, Any], kind: str, delta: str) -> None:
        item = self._items.setdefault(self._index(data), {"type": "message", "role": "assistant", "content": []})
        content = self._content(item)
        at = data.get("content_index")
        at = at if isinstance(at, int) and 0 <= at < 1024 else max(len(content) - 1, 0)
        while len(content) <= at:
            content.append({"type": kind, kind if kind == "refusal" else "text": ""})
        part = content[at] if isinstance(content[at], dict) else {}
        key = "refusal" if kind == "refusal" else "text"
        content[at] = {**part, key: str(part.get(key) or "") + delta}

    def turn(self) -> Turn:
        items = [self._items[i] for i in sorted(self._items)]
        return read_response(self._final or {}, items)
