"""The OpenAI Responses API wire (`style="responses"`): URL, headers, bodies, replies and streams as turns.

The same loop, the same `Turn`: this dialect only maps. The canonical transcript on this wire:
- the system text is the body's `instructions` (recomputed each run, never in the transcript);
- a user turn is `{"role": "user", "content": str | [canonical parts]}`;
- an assistant turn is `{"role": "assistant", "content": [output items, verbatim], "response_id"}`
  (`responses_reply.py`): on the wire its items are sent back one by one, reasoning items with
  their `encrypted_content` included, so reasoning carries across turns;
- tool results are the library's chat-style `{"role": "tool", "tool_call_id", "content"}`
  messages (the same shape durable resume, compaction and the openai wire share), sent as
  `function_call_output` items; a result's media parts go in the item's `output` list
  (`input_text` / `input_image` / `input_file`).
History written on the chat-completions wire (`content` strings, `tool_calls`) is read too: an
assistant message with `tool_calls` is sent as its text and `function_call` items.

Body: `model`, [`instructions`], [`previous_response_id`], `input`, [`stream`: true], [`tools`,
`tool_choice`: `"auto"`]. Function tools are the toolkit's declarations flattened to the
Responses shape with `"strict": false` (the API's default is strict, which arbitrary schemas fail).
Nothing else is set: `store` keeps the API's default (stored), so reasoning items travel by id.

`store: false` (`request_params`): nothing is kept server-side, so items are replayed without the
server ids the API could not resolve (message and call items lose `id`; a reasoning item is sent
only with its `encrypted_content`, which needs `include: ["reasoning.encrypted_content"]` in
`request_params` — a reasoning item without it is left out and warned about once, since sending it
would fail the request). `Client(chain_responses=True)`: each request sends `previous_response_id`
(the last reply's id) and only the items after that reply; the server holds the rest (needs the
default `store`).

Translate on this wire: OpenAI-shaped messages become input items (`system`/`developer` messages
stay in the input; the `system` argument, else the client's `system_prompt`, is `instructions`
when the messages hold none), tools are flattened, `tool_choice` mapped, `max_tokens` is
`max_output_tokens`; an assistant message's `thinking_blocks` (reasoning items) go back in front
of it, and the reply's reasoning items come back as `thinking_blocks`.

Not here: reading replies and streams (`responses_reply.py`), retries, hooks, tool execution.
"""

from __future__ import annotations

from typing import Any, Optional

from ..._diag import warn_once
from ..._encoded import EncodedList
from ...content._parts import MEDIA_PART_TYPES, is_part_dict
from .._parts import PartPolicy
from .._result import declares_shared
from .base import ToolCall, TranslateReply, TranslateRequest, Turn, WireOptions, find_last_assistant, malformed
from .openai import OpenAIWire, args_string, canonical_part, content_text, has_system_message, message_calls
from .responses_reply import WIRE, ResponsesStream, failed_error, read_response, response_calls

_REASONING = "reasoning"


def flat_tools(tools: Any) -> list[dict[str, Any]]:
    """Chat-completions tool declarations in the Responses shape (`{"type": "function", "name", ...}`,
    `strict` false unless the declaration says); entries already flat pass unchanged."""
    out: list[dict[str, Any]] = []
    for t in tools if isinstance(tools, list) else []:
        if not isinstance(t, dict):
            continue
        fn = t.get("function")
        if not isinstance(fn, dict):
            if t.get("name") or t.get("type") not in (None, "function"):
                out.append(t)  # already a Responses tool (function or hosted)
            continue
        if not fn.get("name"):
            continue
        decl: dict[str, Any] = {"type": "function", "name": fn["name"]}
        if fn.get("description"):
            decl["description"] = fn["description"]
        params = fn.get("parameters")
        decl["parameters"] = params if isinstance(params, dict) else {"type": "object", "properties": {}}
        decl["strict"] = bool(fn.get("strict", False))
        out.append(decl)
    return out


def _input_block(block: dict[str, Any], role: Any) -> dict[str, Any]:
    """A chat-completions content block as a Responses content part."""
    kind = block.get("type")
    if kind == "text":
        return {"type": "output_text" if role == "assistant" else "input_text", "text": block.get("text") or ""}
    if kind == "image_url":
        ref = block.get("image_url")
        url = ref.get("url") if isinstance(ref, dict) else ref
        detail = ref.get("detail") if isinstance(ref, dict) and ref.get("detail") else "auto"
        return {"type": "input_image", "image_url": url, "detail": detail}
    if kind == "file" and isinstance(block.get("file"), dict):
        ref = block["file"]
        out = {"type": "input_file"}
        for key in ("filename", "file_data", "file_id"):
            if ref.get(key):
                out[key] = ref[key]
        return out
    return block


def _call_item(call: ToolCall) -> dict[str, Any]:
    return {"type": "function_call", "call_id": call.id, "name": call.name,
            "arguments": call.arguments if call.arguments is not None else args_string(call.args)}


class ResponsesWire(OpenAIWire):
    """The `style="responses"` dialect (the results side is the openai wire's `tool` messages)."""

    name = WIRE
    env_key = "OPENAI_API_KEY"
    halt_emits_placeholder_result = False
    result_id_key = "tool_call_id"

    def __init__(self, policy: Optional[PartPolicy] = None, options: Optional[WireOptions] = None) -> None:
        super().__init__(policy, options)
        self.stateless = self.options.store is False
        self.resends_transcript = not self.options.chain

    # -- request side ---------------------------------------------------------------------------

    def url(self, base_url: str) -> str:
        return base_url.rstrip("/") + "/responses"

    def start_transcript(self, history: list[dict[str, Any]], system: str, prompt: Any) -> list[dict[str, Any]]:
        return list(history) + [{"role": "user", "content": prompt}]

    def declare_tools(self, toolkit: Any, *, shared: bool = False) -> list[dict[str, Any]]:
        """The toolkit's function declarations in the Responses shape (encoded once per run when `shared`)."""
        if toolkit is None:
            return []
        chat = toolkit.declarations("openai") if shared and declares_shared(toolkit) else toolkit.to_openai()
        flat = flat_tools(chat)
        return EncodedList(flat) if shared else flat

    def encode_part(self, part: dict[str, Any], *, attached: bool) -> dict[str, Any]:
        # audio has no Responses input part: the policy refuses it (an error, or a placeholder)
        style = WIRE if part.get("type") == "audio" else "openai"
        return self.policy.encode(part, style, attached=attached)

    def build_body(self, model: str, messages: list[dict[str, Any]], tools: list[dict[str, Any]], system: str,
                   stream: bool, *, wired: bool = False) -> dict[str, Any]:
        body: dict[str, Any] = {"model": model}
        if system:
            body["instructions"] = system
        if self.options.chain and not wired:
            i = find_last_assistant(messages)
            rid = messages[i].get("response_id") if i >= 0 else None
            if isinstance(rid, str) and rid:
                body["previous_response_id"] = rid
                messages = messages[i + 1:]
        body["input"] = messages if wired else self.wire_messages(messages)
        if stream:
            body["stream"] = True
        if tools:
            body["tools"] = tools
            body["tool_choice"] = "auto"
        return body

    def wire_messages(self, messages: list[Any]) -> list[Any]:
        """The canonical transcript as input items (see module docstring)."""
        out: list[Any] = []
        for m in messages:
            role = m.get("role") if isinstance(m, dict) else None
            if role == "assistant":
                out += self._assistant_items(m)
            elif role == "tool":
                out.append(self._output_item(m))
            elif role is not None:
                content = m.get("content")
                if isinstance(content, list):
                    content = [_input_block(b, role) if isinstance(b, dict) else b
                               for b in self.map_content(content, role)]
                out.append({"role": role, "content": content})
            else:
                out.append(m)  # a raw Responses item a caller put in the history
        return out

    def _assistant_items(self, message: dict[str, Any]) -> list[Any]:
        content = message.get("content")
        if isinstance(content, list):
            return [self._replayed(item) for item in content if self._replayable(item)]
        items: list[Any] = [{"role": "assistant", "content": content}] if content else []
        return items + [_call_item(c) for c in message_calls(message)]

    def _replayable(self, item: Any) -> bool:
        if not isinstance(item, dict):
            return False
        if self.stateless and item.get("type") == _REASONING and not item.get("encrypted_content"):
            warn_once("responses:reasoning-without-content",
                      '[toolnexus] responses: a reasoning item has no encrypted_content while store is false, so it '
                      'cannot be sent back and is left out — add include=["reasoning.encrypted_content"] to '
                      "request_params to keep reasoning across turns")
            return False
        return True

    def _replayed(self, item: dict[str, Any]) -> dict[str, Any]:
        if self.stateless and item.get("type") != _REASONING and "id" in item:
            return {k: v for k, v in item.items() if k != "id"}  # nothing was stored to resolve the id against
        return item

    def _output_item(self, m: dict[str, Any]) -> dict[str, Any]:
        output: Any = m.get("content")
        parts = [p for p in m.get("parts") or [] if is_part_dict(p)]
        if parts:
            head = [{"type": "input_text", "text": output}] if isinstance(output, str) and output else []
            output = head + [_input_block(self.encode_part(p, attached=False), "tool") for p in parts]
        return {"type": "function_call_output", "call_id": m.get("tool_call_id"),
                "output": output if isinstance(output, (str, list)) else str(output or "")}

    # -- reply side -----------------------------------------------------------------------------

    def check_reply(self, data: Any) -> None:
        err = failed_error(data, in_stream=False) if isinstance(data, dict) else None
        if err is not None:
            raise err

    def parse_response(self, data: Any) -> Turn:
        return read_response(data)

    def assistant_calls(self, message: Any, strict: bool = False) -> list[ToolCall]:
        content = message.get("content") if isinstance(message, dict) else None
        if isinstance(content, list):
            return response_calls(content)
        return super().assistant_calls(message, strict)

    def new_stream(self) -> ResponsesStream:  # type: ignore[override]
        return ResponsesStream()

    def exhausted_text(self, messages: list[dict[str, Any]], run_start: int) -> str:
        return ""

    # -- translate --------------------------------------------------------------

    def translate_url(self, base_url: str) -> str:
        return self.url(base_url)

    def translate_request(self, messages: list[Any], tools: list[Any], toolkit: Any, system: Optional[str],
                          system_prompt: Optional[str]) -> TranslateRequest:
        items: list[Any] = []
        for m in messages if isinstance(messages, list) else []:
            if not isinstance(m, dict):
                continue
            role = m.get("role")
            if role in ("tool", "function"):
                items.append({"type": "function_call_output", "call_id": str(m.get("tool_call_id") or ""),
                              "output": content_text(m.get("content"))})
            elif role == "assistant":
                kept = m.get("thinking_blocks")
                items += [b for b in kept if isinstance(b, dict)] if isinstance(kept, list) else []
                text = content_text(m.get("content"))
                if text:
                    items.append({"role": "assistant", "content": text})
                items += [_call_item(c) for c in message_calls(m)]
            else:
                items.append({"role": role or "user", "content": self._translate_content(m.get("content"), role)})
        given = system if system is not None else system_prompt
        instructions = given if given and not has_system_message(messages) else ""
        return TranslateRequest(items, self.declare_tools(toolkit) + flat_tools(tools), instructions)

    def _translate_content(self, content: Any, role: Any) -> Any:
        if not isinstance(content, list):
            return content
        out = []
        for p in content:
            canonical = canonical_part(p) if isinstance(p, dict) and p.get("type") != "text" else None
            if canonical is not None and canonical.get("type") in MEDIA_PART_TYPES:
                p = self.encode_part(canonical, attached=True)
            out.append(_input_block(p, role) if isinstance(p, dict) else p)
        return out

    def translate_body(self, model: str, request: TranslateRequest, tool_choice: Any,
                       max_tokens: int) -> dict[str, Any]:
        body: dict[str, Any] = {"model": model}
        if request.system:
            body["instructions"] = request.system
        body["input"] = request.messages
        if request.tools:
            body["tools"] = request.tools
        if tool_choice is not None:
            fn = tool_choice.get("function") if isinstance(tool_choice, dict) else None
            body["tool_choice"] = {"type": "function", "name": fn.get("name")} if isinstance(fn, dict) else tool_choice
        if max_tokens > 0:
            body["max_output_tokens"] = max_tokens
        return body

    def translate_reply(self, data: dict[str, Any]) -> TranslateReply:
        turn = read_response(data) if isinstance(data.get("output"), list) else None
        if turn is None:
            raise malformed(WIRE, "missing `output` list", data)
        thinking = [i for i in turn.assistant_message["content"] if i.get("type") == _REASONING]
        return TranslateReply(turn.text, turn.tool_calls, turn.finish_reason, turn.usage,
                              provider_finish_reason=turn.provider_finish_reason, thinking_blocks=thinking or None)
