"""`RunSpec`: what a host asks a workflow to run — the entry agent, its prompt and the runtime
options a run may choose — as plain JSON, checked on both sides of the wire.

The definitions themselves are not in it: code never travels, the worker has it. `resume_mode`
defaults to `"continue"`, as with a durable store (a resumed call is filled from the answer; the
model is not asked to repeat it); pass `"replay"` for the founding page's behaviour.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass, fields
from typing import Any, Optional

from ..agents._budget import Budget
from ..agents._defs import RESUME_CONTINUE, check_resume_mode
from ..errors import ToolnexusTypeError, ToolnexusValueError

_BUDGET_FIELDS = tuple(f.name for f in fields(Budget))


@dataclass(frozen=True)
class RunSpec:
    """One run's input (see the module docstring)."""

    agent: str
    prompt: str
    budget: Optional[dict[str, Any]] = None
    resume_mode: str = RESUME_CONTINUE
    max_concurrent_turns: int = 8
    inbox_cap: int = 8

    def __post_init__(self) -> None:
        if not isinstance(self.agent, str) or not self.agent:
            raise ToolnexusValueError(
                f"toolnexus.temporal: the agent to run must be a non-empty name, got {self.agent!r}"
            )
        if not isinstance(self.prompt, str):
            raise ToolnexusTypeError(f"toolnexus.temporal: the prompt must be a str, got {type(self.prompt).__name__}")
        check_resume_mode(self.resume_mode, "run")
        if self.resume_mode is None:
            raise ToolnexusValueError("toolnexus.temporal: resume_mode must be 'replay' or 'continue'")
        for name in ("max_concurrent_turns", "inbox_cap"):
            value = getattr(self, name)
            if (
                not isinstance(value, int)
                or isinstance(value, bool)
                or value < (1 if name == "max_concurrent_turns" else 0)
            ):
                raise ToolnexusValueError(f"toolnexus.temporal: {name} must be a non-negative integer, got {value!r}")
        if self.budget is not None:
            if not isinstance(self.budget, dict):
                raise ToolnexusTypeError(
                    f"toolnexus.temporal: budget must be a Budget or a dict, got {type(self.budget).__name__}"
                )
            unknown = sorted(k for k in self.budget if k not in _BUDGET_FIELDS)
            if unknown:
                raise ToolnexusValueError(f"toolnexus.temporal: unknown budget field(s) {', '.join(unknown)} "
                                 f"(known: {', '.join(_BUDGET_FIELDS)})")

    @classmethod
    def of(cls, agent: str, prompt: str, *, budget: Any = None, resume_mode: Optional[str] = None,
           max_concurrent_turns: int = 8, inbox_cap: int = 8) -> "RunSpec":
        if isinstance(budget, Budget):
            budget = {k: v for k, v in asdict(budget).items() if v is not None}
        return cls(agent, prompt, budget, resume_mode or RESUME_CONTINUE, max_concurrent_turns, inbox_cap)

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)

    @classmethod
    def from_dict(cls, data: Any) -> "RunSpec":
        if not isinstance(data, dict):
            raise ToolnexusTypeError(f"toolnexus.temporal: a run's input is a JSON object, got {type(data).__name__}")
        known = {f.name for f in fields(cls)}
        return cls(**{k: v for k, v in data.items() if k in known})

    def budget_obj(self) -> Optional[Budget]:
        return Budget(**self.budget) if self.budget else None
