"""Sticky decisions: "approve (or reject) this tool always, for the rest of this run".

An answer with `always=True` to an approval request is remembered in the run's `ApprovalMemory`,
keyed by the tool's name; later approval requests of that tool in the same run are answered from
it at once (`answer_for`), without asking anyone. A sticky reject tells the model the same
`declined/expired: <prompt>` text, with the remembered message. A call under a two-person rule is
never answered from memory (and `always` is refused for it).

Where a run keeps its memory: an agent run stores it with the run (the root handle's record, so a
restored run keeps it); a client conversation (`ask(..., id=)`) in the client, per conversation
id; a plain `run()` for that run only. `ApprovalScope` is what a client is handed for one agent's
turns: the run's memory and the agent's path (stamped into each approval request).

Plain data with a change callback; no I/O.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from datetime import datetime
from typing import Any, Callable, Optional

from ..types import Answer, Request
from ._requests import approval_of, iso


class ApprovalMemory:
    """One run's sticky approval decisions, by tool name (see the module docstring)."""

    def __init__(self, decisions: Optional[dict[str, dict[str, Any]]] = None,
                 on_change: Optional[Callable[[], None]] = None) -> None:
        self.decisions: dict[str, dict[str, Any]] = dict(decisions or {})
        self.on_change = on_change

    def __repr__(self) -> str:
        return f"ApprovalMemory({ {k: v.get('ok') for k, v in self.decisions.items()} !r})"

    def __bool__(self) -> bool:
        return True

    def remember(self, request: Optional[Request], answer: Optional[Answer], now: datetime) -> bool:
        """Keep `answer` when it says `always` and answers an approval request; True if it changed."""
        a = approval_of(request)
        if a is None or answer is None or not answer.always or not isinstance(a.get("tool"), str):
            return False
        entry = {"ok": answer.ok, "by": answer.by, "message": answer.message, "at": iso(now)}
        if self.decisions.get(a["tool"]) == entry:
            return False
        self.decisions[a["tool"]] = entry
        if self.on_change is not None:
            self.on_change()
        return True

    def answer_for(self, request: Optional[Request]) -> Optional[Answer]:
        """The remembered answer to `request` (an approval of a tool decided `always`), or None."""
        a = approval_of(request)
        if a is None or int(a.get("required") or 1) > 1:
            return None
        entry = self.decisions.get(str(a.get("tool")))
        if entry is None:
            return None
        assert request is not None
        ok = bool(entry.get("ok"))
        return Answer(id=request.id, ok=ok, reason=None if ok else "declined", message=entry.get("message"),
                      by=entry.get("by"), via="always")

    def to_record(self) -> dict[str, Any]:
        return {"decisions": {k: dict(v) for k, v in self.decisions.items()}}

    @classmethod
    def from_record(cls, rec: Any) -> "ApprovalMemory":
        decisions = rec.get("decisions") if isinstance(rec, dict) else None
        return cls({k: dict(v) for k, v in (decisions or {}).items() if isinstance(v, dict)})


@dataclass
class ApprovalScope:
    """What a client knows about approvals for the runs it makes: the memory, the agent path."""

    memory: ApprovalMemory = field(default_factory=ApprovalMemory)
    agent_path: Optional[list[str]] = None
