"""The Anthropic messages wire: URL, headers, bodies, replies and streams as neutral turns.

Content parts (canonical dicts, `toolnexus.content`; blocks from `content.encode_part` — images,
PDF documents — under the client's part policy in `client/_parts.py`) on this wire:
- list contents: canonical non-text parts are encoded — as attached parts in a user message, as
  tool-derived ones elsewhere; other blocks pass through.
- tool results: a `tool_result` block holding stored `parts` is sent with
  `content = [{"type":"text","text": output}, *encoded parts]`; the stored `parts` key is stripped.

Streamed replies are assembled in `anthropic_reply.py` (blocks kept verbatim, final usage).

Translate on this wire: OpenAI-shaped messages, tools and `tool_choice` are
converted (`openai_messages_to_anthropic`, `openai_tools_to_anthropic`,
`openai_tool_choice_to_anthropic`; public through `toolnexus.translate`), the system text is the
`system` argument, else the client's `system_prompt`, else the hoisted system messages (key omitted
when empty), and the reply's `stop_reason` is read into the neutral finish vocabulary by the run loop's rule
(`refusal` and `pause` kept apart from `stop`, `max_tokens` is `length` even when the cut reply
holds a `tool_use`, which stays as sent; the pinned `finish_reason_for` helper keeps its older,
OpenAI-only mapping for callers that use it). Thinking survives a translate round trip: the
reply's `thinking` / `redacted_thinking` blocks come back verbatim as `thinking_blocks`, and an
assistant message carrying `thinking_blocks` (the key LiteLLM and others use) is converted with
those blocks first, as the API requires when the turn called tools. Parts in converted
messages go through this wire's own block allowlist with a lenient policy: what Anthropic cannot
carry (audio, other file types, a `file_id` reference) becomes a text placeholder, warned once — a
pure converter has no run to fail, and a silent drop would lose data; a part with neither data nor
url becomes a placeholder too. A dict part of an unknown type passes through
verbatim (it may already be an Anthropic block); a `tool_result` with media but no text gets no
empty text block.

Not here: retries, hooks, tool execution (loop), and the translate call itself (`toolnexus.translate`).
"""

from __future__ import annotations

import json
from typing import Any, Callable, Optional

from ...content._blocks import encode_part
from ...content._errors import UnsupportedPartError
from .._parts import degrade_notice, placeholder_block
from .anthropic_reply import AnthropicStream, reply_finish, reply_text, reply_usage
from .base import DialectBase, ResultEntry, ToolCall, TranslateReply, TranslateRequest, Turn, malformed, provider_error
from .openai import canonical_part, content_text, message_calls

WIRE = "anthropic"
ANTHROPIC_VERSION = "2023-06-01"
MAX_TOKENS = 4096
"""The pinned default `max_tokens` of every request; raise it with `request_params={"max_tokens": N}`."""
THINKING_TYPES = ("thinking", "redacted_thinking")


def input_args(value: Any) -> tuple[dict[str, Any], None, Optional[str]]:
    """A `tool_use.input` as `(args, None, problem)`: a dict (or absent ⇒ `{}`), else a problem."""
    if value is None or isinstance(value, dict):
        return value or {}, None, None
    return {}, None, f"the input is {type(value).__name__}, not a JSON object"




class AnthropicWire(DialectBase):
    """The `style="anthropic"` dialect."""

    name = WIRE
    env_key = "ANTHROPIC_API_KEY"
    halt_emits_placeholder_result = True
    result_id_key = "tool_use_id"

    # -- request side ---------------------------------------------------------------------------

    def url(self, base_url: str) -> str:
        b = base_url.rstrip("/")
        return b + "/messages" if b.endswith("/v1") else b + "/v1/messages"

    def headers(self, api_key: str, extra: dict[str, str]) -> dict[str, str]:
        return {"x-api-key": api_key, "anthropic-version": ANTHROPIC_VERSION,
                "Content-Type": "application/json", **extra}

    def start_transcript(self, history: list[dict[str, Any]], system: str, prompt: Any) -> list[dict[str, Any]]:
        return list(history) + [{"role": "user", "content": prompt}]

    def build_body(self, model: str, messages: list[dict[str, Any]], tools: list[dict[str, Any]], system: str,
                   stream: bool, *, wired: bool = False) -> dict[str, Any]:
        body: dict[str, Any] = {"model": model, "max_tokens": MAX_TOKENS, "system": system,
                                "messages": messages if wired else self.wire_messages(messages)}
        if stream:
            body["stream"] = True
        if tools:
            body["tools"] = tools
        return body

    def wire_messages(self, messages: list[dict[str, Any]]) -> list[dict[str, Any]]:
        """The canonical transcript as sent (list contents mapped; unchanged messages reused as-is)."""
        out = []
        for m in messages:
            if isinstance(m, dict) and isinstance(m.get("content"), list):
                m = {**m, "content": self.map_content(m["content"], m.get("role"))}
            out.append(m)
        return out

    @staticmethod
    def _result_blocks(entries: list[ResultEntry]) -> list[dict[str, Any]]:
        blocks = []
        for e in entries:
            block: dict[str, Any] = {"type": "tool_result", "tool_use_id": e.call.id, "content": e.output,
                                     "is_error": e.is_error}
            if e.parts:
                block["parts"] = e.parts
            blocks.append(block)
        return blocks

    def result_messages(self, entries: list[ResultEntry]) -> list[dict[str, Any]]:
        return [{"role": "user", "content": self._result_blocks(entries)}] if entries else []

    def split_results(self, after: list[Any]) -> tuple[list[dict[str, Any]], list[Any]]:
        """The `tool_result` blocks of the user message opening `after` (only such blocks), and the rest."""
        head = after[0] if after else None
        blocks = head.get("content") if isinstance(head, dict) and head.get("role") == "user" else None
        if isinstance(blocks, list) and blocks and all(
                isinstance(b, dict) and b.get("type") == "tool_result" for b in blocks):
            return list(blocks), list(after[1:])
        return [], list(after)

    def rewrite_results(self, messages: list[dict[str, Any]], index: int, kept: list[dict[str, Any]],
                        entries: list[ResultEntry]) -> list[dict[str, Any]]:
        """`messages` up to the tool-call turn at `index`, then its results message (which must follow
        it) holding `kept` blocks verbatim and then `entries`."""
        holder = messages[index + 1]
        return messages[: index + 1] + [{**holder, "content": list(kept) + self._result_blocks(entries)}]

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
        calls = self.assistant_calls(message)
        stop = data.get("stop_reason")
        return Turn(reply_text(content), calls, reply_usage(data.get("usage")), message, raw=data,
                    finish_reason=reply_finish(stop, bool(calls)),
                    provider_finish_reason=stop if isinstance(stop, str) else None)

    def check_reply(self, data: Any) -> None:
        if isinstance(data, dict) and data.get("type") == "error":
            raise provider_error(WIRE, data, data.get("error"), in_stream=False)

    def assistant_calls(self, message: Any) -> list[ToolCall]:
        content = message.get("content") if isinstance(message, dict) else None
        if not isinstance(content, list):
            return []
        return [
            ToolCall(str(b.get("id") or ""), b["name"], *input_args(b.get("input")))
            for b in content
            if isinstance(b, dict) and b.get("type") == "tool_use" and isinstance(b.get("name"), str)
        ]

    def new_stream(self) -> AnthropicStream:
        return AnthropicStream()

    def exhausted_text(self, messages: list[dict[str, Any]], run_start: int) -> str:
        return ""

    def balance(self, messages: list[dict[str, Any]], text_for: Callable[[ToolCall], str]) -> list[dict[str, Any]]:
        i, calls = self.trailing_calls(messages)
        if not calls:
            return messages
        nxt = messages[i + 1] if i + 1 < len(messages) else None
        content = nxt.get("content") if isinstance(nxt, dict) and nxt.get("role") == "user" else None
        blocks: list[Any] = content if isinstance(content, list) else []
        holds_results = any(isinstance(b, dict) and b.get("type") == "tool_result" for b in blocks)
        answered = {b.get("tool_use_id") for b in blocks if isinstance(b, dict)} if holds_results else set()
        missing = [c for c in calls if c.id not in answered]
        if not missing:
            return messages
        fill = self._result_blocks([ResultEntry(c, text_for(c), True) for c in missing])
        if holds_results and isinstance(nxt, dict):
            merged = {**nxt, "content": list(blocks) + fill}
            return messages[: i + 1] + [merged] + messages[i + 2 :]
        return messages[: i + 1] + [{"role": "user", "content": fill}] + messages[i + 1 :]

    # -- translate --------------------------------------------------------------

    def translate_url(self, base_url: str) -> str:
        return self.url(base_url)

    def translate_headers(self, api_key: str, extra: dict[str, str]) -> dict[str, str]:
        return {"content-type": "application/json", "x-api-key": api_key, "anthropic-version": ANTHROPIC_VERSION,
                **extra}

    def translate_request(self, messages: list[Any], tools: list[Any], toolkit: Any, system: Optional[str],
                          system_prompt: Optional[str]) -> TranslateRequest:
        wire, hoisted = openai_messages_to_anthropic(messages)
        text = system if system is not None else (system_prompt or hoisted)
        return TranslateRequest(wire, self.declare_tools(toolkit) + openai_tools_to_anthropic(tools), text or "")

    def translate_body(self, model: str, request: TranslateRequest, tool_choice: Any,
                       max_tokens: int) -> dict[str, Any]:
        body: dict[str, Any] = {"model": model, "max_tokens": max_tokens if max_tokens > 0 else MAX_TOKENS}
        if request.system:
            body["system"] = request.system
        body["messages"] = request.messages
        if request.tools:
            body["tools"] = request.tools
        choice = openai_tool_choice_to_anthropic(tool_choice)
        if choice is not None:
            body["tool_choice"] = choice
        return body

    def translate_reply(self, data: dict[str, Any]) -> TranslateReply:
        content = data.get("content")
        blocks = [b for b in content if isinstance(b, dict)] if isinstance(content, list) else []
        calls = [
            ToolCall(str(b.get("id") or ""), str(b.get("name") or ""),
                     b["input"] if isinstance(b.get("input"), dict) else {},
                     json.dumps(b.get("input") or {}, separators=(",", ":")))
            for b in blocks
            if b.get("type") == "tool_use"
        ]
        stop = data.get("stop_reason")
        thinking = [b for b in blocks if b.get("type") in THINKING_TYPES]
        finish = reply_finish(stop, bool(calls))  # a cut `tool_use` is `length`, as in the run loop
        return TranslateReply(reply_text(blocks), calls, finish,
                              reply_usage(data.get("usage")),
                              provider_finish_reason=stop if isinstance(stop, str) else None,
                              thinking_blocks=thinking or None)


# -- OpenAI-shaped input as Anthropic (translate; public through `toolnexus.translate`) -------------

# Pure conversion has no run to fail: a part Anthropic cannot carry degrades to a placeholder
# (warned once), through the very block allowlist the run loop uses; no size rule applies.


def finish_reason_for(has_calls: bool, stop: Optional[str] = None) -> str:
    """A provider stop reason in OpenAI's vocabulary; any tool call wins."""
    if has_calls:
        return "tool_calls"
    if stop in ("max_tokens", "length"):
        return "length"
    if stop in ("refusal", "content_filter"):
        return "content_filter"
    return "stop"


def _has_payload(part: dict[str, Any]) -> bool:
    data, url = part.get("data"), part.get("url")
    return (isinstance(data, str) and bool(data)) or (isinstance(url, str) and bool(url))


def part_to_anthropic(part: dict[str, Any]) -> dict[str, Any]:
    """One content part as an Anthropic block; parts Anthropic cannot carry become a text placeholder."""
    if part.get("type") == "text":
        return {"type": "text", "text": content_text([part])}
    canonical = canonical_part(part)
    if canonical is None:
        return part
    if not _has_payload(canonical):
        degrade_notice(f"translate:nopayload:{canonical.get('type')}",
                       f"a {canonical.get('type')} part carries neither data nor url")
        return placeholder_block(canonical)
    try:
        return encode_part(canonical, WIRE)
    except UnsupportedPartError as e:
        degrade_notice(f"translate:{e}", str(e))
        return placeholder_block(canonical)


def anthropic_blocks(content: Any) -> list[dict[str, Any]]:
    """The Anthropic blocks for the non-text parts of an OpenAI `content`, in order (`[]` if none)."""
    if not isinstance(content, list):
        return []
    return [part_to_anthropic(p) for p in content if isinstance(p, dict) and p.get("type") != "text"]


def _text_then_media(text: str, media: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """A block list: the text (only when non-empty: Anthropic rejects empty text blocks), then media."""
    return ([{"type": "text", "text": text}] if text else []) + media


def _tool_result_block(message: dict[str, Any]) -> dict[str, Any]:
    content = message.get("content")
    text = content_text(content)
    media = anthropic_blocks(content)
    block: dict[str, Any] = {"type": "tool_result", "content": _text_then_media(text, media) if media else text}
    if message.get("tool_call_id"):
        block["tool_use_id"] = str(message["tool_call_id"])
    return block


def _assistant_blocks(message: dict[str, Any]) -> list[dict[str, Any]]:
    kept = message.get("thinking_blocks")
    blocks: list[dict[str, Any]] = [b for b in kept if isinstance(b, dict) and b.get("type") in THINKING_TYPES] \
        if isinstance(kept, list) else []
    text = content_text(message.get("content"))
    if text:
        blocks.append({"type": "text", "text": text})
    for call in message_calls(message):
        blocks.append({"type": "tool_use", "id": call.id, "name": call.name, "input": call.args})
    return blocks


def _user_content(content: Any) -> Any:
    """Anthropic user content for an OpenAI content value, or None when there is nothing to send."""
    text = content_text(content)
    media = anthropic_blocks(content)
    if media:
        return _text_then_media(text, media)
    if text:
        return text
    if isinstance(content, list) and content:
        return content
    return None


def openai_messages_to_anthropic(msgs: Any) -> tuple[list[dict[str, Any]], str]:
    """OpenAI messages as `(anthropic_messages, system_text)`, keeping the tool-call structure.

    Hoisted `system`/`developer` messages leave the transcript, so they never split a run of
    consecutive tool results: those still form the single user turn Anthropic requires.
    """
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
