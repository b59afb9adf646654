"""Argument validation against a tool's JSON schema, with messages a model can act on.

`jsonschema` (already required by `mcp`) is imported on first use only, so a process that never
validates never pays for it. A non-finite number (NaN, ±Infinity: not JSON, though Python's
`json` reads them) is a problem wherever a schema validates, whatever the schema says — JSON
Schema's own keywords let NaN through `maximum` and `minimum`.
"""

from __future__ import annotations

from typing import Any, Optional

from ._shapes import non_finite_problem

__all__ = ["schema_error", "schema_problems"]

_validators: dict[int, Any] = {}


def _validator(schema: dict[str, Any]) -> Any:
    key = id(schema)
    cached = _validators.get(key)
    if cached is not None and cached[0] is schema:
        return cached[1]
    from jsonschema import Draft202012Validator

    validator = Draft202012Validator(schema)
    if len(_validators) > 1024:
        _validators.clear()
    _validators[key] = (schema, validator)
    return validator


def schema_problems(schema: dict[str, Any], value: Any) -> list[str]:
    """Every way `value` violates `schema`, as `path: reason` lines (no path at the root), by path."""
    found = non_finite_problem(value)
    out = [found] if found is not None else []
    errors = sorted(_validator(schema).iter_errors(value), key=lambda e: list(e.path))
    for err in errors:
        where = "/".join(str(p) for p in err.absolute_path)
        out.append(f"{where}: {err.message}" if where else err.message)
    return out


def schema_error(schema: Optional[dict[str, Any]], args: Any) -> Optional[str]:
    """None if `args` satisfies `schema`, else one line naming the offending argument(s)."""
    if not schema:
        return None
    try:
        problems = schema_problems(schema, args)
    except Exception as exc:  # a broken schema must not break the call; say so instead
        return f"tool schema is not valid JSON Schema: {exc}"
    if not problems:
        return None
    more = f" (+{len(problems) - 5} more)" if len(problems) > 5 else ""
    return "; ".join(problems[:5]) + more
