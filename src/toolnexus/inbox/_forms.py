"""The answer form of one request, generated from what it asks, and its POST read back as an `Answer`.

- An approval (`data["approval"]`): the tool's arguments as fields generated from its input
  schema (strings, numbers, booleans, enums; anything else as JSON), pre-filled with what the
  model sent; a message; `always`; two decisions, approve and reject. Arguments changed in the
  form make the approval an edit (`Answer.arguments`); unchanged ones approve the call as sent.
  Under a two-person rule the edit fields and `always` are left out (they would be refused).
- Any other request with a flat answer schema (`data["schema"]`): its fields make `Answer.data`;
  decisions submit and decline.
- Anything else: a message, submit and decline.

A value the form cannot read (a number field holding text, JSON that does not parse) is an error
naming the field: nothing is submitted on a guess.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from typing import Any, Optional

from ..approvals import approval_of
from ..errors import ToolnexusValueError
from ..types import Answer, Request

_SIMPLE = ("string", "integer", "number", "boolean")


class FormError(ToolnexusValueError):
    """A form value that cannot be read (the message names the field)."""


@dataclass
class Field:
    name: str  # the property
    kind: str  # string | integer | number | boolean | enum | json | text
    label: str
    value: Any = None
    required: bool = False
    options: list[Any] = field(default_factory=list)
    description: str = ""


def _kind(spec: Any) -> str:
    if not isinstance(spec, dict):
        return "json"
    if (
        isinstance(spec.get("enum"), list)
        and spec["enum"]
        and all(isinstance(v, (str, int, float)) for v in spec["enum"])
    ):
        return "enum"
    kind = spec.get("type")
    if isinstance(kind, list):
        kinds = [k for k in kind if k != "null"]
        kind = kinds[0] if len(kinds) == 1 else None
    if kind == "string" and (spec.get("maxLength") or 0) > 200:
        return "text"
    return kind if kind in _SIMPLE else "json"


def fields_of(schema: Any, values: Optional[dict[str, Any]]) -> list[Field]:
    """Fields for the top-level properties of an object schema (values pre-filled)."""
    values = values if isinstance(values, dict) else {}
    props = schema.get("properties") if isinstance(schema, dict) else None
    required = set(schema.get("required") or []) if isinstance(schema, dict) else set()
    out: list[Field] = []
    names = list(props) if isinstance(props, dict) else []
    names += [k for k in values if k not in names]  # what the model sent beyond the schema is shown too
    for name in names:
        spec = props.get(name) if isinstance(props, dict) else None
        kind = _kind(spec) if spec is not None else ("json" if not isinstance(values.get(name), str) else "string")
        value = values.get(name, (spec or {}).get("default") if isinstance(spec, dict) else None)
        if kind == "string" and isinstance(value, str) and ("\n" in value or len(value) > 80):
            kind = "text"
        label = str((spec or {}).get("title") or name) if isinstance(spec, dict) else name
        desc = str((spec or {}).get("description") or "") if isinstance(spec, dict) else ""
        options = list(spec["enum"]) if kind == "enum" and isinstance(spec, dict) else []
        out.append(Field(name, kind, label, value, name in required, options, desc))
    return out


def _read(f: Field, form: dict[str, str], prefix: str) -> tuple[bool, Any]:
    """(present, value) of one field from the posted form."""
    key = prefix + f.name
    if f.kind == "boolean":
        return True, form.get(key) == "on"
    raw = form.get(key)
    if raw is None:
        return False, None
    if f.kind in ("string", "text"):
        return True, raw
    if raw.strip() == "":
        return False, None
    try:
        if f.kind == "integer":
            return True, int(raw)
        if f.kind == "number":
            number = float(raw)
            if number != number or number in (float("inf"), float("-inf")):
                raise ValueError
            return True, int(number) if number.is_integer() and "." not in raw else number
        if f.kind == "enum":
            for option in f.options:
                if str(option) == raw:
                    return True, option
            raise ValueError
        from .._shapes import strict_loads

        return True, strict_loads(raw)
    except (ValueError, RecursionError):
        what = {"integer": "a whole number", "number": "a number", "enum": "one of the choices"}.get(f.kind, "JSON")
        raise FormError(f"{f.label}: {raw[:60]!r} is not {what}") from None


def _values(fields: list[Field], form: dict[str, str], prefix: str,
            original: Optional[dict[str, Any]] = None) -> dict[str, Any]:
    """The posted values; with `original`, a field it lacks that was left empty (or unticked) stays
    out (an optional argument the model did not send is not added by a form's empty field)."""
    out: dict[str, Any] = {}
    for f in fields:
        present, value = _read(f, form, prefix)
        if present and original is not None and f.name not in original and value in ("", False):
            continue
        if present:
            out[f.name] = value
    return out


def answer_of(request: Request, form: dict[str, str], *, by: str, via: str = "inbox") -> Answer:
    """The `Answer` a posted form gives (see the module docstring); `FormError` for a bad value."""
    decision = form.get("decision")
    message = (form.get("message") or "").strip() or None
    if decision not in ("approve", "reject", "submit", "decline"):
        raise FormError("choose a decision (approve or reject)")
    a = approval_of(request)
    if decision in ("reject", "decline"):
        return Answer(id=request.id, ok=False, reason="declined", message=message, always=form.get("always") == "on"
                      and a is not None, by=by, via=via)
    if a is not None:
        arguments = None
        if int(a.get("required") or 1) <= 1 and any(k.startswith("arg.") for k in form):
            fields = fields_of(a.get("input_schema"), a.get("arguments"))
            original = a.get("arguments") if isinstance(a.get("arguments"), dict) else {}
            edited = _values(fields, form, "arg.", original)
            if edited != original:
                arguments = edited
        return Answer(id=request.id, ok=True, message=message, arguments=arguments, always=form.get("always") == "on",
                      by=by, via=via)
    schema = request.data.get("schema") if isinstance(request.data, dict) else None
    data = _values(fields_of(schema, None), form, "data.") if isinstance(schema, dict) and schema else None
    return Answer(id=request.id, ok=True, data=data, message=message, by=by, via=via)


def pretty(value: Any) -> str:
    """JSON for a person to read (and to edit in a field)."""
    return json.dumps(value, ensure_ascii=False, indent=2, sort_keys=True, default=repr)
