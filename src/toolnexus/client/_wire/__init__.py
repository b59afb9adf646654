"""Provider wire dialects. `dialect_for(style)` is the one place a style name picks behaviour.

The Responses API dialect loads on first use: a process on the other two wires never imports it.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Callable, Optional

from ...errors import ToolnexusValueError
from .._parts import PartPolicy
from .anthropic import AnthropicWire as AnthropicWire
from .base import (
    ResultEntry as ResultEntry,
    StreamAccumulator as StreamAccumulator,
    ToolCall as ToolCall,
    Turn as Turn,
    WireDialect as WireDialect,
    WireOptions as WireOptions,
)
from .openai import OpenAIWire as OpenAIWire

if TYPE_CHECKING:
    from .responses import ResponsesWire as ResponsesWire

STYLES = ("openai", "anthropic", "responses")


def _responses(policy: Optional[PartPolicy], options: Optional[WireOptions]) -> WireDialect:
    from .responses import ResponsesWire

    return ResponsesWire(policy, options)


_DIALECTS: dict[str, Callable[[Optional[PartPolicy], Optional[WireOptions]], WireDialect]] = {
    "openai": OpenAIWire, "anthropic": AnthropicWire, "responses": _responses}


def dialect_for(style: str, policy: Optional[PartPolicy] = None, options: Optional[WireOptions] = None) -> WireDialect:
    """The dialect object for `style` ("openai", "anthropic" or "responses")."""
    try:
        make = _DIALECTS[style]
    except (KeyError, TypeError):
        raise ToolnexusValueError(f'toolnexus: unknown client style {style!r} '
                                  '(expected "openai", "anthropic" or "responses")') from None
    return make(policy, options)


def __getattr__(name: str) -> object:
    if name == "ResponsesWire":
        from .responses import ResponsesWire

        return ResponsesWire
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
