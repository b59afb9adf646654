"""Single-turn translation: an OpenAI-shaped request in, one provider call, an OpenAI-shaped
result out (`Client.translate`). The implementation lives with the client
(`toolnexus.client._translation`); this module is its public home."""

from __future__ import annotations

from .client._translation import (
    TranslatedToolCall,
    TranslateResult,
    anthropic_blocks,
    args_object,
    args_string,
    content_text,
    finish_reason_for,
    has_system_message,
    openai_messages_to_anthropic,
    openai_tool_choice_to_anthropic,
    openai_tools_to_anthropic,
    part_to_anthropic,
    tool_calls_of,
    translate_with_client,
)

__all__ = [
    "TranslatedToolCall",
    "TranslateResult",
    "finish_reason_for",
    "content_text",
    "args_object",
    "args_string",
    "tool_calls_of",
    "has_system_message",
    "part_to_anthropic",
    "anthropic_blocks",
    "openai_messages_to_anthropic",
    "openai_tools_to_anthropic",
    "openai_tool_choice_to_anthropic",
    "translate_with_client",
]
