"""Provider wire dialects. `dialect_for(style)` is the one place a style name picks behaviour."""

from __future__ import annotations

from typing import Callable, Optional

from ..parts import PartPolicy
from .anthropic import AnthropicWire
from .base import ResultEntry, StreamAccumulator, ToolCall, Turn, WireDialect
from .openai import OpenAIWire
from ...errors import ToolnexusValueError

__all__ = ["dialect_for", "OpenAIWire", "AnthropicWire", "ToolCall", "Turn", "ResultEntry",
           "StreamAccumulator", "WireDialect"]

_DIALECTS: dict[str, Callable[[Optional[PartPolicy]], WireDialect]] = {"openai": OpenAIWire, "anthropic": AnthropicWire}


def dialect_for(style: str, policy: Optional[PartPolicy] = None) -> WireDialect:
    """The dialect object for `style` ("openai" or "anthropic")."""
    try:
        cls = _DIALECTS[style]
    except (KeyError, TypeError):
        raise ToolnexusValueError(f'toolnexus: unknown client style {style!r} (expected "openai" or "anthropic")') from None
    return cls(policy)
