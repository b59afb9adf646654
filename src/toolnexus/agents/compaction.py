"""Context compaction (§7F): a `before_llm` hook that summarizes the older part of a transcript.

`compactor(...)` returns an async `before_llm(ev)` hook. Under budget it returns None, so the
wire transcript is byte-identical to running without it. Over budget it keeps a leading system
prompt verbatim, replaces the older body by one summary system message, and keeps a recent tail
that always starts at a real user turn. Because a tail never starts at a tool result (an OpenAI
`role:"tool"` message or an Anthropic user message carrying `tool_result` blocks), no tool result
is ever separated from the assistant message that called it — in either dialect, with no branch
on the dialect.

`estimate_tokens` is a cheap estimator (JSON length / 4), not a tokenizer. Not here: choosing a
summarizer model, persisting summaries (the runtime rewinds a suspended turn to its snapshot and
the replay compacts again).

Choices where the spec is silent: a missing or non-list `ev["messages"]` counts as empty (no-op);
with the default estimator the tail scan sums per-message estimates instead of re-serializing
every suffix, which gives the same numbers.
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
        split = _find_split(msgs, head0, tail_budget, _suffix_counter(msgs, count_tokens))
        older = msgs[head0:split]
        if not older:
            return None
        summary = summarize(older)
        if inspect.isawaitable(summary):
            summary = await summary
        flush = [{"role": "system", "content": FLUSH_TEXT}] if flush_to_memory else []
        return {
            "messages": [
                *msgs[:head0],
                {"role": "system", "content": SUMMARY_PREFIX + str(summary)},
                *flush,
                *msgs[split:],
            ]
        }

    return before_llm
