"""toolnexus: every tool source behind one `Tool` interface, one tool-calling loop for OpenAI-
and Anthropic-style endpoints, and an agent runtime that suspends and resumes.

This module is the public surface only. Names are re-exported lazily (PEP 562): `import
toolnexus` loads just the core types; the client, MCP SDK, HTTP stack and so on are imported
the first time one of their names is touched.
"""

from __future__ import annotations

import importlib
from typing import Any

from .adapters import to_anthropic, to_gemini, to_openai
from .types import (
    Answer,
    JSONSchema,
    McpStatus,
    Request,
    Tool,
    ToolContext,
    ToolResult,
    ToolSource,
    answer_declined,
    answer_output,
    auth_required,
    pending,
    pending_of,
    sanitize,
)

__version__ = "0.22.0"

# public name -> (module, attribute)
_LAZY: dict[str, tuple[str, str]] = {}


def _register(module: str, names: str, **renamed: str) -> None:
    for name in names.split():
        _LAZY[name] = (module, name)
    for public, attr in renamed.items():
        _LAZY[public] = (module, attr)


_register(".errors", "ToolnexusError")
_register(".toolkit", "Toolkit create_toolkit")
_register(".native", "define_tool tool")
_register(".http", "http_tool http_tools_from_openapi", HTTP_DEFAULT_TIMEOUT="DEFAULT_TIMEOUT")
_register(
    ".client",
    "Client ClientStyle Conversation ConversationStore ErrorClassifier ErrorInfo ErrorTier Hooks "
    "HttpTransport InMemoryConversationStore InProcessTransport MetricEvent OnMetric RunCancelled "
    "RunResult RunTimeout UrllibTransport WaitFor create_client create_in_process_client ResumeError "
    "ContentPartError",
)
_register(".translate", "TranslateResult TranslatedToolCall")
_register(".relay", "RELAY_KIND RelayCall RelayResult relay_tool is_relay_request relay_calls_of relay_answer")
_register(
    ".mcp_source",
    "DEFAULT_TIMEOUT McpConfig McpInventory McpSource ServerConfig ToolInfo answer_to_elicit_result "
    "apply_tools_filter elicitation_to_request expand_env_headers is_enabled is_remote list_mcp_tools "
    "load_mcp load_mcp_with_context parse_mcp_config",
)
_register(".mcp_serve", "MCPServeConfig OnCall build_mcp_server exposed_mcp_tools")
_register(
    ".skill",
    "SKILL_TOOL_DESCRIPTION SKILLS_PROMPT_PREAMBLE SkillDef SkillInfo SkillInventory SkillSkip "
    "SkillSource list_skills load_skills",
)
_register(".builtin", "BuiltinsConfig builtins_enabled create_builtin_tools select_builtins")
_register(".a2a", "Agent AgentConfig AgentsConfig agent agent_tools parse_agents_config")
_register(".serve", "ServeHandle")

__all__ = [
    "Answer",
    "JSONSchema",
    "McpStatus",
    "Request",
    "Tool",
    "ToolContext",
    "ToolResult",
    "ToolSource",
    "answer_declined",
    "answer_output",
    "auth_required",
    "pending",
    "pending_of",
    "sanitize",
    "to_anthropic",
    "to_gemini",
    "to_openai",
    *_LAZY,
]


def __getattr__(name: str) -> Any:
    try:
        module, attr = _LAZY[name]
    except KeyError:
        raise AttributeError(f"module 'toolnexus' has no attribute {name!r}") from None
    value = getattr(importlib.import_module(module, __name__), attr)
    globals()[name] = value
    return value


def __dir__() -> list[str]:
    return sorted(set(globals()) | set(_LAZY))
