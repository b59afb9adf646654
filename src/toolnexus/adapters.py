"""Provider tool declarations: `Tool` lists in the OpenAI, Anthropic and Gemini shapes.

Pure functions over the schema only; nothing here executes a tool. Each call returns deep copies
of `input_schema`, so a caller (or a `body_transform`) editing the declaration cannot corrupt
the tool it came from.
"""

from __future__ import annotations

import copy
from typing import Any

from .types import Tool

__all__ = ["to_openai", "to_anthropic", "to_gemini"]


def _declaration(t: Tool, schema_key: str) -> dict[str, Any]:
    return {"name": t.name, "description": t.description, schema_key: copy.deepcopy(t.input_schema)}


def to_openai(tools: list[Tool]) -> list[dict[str, Any]]:
    """`[{"type": "function", "function": {"name", "description", "parameters"}}]`."""
    return [{"type": "function", "function": _declaration(t, "parameters")} for t in tools]


def to_anthropic(tools: list[Tool]) -> list[dict[str, Any]]:
    """`[{"name", "description", "input_schema"}]`."""
    return [_declaration(t, "input_schema") for t in tools]


def to_gemini(tools: list[Tool]) -> list[dict[str, Any]]:
    """Always one wrapper: `[{"functionDeclarations": [...]}]`, even for no tools."""
    return [{"functionDeclarations": [_declaration(t, "parameters") for t in tools]}]
