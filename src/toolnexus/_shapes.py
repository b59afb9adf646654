"""Reading untrusted JSON: a value as the shape we need, or an empty one.

Model replies, server messages and stored records are peer input: a field that should be an
object may be missing, null or a string. These two turn "use it if it is the right shape" into
one call that type checkers understand.
"""

from __future__ import annotations

from typing import Any

__all__ = ["as_dict", "as_list"]


def as_dict(value: Any) -> dict[str, Any]:
    """`value` if it is a dict, else a new empty dict."""
    return value if isinstance(value, dict) else {}


def as_list(value: Any) -> list[Any]:
    """`value` if it is a list, else a new empty list."""
    return value if isinstance(value, list) else []
