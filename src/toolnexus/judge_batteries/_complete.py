"""`IsCompleteClassifier`: does an agent's final answer complete the task it was given?

One noul; complete only on a clear "yes". On a classifier error the verdict follows `on_error`
("open": treat as complete, "closed": treat as not complete).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Optional

from ..judge import Bands, noul, read, state
from ._common import ROLE_IS_COMPLETE, check_on_error

_INSTRUCTIONS = "Does `answer` fully complete the request in `task`?"
_TRUE = "every part of the task is done and nothing asked for is missing"
_FALSE = "part of the task is missing, wrong or only promised"


@dataclass
class CompleteVerdict:
    """`complete`, the probability `p` and its `band`."""

    complete: bool = False
    p: Optional[float] = None
    band: str = "uncertain"
    calibrated: bool = False
    error: Optional[str] = None


class IsCompleteClassifier:
    """Check an answer against its task (see the module docstring)."""

    def __init__(self, classifier: Any, *, on_error: Optional[str] = None, bands: Optional[Bands] = None,
                 role: str = "") -> None:
        self.classifier = classifier
        self.on_error = check_on_error("IsComplete", on_error)
        self.bands = bands
        self.role = role or ROLE_IS_COMPLETE

    async def check(self, task: Any, answer: Any) -> CompleteVerdict:
        try:
            decision = await self.classifier.evaluate(
                state(self.role, {"task": "" if task is None else task, "answer": "" if answer is None else answer}),
                dict([noul("complete", _INSTRUCTIONS, _TRUE, _FALSE)]))
            answers = read(decision, self.bands)
        except Exception as e:
            return CompleteVerdict(complete=self.on_error == "open", error=str(e))
        a = answers.get("complete")
        if a is None:
            return CompleteVerdict(calibrated=decision.calibrated)
        return CompleteVerdict(a.band == "yes", a.value(), a.band or "uncertain", decision.calibrated)
