"""The neutral turn every wire dialect produces, and the dialect interface the loop programs against.

The loop never looks at a provider's JSON: a dialect turns the canonical transcript into a request
body and a provider reply (whole or streamed) into a `Turn`, reads and rewrites the results after a
tool-call turn (durable resume), and does the same for `translate` (OpenAI-shaped request in,
`TranslateReply` out). Everything style-specific lives in `wire/openai.py`, `wire/anthropic.py` and
`wire/responses.py`; this module holds only the shared shapes and helpers.

Every `Turn` says how the reply ended in the neutral finish vocabulary (`client/_result.py`) and
keeps the provider's own value beside it; the loop decides from that alone (a `STOPPED` finish
ends the run `incomplete` and its calls are never run; `pause` sends the turn back). A provider
error delivered inside a 2xx reply (a stream's error event, an error chunk, an error body) is
raised by the dialect as `ProviderError` (`provider_error`), so it goes through the retry policy
of the same status on a plain reply.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from typing import Any, Callable, Optional, Protocol

from ...content._parts import MEDIA_PART_TYPES, is_part_dict
from ...types import ToolResult
from .._errors import ProviderError, ProviderResponseError
from .._parts import PartPolicy, tool_result_parts
from .._result import (
    FINISH_CONTENT_FILTER,
    FINISH_LENGTH,
    FINISH_PAUSE,
    FINISH_REFUSAL,
    FINISH_STOP,
    FINISH_TOOL_CALLS,
    LIMIT_CONTENT_FILTER,
    LIMIT_MAX_OUTPUT_TOKENS,
    LIMIT_REFUSAL,
    USAGE_DETAILS,
    Toolset,
    declares_shared,
    zero_usage as zero_usage,
)
from .._sse import SseEvent

STOPPED = {FINISH_LENGTH: LIMIT_MAX_OUTPUT_TOKENS, FINISH_REFUSAL: LIMIT_REFUSAL,
           FINISH_CONTENT_FILTER: LIMIT_CONTENT_FILTER}
"""The finishes that are not an answer, each with the `limit` an incomplete run names."""


@dataclass
class ToolCall:
    """One tool call the model asked for. `arguments` is the raw wire string when there was one.

    `args_error` says why the model's arguments could not be read (invalid or truncated JSON, not
    an object); such a call is never executed — the model gets that reason as the call's error
    result instead (`arguments_error_text`).
    """

    id: str
    name: str
    args: dict[str, Any]
    arguments: Optional[str] = None
    args_error: Optional[str] = None


@dataclass
class Turn:
    """One assistant reply, wire-neutral. No `tool_calls` ⇒ the run's final answer.

    `finish_reason` is neutral (`client/_result.py`); `provider_finish_reason` is the provider's
    own value (None when it sent none). A refusal's text is `text`.
    """

    text: str
    tool_calls: list[ToolCall]
    usage: dict[str, int]
    assistant_message: dict[str, Any]
    raw: Any = None
    finish_reason: str = FINISH_STOP
    provider_finish_reason: Optional[str] = None


@dataclass(frozen=True)
class WireOptions:
    """Client settings a dialect needs beyond its part policy (read once per run).

    `store`: the `store` request parameter, when set (the Responses API keeps nothing server-side
    with `store: false`, so its items are replayed without server ids). `chain`: the Responses API
    sends `previous_response_id` and only the items after the last reply (`Client.chain_responses`).
    """

    store: Optional[bool] = None
    chain: bool = False


@dataclass
class ResultEntry:
    """A tool result ready to be written into the transcript."""

    call: ToolCall
    output: str
    is_error: bool
    parts: Optional[list[dict[str, Any]]] = None

    @classmethod
    def of(cls, call: ToolCall, result: ToolResult) -> "ResultEntry":
        """The entry for a tool's result; its parts are normalised (and invalid ones replaced) here."""
        return cls(call, result.output, bool(result.is_error), tool_result_parts(result.parts, call.name))


@dataclass
class TranslateRequest:
    """The wire-shaped pieces of a translate request, before `before_llm` may replace them."""

    messages: list[Any]
    tools: list[Any]
    system: str  # top-level system text (wires that carry it in `messages` leave it "")


@dataclass
class TranslateReply:
    """A translate reply read back: each call's `arguments` is the JSON string the caller echoes."""

    text: str
    calls: list[ToolCall]
    finish_reason: str
    usage: dict[str, int]
    provider_finish_reason: Optional[str] = None
    thinking_blocks: Optional[list[dict[str, Any]]] = None


class StreamAccumulator(Protocol):
    """Assembles one streamed turn from SSE events. `finished`: nothing more is to be read;
    `complete`: the stream carried its end marker (`end_marker` says which, for the error)."""

    finished: bool
    complete: bool
    end_marker: str

    def feed(self, event: SseEvent) -> list[str]:
        """Consume one event; return the text deltas it carried."""

    def turn(self) -> Turn:
        """The assembled turn (after the stream ended)."""


class WireDialect(Protocol):
    """What the loop needs from a provider wire. Three implementations: openai, anthropic, responses."""

    name: str
    env_key: str  # the style's own API-key variable
    halt_emits_placeholder_result: bool
    result_id_key: str  # the key naming the answered call in one result item
    resends_transcript: bool  # False: a request carries only what the server has not kept

    def url(self, base_url: str) -> str: ...
    def headers(self, api_key: str, extra: dict[str, str]) -> dict[str, str]: ...
    def start_transcript(self, history: list[dict[str, Any]], system: str, prompt: Any) -> list[dict[str, Any]]: ...
    def declare_tools(self, toolkit: Any, *, shared: bool = False) -> list[dict[str, Any]]:
        """The toolkit's declarations: copies to edit, or (`shared`) the toolkit's read-only ones."""
        ...
    def wire_messages(self, messages: list[Any]) -> list[Any]: ...
    def build_body(self, model: str, messages: list[dict[str, Any]], tools: list[dict[str, Any]], system: str,
                   stream: bool, *, wired: bool = False) -> dict[str, Any]:
        """The request body; `wired=True` when `messages` are in wire form already."""
        ...
    def parse_response(self, data: Any) -> Turn: ...
    def check_reply(self, data: Any) -> None:
        """Raise `ProviderError` when a 2xx reply body carries the provider's error instead of a reply."""
        ...
    def new_stream(self) -> StreamAccumulator: ...
    def result_messages(self, entries: list[ResultEntry]) -> list[dict[str, Any]]: ...
    def split_results(self, after: list[Any]) -> tuple[list[dict[str, Any]], list[Any]]: ...
    def rewrite_results(self, messages: list[dict[str, Any]], index: int, kept: list[dict[str, Any]],
                        entries: list[ResultEntry]) -> list[dict[str, Any]]: ...
    def exhausted_text(self, messages: list[dict[str, Any]], run_start: int) -> str: ...
    def assistant_calls(self, message: Any) -> list[ToolCall]: ...
    def balance(self, messages: list[dict[str, Any]], text_for: Callable[[ToolCall], str]) -> list[dict[str, Any]]: ...
    # translate: one call, OpenAI-shaped input
    def translate_url(self, base_url: str) -> str: ...
    def translate_headers(self, api_key: str, extra: dict[str, str]) -> dict[str, str]: ...
    def translate_request(self, messages: list[Any], tools: list[Any], toolkit: Any, system: Optional[str],
                          system_prompt: Optional[str]) -> TranslateRequest: ...
    def translate_body(self, model: str, request: TranslateRequest, tool_choice: Any,
                       max_tokens: int) -> dict[str, Any]: ...
    def translate_reply(self, data: dict[str, Any]) -> TranslateReply: ...


def add_usage(total: dict[str, int], turn: dict[str, int]) -> None:
    """Sum one turn's usage into the run's (a detail key appears once some turn reported it)."""
    for key in ("prompt_tokens", "completion_tokens", "total_tokens"):
        total[key] = total.get(key, 0) + int(turn.get(key, 0) or 0)
    if len(turn) > 3:
        for key in USAGE_DETAILS:
            if turn.get(key):
                total[key] = total.get(key, 0) + int(turn[key])


def _int(value: Any) -> int:
    return value if isinstance(value, int) and not isinstance(value, bool) else 0


def usage_of(prompt: Any, completion: Any, total: Any = None, *, cached: Any = 0, cache_creation: Any = 0,
             reasoning: Any = 0) -> dict[str, int]:
    """The neutral usage dict; details only when non-zero (`client/_result.py`)."""
    p, c = _int(prompt), _int(completion)
    t = _int(total) or p + c
    usage = {"prompt_tokens": p, "completion_tokens": c, "total_tokens": t}
    for key, value in (("cached_tokens", cached), ("cache_creation_tokens", cache_creation),
                       ("reasoning_tokens", reasoning)):
        if _int(value) > 0:
            usage[key] = value
    return usage


def finish_of(native: Any, table: dict[str, str], has_calls: bool) -> str:
    """A provider's finish value in the neutral vocabulary: `table` maps the known ones; a missing
    or unknown value reads as `tool_calls` when the reply holds calls, else `stop`."""
    neutral = table.get(native) if isinstance(native, str) else None
    if neutral is None or (neutral == FINISH_STOP and has_calls):
        return FINISH_TOOL_CALLS if has_calls else FINISH_STOP
    return neutral


def unfinished_call_text(call: "ToolCall", finish: str, native: Optional[str]) -> str:
    """The result a call of a reply that did not finish gets in the transcript: it was never run."""
    why = {FINISH_LENGTH: "the reply was cut off at the output limit before the call was complete",
           FINISH_REFUSAL: "the model refused",
           FINISH_CONTENT_FILTER: "the provider's content filter stopped the reply",
           FINISH_PAUSE: "the provider paused the turn"}.get(finish, f"the reply ended with {finish}")
    said = f" ({native})" if native and native != finish else ""
    return f'toolnexus: tool "{call.name}" was not run: {why}{said}.'


# Statuses a provider's error type stands for when it arrives without one (inside a 2xx reply).
_ERROR_STATUS = {
    "invalid_request_error": 400, "authentication_error": 401, "billing_error": 402, "permission_error": 403,
    "not_found_error": 404, "request_too_large": 413, "rate_limit_error": 429, "rate_limit_exceeded": 429,
    "insufficient_quota": 429, "api_error": 500, "server_error": 500, "timeout_error": 504, "overloaded_error": 529,
}


def status_for(error_type: Any, code: Any = None) -> int:
    """The HTTP status an in-reply error stands for: a numeric `code` in 400–599 itself, else the
    status the provider's error type names, else 500 (a server-side failure mid-reply)."""
    for value in (code, error_type):
        if isinstance(value, int) and not isinstance(value, bool) and 400 <= value <= 599:
            return value
        if isinstance(value, str) and value.isdigit() and 400 <= int(value) <= 599:
            return int(value)
    for value in (error_type, code):
        if isinstance(value, str) and value in _ERROR_STATUS:
            return _ERROR_STATUS[value]
    return 500


def provider_error(wire: str, payload: Any, error: Any, *, in_stream: bool) -> ProviderError:
    """`ProviderError` for an error the provider sent inside a 2xx reply: `error` is its error
    object (`type`/`code`, `message`), `payload` what carried it (kept, redacted, as the body)."""
    err = error if isinstance(error, dict) else {}
    kind = err.get("type") if isinstance(err.get("type"), str) and err.get("type") != "error" else None
    code = err.get("code")
    name = kind or (code if isinstance(code, str) else None) or (str(code) if code is not None else None)
    message = err.get("message") if isinstance(err.get("message"), str) else None
    if message is None and isinstance(error, str):
        message = error
    status = status_for(kind or code, code)
    return ProviderError(status, json.dumps(payload, ensure_ascii=False)[:4096], error_type=name,
                         error_message=message or "", inside="stream" if in_stream else "reply", wire=wire)


def parse_arguments(raw: Any) -> dict[str, Any]:
    """Tool-call arguments as a dict: a dict is kept; a JSON-object string parsed; anything else `{}`.

    The lenient reader (translation, declarations). The loop uses `read_arguments`, which also
    says what was wrong so that a call with broken arguments is refused instead of run with `{}`.
    """
    return read_arguments(raw)[0]


def _json_type(value: Any) -> str:
    if isinstance(value, bool):
        return "a boolean"
    if value is None:
        return "null"
    return {list: "an array", str: "a string", int: "a number", float: "a number"}.get(
        type(value), type(value).__name__
    )


def read_arguments(raw: Any, *, missing_ok: bool = True) -> tuple[dict[str, Any], Optional[str]]:
    """`(args, problem)` for a call's wire arguments; `problem` is None when they are usable.

    A dict is kept. A string must hold one JSON object (`""`/whitespace reads as `{}`); invalid or
    truncated JSON and any other JSON value give `({}, <what is wrong>)`. `None` (no arguments at
    all) is `{}` unless `missing_ok=False`; any other type is a problem.
    """
    if isinstance(raw, dict):
        return raw, None
    if raw is None:
        return {}, (None if missing_ok else "no arguments were sent")
    if not isinstance(raw, str):
        return {}, f"the arguments are {_json_type(raw)}, not a JSON object"
    if not raw.strip():
        return {}, None
    try:
        value = json.loads(raw)
    except json.JSONDecodeError as exc:
        truncated = exc.pos >= len(raw.rstrip()) or exc.msg.startswith("Unterminated")
        where = "the JSON ends early (truncated?)" if truncated else f"at character {exc.pos}"
        return {}, f"the arguments are not valid JSON: {exc.msg}, {where}"
    except ValueError as exc:  # e.g. a lone surrogate the decoder refuses
        return {}, f"the arguments are not valid JSON: {exc}"
    except RecursionError:
        return {}, "the arguments are nested too deeply to read"
    if not isinstance(value, dict):
        return {}, f"the arguments are {_json_type(value)}, not a JSON object"
    return value, None


def arguments_error_text(call: "ToolCall") -> str:
    """The error result the model gets for a call whose arguments could not be read."""
    shown = call.arguments if isinstance(call.arguments, str) else ""
    tail = f" Received {len(shown)} characters: {shown[:200]!r}{'…' if len(shown) > 200 else ''}." if shown else ""
    return (f'toolnexus: tool "{call.name}" was not run: {call.args_error}. Call it again with the '
            f"complete arguments as one JSON object.{tail}")


def malformed(wire: str, what: str, data: Any) -> ProviderResponseError:
    """A clear error for a 2xx reply that is not the expected shape."""
    if isinstance(data, dict):
        got = f"keys {sorted(map(str, data))!r}"
        if "error" in data:
            got += f", error {json.dumps(data['error'])[:200]}"
    else:
        got = type(data).__name__
    return ProviderResponseError(f"toolnexus: malformed {wire} response: {what} (got {got})")


def find_last_assistant(messages: list[dict[str, Any]]) -> int:
    """Index of the last assistant message, or -1."""
    for i in range(len(messages) - 1, -1, -1):
        m = messages[i]
        if isinstance(m, dict) and m.get("role") == "assistant":
            return i
    return -1




class DialectBase:
    """What both dialects share: the part policy, part mapping skeleton, trailing-turn lookup."""

    name = ""
    env_key = ""
    halt_emits_placeholder_result = False
    resends_transcript = True  # each request carries the whole transcript (so the loop may keep it encoded)

    def __init__(self, policy: Optional[PartPolicy] = None, options: Optional[WireOptions] = None) -> None:
        self.policy = policy or PartPolicy()
        self.options = options or WireOptions()

    def declare_tools(self, toolkit: Optional[Toolset], *, shared: bool = False) -> list[dict[str, Any]]:
        """The toolkit's declarations in this wire's shape: copies to edit (`to_openai()` /
        `to_anthropic()`), or (`shared`) the toolkit's own read-only list, encoded once per change."""
        if toolkit is None:
            return []
        if shared and declares_shared(toolkit):
            return toolkit.declarations(self.name)
        return toolkit.to_anthropic() if self.name == "anthropic" else toolkit.to_openai()

    def encode_part(self, part: dict[str, Any], *, attached: bool) -> dict[str, Any]:
        """One canonical part as this wire's block, under the client's part policy."""
        return self.policy.encode(part, self.name, attached=attached)

    def map_content(self, content: list[Any], role: Any) -> list[Any]:
        """A list `content` for the wire: `tool_result` blocks with `parts` get
        `[{"type":"text","text": content}, *blocks]` (their `parts` key dropped); other non-text
        part dicts are encoded — attached when the message is the user's, else tool-derived;
        everything else passes through."""
        out: list[Any] = []
        for block in content:
            if isinstance(block, dict) and block.get("type") == "tool_result" and "parts" in block:
                mapped = {k: v for k, v in block.items() if k != "parts"}
                if block["parts"]:
                    inner = block.get("content")
                    head = inner if isinstance(inner, list) else [{"type": "text", "text": inner}]
                    mapped["content"] = [*head, *(self.encode_part(p, attached=False)
                                                  for p in block["parts"] if is_part_dict(p))]
                out.append(mapped)
            elif is_part_dict(block) and block.get("type") in MEDIA_PART_TYPES:
                out.append(self.encode_part(block, attached=role == "user"))
            else:
                out.append(block)
        return out

    def assistant_calls(self, message: Any) -> list[ToolCall]:
        raise NotImplementedError

    def trailing_calls(self, messages: list[dict[str, Any]]) -> tuple[int, list[ToolCall]]:
        """Index and tool calls of the last assistant message (`-1, []` without one)."""
        i = find_last_assistant(messages)
        return i, (self.assistant_calls(messages[i]) if i >= 0 else [])
