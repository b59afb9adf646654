"""Context compaction: a `before_llm` hook that summarizes the older part of a transcript.

`compactor(...)` returns an async `before_llm(ev)` hook. Under budget it returns None, so the
wire transcript is byte-identical to running without it. Over budget it keeps a leading system
prompt verbatim, replaces the older body by one summary system message, and keeps a recent tail
that always starts at a real user turn. Because a tail never starts at a tool result (an OpenAI
`role:"tool"` message or an Anthropic user message carrying `tool_result` blocks), no tool result
is ever separated from the assistant message that called it — in every dialect, with no branch
on the dialect (a Responses API assistant turn keeps its `function_call` items in its content).

`estimate_tokens` is a cheap estimator (JSON length / 4), not a tokenizer. Not here: choosing a
summarizer model, persisting summaries (the runtime rewinds a suspended turn to its snapshot and
the replay compacts again).

Choices of ours: a missing or non-list `ev["messages"]` counts as empty (no-op);
with the default estimator the tail scan sums per-message estimates instead of re-serializing
every suffix, which gives the same numbers.

Long tool loops: one user turn followed by many tool rounds has no user turn to split at, so the
rule above would keep the whole loop (and, with nothing older than that turn, never compact at
all — 0.21 programs that attach `compactor(...)` as the client's `before_llm` expect it to keep a
long run bounded). When no real user turn fits the tail budget, the cut may also fall between tool
rounds of the most recent turn: at the first assistant message carrying tool calls (other than
the turn's first one) whose suffix fits `keep_tail`, else at the last such message. That user
turn is kept verbatim, the summary follows it, and the tail starts at an assistant tool-call
message — so, again, no tool result is separated from its call. A turn with a single tool round
has no such cut point and is handled exactly as before.
"""

from __future__ import annotations

import inspect
import json
from typing import Any, Awaitable, Callable, Optional, Union

__all__ = ["compactor", "estimate_tokens"]

SUMMARY_PREFIX = "[Summary of earlier conversation]\n"
FLUSH_TEXT = (
    "Before continuing: if anything from earlier is worth keeping, save it with the memory tool now "
    "— the earlier transcript is about to be summarized."
)

Messages = list[dict[str, Any]]


def _message_tokens(message: Any) -> int:
    size = len(json.dumps(message, separators=(",", ":"), ensure_ascii=False))
    return -(-size // 4)


def estimate_tokens(messages: Messages) -> int:
    """Σ ceil(len(compact JSON of each message, code points, key order kept) / 4)."""
    return sum(_message_tokens(m) for m in messages)


def _is_boundary(message: Any) -> bool:
    """A real user turn: role user and not a carrier of `tool_result` blocks."""
    if not isinstance(message, dict) or message.get("role") != "user":
        return False
    content = message.get("content")
    if isinstance(content, list):
        return not any(isinstance(b, dict) and b.get("type") == "tool_result" for b in content)
    return True


def _suffix_counter(msgs: Messages, count: Optional[Callable[[Messages], int]]) -> Callable[[int], int]:
    """count(msgs[i:]) as a function of i; cheap for the default estimator."""
    if count is not None:
        return lambda i: count(msgs[i:])
    sums = [0] * (len(msgs) + 1)
    for i in range(len(msgs) - 1, -1, -1):
        sums[i] = sums[i + 1] + _message_tokens(msgs[i])
    return lambda i: sums[i]


def _find_split(msgs: Messages, head0: int, keep_tail: int, suffix: Callable[[int], int]) -> int:
    split = None
    for i in range(len(msgs) - 1, head0, -1):
        if suffix(i) > keep_tail:
            break
        if _is_boundary(msgs[i]):
            split = i
    if split is not None:
        return split
    boundaries = [i for i in range(head0, len(msgs)) if _is_boundary(msgs[i])]
    return boundaries[-1] if boundaries else len(msgs)


# Content blocks that call a tool: Anthropic `tool_use`, and the Responses API's `function_call` output
# items (an assistant turn on that wire keeps the reply's items verbatim as its content).
_CALL_BLOCKS = ("tool_use", "function_call")


def _calls_tools(message: Any) -> bool:
    """An assistant message that opens a tool round (`tool_calls`, `tool_use` or `function_call` items)."""
    if not isinstance(message, dict) or message.get("role") != "assistant":
        return False
    if message.get("tool_calls"):
        return True
    content = message.get("content")
    return isinstance(content, list) and any(isinstance(b, dict) and b.get("type") in _CALL_BLOCKS for b in content)


def _find_round_split(msgs: Messages, turn: int, keep_tail: int, suffix: Callable[[int], int]) -> Optional[int]:
    """A cut between the tool rounds after the user turn at `turn` (see the module docstring), or None."""
    rounds = [i for i in range(turn + 2, len(msgs)) if _calls_tools(msgs[i])]
    if not rounds:
        return None
    fitting = [i for i in rounds if suffix(i) <= keep_tail]
    return fitting[0] if fitting else rounds[-1]


def compactor(
    *,
    max_tokens: int,
    summarize: Callable[[Messages], Union[str, Awaitable[str]]],
    keep_tail: Optional[int] = None,
    count_tokens: Optional[Callable[[Messages], int]] = None,
    flush_to_memory: bool = False,
) -> Callable[[dict[str, Any]], Awaitable[Optional[dict[str, Any]]]]:
    """A `before_llm` hook that keeps the transcript under `max_tokens` by summarizing its head.

    `summarize(older)` (sync or async) gets the messages being dropped and returns the summary
    text. `keep_tail` (default `max_tokens // 2`) bounds the retained recent tail.
    `flush_to_memory` adds a system message asking the model to save durable facts first.
    """
    tail_budget = max_tokens // 2 if keep_tail is None else keep_tail
    count = count_tokens or estimate_tokens

    async def before_llm(ev: dict[str, Any]) -> Optional[dict[str, Any]]:
        msgs = ev.get("messages")
        if not isinstance(msgs, list) or count(msgs) <= max_tokens:
            return None
        head0 = 1 if msgs and isinstance(msgs[0], dict) and msgs[0].get("role") == "system" else 0
        suffix = _suffix_counter(msgs, count_tokens)
        split = _find_split(msgs, head0, tail_budget, suffix)
        kept_turn: Messages = []
        tail_start = split
        if split < len(msgs) and suffix(split) > tail_budget:  # no user turn fits: try between tool rounds
            cut = _find_round_split(msgs, split, tail_budget, suffix)
            if cut is not None:
                kept_turn, tail_start = [msgs[split]], cut
        older = msgs[head0:split] + msgs[split + 1 : tail_start] if kept_turn else msgs[head0:split]
        if not older:
            return None
        summary = summarize(older)
        if inspect.isawaitable(summary):
            summary = await summary
        flush = [{"role": "system", "content": FLUSH_TEXT}] if flush_to_memory else []
        return {
            "messages": [
                *msgs[:head0],
                *kept_turn,
                {"role": "system", "content": SUMMARY_PREFIX + str(summary)},
                *flush,
                *msgs[tail_start:],
            ]
        }

    return before_llm
