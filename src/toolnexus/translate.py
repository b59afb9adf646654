"""Single-turn translation (client.md §14): OpenAI-shaped request in, ONE provider call, OpenAI-shaped result out.

`Client.translate(...)` delegates to `translate_with_client` here. The caller owns the conversation
and runs tools itself; this module only converts shapes, makes the call through the client's
private seam (key, deadline, body shaping, retries, hooks, the `llm` metric) and reads the answer
back. It deliberately has no loop, executes no tool, touches no conversation store and never adds
the toolkit's skills text (a `toolkit` only contributes its tool declarations).

The two dialects differ only in data, kept in one small table (`_DIALECTS`) of per-style
functions: URL, headers, request preparation, body, response reading and the finish-reason rule.

Choices where the spec is silent (a careful caller's expectations):
- Content parts: besides the canonical part dicts (`{"type": "image"|"audio"|"file", "mimeType",
  "data"|"url", "name"?}`) the OpenAI-native parts a caller actually sends are understood too:
  `image_url` (data: URL or http URL), `input_audio` and `file` (`file_data` data: URL). They are
  mapped by the run loop's own Anthropic part mapping (images ⇒ `image`, PDF/plain text ⇒
  `document`); anything Anthropic cannot carry (audio, other file types, a `file_id` reference,
  an oversize part) degrades to a text placeholder naming type and mime type, warned once (a pure
  converter has no run to fail, and a silent drop would lose data). A dict part of an unknown type
  passes through verbatim (it may already be an Anthropic block). The client's
  `on_unsupported_part`/`max_part_bytes` policy governs the run loop only.
- A `tool_result` whose text is empty but which carries media gets no empty text block
  (Anthropic rejects empty text blocks).
- Hoisted `system`/`developer` messages do not split a run of consecutive tool results: they
  leave the transcript, so the results still form the single user turn Anthropic requires.
- `before_llm` sees (and may replace) the wire-shaped messages and tools of the request, i.e.
  Anthropic-shaped ones for the anthropic style, exactly as in the run loop.
- openai: a `content` that is a parts list is flattened with `content_text`; `finish_reason` is
  the provider's own string when there are no tool calls (§15). anthropic: `stop_reason` is
  mapped onto the OpenAI vocabulary with `finish_reason_for`.
- A 2xx response that is not a JSON object raises `ProviderResponseError` naming what arrived.
- The `llm` metric carries `attempts` (from the client's send) and, when the caller's messages
  hold media parts, `parts` (`{type, mimeType, bytes}`), like the run loop's.
"""

from __future__ import annotations

import json
import re
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Optional

from .client.parts import MEDIA_TYPES, PartPolicy, media_parts_summary, placeholder_text
from .client.wire.anthropic import ANTHROPIC_VERSION, MAX_TOKENS, AnthropicWire
from .client.wire.base import malformed, parse_arguments, usage_of, zero_usage

if TYPE_CHECKING:  # pragma: no cover - import for annotations only
    import asyncio

    from .client import Client

__all__ = [
    "TranslatedToolCall",
    "TranslateResult",
    "finish_reason_for",
    "content_text",
    "args_object",
    "args_string",
    "tool_calls_of",
    "has_system_message",
    "part_to_anthropic",
    "anthropic_blocks",
    "openai_messages_to_anthropic",
    "openai_tools_to_anthropic",
    "openai_tool_choice_to_anthropic",
    "translate_with_client",
]


@dataclass
class TranslatedToolCall:
    """One tool call the model asked for; `arguments` is the JSON string the caller echoes back."""

    id: str
    name: str
    arguments: str


@dataclass
class TranslateResult:
    """The OpenAI-shaped outcome of one translated call; `raw` keeps the decoded provider response."""

    text: str = ""
    tool_calls: list[TranslatedToolCall] = field(default_factory=list)
    finish_reason: str = "stop"
    usage: dict[str, int] = field(default_factory=zero_usage)
    model: str = ""
    raw: Optional[dict[str, Any]] = None

    def tool_calls_json(self) -> list[dict[str, Any]]:
        """The calls as an OpenAI `tool_calls` array, ready to put on an assistant message."""
        return [
            {"id": c.id, "type": "function", "function": {"name": c.name, "arguments": c.arguments}}
            for c in self.tool_calls
        ]


# --------------------------------------------------------------------------- pure helpers


def finish_reason_for(has_calls: bool, stop: Optional[str] = None) -> str:
    """A provider stop reason in OpenAI's vocabulary; any tool call wins."""
    if has_calls:
        return "tool_calls"
    if stop in ("max_tokens", "length"):
        return "length"
    if stop in ("refusal", "content_filter"):
        return "content_filter"
    return "stop"


def content_text(c: Any) -> str:
    """The text of an OpenAI `content`: a string as-is, or the `text` of a parts list joined."""
    if isinstance(c, str):
        return c
    if isinstance(c, list):
        return "".join(p["text"] for p in c if isinstance(p, dict) and isinstance(p.get("text"), str))
    return ""


def args_object(a: Any) -> dict[str, Any]:
    """Tool-call arguments as an object: a dict, or a non-blank JSON string holding one, else `{}`."""
    return parse_arguments(a)


def args_string(a: Any) -> str:
    """Tool-call arguments as OpenAI's JSON string: a string as-is, a dict compact, else `"{}"`."""
    if isinstance(a, str):
        return a
    if isinstance(a, dict):
        return json.dumps(a, separators=(",", ":"))
    return "{}"


def tool_calls_of(message: Any) -> list[TranslatedToolCall]:
    """The calls of an OpenAI assistant message; entries without a `function` object are skipped."""
    raw = message.get("tool_calls") if isinstance(message, dict) else None
    if not isinstance(raw, list):
        return []
    calls = []
    for entry in raw:
        fn = entry.get("function") if isinstance(entry, dict) else None
        if not isinstance(fn, dict):
            continue
        calls.append(
            TranslatedToolCall(
                id=str(entry.get("id") or ""),
                name=str(fn.get("name") or ""),
                arguments=args_string(fn.get("arguments")),
            )
        )
    return calls


def has_system_message(messages: Any) -> bool:
    """True when an OpenAI message list already holds a `system` or `developer` message."""
    if not isinstance(messages, list):
        return False
    return any(isinstance(m, dict) and m.get("role") in ("system", "developer") for m in messages)


# --------------------------------------------------------------------------- content parts

_DATA_URL = re.compile(r"^data:([^;,]*)(?:;[^,]*)?;base64,(.*)$", re.DOTALL)
_AUDIO_FORMATS = {"mp3": "audio/mpeg", "wav": "audio/wav"}
# Pure conversion has no run to fail: a part Anthropic cannot carry degrades to a placeholder
# (warned once), through the very mapping the run loop uses.
_ANTHROPIC_PARTS = AnthropicWire(PartPolicy(on_unsupported="text"))


def _from_data_url(url: str) -> Optional[tuple[str, str]]:
    m = _DATA_URL.match(url)
    return (m.group(1), m.group(2)) if m else None


def _canonical_part(part: dict[str, Any]) -> Optional[dict[str, Any]]:
    """A media part in canonical form (`type`, `mimeType`, `data` | `url`, `name`), or None if unknown."""
    kind = part.get("type")
    if kind == "image_url":
        ref = part.get("image_url")
        url = ref.get("url") if isinstance(ref, dict) else ref
        decoded = _from_data_url(url) if isinstance(url, str) else None
        if decoded:
            return {"type": "image", "mimeType": decoded[0], "data": decoded[1]}
        return {"type": "image", "mimeType": "", "url": url}
    if kind == "input_audio":
        ref = part.get("input_audio") if isinstance(part.get("input_audio"), dict) else {}
        fmt = str(ref.get("format") or "")
        mime = _AUDIO_FORMATS.get(fmt, f"audio/{fmt}" if fmt else "")
        return {"type": "audio", "mimeType": mime, "data": ref.get("data")}
    if kind == "file" and isinstance(part.get("file"), dict):
        ref = part["file"]
        decoded = _from_data_url(ref["file_data"]) if isinstance(ref.get("file_data"), str) else None
        mime, data = decoded if decoded else ("", None)
        out: dict[str, Any] = {"type": "file", "mimeType": mime, "data": data}
        if ref.get("filename"):
            out["name"] = ref["filename"]
        return out
    if kind in MEDIA_TYPES and "source" not in part:
        return {"mimeType": "", **part}
    return None


def _has_payload(part: dict[str, Any]) -> bool:
    data, url = part.get("data"), part.get("url")
    return (isinstance(data, str) and bool(data)) or (isinstance(url, str) and bool(url))


def part_to_anthropic(part: dict[str, Any]) -> dict[str, Any]:
    """One content part as an Anthropic block; parts Anthropic cannot carry become a text placeholder."""
    if part.get("type") == "text":
        return {"type": "text", "text": content_text([part])}
    canonical = _canonical_part(part)
    if canonical is None:
        return part
    if not _has_payload(canonical):
        return {"type": "text", "text": placeholder_text(canonical, "it has no data or url")}
    return _ANTHROPIC_PARTS.map_part(canonical, user=False)


def anthropic_blocks(content: Any) -> list[dict[str, Any]]:
    """The Anthropic blocks for the non-text parts of an OpenAI `content`, in order (`[]` if none)."""
    if not isinstance(content, list):
        return []
    return [part_to_anthropic(p) for p in content if isinstance(p, dict) and p.get("type") != "text"]


# --------------------------------------------------------------------------- OpenAI -> Anthropic


def _tool_result_block(message: dict[str, Any]) -> dict[str, Any]:
    content = message.get("content")
    text = content_text(content)
    media = anthropic_blocks(content)
    block: dict[str, Any] = {"type": "tool_result", "content": text}
    if media:
        block["content"] = ([{"type": "text", "text": text}] if text else []) + media
    if message.get("tool_call_id"):
        block["tool_use_id"] = str(message["tool_call_id"])
    return block


def _assistant_blocks(message: dict[str, Any]) -> list[dict[str, Any]]:
    text = content_text(message.get("content"))
    blocks: list[dict[str, Any]] = [{"type": "text", "text": text}] if text else []
    for call in tool_calls_of(message):
        blocks.append({"type": "tool_use", "id": call.id, "name": call.name, "input": args_object(call.arguments)})
    return blocks


def _user_content(content: Any) -> Any:
    """Anthropic user content for an OpenAI content value, or None when there is nothing to send."""
    text = content_text(content)
    media = anthropic_blocks(content)
    if media:
        return ([{"type": "text", "text": text}] if text else []) + media
    if text:
        return text
    if isinstance(content, list) and content:
        return content
    return None


def openai_messages_to_anthropic(msgs: Any) -> tuple[list[dict[str, Any]], str]:
    """OpenAI messages as `(anthropic_messages, system_text)`, keeping the tool-call structure."""
    out: list[dict[str, Any]] = []
    system: list[str] = []
    results: list[dict[str, Any]] = []

    def append(message: dict[str, Any]) -> None:
        if results:
            out.append({"role": "user", "content": list(results)})
            results.clear()
        out.append(message)

    for m in msgs if isinstance(msgs, list) else []:
        if not isinstance(m, dict):
            continue
        role = m.get("role")
        if role in ("system", "developer"):
            text = content_text(m.get("content"))
            if text:
                system.append(text)
        elif role in ("tool", "function"):
            results.append(_tool_result_block(m))
        elif role == "assistant":
            blocks = _assistant_blocks(m)
            if blocks:
                append({"role": "assistant", "content": blocks})
        else:
            content = _user_content(m.get("content"))
            if content is not None:
                append({"role": "user", "content": content})
    if results:
        out.append({"role": "user", "content": list(results)})
    return out, "\n\n".join(system)


def openai_tools_to_anthropic(tools: Any) -> list[dict[str, Any]]:
    """OpenAI tool declarations as Anthropic ones; native entries (with `name`) pass, the rest are skipped."""
    out: list[dict[str, Any]] = []
    for t in tools if isinstance(tools, list) else []:
        if not isinstance(t, dict):
            continue
        fn = t.get("function")
        if isinstance(fn, dict):
            if not fn.get("name"):
                continue
            decl: dict[str, Any] = {"name": fn["name"]}
            if fn.get("description"):
                decl["description"] = fn["description"]
            params = fn.get("parameters")
            decl["input_schema"] = params if isinstance(params, dict) else {"type": "object", "properties": {}}
            out.append(decl)
        elif t.get("name"):
            out.append(t)
    return out


def openai_tool_choice_to_anthropic(choice: Any) -> Optional[dict[str, Any]]:
    """OpenAI `tool_choice` in Anthropic's shape, or None (omit the key) for auto/unknown values."""
    if choice in ("required", "any"):
        return {"type": "any"}
    if choice == "none":
        return {"type": "none"}
    fn = choice.get("function") if isinstance(choice, dict) else None
    if isinstance(fn, dict) and fn.get("name"):
        return {"type": "tool", "name": fn["name"]}
    return None


# --------------------------------------------------------------------------- the two dialects


@dataclass(frozen=True)
class _Prepared:
    """The wire-shaped pieces of a request, before `before_llm` may replace them."""

    messages: list[Any]
    tools: list[Any]
    system: str  # anthropic only (openai puts it into `messages`)


@dataclass(frozen=True)
class _Reply:
    text: str
    calls: list[TranslatedToolCall]
    stop: Any
    usage: dict[str, int]


def _tools_of(toolkit: Any, method: str) -> list[Any]:
    return list(getattr(toolkit, method)()) if toolkit is not None else []


def _openai_url(base_url: str) -> str:
    b = base_url.rstrip("/")
    return b + "/chat/completions" if b.endswith("/v1") or "/chat/" in b else b + "/v1/chat/completions"


def _openai_headers(key: str, extra: Mapping[str, str]) -> dict[str, str]:
    return {"content-type": "application/json", "authorization": f"Bearer {key}", **extra}


def _openai_prepare(
    client: Any, messages: list[Any], tools: list[Any], toolkit: Any, system: Optional[str]
) -> _Prepared:
    wire = list(messages)
    text = system if system is not None else client.system_prompt
    if text and not has_system_message(wire):
        wire.insert(0, {"role": "system", "content": text})
    return _Prepared(wire, _tools_of(toolkit, "to_openai") + tools, "")


def _openai_body(model: str, p: _Prepared, tool_choice: Any, max_tokens: int) -> dict[str, Any]:
    body: dict[str, Any] = {"model": model, "messages": p.messages}
    if p.tools:
        body["tools"] = p.tools
    if tool_choice is not None:
        body["tool_choice"] = tool_choice
    if max_tokens > 0:
        body["max_tokens"] = max_tokens
    return body


def _openai_read(data: dict[str, Any]) -> _Reply:
    u = data.get("usage") if isinstance(data.get("usage"), dict) else {}
    usage = usage_of(u.get("prompt_tokens"), u.get("completion_tokens"), u.get("total_tokens"))
    choices = data.get("choices")
    first = choices[0] if isinstance(choices, list) and choices and isinstance(choices[0], dict) else None
    if first is None:
        return _Reply("", [], None, usage)
    message = first.get("message") if isinstance(first.get("message"), dict) else {}
    return _Reply(content_text(message.get("content")), tool_calls_of(message), first.get("finish_reason"), usage)


def _openai_finish(has_calls: bool, stop: Any) -> str:
    if has_calls:
        return "tool_calls"
    return stop if isinstance(stop, str) and stop else "stop"


def _anthropic_headers(key: str, extra: Mapping[str, str]) -> dict[str, str]:
    return {"content-type": "application/json", "x-api-key": key, "anthropic-version": ANTHROPIC_VERSION, **extra}


def _anthropic_prepare(
    client: Any, messages: list[Any], tools: list[Any], toolkit: Any, system: Optional[str]
) -> _Prepared:
    wire, hoisted = openai_messages_to_anthropic(messages)
    text = system if system is not None else (client.system_prompt or hoisted)
    return _Prepared(wire, _tools_of(toolkit, "to_anthropic") + openai_tools_to_anthropic(tools), text or "")


def _anthropic_body(model: str, p: _Prepared, tool_choice: Any, max_tokens: int) -> dict[str, Any]:
    body: dict[str, Any] = {"model": model, "max_tokens": max_tokens if max_tokens > 0 else MAX_TOKENS}
    if p.system:
        body["system"] = p.system
    body["messages"] = p.messages
    if p.tools:
        body["tools"] = p.tools
    choice = openai_tool_choice_to_anthropic(tool_choice)
    if choice is not None:
        body["tool_choice"] = choice
    return body


def _anthropic_read(data: dict[str, Any]) -> _Reply:
    u = data.get("usage") if isinstance(data.get("usage"), dict) else {}
    usage = usage_of(u.get("input_tokens"), u.get("output_tokens"))
    content = data.get("content")
    blocks = [b for b in content if isinstance(b, dict)] if isinstance(content, list) else []
    text = "".join(b["text"] for b in blocks if b.get("type") == "text" and isinstance(b.get("text"), str))
    calls = [
        TranslatedToolCall(
            id=str(b.get("id") or ""),
            name=str(b.get("name") or ""),
            arguments=json.dumps(b.get("input") or {}, separators=(",", ":")),
        )
        for b in blocks
        if b.get("type") == "tool_use"
    ]
    return _Reply(text, calls, data.get("stop_reason"), usage)


@dataclass(frozen=True)
class _Dialect:
    url: Callable[[str], str]
    headers: Callable[[str, Mapping[str, str]], dict[str, str]]
    prepare: Callable[[Any, list[Any], list[Any], Any, Optional[str]], _Prepared]
    body: Callable[[str, _Prepared, Any, int], dict[str, Any]]
    read: Callable[[dict[str, Any]], _Reply]
    finish: Callable[[bool, Any], str]


_DIALECTS: dict[str, _Dialect] = {
    "openai": _Dialect(_openai_url, _openai_headers, _openai_prepare, _openai_body, _openai_read, _openai_finish),
    "anthropic": _Dialect(
        _ANTHROPIC_PARTS.url,
        _anthropic_headers,
        _anthropic_prepare,
        _anthropic_body,
        _anthropic_read,
        finish_reason_for,
    ),
}


# --------------------------------------------------------------------------- the call


def _dialect_for(style: Any) -> _Dialect:
    dialect = _DIALECTS.get(style) if isinstance(style, str) else None
    if dialect is None:
        raise ValueError(f'toolnexus: translate does not support style {style!r} (expected "openai" or "anthropic")')
    return dialect


def _check_inputs(messages: Any, tools: Any, max_tokens: Any) -> None:
    if not isinstance(messages, list):
        raise TypeError(
            "toolnexus: translate messages must be a list of OpenAI-shaped message dicts, "
            f"got {type(messages).__name__}"
        )
    if tools is not None and not isinstance(tools, list):
        raise TypeError(
            f"toolnexus: translate tools must be a list of tool declarations or None, got {type(tools).__name__}"
        )
    if max_tokens is not None and (isinstance(max_tokens, bool) or not isinstance(max_tokens, int)):
        raise TypeError(f"toolnexus: translate max_tokens must be an int, got {type(max_tokens).__name__}")


def _apply_before_llm(override: Any, prepared: _Prepared, model: str) -> tuple[_Prepared, str]:
    """Honour a `before_llm` return: non-None messages/tools replace, a truthy model wins."""
    get = getattr(override, "get", None) if override else None
    if not callable(get):
        return prepared, model
    messages, tools = get("messages"), get("tools")
    prepared = _Prepared(
        list(messages) if messages is not None else prepared.messages,
        list(tools) if tools is not None else prepared.tools,
        prepared.system,
    )
    return prepared, get("model") or model


async def translate_with_client(
    client: "Client",
    messages: list[Any],
    *,
    tools: Optional[list[Any]] = None,
    toolkit: Any = None,
    tool_choice: Any = None,
    system: Optional[str] = None,
    max_tokens: int = 0,
    cancel: "Optional[asyncio.Event]" = None,
) -> TranslateResult:
    """Make the one provider call of `client.translate(...)` and read the answer back (client.md §14).

    Bad arguments raise `TypeError`/`ValueError` before anything else. Otherwise raises what the
    client's call raises (`RuntimeError` without a key, `ProviderError`, `RunTimeout`,
    `RunCancelled`) or `ProviderResponseError` for a non-object reply; a failed call first emits
    its `llm` error metric (tokens 0).
    """
    dialect = _dialect_for(client.style)
    _check_inputs(messages, tools, max_tokens)
    key = client._resolve_api_key()
    deadline = client._new_deadline()
    prepared = dialect.prepare(client, messages, list(tools or []), toolkit, system)
    model = client.model
    override = await client._call_hook(
        "before_llm", {"messages": prepared.messages, "tools": prepared.tools, "model": model, "turn": 0}
    )
    prepared, model = _apply_before_llm(override, prepared, model)
    body = client._shape_body(dialect.body(model, prepared, tool_choice, max_tokens or 0))
    url = dialect.url(client.base_url)
    headers = dialect.headers(key, client.headers or {})

    metric = _LlmMetric(model, _media_summary(messages))
    try:
        data, attempts = await client._send(url, headers, body, cancel=cancel, deadline=deadline)
        if not isinstance(data, dict):
            raise malformed(client.style, "expected a JSON object", data)
    except Exception:
        client._emit(metric.event("error", zero_usage()))
        raise
    reply = dialect.read(data)
    client._emit(metric.event("ok", reply.usage, attempts))
    await client._call_hook("after_llm", {"response": data, "model": model, "turn": 0})
    return TranslateResult(
        text=reply.text,
        tool_calls=reply.calls,
        finish_reason=dialect.finish(bool(reply.calls), reply.stop),
        usage=reply.usage,
        model=model,
        raw=data,
    )


def _media_summary(messages: list[Any]) -> list[dict[str, Any]]:
    """`{type, mimeType, bytes}` per media part of the caller's messages (OpenAI-native parts included)."""
    canonical = []
    for m in messages:
        content = m.get("content") if isinstance(m, dict) else None
        if isinstance(content, list):
            canonical.append({"content": [(_canonical_part(p) or p) if isinstance(p, dict) else p for p in content]})
    return media_parts_summary(canonical)


class _LlmMetric:
    """Times the one logical call and builds its `llm` metric event (client.md §11)."""

    def __init__(self, model: str, parts: list[dict[str, Any]]) -> None:
        self.model = model
        self.parts = parts
        self.started = time.monotonic()

    def event(self, status: str, usage: dict[str, int], attempts: Optional[int] = None) -> dict[str, Any]:
        ev: dict[str, Any] = {
            "event": "llm",
            "model": self.model,
            "status": status,
            "ms": (time.monotonic() - self.started) * 1000,
            "prompt_tokens": usage["prompt_tokens"],
            "completion_tokens": usage["completion_tokens"],
        }
        if self.parts:
            ev["parts"] = self.parts
        if attempts is not None:
            ev["attempts"] = attempts
        return ev
