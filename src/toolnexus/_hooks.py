"""Hooks as the host gives them: a mapping (`{"before_llm": fn}`) or an object with those methods.

The client's hooks (`before_llm`, `after_tool`, ...) and an MCP source's notification hooks accept
both shapes; `hook_of` is the one place that tells them apart. It looks the hook up at each call, so
a hooks mapping edited in place counts from the next call on. It does not call the hook or know
which names exist: the caller does.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any, Callable, Optional


def hook_of(hooks: object, name: str) -> Optional[Callable[..., Any]]:
    """The hook `name` of `hooks` — by key in a mapping, by attribute on an object — if callable."""
    if hooks is None:
        return None
    fn = hooks.get(name) if isinstance(hooks, Mapping) else getattr(hooks, name, None)
    return fn if callable(fn) else None
