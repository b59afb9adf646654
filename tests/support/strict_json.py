"""`assert_strict_json(body)`: what a strict provider accepts — UTF-8, JSON without `NaN` or
`Infinity`, and no lone surrogate (a `\\ud800` escape that pairs with nothing)."""

from __future__ import annotations

import json
import re
from typing import Any, Iterator

__all__ = ["assert_strict_json"]

_LONE = re.compile(r"[\ud800-\udfff]")


def _strings(value: Any) -> Iterator[str]:
    if isinstance(value, str):
        yield value
    elif isinstance(value, dict):
        for k, v in value.items():
            yield k
            yield from _strings(v)
    elif isinstance(value, list):
        for v in value:
            yield from _strings(v)


def assert_strict_json(body: bytes) -> Any:
    """The body decoded, after checking it is what a strict provider accepts."""
    text = body.decode("utf-8")

    def refuse(name: str) -> None:
        raise AssertionError(f"{name} in a request body")

    value = json.loads(text, parse_constant=refuse)
    lone = [s for s in _strings(value) if _LONE.search(s)]
    assert not lone, f"lone surrogates sent to the provider: {lone[:3]!r}"
    return value
