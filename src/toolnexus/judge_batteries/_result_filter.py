"""`ToolResultFilterClassifier`: drop the parts of a tool's output that do not help answer the query.

The output is split into chunks (the hook splits on blank lines), one noul per chunk; a chunk is
dropped only on a clear "no". As an `after_tool` hook it rewrites a successful, part-less result
of two or more chunks to the kept chunks joined by a blank line; `next` sees the filtered event
and its `result`, if any, wins.
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass, field
from typing import Any, Optional, Sequence

from ..judge import Bands, noul, read, state
from ..types import ToolResult
from ._common import DEFAULT_MAX_ITEMS, ROLE_TOOL_RESULT_FILTER, Hook, check_on_error, maybe_await

_TRUE = "this part helps answer the query"
_FALSE = "this part does not help answer the query"


@dataclass
class FilterVerdict:
    """Chunk indexes kept and dropped, in order."""

    kept: list[int] = field(default_factory=list)
    dropped: list[int] = field(default_factory=list)
    calibrated: bool = True
    error: Optional[str] = None


class ToolResultFilterClassifier:
    """Filter tool output by relevance (see the module docstring)."""

    def __init__(self, classifier: Any, *, on_error: Optional[str] = None, bands: Optional[Bands] = None,
                 role: str = "", max_chunks: int = DEFAULT_MAX_ITEMS) -> None:
        self.classifier = classifier
        self.on_error = check_on_error("ToolResultFilter", on_error)
        self.bands = bands
        self.role = role or ROLE_TOOL_RESULT_FILTER
        self.max_chunks = max_chunks

    async def filter(self, query: Any, chunks: Sequence[str]) -> FilterVerdict:
        """Which `chunks` are relevant to `query`."""
        items = ["" if c is None else c for c in chunks]
        every = list(range(len(items)))
        if not items or len(items) > self.max_chunks:  # nothing to ask, or too many: leave untouched
            return FilterVerdict(kept=every)
        qs = dict(noul(str(i), f"Is `chunks.{i}` relevant to `query`?", _TRUE, _FALSE) for i in every)
        try:
            decision = await self.classifier.evaluate(
                state(self.role, {"query": "" if query is None else query,
                                  "chunks": {str(i): c for i, c in enumerate(items)}}), qs)
            answers = read(decision, self.bands)
        except Exception as e:
            if self.on_error == "open":
                return FilterVerdict(kept=every, calibrated=False, error=str(e))
            return FilterVerdict(dropped=every, calibrated=False, error=str(e))
        dropped = [i for i in every if str(i) in answers and answers[str(i)].band == "no"]
        return FilterVerdict([i for i in every if i not in dropped], dropped, decision.calibrated)

    def as_hook(self, next: Optional[Hook] = None) -> Hook:
        """An `after_tool` hook (see the module docstring)."""

        async def after_tool(ev: dict) -> Optional[dict]:
            result = ev.get("result")
            ours: Optional[dict] = None
            if isinstance(result, ToolResult) and not result.is_error and not result.parts:
                chunks = str(result.output).split("\n\n")
                if len(chunks) >= 2:
                    verdict = await self.filter({"tool": ev.get("name"), "arguments": ev.get("args") or {}}, chunks)
                    if verdict.dropped:
                        kept = "\n\n".join(chunks[i] for i in verdict.kept)
                        ours = {"result": dataclasses.replace(result, output=kept)}
            if next is None:
                return ours
            theirs = await maybe_await(next({**ev, **ours} if ours else ev))
            if theirs and theirs.get("result") is not None:
                return theirs
            return ours

        return after_tool
