"""`ToolGuardClassifier`: rate a tool call's risk before it runs, and allow, ask a human, or deny.

One score question on a four-level rubric (harmless, reversible, consequential, destructive). A
sure score below `ask_at` allows the call, below `deny_at` asks for approval, else denies; an
unsure or missing answer asks. As a `before_tool` hook, "ask" suspends the call with an approval
`Request` (the client's suspension rules apply: an approved call re-runs without this hook) and
"deny" answers the model with an error result instead of running the tool.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Optional

from ..classifier._models import ScoreAnswer
from ..judge import Bands, read, score, state
from ..types import Request, ToolResult
from ._common import RISK_INSTRUCTIONS, RISK_RUBRIC, ROLE_TOOL_GUARD, Hook, Memo, check_on_error, field_of, maybe_await


@dataclass
class ToolGuardVerdict:
    """`action` is "allow", "ask" or "deny"; `risk` the rubric score when one was answered."""

    action: str
    reason: str
    risk: Optional[float] = None
    sure: bool = False
    calibrated: bool = False
    error: Optional[str] = None


class ToolGuardClassifier:
    """Guard tool calls by their risk (see the module docstring)."""

    def __init__(self, classifier: Any, *, on_error: Optional[str] = None, bands: Optional[Bands] = None,
                 role: str = "", ask_at: float = 1.5, deny_at: float = 2.5) -> None:
        self.classifier = classifier
        self.on_error = check_on_error("ToolGuard", on_error)
        self.bands = bands
        self.role = role or ROLE_TOOL_GUARD
        self.ask_at = ask_at
        self.deny_at = deny_at
        self._memo = Memo()

    async def check(self, call: Any) -> ToolGuardVerdict:
        """The verdict for `call` (`{name, arguments, description?}`, a mapping or an object)."""
        data: dict[str, Any] = {"tool_name": field_of(call, "name") or "",
                                "arguments": field_of(call, "arguments") or {}}
        description = field_of(call, "description")
        if description:
            data["tool_description"] = description
        try:
            decision = await self.classifier.evaluate(state(self.role, data),
                                                      dict([score("risk", RISK_INSTRUCTIONS, RISK_RUBRIC)]))
            answer = read(decision, self.bands).get("risk")
        except Exception as e:
            return ToolGuardVerdict("allow" if self.on_error == "open" else "deny", "classifier error", error=str(e))
        if answer is None or not isinstance(answer.raw, ScoreAnswer):
            return ToolGuardVerdict("ask", "missing answer", calibrated=decision.calibrated)
        risk, sure = answer.value(), bool(answer.sure)
        if not sure:
            return ToolGuardVerdict("ask", "uncertain", risk, sure, decision.calibrated)
        if risk < self.ask_at:
            return ToolGuardVerdict("allow", "low risk", risk, sure, decision.calibrated)
        if risk < self.deny_at:
            return ToolGuardVerdict("ask", "medium risk", risk, sure, decision.calibrated)
        return ToolGuardVerdict("deny", "high risk", risk, sure, decision.calibrated)

    def as_hook(self, next: Optional[Hook] = None) -> Hook:
        """A `before_tool` hook: allow passes to `next`; deny and ask answer with a result (next skipped)."""
        from ..classifier._wire import canonical_json

        async def before_tool(ev: dict) -> Optional[dict]:
            name, args = ev.get("name") or "", ev.get("args") or {}
            try:
                key: Any = (name, canonical_json(args))
            except (TypeError, ValueError):
                key = None
            verdict = self._memo.get(key) if key is not None else None
            if verdict is None:
                verdict = await self.check({"name": name, "arguments": args})
                if key is not None:
                    self._memo.put(key, verdict)
            if verdict.action == "allow":
                return await maybe_await(next(ev)) if next is not None else None
            if verdict.action == "deny":
                return {"result": ToolResult(f"denied by tool guard: {verdict.reason}", is_error=True)}
            request = Request(id=f"toolguard:{ev.get('id')}", kind="approval",
                              prompt=f"Approve the call to {name}? ({verdict.reason})",
                              data={"tool": name, "arguments": args, "reason": verdict.reason, "risk": verdict.risk})
            return {"result": ToolResult(f"approval required: {name}", is_error=True, metadata={"pending": request})}

        return before_tool
