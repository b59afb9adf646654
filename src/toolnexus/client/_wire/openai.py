"""The OpenAI chat-completions wire: URL, headers, bodies, replies and streams as neutral turns.

Content parts (canonical dicts, `toolnexus.content`; blocks from `content.encode_part`, under the
client's part policy in `client/_parts.py`) on this wire:
- list contents: canonical non-text parts are encoded — as attached parts in a user message, as
  tool-derived ones elsewhere; other blocks pass through.
- tool results: the `tool` message keeps its text (plus its text parts); the stored `parts`/`name`
  are stripped and each non-text part moves into ONE synthetic user message right after the run
  of tool messages, preceded by `Output of tool {name} ({tool_call_id}):`. That message is built
  per request and never stored.

Replies: the finish (`finish_reason`: `stop`, `length`, `tool_calls`, `content_filter`; a
`refusal` field, streamed or not, is a refusal whose text is the turn's text and stays on the
message) is read into the neutral vocabulary; an error the provider sends inside a 2xx reply — a
body or chunk with an `error` object (OpenAI, OpenRouter, vLLM's `{"object": "error"}`), or a
`finish_reason: "error"` — raises `ProviderError`. Usage: `prompt_tokens` as sent (OpenAI counts
cached input in it), with `prompt_tokens_details.cached_tokens` and
`completion_tokens_details.reasoning_tokens` as details. A streamed turn keeps what the provider
sent beyond content and calls: extra delta fields are merged onto the message (strings
concatenated, lists extended, objects replaced — OpenRouter's `reasoning` / `reasoning_details`,
Gemini's `extra_content`), and extra tool-call fields (Gemini's `extra_content.google.
thought_signature`) stay on their call, so they go back unchanged.

Translate on this wire: its own URL rule (`/v1` added unless the base already names a version —
`/v1`, `/v1beta`… — or a `/chat/` path; `translate_url`), lowercase headers, the caller's
messages as given except that canonical part dicts in them are encoded exactly as the run loop
does (so a part the provider rejects is never forwarded), the system text prepended only when no
`system`/`developer` message exists, and a lenient reply reader (no choices ⇒ empty result; the
finish in the neutral vocabulary by the run loop's rule — `length` or `content_filter` even when
the cut reply holds calls, which stay as sent — the provider's own value beside it). The OpenAI-shaped readers
translate's input needs on every wire live here too: `content_text`, `args_string`,
`has_system_message`, `message_calls` and `canonical_part` (an OpenAI-native part as a canonical
one, the inverse of this wire's part mapping).

Not here: retries, hooks, tool execution (loop), and the translate call itself (`toolnexus.translate`).
"""

from __future__ import annotations

import json
import re
from typing import Any, Callable, Optional
from urllib.parse import urlsplit

from ..._shapes import as_dict
from ...content._parts import MEDIA_PART_TYPES, is_part_dict
from .._result import FINISH_CONTENT_FILTER, FINISH_ERROR, FINISH_LENGTH, FINISH_REFUSAL, FINISH_STOP, FINISH_TOOL_CALLS
from .._sse import SseEvent, json_payloads
from .base import (
    DialectBase,
    ResultEntry,
    ToolCall,
    TranslateReply,
    TranslateRequest,
    Turn,
    add_usage,
    finish_of,
    malformed,
    parse_arguments,
    provider_error,
    read_arguments,
    usage_of,
)

WIRE = "openai"
_AUDIO_MIME = {"mp3": "audio/mpeg", "wav": "audio/wav"}  # the inverse, for reading `input_audio`
_DATA_URL = re.compile(r"^data:([^;,]*)(?:;[^,]*)?;base64,(.*)$", re.DOTALL)
_VERSIONED = re.compile(r"/v\d+[a-z0-9]*(/|$)")  # a base URL that names an API version: /v1, /v1beta, /v2…
FINISHES = {"stop": FINISH_STOP, "length": FINISH_LENGTH, "tool_calls": FINISH_TOOL_CALLS,
            "function_call": FINISH_TOOL_CALLS, "content_filter": FINISH_CONTENT_FILTER, "error": FINISH_ERROR}


def _usage(u: Any) -> dict[str, int]:
    if not isinstance(u, dict):
        return usage_of(None, None)
    prompt, completion = u.get("prompt_tokens_details"), u.get("completion_tokens_details")
    return usage_of(u.get("prompt_tokens"), u.get("completion_tokens"), u.get("total_tokens"),
                    cached=prompt.get("cached_tokens") if isinstance(prompt, dict) else 0,
                    reasoning=completion.get("reasoning_tokens") if isinstance(completion, dict) else 0)


def finish_for(choice_finish: Any, has_calls: bool, refused: bool) -> str:
    """A chat-completions reply's finish in the neutral vocabulary (a `refusal` field wins over `stop`)."""
    finish = finish_of(choice_finish, FINISHES, has_calls)
    return FINISH_REFUSAL if refused and finish in (FINISH_STOP, FINISH_TOOL_CALLS) and not has_calls else finish


def _error_in(data: dict[str, Any]) -> Any:
    """The provider's error object in a reply body or chunk (None when it carries none)."""
    err = data.get("error")
    if isinstance(err, (dict, str)) and err:
        return err
    if data.get("object") == "error":  # vLLM and other servers: the error is the object itself
        return data
    choices = data.get("choices")
    first = choices[0] if isinstance(choices, list) and choices and isinstance(choices[0], dict) else None
    if first is not None and first.get("finish_reason") == "error":
        return first.get("error") or {"type": "server_error", "message": "the provider ended the reply with an error"}
    return None


# -- reading OpenAI-shaped input (translate) -----------------------------------------------------


def content_text(c: Any) -> str:
    """The text of an OpenAI `content`: a string as-is, or the `text` of a parts list joined."""
    if isinstance(c, str):
        return c
    if isinstance(c, list):
        return "".join(p["text"] for p in c if isinstance(p, dict) and isinstance(p.get("text"), str))
    return ""


def args_string(a: Any) -> str:
    """Tool-call arguments as OpenAI's JSON string: a string as-is, a dict compact, else `"{}"`."""
    if isinstance(a, str):
        return a
    if isinstance(a, dict):
        return json.dumps(a, separators=(",", ":"))
    return "{}"


def has_system_message(messages: Any) -> bool:
    """True when an OpenAI message list already holds a `system` or `developer` message."""
    if not isinstance(messages, list):
        return False
    return any(isinstance(m, dict) and m.get("role") in ("system", "developer") for m in messages)


def message_calls(message: Any) -> list[ToolCall]:
    """The calls of an OpenAI assistant message as a caller wrote them: every entry with a `function`
    object (others skipped), `arguments` always a JSON string (`args_string`)."""
    raw = message.get("tool_calls") if isinstance(message, dict) else None
    if not isinstance(raw, list):
        return []
    calls = []
    for entry in raw:
        fn = entry.get("function") if isinstance(entry, dict) else None
        if isinstance(fn, dict):
            arguments = args_string(fn.get("arguments"))
            calls.append(ToolCall(str(entry.get("id") or ""), str(fn.get("name") or ""), parse_arguments(arguments),
                                  arguments))
    return calls


def _from_data_url(url: Any) -> Optional[tuple[str, str]]:
    m = _DATA_URL.match(url) if isinstance(url, str) else None
    return (m.group(1), m.group(2)) if m else None


def canonical_part(part: dict[str, Any]) -> Optional[dict[str, Any]]:
    """A media part (OpenAI-native `image_url` / `input_audio` / `file`, or already canonical) in
    canonical form (`type`, `mimeType`, `data` | `url`, `name`); None for anything else."""
    kind = part.get("type")
    if kind == "image_url":
        ref = part.get("image_url")
        url = ref.get("url") if isinstance(ref, dict) else ref
        decoded = _from_data_url(url)
        if decoded:
            return {"type": "image", "mimeType": decoded[0], "data": decoded[1]}
        return {"type": "image", "mimeType": "", "url": url}
    if kind == "input_audio":
        ref = as_dict(part.get("input_audio"))
        fmt = str(ref.get("format") or "")
        mime = _AUDIO_MIME.get(fmt, f"audio/{fmt}" if fmt else "")
        return {"type": "audio", "mimeType": mime, "data": ref.get("data")}
    if kind == "file" and isinstance(part.get("file"), dict):
        ref = part["file"]
        decoded = _from_data_url(ref.get("file_data"))
        mime, data = decoded if decoded else ("", None)
        out: dict[str, Any] = {"type": "file", "mimeType": mime, "data": data}
        if ref.get("filename"):
            out["name"] = ref["filename"]
        return out
    if kind in MEDIA_PART_TYPES and "source" not in part:
        return {"mimeType": "", **part}
    return None


class OpenAIWire(DialectBase):
    """The `style="openai"` dialect."""

    name = WIRE
    env_key = "OPENAI_API_KEY"
    halt_emits_placeholder_result = False
    result_id_key = "tool_call_id"

    # -- request side ---------------------------------------------------------------------------

    def url(self, base_url: str) -> str:
        return base_url.rstrip("/") + "/chat/completions"

    def headers(self, api_key: str, extra: dict[str, str]) -> dict[str, str]:
        return {"Authorization": f"Bearer {api_key}", "Content-Type": "application/json", **extra}

    def start_transcript(self, history: list[dict[str, Any]], system: str, prompt: Any) -> list[dict[str, Any]]:
        messages = list(history)
        if not messages and system:
            messages.append({"role": "system", "content": system})
        messages.append({"role": "user", "content": prompt})
        return messages

    def build_body(self, model: str, messages: list[dict[str, Any]], tools: list[dict[str, Any]], system: str,
                   stream: bool, *, wired: bool = False) -> dict[str, Any]:
        body: dict[str, Any] = {"model": model, "messages": messages if wired else self.wire_messages(messages)}
        if stream:
            body["stream"] = True
            body["stream_options"] = {"include_usage": True}
        if tools:
            body["tools"] = tools
            body["tool_choice"] = "auto"
        return body

    def wire_messages(self, messages: list[Any]) -> list[Any]:
        """The canonical transcript as sent: parts encoded, the synthetic tool-output message inserted.

        A `tool` message loses `parts`/`name`; its text parts extend its content
        (`[{"type":"text","text": content}, *texts]`) and each other part moves, preceded by
        `Output of tool {name} ({tool_call_id}):`, into ONE user message right after the run of
        tool messages. Unchanged messages are reused as they are.
        """
        out: list[Any] = []
        synthetic: list[dict[str, Any]] = []
        for m in messages:
            role = m.get("role") if isinstance(m, dict) else None
            if synthetic and role != "tool":
                out.append({"role": "user", "content": synthetic})
                synthetic = []
            if role == "tool" and ("parts" in m or "name" in m):
                parts = [p for p in m.get("parts") or [] if is_part_dict(p)]
                texts = [self.encode_part(p, attached=False) for p in parts if p.get("type") == "text"]
                for p in parts:
                    if p.get("type") != "text":
                        synthetic.append({"type": "text",
                                          "text": f"Output of tool {m.get('name')} ({m.get('tool_call_id')}):"})
                        synthetic.append(self.encode_part(p, attached=False))
                m = {k: v for k, v in m.items() if k not in ("parts", "name")}
                if texts:
                    m["content"] = [{"type": "text", "text": m.get("content")}, *texts]
            elif isinstance(m, dict) and isinstance(m.get("content"), list):
                m = {**m, "content": self.map_content(m["content"], role)}
            out.append(m)
        if synthetic:
            out.append({"role": "user", "content": synthetic})
        return out

    def result_messages(self, entries: list[ResultEntry]) -> list[dict[str, Any]]:
        out = []
        for e in entries:
            msg: dict[str, Any] = {"role": "tool", "tool_call_id": e.call.id, "content": e.output}
            if e.parts:
                msg["parts"] = e.parts
                msg["name"] = e.call.name
            out.append(msg)
        return out

    def split_results(self, after: list[Any]) -> tuple[list[dict[str, Any]], list[Any]]:
        """The `tool` messages that open `after` (a tool-call turn's results), and what follows them."""
        n = 0
        while n < len(after) and isinstance(after[n], dict) and after[n].get("role") == "tool":
            n += 1
        return list(after[:n]), list(after[n:])

    def rewrite_results(self, messages: list[dict[str, Any]], index: int, kept: list[dict[str, Any]],
                        entries: list[ResultEntry]) -> list[dict[str, Any]]:
        """`messages` up to the tool-call turn at `index`, `kept` results verbatim, then `entries`."""
        return messages[: index + 1] + list(kept) + self.result_messages(entries)

    # -- reply side -----------------------------------------------------------------------------

    def check_reply(self, data: Any) -> None:
        err = _error_in(data) if isinstance(data, dict) else None
        if err is not None:
            raise provider_error(WIRE, data, err, in_stream=False)

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
        refusal = message.get("refusal")
        refused = isinstance(refusal, str) and bool(refusal)
        if refused and not text:
            text = str(refusal)
        calls = self.assistant_calls(message, strict=True)
        native = choices[0].get("finish_reason")
        return Turn(text, calls, _usage(data.get("usage")), message, raw=data,
                    finish_reason=finish_for(native, bool(calls), refused),
                    provider_finish_reason=native if isinstance(native, str) else None)

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
            args, problem = read_arguments(arguments)
            calls.append(ToolCall(str(tc.get("id") or ""), fn["name"], args,
                                  arguments if isinstance(arguments, str) else None, problem))
        return calls

    def new_stream(self) -> "OpenAIStream":
        return OpenAIStream()

    def exhausted_text(self, messages: list[dict[str, Any]], run_start: int) -> str:
        for m in reversed(messages[run_start:]):
            content = m.get("content") if isinstance(m, dict) and m.get("role") == "assistant" else None
            if isinstance(content, str):
                return content
        return ""

    def balance(self, messages: list[dict[str, Any]], text_for: Callable[[ToolCall], str]) -> list[dict[str, Any]]:
        i, calls = self.trailing_calls(messages)
        if not calls:
            return messages
        results, _ = self.split_results(messages[i + 1 :])
        answered = {m.get("tool_call_id") for m in results}
        j = i + 1 + len(results)
        missing = [c for c in calls if c.id not in answered]
        if not missing:
            return messages
        fill = self.result_messages([ResultEntry(c, text_for(c), True) for c in missing])
        return messages[:j] + fill + messages[j:]

    # -- translate --------------------------------------------------------------

    def translate_url(self, base_url: str) -> str:
        """`/chat/completions` joined as the provider SDKs join it, adding `/v1` only to a base
        URL that names no API version (`https://api.openai.com` → `…/v1/chat/completions`;
        Gemini's `…/v1beta/openai/` → `…/v1beta/openai/chat/completions`)."""
        b = base_url.rstrip("/")
        path = urlsplit(b).path
        if b.endswith("/v1") or "/chat/" in b or _VERSIONED.search(path):
            return b + "/chat/completions"
        return b + "/v1/chat/completions"

    def translate_headers(self, api_key: str, extra: dict[str, str]) -> dict[str, str]:
        return {"content-type": "application/json", "authorization": f"Bearer {api_key}", **extra}

    def translate_request(self, messages: list[Any], tools: list[Any], toolkit: Any, system: Optional[str],
                          system_prompt: Optional[str]) -> TranslateRequest:
        wire = self.wire_messages(list(messages))  # canonical parts: the loop's allowlist and provenance rule
        text = system if system is not None else system_prompt
        if text and not has_system_message(wire):
            wire.insert(0, {"role": "system", "content": text})
        return TranslateRequest(wire, self.declare_tools(toolkit) + tools, "")

    def translate_body(self, model: str, request: TranslateRequest, tool_choice: Any,
                       max_tokens: int) -> dict[str, Any]:
        body: dict[str, Any] = {"model": model, "messages": request.messages}
        if request.tools:
            body["tools"] = request.tools
        if tool_choice is not None:
            body["tool_choice"] = tool_choice
        if max_tokens > 0:
            body["max_tokens"] = max_tokens
        return body

    def translate_reply(self, data: dict[str, Any]) -> TranslateReply:
        usage = _usage(data.get("usage"))
        choices = data.get("choices")
        first = choices[0] if isinstance(choices, list) and choices and isinstance(choices[0], dict) else None
        if first is None:
            return TranslateReply("", [], "stop", usage)
        message = as_dict(first.get("message"))
        calls = message_calls(message)
        stop = first.get("finish_reason")
        native = stop if isinstance(stop, str) and stop else None
        refusal = message.get("refusal")
        refused = isinstance(refusal, str) and bool(refusal)
        text = content_text(message.get("content")) or (str(refusal) if refused else "")
        finish = finish_for(native, bool(calls), refused)  # a cut call is `length`, as in the run loop
        if native is not None and native not in FINISHES and finish == FINISH_STOP:
            finish = native  # an unknown provider value passes through, as it always has
        return TranslateReply(text, calls, finish, usage, provider_finish_reason=native)


def _checked(arguments: str) -> tuple[dict[str, Any], str, Optional[str]]:
    args, problem = read_arguments(arguments)
    return args, arguments, problem


_KNOWN_DELTA = frozenset({"role", "content", "tool_calls", "refusal", "function_call"})
_KNOWN_CALL = frozenset({"index", "id", "type", "function"})


_STREAMED_TEXT = ("text", "summary", "data")  # the fields a list entry streamed in pieces spreads over


def _merge_extra(target: dict[str, Any], key: str, value: Any) -> None:
    """Merge one streamed field the loop does not interpret onto `target`: strings concatenate,
    lists extend, anything else (objects, numbers) replaces. A list entry carrying the `index`
    and `type` of one already there is that entry streamed in pieces (OpenRouter's
    `reasoning_details`): its `text` / `summary` / `data` are appended, its other fields replace."""
    if value is None:
        return
    old = target.get(key)
    if isinstance(value, str) and isinstance(old, str):
        target[key] = old + value
    elif isinstance(value, list) and isinstance(old, list):
        for entry in value:
            same = next((e for e in old if isinstance(e, dict) and isinstance(entry, dict) and "index" in entry
                         and e.get("index") == entry["index"] and e.get("type") == entry.get("type")), None)
            if same is None:
                old.append(dict(entry) if isinstance(entry, dict) else entry)
                continue
            for k, v in entry.items():
                if k in _STREAMED_TEXT and isinstance(v, str) and isinstance(same.get(k), str):
                    same[k] += v
                elif v is not None and v != "":
                    same[k] = v
    else:
        target[key] = [dict(e) if isinstance(e, dict) else e for e in value] if isinstance(value, list) else value


class OpenAIStream:
    """Assembles a streamed chat-completions turn (tool-call deltas merged by `index`).

    `finished` is set by `[DONE]`; `complete` also by a chunk's `finish_reason` (some compatible
    servers end there without `[DONE]`). A stream that ends with neither is truncated. A chunk
    carrying an `error` (or `finish_reason: "error"`) raises `ProviderError` at once.
    """

    end_marker = "[DONE] or a finish_reason"

    def __init__(self) -> None:
        self.finished = False
        self.complete = False
        self._text: list[str] = []
        self._refusal: list[str] = []
        self._calls: dict[int, dict[str, Any]] = {}
        self._extra: dict[str, Any] = {}
        self._usage: dict[str, int] = usage_of(None, None)
        self._finish: Optional[str] = None

    def feed(self, event: SseEvent) -> list[str]:
        deltas: list[str] = []
        for chunk in json_payloads(event):
            if chunk == "[DONE]":
                self.finished = self.complete = True
                break
            if not isinstance(chunk, dict):
                continue
            err = _error_in(chunk)
            if err is not None:
                raise provider_error(WIRE, chunk, err, in_stream=True)
            if isinstance(chunk.get("usage"), dict):
                add_usage(self._usage, _usage(chunk["usage"]))
            choices = chunk.get("choices")
            if not isinstance(choices, list) or not choices or not isinstance(choices[0], dict):
                continue
            finish = choices[0].get("finish_reason")
            if finish:
                self.complete = True
                self._finish = finish if isinstance(finish, str) else self._finish
            delta = choices[0].get("delta")
            if not isinstance(delta, dict):
                continue
            if isinstance(delta.get("content"), str) and delta["content"]:
                self._text.append(delta["content"])
                deltas.append(delta["content"])
            if isinstance(delta.get("refusal"), str) and delta["refusal"]:
                self._refusal.append(delta["refusal"])
                deltas.append(delta["refusal"])
            for tc in delta.get("tool_calls") or []:
                if isinstance(tc, dict):
                    self._merge_call(tc)
            if not delta.keys() <= _KNOWN_DELTA:
                for key, value in delta.items():
                    if key not in _KNOWN_DELTA:
                        _merge_extra(self._extra, key, value)
        return deltas

    def _merge_call(self, tc: dict[str, Any]) -> None:
        index = tc.get("index", 0)
        slot = self._calls.setdefault(index if isinstance(index, int) else 0, {"id": "", "name": "", "arguments": ""})
        if tc.get("id"):
            slot["id"] = str(tc["id"])
        fn = as_dict(tc.get("function"))
        if isinstance(fn.get("name"), str):
            slot["name"] += fn["name"]
        if isinstance(fn.get("arguments"), str):
            slot["arguments"] += fn["arguments"]
        for key, value in tc.items():
            if key not in _KNOWN_CALL:
                _merge_extra(slot.setdefault("extra", {}), key, value)

    def turn(self) -> Turn:
        text = "".join(self._text)
        refusal = "".join(self._refusal)
        slots = [self._calls[i] for i in sorted(self._calls)]
        if slots:
            message: dict[str, Any] = {
                "role": "assistant",
                "content": text or None,
                "tool_calls": [
                    {"id": s["id"], "type": "function", "function": {"name": s["name"], "arguments": s["arguments"]},
                     **s.get("extra", {})}
                    for s in slots
                ],
            }
        else:
            message = {"role": "assistant", "content": text}
        if refusal:
            message["refusal"] = refusal
        for key, value in self._extra.items():
            message.setdefault(key, value)
        calls = [ToolCall(s["id"], s["name"], *_checked(s["arguments"])) for s in slots]
        return Turn(text or refusal, calls, dict(self._usage), message,
                    finish_reason=finish_for(self._finish, bool(calls), bool(refusal)),
                    provider_finish_reason=self._finish)
