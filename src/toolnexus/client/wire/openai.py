"""The OpenAI chat-completions wire: URL, headers, bodies, replies and streams as neutral turns.

Content parts (canonical form in `client/parts.py`) on this wire:
- user messages: `text` → `{"type":"text"}`, `image` → `{"type":"image_url","image_url":{"url"}}`
  (the part's `url`, else a `data:` URL), `audio` (wav/mp3 data only) → `input_audio`, `file` →
  `{"type":"file","file":{"filename","file_data": data URL}}`; anything else is unsupported.
- tool results: the `tool` message keeps only the text; the stored `parts`/`name` are stripped and
  the non-text parts move into ONE synthetic user message right after the run of tool messages,
  each tool's parts preceded by `Output of tool {name} ({tool_call_id}):`. That message is built
  per request and never stored.

Not here: retries, hooks, tool execution (loop), and translate's own URL rule (translate module).
"""

from __future__ import annotations

from typing import Any, Callable, Optional

from ..sse import SseEvent, json_payloads
from .base import DialectBase, ResultEntry, ToolCall, Turn, malformed, parse_arguments, usage_of, zero_usage

__all__ = ["OpenAIWire"]

WIRE = "openai"
_AUDIO_FORMATS = {"audio/wav": "wav", "audio/x-wav": "wav", "audio/mpeg": "mp3", "audio/mp3": "mp3"}


def _data_url(part: dict[str, Any]) -> str:
    return f"data:{part['mimeType']};base64,{part['data']}"


class OpenAIWire(DialectBase):
    """The `style="openai"` dialect."""

    name = WIRE
    halt_emits_placeholder_result = False

    # -- request side ---------------------------------------------------------------------------

    def url(self, base_url: str) -> str:
        return base_url.rstrip("/") + "/chat/completions"

    def headers(self, api_key: str, extra: dict[str, str]) -> dict[str, str]:
        return {"Authorization": f"Bearer {api_key}", "Content-Type": "application/json", **extra}

    def start_transcript(self, history: list[dict], system: str, prompt: Any) -> list[dict]:
        messages = list(history)
        if not messages and system:
            messages.append({"role": "system", "content": system})
        messages.append({"role": "user", "content": prompt})
        return messages

    def declare_tools(self, toolkit: Any) -> list[dict]:
        return toolkit.to_openai() if toolkit is not None else []

    def build_body(self, model: str, messages: list[dict], tools: list[dict], system: str, stream: bool) -> dict:
        body: dict[str, Any] = {"model": model, "messages": self.wire_messages(messages)}
        if stream:
            body["stream"] = True
            body["stream_options"] = {"include_usage": True}
        if tools:
            body["tools"] = tools
            body["tool_choice"] = "auto"
        return body

    def map_media(self, part: dict[str, Any]) -> Optional[dict[str, Any]]:
        kind, data = part["type"], part.get("data")
        if kind == "image":
            return {"type": "image_url", "image_url": {"url": part.get("url") or _data_url(part)}}
        if kind == "audio" and data and part["mimeType"] in _AUDIO_FORMATS:
            return {"type": "input_audio", "input_audio": {"data": data, "format": _AUDIO_FORMATS[part["mimeType"]]}}
        if kind == "file" and data:
            return {"type": "file", "file": {"filename": part.get("name") or "file", "file_data": _data_url(part)}}
        return None

    def wire_messages(self, messages: list[dict]) -> list[dict]:
        """The canonical transcript as sent: parts mapped, synthetic tool-output message inserted."""
        out: list[dict] = []
        synthetic: list[dict] = []
        for m in messages:
            role = m.get("role") if isinstance(m, dict) else None
            if synthetic and role != "tool":
                out.append({"role": "user", "content": synthetic})
                synthetic = []
            if role == "tool" and ("parts" in m or "name" in m):
                parts = m.get("parts") or []
                media = [self.map_part(p, user=False) for p in parts if isinstance(p, dict) and p.get("type") != "text"]
                if media:
                    synthetic.append({"type": "text", "text": f"Output of tool {m.get('name')} ({m.get('tool_call_id')}):"})
                    synthetic.extend(media)
                m = {k: v for k, v in m.items() if k not in ("parts", "name")}
            elif role == "user" and isinstance(m.get("content"), list):
                m = {**m, "content": [self.map_part(p, user=True) for p in m["content"]]}
            out.append(m)
        if synthetic:
            out.append({"role": "user", "content": synthetic})
        return out

    def result_messages(self, entries: list[ResultEntry]) -> list[dict]:
        out = []
        for e in entries:
            msg: dict[str, Any] = {"role": "tool", "tool_call_id": e.call.id, "content": e.output}
            if e.parts:
                msg["name"] = e.call.name
                msg["parts"] = e.parts
            out.append(msg)
        return out

    # -- reply side -----------------------------------------------------------------------------

    def parse_response(self, data: Any) -> Turn:
        if not isinstance(data, dict):
            raise malformed(WIRE, "expected a JSON object", data)
        choices = data.get("choices")
        if not isinstance(choices, list) or not choices or not isinstance(choices[0], dict):
            raise malformed(WIRE, "missing `choices[0]`", data)
        message = choices[0].get("message")
        if not isinstance(message, dict):
            raise malformed(WIRE, "`choices[0].message` is not an object", choices[0])
        content = message.get("content")
        text = content if isinstance(content, str) else ""
        calls = self.assistant_calls(message, strict=True)
        u = data.get("usage") if isinstance(data.get("usage"), dict) else {}
        usage = usage_of(u.get("prompt_tokens"), u.get("completion_tokens"), u.get("total_tokens"))
        return Turn(text, calls, usage, message, raw=data)

    def assistant_calls(self, message: Any, strict: bool = False) -> list[ToolCall]:
        """The tool calls of an assistant message (malformed entries raise when `strict`)."""
        raw = message.get("tool_calls") if isinstance(message, dict) else None
        if not raw:
            return []
        if not isinstance(raw, list):
            if strict:
                raise malformed(WIRE, "`message.tool_calls` is not a list", message)
            return []
        calls = []
        for i, tc in enumerate(raw):
            fn = tc.get("function") if isinstance(tc, dict) else None
            if not isinstance(fn, dict) or not isinstance(fn.get("name"), str):
                if strict:
                    raise malformed(WIRE, f"`message.tool_calls[{i}].function.name` is missing", tc)
                continue
            arguments = fn.get("arguments")
            calls.append(ToolCall(str(tc.get("id") or ""), fn["name"], parse_arguments(arguments),
                                  arguments if isinstance(arguments, str) else None))
        return calls

    def new_stream(self) -> "OpenAIStream":
        return OpenAIStream()

    def exhausted_text(self, messages: list[dict], run_start: int) -> str:
        for m in reversed(messages[run_start:]):
            if isinstance(m, dict) and m.get("role") == "assistant" and isinstance(m.get("content"), str):
                return m["content"]
        return ""

    def balance(self, messages: list[dict], text_for: Callable[[ToolCall], str]) -> list[dict]:
        i, calls = self.trailing_calls(messages)
        if not calls:
            return messages
        j = i + 1
        answered = set()
        while j < len(messages) and isinstance(messages[j], dict) and messages[j].get("role") == "tool":
            answered.add(messages[j].get("tool_call_id"))
            j += 1
        missing = [c for c in calls if c.id not in answered]
        if not missing:
            return messages
        fill = self.result_messages([ResultEntry(c, text_for(c), True) for c in missing])
        return messages[:j] + fill + messages[j:]


class OpenAIStream:
    """Assembles a streamed chat-completions turn (tool-call deltas merged by `index`)."""

    def __init__(self) -> None:
        self.finished = False
        self._text: list[str] = []
        self._calls: dict[int, dict[str, str]] = {}
        self._usage = zero_usage()

    def feed(self, event: SseEvent) -> list[str]:
        deltas: list[str] = []
        for chunk in json_payloads(event):
            if chunk == "[DONE]":
                self.finished = True
                break
            if not isinstance(chunk, dict):
                continue
            u = chunk.get("usage")
            if isinstance(u, dict):
                add = usage_of(u.get("prompt_tokens"), u.get("completion_tokens"), u.get("total_tokens"))
                for k in self._usage:
                    self._usage[k] += add[k]
            choices = chunk.get("choices")
            if not isinstance(choices, list) or not choices or not isinstance(choices[0], dict):
                continue
            delta = choices[0].get("delta")
            if not isinstance(delta, dict):
                continue
            if isinstance(delta.get("content"), str) and delta["content"]:
                self._text.append(delta["content"])
                deltas.append(delta["content"])
            for tc in delta.get("tool_calls") or []:
                if isinstance(tc, dict):
                    self._merge_call(tc)
        return deltas

    def _merge_call(self, tc: dict) -> None:
        index = tc.get("index", 0)
        slot = self._calls.setdefault(index if isinstance(index, int) else 0, {"id": "", "name": "", "arguments": ""})
        if tc.get("id"):
            slot["id"] = str(tc["id"])
        fn = tc.get("function") if isinstance(tc.get("function"), dict) else {}
        if isinstance(fn.get("name"), str):
            slot["name"] += fn["name"]
        if isinstance(fn.get("arguments"), str):
            slot["arguments"] += fn["arguments"]

    def turn(self) -> Turn:
        text = "".join(self._text)
        slots = [self._calls[i] for i in sorted(self._calls)]
        if slots:
            message: dict[str, Any] = {
                "role": "assistant",
                "content": text or None,
                "tool_calls": [
                    {"id": s["id"], "type": "function", "function": {"name": s["name"], "arguments": s["arguments"]}}
                    for s in slots
                ],
            }
        else:
            message = {"role": "assistant", "content": text}
        calls = [ToolCall(s["id"], s["name"], parse_arguments(s["arguments"]), s["arguments"]) for s in slots]
        return Turn(text, calls, dict(self._usage), message)

