"""Typed values at the model boundary: pydantic models and dataclasses in, validated instances out.

Two features need the same three things — native tools whose parameters are pydantic models or
dataclasses, and runs whose final answer must be an `output_type` — so they live here once:

- `involves_model(annotation)`: does this annotation carry a pydantic model or a dataclass
  (directly, or inside `Optional`, `list[...]`, `dict[str, ...]`, `Annotated`, a union)?
- `pydantic_schema(annotation)`: pydantic's own JSON schema for it, with every `$ref` inlined.
  Inlining is deliberate: OpenAI and Anthropic both accept plain nested objects, but several
  OpenAI-compatible servers (and Gemini's function declarations) reject or ignore `$ref`, and a
  `$ref` inside a *property* would point at the root of the tool's schema, not at the model's
  `$defs`. Only a recursive model cannot be inlined; its definitions are returned separately so
  the caller can keep them as `$defs` at the top of the tool's schema (local `#/$defs/...`
  references there are accepted by both wires).
- `Adapter(annotation)`: validates a JSON value against the annotation with pydantic and returns
  the instance; on failure `ArgumentProblems` lists `path: reason` lines a model can act on.

pydantic is imported only when an annotation needs it: `import toolnexus` and plain-typed tools
never load it. A stdlib dataclass gets its schema from `toolnexus.native.infer_schema` (no
pydantic at definition time); pydantic is imported the first time such a value is validated.

Not here: the plain-type schema table (native.py) or JSON Schema validation (_schema.py).
"""

from __future__ import annotations

import copy
import dataclasses
import sys
import typing
from typing import Any, Optional, get_args, get_origin

from .errors import ToolnexusError, ToolnexusTypeError

MAX_PROBLEMS = 5


class ArgumentProblems(ToolnexusError):
    """A value failed validation; `problems` are `path: reason` lines (path omitted at the root)."""

    def __init__(self, problems: list[str]) -> None:
        super().__init__("; ".join(problems))
        self.problems = problems

    def text(self) -> str:
        """The problems as one line: the first `MAX_PROBLEMS`, then `(+N more)`."""
        shown = "; ".join(self.problems[:MAX_PROBLEMS])
        more = len(self.problems) - MAX_PROBLEMS
        return shown + (f" (+{more} more)" if more > 0 else "")


def _base_model() -> Any:
    """`pydantic.BaseModel` if pydantic is loaded, else None (nothing can be a model then)."""
    module = sys.modules.get("pydantic")
    return getattr(module, "BaseModel", None) if module is not None else None


def is_pydantic_model(annotation: Any) -> bool:
    """True for a pydantic `BaseModel` subclass or a pydantic dataclass."""
    if not isinstance(annotation, type):
        return False
    base = _base_model()
    if base is not None and issubclass(annotation, base):
        return True
    return dataclasses.is_dataclass(annotation) and hasattr(annotation, "__pydantic_validator__")


def _members(annotation: Any) -> list[Any]:
    origin = get_origin(annotation)
    if origin is typing.Annotated:
        return [get_args(annotation)[0]]
    if origin is typing.Literal:
        return []
    return [a for a in get_args(annotation) if a is not Ellipsis]


def _walk(annotation: Any, test: Any, depth: int = 0) -> bool:
    if depth > 20:
        return False
    if isinstance(annotation, type) and test(annotation):
        return True
    return any(_walk(a, test, depth + 1) for a in _members(annotation))


def involves_model(annotation: Any) -> bool:
    """Does `annotation` carry a pydantic model or a (stdlib or pydantic) dataclass anywhere?"""
    return _walk(annotation, lambda t: dataclasses.is_dataclass(t) or is_pydantic_model(t))


def involves_pydantic(annotation: Any) -> bool:
    """Does `annotation` carry a pydantic model (or pydantic dataclass) anywhere?"""
    return _walk(annotation, is_pydantic_model)


# --------------------------------------------------------------------------- schemas


def _ref_name(ref: Any) -> Optional[str]:
    if isinstance(ref, str) and ref.startswith("#/$defs/"):
        return ref[len("#/$defs/"):]
    return None


def _refs(node: Any) -> set[str]:
    out: set[str] = set()
    if isinstance(node, dict):
        name = _ref_name(node.get("$ref"))
        if name is not None:
            out.add(name)
        for value in node.values():
            out |= _refs(value)
    elif isinstance(node, list):
        for value in node:
            out |= _refs(value)
    return out


def _recursive(defs: dict[str, Any]) -> set[str]:
    """Definitions that reach themselves through references (these cannot be inlined)."""
    graph = {name: _refs(body) for name, body in defs.items()}
    found: set[str] = set()
    for start in graph:
        stack, seen = list(graph[start]), set()
        while stack:
            name = stack.pop()
            if name == start:
                found.add(start)
                break
            if name in seen or name not in graph:
                continue
            seen.add(name)
            stack.extend(graph[name])
    return found


def inline_refs(schema: dict[str, Any]) -> tuple[dict[str, Any], dict[str, Any]]:
    """`schema` with its `$defs` inlined; returns `(schema, kept_defs)` — `kept_defs` holds only
    recursive definitions (their references stay `#/$defs/<name>`)."""
    schema = copy.deepcopy(schema)
    defs: dict[str, Any] = schema.pop("$defs", None) or {}
    if not defs:
        return schema, {}
    keep = _recursive(defs)

    def resolve(node: Any) -> Any:
        if isinstance(node, list):
            return [resolve(v) for v in node]
        if not isinstance(node, dict):
            return node
        name = _ref_name(node.get("$ref"))
        if name is not None and name not in keep and name in defs:
            siblings = {k: v for k, v in node.items() if k != "$ref"}
            return resolve({**copy.deepcopy(defs[name]), **siblings})
        return {k: resolve(v) for k, v in node.items()}

    return resolve(schema), {name: resolve(defs[name]) for name in sorted(keep)}


def pydantic_schema(annotation: Any) -> tuple[dict[str, Any], dict[str, Any]]:
    """pydantic's JSON schema of `annotation` (validation mode), inlined: `(schema, kept_defs)`."""
    from pydantic import TypeAdapter

    return inline_refs(TypeAdapter(annotation).json_schema())


# --------------------------------------------------------------------------- validation


class Adapter:
    """Validates JSON values into instances of one annotation (the pydantic adapter is built lazily)."""

    def __init__(self, annotation: Any, prefix: str = "", localns: Optional[dict[str, Any]] = None) -> None:
        self.annotation = annotation
        self.prefix = prefix
        self.localns = localns
        self._adapter: Any = None

    def validate(self, value: Any, prefix: Optional[str] = None) -> Any:
        """The validated instance; `ArgumentProblems` (paths under `prefix`, default the adapter's)
        when `value` does not fit."""
        from pydantic import TypeAdapter, ValidationError

        if self._adapter is None:
            adapter = TypeAdapter(self.annotation)
            if self.localns:  # names local to the scope that defined the tool or the output type
                adapter.rebuild(force=True, raise_errors=False, _types_namespace=self.localns)
            self._adapter = adapter
        try:
            return self._adapter.validate_python(value)
        except ValidationError as exc:
            lead = self.prefix if prefix is None else prefix
            raise ArgumentProblems([self._line(err, lead) for err in exc.errors(include_url=False)]) from None

    @staticmethod
    def _line(err: Any, prefix: str) -> str:
        path = "/".join(str(p) for p in ((prefix,) if prefix else ()) + tuple(err.get("loc") or ()))
        message = str(err.get("msg") or "invalid value")
        return f"{path}: {message}" if path else message


def json_default(value: Any) -> Any:
    """`json.dumps(default=...)`: pydantic models and dataclass instances as plain JSON data."""
    dump = getattr(value, "model_dump", None)
    if callable(dump) and _base_model() is not None and isinstance(value, _base_model()):
        return dump(mode="json")
    if dataclasses.is_dataclass(value) and not isinstance(value, type):
        return {f.name: getattr(value, f.name) for f in dataclasses.fields(value)}
    raise ToolnexusTypeError(f"Object of type {type(value).__name__} is not JSON serializable")
