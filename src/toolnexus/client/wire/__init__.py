"""Provider wire dialects. `dialect_for(style)` is the one place a style name picks behaviour."""

from __future__ import annotations

from typing import Callable, Optional

from ..parts import PartPolicy
from .anthropic import AnthropicWire
from .base import ResultEntry, StreamAccumulator, ToolCall, Turn, WireDialect, WireOptions
from .openai import OpenAIWire
from .responses import ResponsesWire
from ...errors import ToolnexusValueError

__all__ = ["dialect_for", "OpenAIWire", "AnthropicWire", "ResponsesWire", "ToolCall", "Turn", "ResultEntry",
           "StreamAccumulator", "WireDialect", "WireOptions", "STYLES"]

_DIALECTS: dict[str, Callable[[Optional[PartPolicy], Optional[WireOptions]], WireDialect]] = {
    "openai": OpenAIWire, "anthropic": AnthropicWire, "responses": ResponsesWire}
STYLES = tuple(_DIALECTS)


def dialect_for(style: str, policy: Optional[PartPolicy] = None, options: Optional[WireOptions] = None) -> WireDialect:
    """The dialect object for `style` ("openai", "anthropic" or "responses")."""
    try:
        cls = _DIALECTS[style]
    except (KeyError, TypeError):
        raise ToolnexusValueError(f'toolnexus: unknown client style {style!r} '
                                  '(expected "openai", "anthropic" or "responses")') from None
    return cls(policy, options)
