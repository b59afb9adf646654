"""Single-turn translation: OpenAI-shaped request in, ONE provider call, OpenAI-shaped result out.

`Client.translate(...)` delegates to `translate_with` here (public home: `toolnexus.translate`;
`translate_with_client(client, ...)` is the same call given the client).
The caller owns the conversation and runs tools itself; this module only makes the call through
the client's `Provider` (_provider.py: wire dialect, key, deadline, body shaping, retries, hooks,
the `llm` metric, and the settings) and reads the answer back.
It deliberately has no loop, executes no tool, touches no conversation store and never adds the
toolkit's skills text (a `toolkit` only contributes its tool declarations).

Everything that differs per style — URL, headers, message/tool conversion, body, reading the reply,
the finish-reason rule — is the client's wire dialect (`client/wire/`, `translate_*` methods); the
public pure helpers below are defined there and re-exported here.

Choices of ours (a careful caller's expectations):
- Content parts: besides the canonical part dicts (`{"type": "image"|"audio"|"file", "mimeType",
  "data"|"url", "name"?}`) the OpenAI-native parts a caller actually sends are understood too:
  `image_url` (data: URL or http URL), `input_audio` and `file` (`file_data` data: URL). For the
  anthropic style they are mapped by the run loop's own Anthropic part mapping; what Anthropic
  cannot carry degrades to a text placeholder, warned once (details in `client/_wire/anthropic.py`).
  The client's `on_unsupported_part`/`max_part_bytes` policy governs the run loop only.
- `before_llm` sees (and may replace) the wire-shaped messages and tools of the request, i.e.
  Anthropic-shaped ones for the anthropic style, exactly as in the run loop.
- `finish_reason` is the neutral vocabulary the run loop uses — `stop`, `tool_calls`, `length`,
  `refusal`, `content_filter`, `pause` — on every wire, read by the run loop's rule, and
  `provider_finish_reason` is the provider's own value (an unknown openai value still passes
  through as `finish_reason`, as in 0.21). `tool_calls` means the calls are complete and may be
  run: a reply that ends `stop` (or mislabelled) with calls is `tool_calls`, but one cut at the
  output limit while writing a call is `length` (filtered: `content_filter`) on every wire, its
  cut call left in `tool_calls` as the provider sent it (as OpenAI itself does), never to be run.
  A refusal's text is `text`. The pinned helper `finish_reason_for` keeps its older mapping (any
  call ⇒ `tool_calls`, refusal ⇒ `content_filter`) for callers using it.
- openai: a `content` that is a parts list is flattened with `content_text`.
- Thinking across a translate round trip: the reply's thinking (Anthropic `thinking` /
  `redacted_thinking` blocks, Responses reasoning items) is `thinking_blocks`, verbatim;
  `assistant_message()` puts it on the OpenAI-shaped assistant message under that key, and the
  next translate on the same wire sends it back in front of the turn (the Anthropic API requires
  it back when the turn called tools). The openai wire sends the caller's messages as given, so
  provider fields on them (OpenRouter `reasoning_details`, Gemini `extra_content`) go back as they came.
- The URL: openai adds `/v1` only to a base URL that names no API version, so Gemini's
  OpenAI-compatible base `https://generativelanguage.googleapis.com/v1beta/openai/` gets
  `chat/completions` joined as the provider SDKs join it; responses: `base_url + "/responses"`.
- An error the provider sends inside a 2xx body raises `ProviderError` (retried by its status).
- A 2xx response that is not a JSON object raises `ProviderResponseError` naming what arrived.
- The `llm` metric is the run loop's own (`Provider.llm_call`): `attempts` from the client's send
  and, when the caller's messages hold media parts, `parts` (`{type, mimeType, bytes}`).
"""

from __future__ import annotations

import asyncio
from dataclasses import dataclass, field
from typing import Any, Optional, Protocol

from ..errors import ToolnexusTypeError, ToolnexusValueError
from ._parts import media_parts_summary
from ._provider import Provider
from ._result import HookReply, Toolset, zero_usage
from ._wire.anthropic import (
    anthropic_blocks as anthropic_blocks,
    finish_reason_for as finish_reason_for,
    openai_messages_to_anthropic as openai_messages_to_anthropic,
    openai_tool_choice_to_anthropic as openai_tool_choice_to_anthropic,
    openai_tools_to_anthropic as openai_tools_to_anthropic,
    part_to_anthropic as part_to_anthropic,
)
from ._wire.base import ToolCall, TranslateRequest, WireDialect, malformed, parse_arguments
from ._wire.openai import (
    args_string as args_string,
    canonical_part,
    content_text as content_text,
    has_system_message as has_system_message,
    message_calls,
)


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
    provider_finish_reason: Optional[str] = None
    thinking_blocks: list[dict[str, Any]] = field(default_factory=list)

    def tool_calls_json(self) -> list[dict[str, Any]]:
        """The calls as an OpenAI `tool_calls` array, ready to put on an assistant message."""
        return [
            {"id": c.id, "type": "function", "function": {"name": c.name, "arguments": c.arguments}}
            for c in self.tool_calls
        ]

    def assistant_message(self) -> dict[str, Any]:
        """The reply as an OpenAI-shaped assistant message to append to the caller's transcript:
        `content`, `tool_calls` when any, and `thinking_blocks` when the provider sent thinking."""
        message: dict[str, Any] = {"role": "assistant", "content": self.text or None}
        if self.tool_calls:
            message["tool_calls"] = self.tool_calls_json()
        if self.thinking_blocks:
            message["thinking_blocks"] = list(self.thinking_blocks)
        return message


def args_object(a: Any) -> dict[str, Any]:
    """Tool-call arguments as an object: a dict, or a non-blank JSON string holding one, else `{}`."""
    return parse_arguments(a)


def tool_calls_of(message: Any) -> list[TranslatedToolCall]:
    """The calls of an OpenAI assistant message; entries without a `function` object are skipped."""
    return _translated(message_calls(message))


def _translated(calls: list[ToolCall]) -> list[TranslatedToolCall]:
    # translate's readers always keep the wire's JSON string; the fallback only guards the type
    return [TranslatedToolCall(c.id, c.name, c.arguments if c.arguments is not None else args_string(c.args))
            for c in calls]


# --------------------------------------------------------------------------- the call


def _dialect_of(provider: Provider) -> WireDialect:
    try:
        return provider.dialect
    except ValueError:
        raise ToolnexusValueError(f'toolnexus: translate does not support style {provider.settings.endpoint.style!r} '
                                  '(expected "openai", "anthropic" or "responses")') from None


def _check_inputs(messages: object, tools: object, max_tokens: object) -> None:
    if not isinstance(messages, list):
        raise ToolnexusTypeError(
            "toolnexus: translate messages must be a list of OpenAI-shaped message dicts, "
            f"got {type(messages).__name__}"
        )
    if tools is not None and not isinstance(tools, list):
        raise ToolnexusTypeError(
            f"toolnexus: translate tools must be a list of tool declarations or None, got {type(tools).__name__}"
        )
    if max_tokens is not None and (isinstance(max_tokens, bool) or not isinstance(max_tokens, int)):
        raise ToolnexusTypeError(f"toolnexus: translate max_tokens must be an int, got {type(max_tokens).__name__}")


def _apply_before_llm(override: Optional[HookReply], request: TranslateRequest,
                      model: str) -> tuple[TranslateRequest, str]:
    """Honour a `before_llm` return: non-None messages/tools replace, a truthy model wins."""
    if not override:
        return request, model
    messages, tools = override.get("messages"), override.get("tools")
    request = TranslateRequest(
        list(messages) if messages is not None else request.messages,
        list(tools) if tools is not None else request.tools,
        request.system,
    )
    return request, override.get("model") or model


def _media_summary(messages: list[Any]) -> list[dict[str, Any]]:
    """`{type, mimeType, bytes}` per media part of the caller's messages (OpenAI-native parts included)."""
    canonical = []
    for m in messages:
        content = m.get("content") if isinstance(m, dict) else None
        if isinstance(content, list):
            canonical.append({"content": [(canonical_part(p) or p) if isinstance(p, dict) else p for p in content]})
    return media_parts_summary(canonical)


class _HasProvider(Protocol):
    @property
    def provider(self) -> Provider: ...


async def translate_with_client(client: _HasProvider, messages: list[Any], *, tools: Optional[list[Any]] = None,
                                toolkit: Optional[Toolset] = None, tool_choice: Any = None,
                                system: Optional[str] = None, max_tokens: int = 0,
                                cancel: Optional[asyncio.Event] = None) -> TranslateResult:
    """`client.translate(...)`: `translate_with` on the client's provider."""
    return await translate_with(client.provider, messages, tools=tools, toolkit=toolkit, tool_choice=tool_choice,
                                system=system, max_tokens=max_tokens, cancel=cancel)


async def translate_with(
    provider: Provider,
    messages: list[Any],
    *,
    tools: Optional[list[Any]] = None,
    toolkit: Optional[Toolset] = None,
    tool_choice: Any = None,
    system: Optional[str] = None,
    max_tokens: int = 0,
    cancel: Optional[asyncio.Event] = None,
) -> TranslateResult:
    """Make the one provider call of `client.translate(...)` and read the answer back.

    Bad arguments raise `TypeError`/`ValueError` before anything else. Otherwise raises what the
    client's call raises (`RuntimeError` without a key, `ProviderError`, `RunTimeout`,
    `RunCancelled`) or `ProviderResponseError` for a non-object reply; a failed call first emits
    its `llm` error metric (tokens 0).
    """
    dialect = _dialect_of(provider)
    _check_inputs(messages, tools, max_tokens)
    endpoint = provider.settings.endpoint
    key = provider.api_key(dialect)
    abort = provider.abort(cancel)
    request = dialect.translate_request(messages, list(tools or []), toolkit, system, endpoint.system_prompt)
    model = endpoint.model
    override = await provider.call_hook(
        "before_llm", {"messages": request.messages, "tools": request.tools, "model": model, "turn": 0}
    )
    request, model = _apply_before_llm(override, request, model)
    body = provider.shape_body(dialect.translate_body(model, request, tool_choice, max_tokens or 0))
    url = dialect.translate_url(endpoint.base_url)
    headers = dialect.translate_headers(key, endpoint.headers)
    async with provider.llm_call(model, _media_summary(messages)) as call:
        data = await provider.send(url, headers, body, abort, call=call, check=dialect.check_reply)
        if not isinstance(data, dict):
            raise malformed(dialect.name, "expected a JSON object", data)
        reply = dialect.translate_reply(data)
        call.usage = reply.usage
    await provider.call_hook("after_llm", {"response": data, "model": model, "turn": 0})
    return TranslateResult(
        text=reply.text,
        tool_calls=_translated(reply.calls),
        finish_reason=reply.finish_reason,
        usage=reply.usage,
        model=model,
        raw=data,
        provider_finish_reason=reply.provider_finish_reason,
        thinking_blocks=list(reply.thinking_blocks or ()),
    )
