"""What a durably parked handle holds, as one plain record: its `Suspension`.

A handle parks when a tool (or a `before_tool` hook, or a child it delegated to) asked a
question no `wait_for` in its chain could answer. Everything needed to carry on later — in this
process or another — is here, and nothing else:

- `request`: the handle's own `Request` (its copy in results carries the stamped path);
- `input`: the exact input of the parked turn (a replay sends it again);
- `mode`: `"replay"` (the transcript was rewound; the resumed turn asks the model again and the
  answer binds to the halted call when it comes back) or `"continue"` (the halted transcript was
  kept; the resumed turn fills the halted call from the answer and goes on);
- `origin`: `"tool"` when a tool (or a child, through `task`) minted the request, `"hook"` when
  a `before_tool` hook short-circuited with it;
- `call`: the halted call — its provider `tool_call_id`, tool name and arguments, and (continue
  mode) the placeholder text standing in its slot.

Waiting *inline* (a `wait_for` is answering while the turn stays live) is not a `Suspension`:
that handle is `suspended` in the state machine but holds no record and parks nothing.

This module is data and (de)serialisation only.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass
from typing import Any, Optional

from ..types import Request

ORIGIN_TOOL = "tool"
ORIGIN_HOOK = "hook"


@dataclass
class HaltedCall:
    """The call a parked turn stopped at."""

    tool_call_id: Optional[str]
    name: Optional[str]
    args: Any
    placeholder: Optional[str] = None

    def to_record(self) -> dict[str, Any]:
        return asdict(self)

    @classmethod
    def from_record(cls, rec: Any) -> Optional["HaltedCall"]:
        if not isinstance(rec, dict):
            return None
        return cls(rec.get("tool_call_id"), rec.get("name"), rec.get("args"), rec.get("placeholder"))


@dataclass
class Suspension:
    """A durably parked handle's one record (see the module docstring)."""

    request: Request
    input: str
    mode: str
    origin: str = ORIGIN_TOOL
    call: Optional[HaltedCall] = None

    def to_record(self) -> dict[str, Any]:
        return {"request": asdict(self.request), "input": self.input, "mode": self.mode, "origin": self.origin,
                "call": self.call.to_record() if self.call is not None else None}

    @classmethod
    def from_record(cls, rec: Any) -> Optional["Suspension"]:
        if not isinstance(rec, dict) or not isinstance(rec.get("request"), dict):
            return None
        return cls(Request.from_dict(rec["request"]), str(rec.get("input") or ""), str(rec.get("mode") or "replay"),
                   str(rec.get("origin") or ORIGIN_TOOL), HaltedCall.from_record(rec.get("call")))
