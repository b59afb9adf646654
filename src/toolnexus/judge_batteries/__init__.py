"""Ready-made judgments ("batteries") for agent loops, each a small classifier-backed decision.

| battery                      | asks                                   | hook          |
|------------------------------|----------------------------------------|---------------|
| `ToolGuardClassifier`        | how risky is this tool call?           | `before_tool` |
| `ToolRelevanceClassifier`    | which tools does the request need?     | `before_llm`  |
| `SkillRelevanceClassifier`   | which skills does the request need?    | —             |
| `ToolResultFilterClassifier` | which parts of a tool's output matter? | `after_tool`  |
| `IsCompleteClassifier`       | does the answer complete the task?     | —             |
| `AgentRouterClassifier`      | which agent should do the task?        | —             |
| `ContentGuardClassifier`     | is this text harmful or an injection?  | `before_llm`  |
| `ModelRouterClassifier`      | which model should answer?             | `before_llm`  |

    guard = ToolGuardClassifier(clf, on_error="closed")
    client = create_client(..., hooks={"before_tool": guard.as_hook()})

Layout: `_common.py` (pinned texts, shared rules, hook chaining), one module per battery.
"""

from __future__ import annotations

from ._common import (
                     DEFAULT_DIMENSIONS,
                     RISK_RUBRIC,
                     ROLE_AGENT_ROUTER,
                     ROLE_CONTENT_GUARD,
                     ROLE_IS_COMPLETE,
                     ROLE_MODEL_ROUTER,
                     ROLE_SKILL_RELEVANCE,
                     ROLE_TOOL_GUARD,
                     ROLE_TOOL_RELEVANCE,
                     ROLE_TOOL_RESULT_FILTER,
                     BatteryConfigError,
                     ContentGuardBlocked,
                     Hook,
                     latest_user_text,
)
from ._complete import CompleteVerdict, IsCompleteClassifier
from ._content_guard import ContentGuardClassifier, ContentVerdict
from ._guard import ToolGuardClassifier, ToolGuardVerdict
from ._relevance import RelevanceVerdict, SkillRelevanceClassifier, ToolRelevanceClassifier
from ._result_filter import FilterVerdict, ToolResultFilterClassifier
from ._routers import AgentRouterClassifier, AgentVerdict, ModelRouterClassifier, ModelVerdict

__all__ = [
    "ToolGuardClassifier", "ToolRelevanceClassifier", "SkillRelevanceClassifier", "ToolResultFilterClassifier",
    "IsCompleteClassifier", "AgentRouterClassifier", "ContentGuardClassifier", "ModelRouterClassifier",
    "ToolGuardVerdict", "RelevanceVerdict", "FilterVerdict", "CompleteVerdict", "AgentVerdict", "ContentVerdict",
    "ModelVerdict", "ContentGuardBlocked", "latest_user_text", "Hook", "ROLE_TOOL_GUARD", "ROLE_TOOL_RELEVANCE",
    "ROLE_SKILL_RELEVANCE", "ROLE_TOOL_RESULT_FILTER", "ROLE_IS_COMPLETE", "ROLE_AGENT_ROUTER", "ROLE_CONTENT_GUARD",
    "ROLE_MODEL_ROUTER", "RISK_RUBRIC", "DEFAULT_DIMENSIONS", "BatteryConfigError",
]
