"""toolnexus: every tool source behind one `Tool` interface, one tool-calling loop for OpenAI-
and Anthropic-style endpoints, and an agent runtime that suspends and resumes.

This module is the public surface only. Names are re-exported lazily (PEP 562): `import
toolnexus` loads just the core types; the client, MCP SDK, HTTP stack and so on are imported
the first time one of their names is touched.

Type checkers cannot follow a PEP 562 `__getattr__`, so the `TYPE_CHECKING` block below imports
every lazy name for them (never at run time; a test keeps it equal to the lazy table), and the
package ships `py.typed`. `dir(toolnexus)` lists exactly the public names (`__all__` and
`__version__`), nothing this module uses internally.
"""

import importlib as _importlib
import typing as _typing

from ._version import VERSION as __version__
from .adapters import to_anthropic, to_gemini, to_openai
from .types import (
    Answer,
    JSONSchema,
    McpStatus,
    Request,
    Tool,
    ToolCaller,
    ToolContext,
    ToolResult,
    ToolSource,
    answer_declined,
    answer_output,
    auth_required,
    declined_text,
    pending,
    pending_of,
    sanitize,
)

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
    "OutputValidationError",
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
_register(".resources", "Prompt PromptArgument Resource ResourceCatalog ResourceContent prompt resource")
_register(
    ".skill",
    "SKILL_TOOL_DESCRIPTION SKILLS_PROMPT_PREAMBLE SkillDef SkillInfo SkillInventory SkillSkip "
    "SkillSource list_skills load_skills",
)
_register(".builtin", "BuiltinsConfig builtins_enabled create_builtin_tools select_builtins")
# `toolnexus.Agent` is the A2A descriptor (0.21's name, kept here without a warning); new code
# spells it `toolnexus.a2a.RemoteAgent`, and the agent this library runs is `toolnexus.agents.Agent`.
_register(".a2a", "AgentConfig AgentsConfig agent agent_tools parse_agents_config", Agent="RemoteAgent")
_register(
    ".serve",
    "A2AConfig FileTaskStore InMemoryTaskStore OnTask ServeHandle ServeLimits TaskStore build_agent_card "
    "resolve_store start_a2a_server",
)
_register(
    ".classifier",
    "ClassifierStyle ClassifierError NoulCriteria NoulQuestion ChoiceQuestion ScoreQuestion Question NoulAnswer "
    "ChoiceAnswer ScoreAnswer DecisionAnswer ClassifierUsage Decision RecordedDecision ClassifierResponse "
    "ClassifierTransport choice_over question_wire questions_wire canonical_json canonical_request near_uniform "
    "create_classifier Classifier",
)
_register(
    ".judge",
    "Bands noul choice score questions state context JudgeAnswer ask Rule Policy Outcome decide gate "
    "static_classifier decision_wire question_from_wire Tape",
)
_register(
    ".judge_batteries",
    "ToolGuardClassifier ToolRelevanceClassifier SkillRelevanceClassifier ToolResultFilterClassifier "
    "IsCompleteClassifier AgentRouterClassifier ContentGuardClassifier ModelRouterClassifier ToolGuardVerdict "
    "RelevanceVerdict FilterVerdict CompleteVerdict AgentVerdict ContentVerdict ModelVerdict ContentGuardBlocked "
    "latest_user_text",
)
_register(".approvals", "ApprovalPolicy ApprovalRule Escalate ApprovalMemory ApprovalScope DEFAULT_APPROVAL_TOOLS "
          "answer_from_text approval_of is_approval_request")
_register(".acp", "ACPClient ACPError ACPOptions ACPPermissionTimeoutError load_acp")
_register(
    ".content",
    "MEDIA_TYPES ContentPartError UnsupportedPartError ContentPart text image file audio part set_max_part_bytes "
    "get_max_part_bytes encode_part summarize estimate_tokens",
)

if _typing.TYPE_CHECKING:  # what the lazy table below resolves to, spelled out for type checkers
    from .a2a import (
        AgentConfig as AgentConfig,
        AgentsConfig as AgentsConfig,
        RemoteAgent as Agent,
        agent as agent,
        agent_tools as agent_tools,
        parse_agents_config as parse_agents_config,
    )
    from .acp import (
        ACPClient as ACPClient,
        ACPError as ACPError,
        ACPOptions as ACPOptions,
        ACPPermissionTimeoutError as ACPPermissionTimeoutError,
        load_acp as load_acp,
    )
    from .approvals import (
        DEFAULT_APPROVAL_TOOLS as DEFAULT_APPROVAL_TOOLS,
        ApprovalMemory as ApprovalMemory,
        ApprovalPolicy as ApprovalPolicy,
        ApprovalRule as ApprovalRule,
        ApprovalScope as ApprovalScope,
        Escalate as Escalate,
        answer_from_text as answer_from_text,
        approval_of as approval_of,
        is_approval_request as is_approval_request,
    )
    from .builtin import (
        BuiltinsConfig as BuiltinsConfig,
        builtins_enabled as builtins_enabled,
        create_builtin_tools as create_builtin_tools,
        select_builtins as select_builtins,
    )
    from .classifier import (
        ChoiceAnswer as ChoiceAnswer,
        ChoiceQuestion as ChoiceQuestion,
        Classifier as Classifier,
        ClassifierError as ClassifierError,
        ClassifierResponse as ClassifierResponse,
        ClassifierStyle as ClassifierStyle,
        ClassifierTransport as ClassifierTransport,
        ClassifierUsage as ClassifierUsage,
        Decision as Decision,
        DecisionAnswer as DecisionAnswer,
        NoulAnswer as NoulAnswer,
        NoulCriteria as NoulCriteria,
        NoulQuestion as NoulQuestion,
        Question as Question,
        RecordedDecision as RecordedDecision,
        ScoreAnswer as ScoreAnswer,
        ScoreQuestion as ScoreQuestion,
        canonical_json as canonical_json,
        canonical_request as canonical_request,
        choice_over as choice_over,
        create_classifier as create_classifier,
        near_uniform as near_uniform,
        question_wire as question_wire,
        questions_wire as questions_wire,
    )
    from .client import (
        Client as Client,
        ClientStyle as ClientStyle,
        Conversation as Conversation,
        ConversationStore as ConversationStore,
        ErrorClassifier as ErrorClassifier,
        ErrorInfo as ErrorInfo,
        ErrorTier as ErrorTier,
        Hooks as Hooks,
        HttpTransport as HttpTransport,
        InMemoryConversationStore as InMemoryConversationStore,
        InProcessTransport as InProcessTransport,
        MetricEvent as MetricEvent,
        OnMetric as OnMetric,
        OutputValidationError as OutputValidationError,
        ResumeError as ResumeError,
        RunCancelled as RunCancelled,
        RunResult as RunResult,
        RunTimeout as RunTimeout,
        UrllibTransport as UrllibTransport,
        WaitFor as WaitFor,
        create_client as create_client,
        create_in_process_client as create_in_process_client,
    )
    from .content import (
        MEDIA_TYPES as MEDIA_TYPES,
        ContentPart as ContentPart,
        ContentPartError as ContentPartError,
        UnsupportedPartError as UnsupportedPartError,
        audio as audio,
        encode_part as encode_part,
        estimate_tokens as estimate_tokens,
        file as file,
        get_max_part_bytes as get_max_part_bytes,
        image as image,
        part as part,
        set_max_part_bytes as set_max_part_bytes,
        summarize as summarize,
        text as text,
    )
    from .errors import (
        ToolnexusError as ToolnexusError,
    )
    from .http import (
        DEFAULT_TIMEOUT as HTTP_DEFAULT_TIMEOUT,
        http_tool as http_tool,
        http_tools_from_openapi as http_tools_from_openapi,
    )
    from .judge import (
        Bands as Bands,
        JudgeAnswer as JudgeAnswer,
        Outcome as Outcome,
        Policy as Policy,
        Rule as Rule,
        Tape as Tape,
        ask as ask,
        choice as choice,
        context as context,
        decide as decide,
        decision_wire as decision_wire,
        gate as gate,
        noul as noul,
        question_from_wire as question_from_wire,
        questions as questions,
        score as score,
        state as state,
        static_classifier as static_classifier,
    )
    from .judge_batteries import (
        AgentRouterClassifier as AgentRouterClassifier,
        AgentVerdict as AgentVerdict,
        CompleteVerdict as CompleteVerdict,
        ContentGuardBlocked as ContentGuardBlocked,
        ContentGuardClassifier as ContentGuardClassifier,
        ContentVerdict as ContentVerdict,
        FilterVerdict as FilterVerdict,
        IsCompleteClassifier as IsCompleteClassifier,
        ModelRouterClassifier as ModelRouterClassifier,
        ModelVerdict as ModelVerdict,
        RelevanceVerdict as RelevanceVerdict,
        SkillRelevanceClassifier as SkillRelevanceClassifier,
        ToolGuardClassifier as ToolGuardClassifier,
        ToolGuardVerdict as ToolGuardVerdict,
        ToolRelevanceClassifier as ToolRelevanceClassifier,
        ToolResultFilterClassifier as ToolResultFilterClassifier,
        latest_user_text as latest_user_text,
    )
    from .mcp_serve import (
        MCPServeConfig as MCPServeConfig,
        OnCall as OnCall,
        build_mcp_server as build_mcp_server,
        exposed_mcp_tools as exposed_mcp_tools,
    )
    from .mcp_source import (
        DEFAULT_TIMEOUT as DEFAULT_TIMEOUT,
        McpConfig as McpConfig,
        McpInventory as McpInventory,
        McpSource as McpSource,
        ServerConfig as ServerConfig,
        ToolInfo as ToolInfo,
        answer_to_elicit_result as answer_to_elicit_result,
        apply_tools_filter as apply_tools_filter,
        elicitation_to_request as elicitation_to_request,
        expand_env_headers as expand_env_headers,
        is_enabled as is_enabled,
        is_remote as is_remote,
        list_mcp_tools as list_mcp_tools,
        load_mcp as load_mcp,
        load_mcp_with_context as load_mcp_with_context,
        parse_mcp_config as parse_mcp_config,
    )
    from .native import (
        define_tool as define_tool,
        tool as tool,
    )
    from .relay import (
        RELAY_KIND as RELAY_KIND,
        RelayCall as RelayCall,
        RelayResult as RelayResult,
        is_relay_request as is_relay_request,
        relay_answer as relay_answer,
        relay_calls_of as relay_calls_of,
        relay_tool as relay_tool,
    )
    from .resources import (
        Prompt as Prompt,
        PromptArgument as PromptArgument,
        Resource as Resource,
        ResourceCatalog as ResourceCatalog,
        ResourceContent as ResourceContent,
        prompt as prompt,
        resource as resource,
    )
    from .serve import (
        A2AConfig as A2AConfig,
        FileTaskStore as FileTaskStore,
        InMemoryTaskStore as InMemoryTaskStore,
        OnTask as OnTask,
        ServeHandle as ServeHandle,
        ServeLimits as ServeLimits,
        TaskStore as TaskStore,
        build_agent_card as build_agent_card,
        resolve_store as resolve_store,
        start_a2a_server as start_a2a_server,
    )
    from .skill import (
        SKILL_TOOL_DESCRIPTION as SKILL_TOOL_DESCRIPTION,
        SKILLS_PROMPT_PREAMBLE as SKILLS_PROMPT_PREAMBLE,
        SkillDef as SkillDef,
        SkillInfo as SkillInfo,
        SkillInventory as SkillInventory,
        SkillSkip as SkillSkip,
        SkillSource as SkillSource,
        list_skills as list_skills,
        load_skills as load_skills,
    )
    from .toolkit import (
        Toolkit as Toolkit,
        create_toolkit as create_toolkit,
    )
    from .translate import (
        TranslatedToolCall as TranslatedToolCall,
        TranslateResult as TranslateResult,
    )

__all__ = [
    "Answer",
    "JSONSchema",
    "McpStatus",
    "Request",
    "Tool",
    "ToolCaller",
    "ToolContext",
    "ToolResult",
    "ToolSource",
    "answer_declined",
    "answer_output",
    "auth_required",
    "declined_text",
    "pending",
    "pending_of",
    "sanitize",
    "to_anthropic",
    "to_gemini",
    "to_openai",
    *_LAZY,
]


if not _typing.TYPE_CHECKING:  # hidden from type checkers: an unknown name must be an error there

    def __getattr__(name: str) -> object:
        try:
            module, attr = _LAZY[name]
        except KeyError:
            raise AttributeError(f"module 'toolnexus' has no attribute {name!r}") from None
        value = getattr(_importlib.import_module(module, __name__), attr)
        globals()[name] = value
        return value


def __dir__() -> list[str]:
    return sorted({*__all__, "__version__"})
