"""`PreparedTranscript`: the transcript in wire form and as JSON, converted once per message.

A run's transcript only grows between turns: the loop appends the assistant turn and the tool
results. Converting and encoding all of it again for every request makes turn `n` cost O(n) and
the run O(n²). This cache converts each message once and keeps, per message, its wire form, its
JSON (for `body.EncodedList`; one chunk per batch of new messages) and its media-part summary
(for the llm metric), so a turn costs what its new messages cost plus one pointer comparison per
old message.

What is cached is a *closed prefix*: messages up to the last one that is not a tool result. A
dialect may fold a run of tool results into a message that follows them (OpenAI's synthetic
tool-output message), so a prefix ending before such a run converts exactly as the whole
transcript would there. The open tail — the last assistant turn and its results — is converted
again each turn; it is small.

The cache trusts that a message it has seen was not edited in place: a new object at a position
is noticed (the cache starts over unless it is equal to the old one), an edited one is not. The loop therefore uses it
only when no `before_llm` hook and no `body_transform` could touch the transcript (`RunLoop`).
"""

from __future__ import annotations

from typing import Any

from .._encoded import EncodedList, inner
from ._parts import media_parts_summary


def _is_result(message: Any) -> bool:
    return isinstance(message, dict) and message.get("role") == "tool"


class PreparedTranscript:
    """Incremental `dialect.wire_messages` + JSON fragments + media summaries for one run."""

    def __init__(self, dialect: Any) -> None:
        self._dialect = dialect
        self._seen: list[Any] = []  # the closed prefix's canonical messages (by identity)
        self._wire: list[Any] = []  # their wire messages
        self._json: list[bytes] = []  # the wire messages' JSON, one chunk per batch converted
        self._media: list[dict[str, Any]] = []  # the prefix's media-part summaries

    def _check_prefix(self, messages: list[Any]) -> None:
        """Start over unless `messages` still begins with the cached prefix. List equality checks
        identity first, element by element in C; a replaced message equal to the old one converts
        the same, so it may stay."""
        seen = self._seen
        if seen and messages[: len(seen)] != seen:  # rare (a rewritten transcript)
            self._seen, self._wire, self._json, self._media = [], [], [], []

    def prepare(self, messages: list[Any]) -> tuple[EncodedList, list[dict[str, Any]]]:
        """`messages` as wire messages that carry their JSON, and the transcript's media summary."""
        self._check_prefix(messages)
        start = len(self._seen)
        closed = len(messages)
        while closed > start and _is_result(messages[closed - 1]):
            closed -= 1
        if closed > start and closed < len(messages):
            closed -= 1  # keep the assistant turn that opened the trailing results in the tail
        if closed > start:
            grown = messages[start:closed]
            wire = self._dialect.wire_messages(grown)
            self._seen += grown
            self._wire += wire
            self._json.append(inner(wire))
            self._media += media_parts_summary(grown)
        tail = messages[closed:]
        tail_wire = self._dialect.wire_messages(tail) if tail else []
        wire_all = EncodedList(
            self._wire + tail_wire, [*self._json, inner(tail_wire)] if tail_wire else list(self._json)
        )
        return wire_all, (self._media + media_parts_summary(tail) if tail else list(self._media))
