"""Reading untrusted JSON: a value as the shape we need, or an empty one; and what JSON itself forbids.

Model replies, server messages and stored records are peer input: a field that should be an
object may be missing, null or a string. `as_dict` / `as_list` turn "use it if it is the right
shape" into one call that type checkers understand.

Python's `json` also reads what JSON has no room for: `NaN`, `Infinity`, `-Infinity` (and
`1e999`, which overflows to infinity) become floats that pass `{"type": "number", "maximum": 100}`
(every comparison with NaN is false). `strict_loads` refuses them where we parse; `non_finite`
finds them in a value already parsed (the schema check, answers); `argument_problem` is what a
tool call's arguments must not hold before a tool may run on them (non-finite numbers, lone
surrogates — see `_text` — and nesting deeper than `MAX_ARGUMENT_DEPTH`).
"""

from __future__ import annotations

import json
import math
from typing import Any, Optional

from ._text import first_surrogate
from .errors import ToolnexusValueError

# A tool's arguments nested deeper than this are refused: no real tool needs it, and a transcript
# holding them must still be written (JSON encoders stop near a thousand levels).
MAX_ARGUMENT_DEPTH = 100


def as_dict(value: Any) -> dict[str, Any]:
    """`value` if it is a dict, else a new empty dict."""
    return value if isinstance(value, dict) else {}


def as_list(value: Any) -> list[Any]:
    """`value` if it is a list, else a new empty list."""
    return value if isinstance(value, list) else []


def json_number_name(value: float) -> str:
    """How JSON-ish text spells a non-finite float: `NaN`, `Infinity`, `-Infinity`."""
    if math.isnan(value):
        return "NaN"
    return "Infinity" if value > 0 else "-Infinity"


def _refuse_constant(name: str) -> Any:
    raise ToolnexusValueError(f"{name} is not a JSON number")


def strict_loads(text: "str | bytes") -> Any:
    """`json.loads`, refusing `NaN`, `Infinity` and `-Infinity` (a `ValueError` naming it) and
    numbers that overflow to infinity (`1e999`)."""
    value = json.loads(text, parse_constant=_refuse_constant)
    found = non_finite(value)
    if found is not None:
        raise ToolnexusValueError(_problem(*found))
    return value


def _children(value: Any, path: tuple[Any, ...]) -> list[tuple[Any, tuple[Any, ...]]]:
    if isinstance(value, dict):
        return [(v, path + (k,)) for k, v in value.items()]
    if isinstance(value, (list, tuple)):
        return [(v, path + (i,)) for i, v in enumerate(value)]
    return []


def _where(path: tuple[Any, ...]) -> str:
    return "/".join(str(p) for p in path)


def _problem(where: str, what: str) -> str:
    return f"{where}: {what}" if where else what


def non_finite(value: Any) -> Optional[tuple[str, str]]:
    """The first non-finite float in `value` (depth first): `(path, "NaN is not a JSON number")`,
    the path `/`-joined (empty at the root); None when there is none."""
    stack: list[tuple[Any, tuple[Any, ...]]] = [(value, ())]
    while stack:
        node, path = stack.pop()
        if isinstance(node, float):
            if not math.isfinite(node):
                return _where(path), f"{json_number_name(node)} is not a JSON number"
        elif isinstance(node, (dict, list, tuple)):
            stack.extend(reversed(_children(node, path)))
    return None


def non_finite_problem(value: Any) -> Optional[str]:
    """`non_finite` as one line (`amount: NaN is not a JSON number`), or None."""
    found = non_finite(value)
    return _problem(*found) if found is not None else None


def _surrogate_problem(text: str) -> Optional[str]:
    at = first_surrogate(text)
    if at < 0:
        return None
    return (f"it holds a lone surrogate (U+{ord(text[at]):04X}, half of a UTF-16 pair, at character {at}), "
            "which is not valid Unicode")


def argument_problem(value: Any, max_depth: int = MAX_ARGUMENT_DEPTH) -> Optional[str]:
    """Why a tool must not run on these (parsed) arguments, or None: a non-finite number, a lone
    surrogate in a key or a string, or nesting deeper than `max_depth`. One line, with the path."""
    stack: list[tuple[Any, tuple[Any, ...]]] = [(value, ())]
    while stack:
        node, path = stack.pop()
        if len(path) > max_depth:
            return _problem(_where(path[:max_depth]), f"nested deeper than {max_depth} levels")
        if isinstance(node, float) and not math.isfinite(node):
            return _problem(_where(path), f"{json_number_name(node)} is not a JSON number")
        if isinstance(node, str):
            said = _surrogate_problem(node)
            if said is not None:
                return _problem(_where(path), said)
        elif isinstance(node, dict):
            for key in node:
                said = _surrogate_problem(key) if isinstance(key, str) else None
                if said is not None:
                    return _problem(_where(path), f"a key {said[3:]}")
            stack.extend(reversed(_children(node, path)))
        elif isinstance(node, (list, tuple)):
            stack.extend(reversed(_children(node, path)))
    return None
