"""Argument validation against a tool's JSON schema, with messages a model can act on.

`jsonschema` (already required by `mcp`) is imported on first use only, so a process that never
validates never pays for it. Most calls need it not even then: the schemas `define_tool` infers
(an object of typed properties, `required`, `additionalProperties`, `items`, `enum`) are checked
first by `_plainly_valid`, a strict subset that only ever says "valid" — anything else (a value
it would reject, a keyword it does not know) goes to `jsonschema`, which also words every
message. Importing `jsonschema` pulls in dozens of modules (the cost is in docs/performance.md),
which a fresh process would otherwise pay on its first tool call — e.g. one that resumes a parked run.

A non-finite number (NaN, ±Infinity: not JSON, though Python's `json` reads them) is a problem
wherever a schema validates, whatever the schema says — JSON Schema's own keywords let NaN through
`maximum` and `minimum`. It is looked for before either path, so the plain subset (whose `number`
admits any float) never calls such a value valid.
"""

from __future__ import annotations

from typing import Any, Optional

from ._shapes import non_finite_problem

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


_TYPES: dict[str, Any] = {
    "string": lambda v: isinstance(v, str),
    "integer": lambda v: isinstance(v, int) and not isinstance(v, bool),
    "number": lambda v: isinstance(v, (int, float)) and not isinstance(v, bool),
    "boolean": lambda v: isinstance(v, bool),
    "null": lambda v: v is None,
    "object": lambda v: isinstance(v, dict),
    "array": lambda v: isinstance(v, list),
}
_ANNOTATIONS = frozenset(("type", "properties", "required", "additionalProperties", "items", "enum", "description",
                          "title", "default", "examples", "$schema", "deprecated", "readOnly", "writeOnly"))


def _plainly_valid(schema: Any, value: Any, depth: int = 0) -> bool:
    """True only when `value` certainly satisfies `schema`, a schema of the plain subset above;
    False means "ask jsonschema" (invalid, or beyond the subset)."""
    if not isinstance(schema, dict) or depth > 8 or not _ANNOTATIONS.issuperset(schema):
        return False
    kind = schema.get("type")
    if kind is not None:
        kinds = [kind] if isinstance(kind, str) else kind
        if not isinstance(kinds, list) or not any(isinstance(k, str) and _TYPES.get(k, lambda v: False)(value)
                                                  for k in kinds):
            return False
    if "enum" in schema:
        options = schema["enum"]
        if not isinstance(options, list) or not any(type(o) is type(value) and o == value for o in options):
            return False
    if isinstance(value, dict):
        props = schema.get("properties", {})
        required = schema.get("required", [])
        extra = schema.get("additionalProperties", True)
        if not isinstance(props, dict) or not isinstance(required, list) or not isinstance(extra, bool):
            return False
        if any(name not in value for name in required):
            return False
        for name, item in value.items():
            if name in props:
                if not _plainly_valid(props[name], item, depth + 1):
                    return False
            elif not extra:
                return False
    elif "properties" in schema or "required" in schema or "additionalProperties" in schema:
        if kind is None:  # object keywords on a non-object without `type`: jsonschema ignores them, we ask it
            return False
    if isinstance(value, list) and "items" in schema:
        return all(_plainly_valid(schema["items"], item, depth + 1) for item in value)
    return True


def schema_problems(schema: dict[str, Any], value: Any) -> list[str]:
    """Every way `value` violates `schema`, as `path: reason` lines (no path at the root), by path."""
    found = non_finite_problem(value)
    if found is None and _plainly_valid(schema, value):
        return []
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
