"""Native tools: turn a plain Python function into a `Tool`.

`define_tool(fn)` / `@tool` infer the JSON schema from type hints and the docstring, and wrap
the call so that nothing but cancellation crosses the tool boundary as an exception: a raise, a
non-JSON return value, arguments that violate the schema or an exceeded `ctx.timeout` all come
back as error `ToolResult`s the model can read.

Choices beyond the pinned baseline (core.md §8), all deliberate:
- Richer inference: `Literal`/`Enum` give `enum`, `list[T]` gives `items`, dataclasses and
  TypedDicts give nested objects, and a Google-style `Args:` section gives each property a
  `description`. `int` stays `{"type": "number"}` (pinned), and integral floats such as `3.0`
  are coerced back to `int` for `int` parameters.
- Arguments are validated against the tool's schema before the call (`validate=False` opts out),
  so a model gets "invalid arguments for add: 'a' is a required property" instead of a
  `TypeError` from deep inside.
- Forward references are resolved per parameter: one unresolvable hint costs only that
  parameter its schema.
- Sync functions run in a worker thread; an awaitable they return (or an object with an
  `async __call__`) is awaited. A `ctx.timeout` is enforced with `asyncio.timeout`; a sync
  function that times out keeps running in its thread (Python cannot kill a thread), its result
  is discarded.
"""

from __future__ import annotations

import asyncio
import dataclasses
import enum
import inspect
import json
import re
import types
import typing
from collections.abc import Callable
from typing import Any, Optional, Union, get_args, get_origin

from ._schema import schema_error
from .types import JSONSchema, Tool, ToolContext, ToolResult
from .errors import ToolnexusValueError

__all__ = ["define_tool", "tool", "infer_schema"]

_SKIPPED = {"ctx", "context", "self", "cls"}
_NONE = type(None)


# --------------------------------------------------------------------------- schema inference


def _docstring_args(doc: Optional[str]) -> dict[str, str]:
    """Parse a Google-style `Args:` section into {name: description}."""
    if not doc:
        return {}
    out: dict[str, str] = {}
    lines = doc.splitlines()
    in_args = False
    indent: Optional[int] = None
    current: Optional[str] = None
    for line in lines:
        stripped = line.strip()
        if not in_args:
            if stripped in ("Args:", "Arguments:", "Parameters:"):
                in_args = True
            continue
        if not stripped:
            continue
        lead = len(line) - len(line.lstrip())
        if indent is None:
            indent = lead
        if lead < indent or (lead == 0 and stripped.endswith(":")):
            break
        m = re.match(r"^(\w+)\s*(?:\([^)]*\))?\s*:\s*(.*)$", stripped)
        if lead == indent and m:
            current = m.group(1)
            out[current] = m.group(2).strip()
        elif current is not None:
            out[current] = (out[current] + " " + stripped).strip()
    return out


def _enum_schema(values: list[Any]) -> JSONSchema:
    schema: JSONSchema = {"enum": values}
    kinds = {type(v) for v in values}
    if kinds == {str}:
        schema = {"type": "string", "enum": values}
    elif kinds == {bool}:
        schema = {"type": "boolean", "enum": values}
    elif kinds and kinds <= {int, float}:
        schema = {"type": "number", "enum": values}
    return schema


def infer_schema(annotation: Any) -> JSONSchema:
    """The JSON schema of one parameter annotation (`{}` when nothing useful is known)."""
    if annotation is inspect.Parameter.empty or annotation is Any or isinstance(annotation, str):
        return {}
    origin = get_origin(annotation)
    if origin is typing.Annotated:
        return infer_schema(get_args(annotation)[0])
    if origin is Union or origin is types.UnionType:
        members = [a for a in get_args(annotation) if a is not _NONE]
        return infer_schema(members[0]) if len(members) == 1 else {}
    if origin is typing.Literal:
        return _enum_schema(list(get_args(annotation)))
    if annotation is bool:
        return {"type": "boolean"}
    if annotation in (int, float):
        return {"type": "number"}
    if annotation is str:
        return {"type": "string"}
    if annotation in (list, tuple, set):
        return {"type": "array"}
    if origin in (list, set, frozenset) or (origin is tuple and get_args(annotation)[-1:] == (Ellipsis,)):
        schema: JSONSchema = {"type": "array"}
        items = infer_schema(get_args(annotation)[0]) if get_args(annotation) else {}
        if items:
            schema["items"] = items
        return schema
    if origin is tuple:
        return {"type": "array"}
    if annotation is dict or origin is dict:
        return {"type": "object"}
    if isinstance(annotation, type) and issubclass(annotation, enum.Enum):
        return _enum_schema([m.value for m in annotation])
    if isinstance(annotation, type) and dataclasses.is_dataclass(annotation):
        return _object_schema(
            annotation,
            [f.name for f in dataclasses.fields(annotation)],
            {
                f.name
                for f in dataclasses.fields(annotation)
                if f.default is dataclasses.MISSING and f.default_factory is dataclasses.MISSING
            },
        )
    if typing.is_typeddict(annotation):
        return _object_schema(annotation, list(annotation.__annotations__), set(annotation.__required_keys__))
    return {}


def _object_schema(cls: type, names: list[str], required: set[str]) -> JSONSchema:
    try:
        hints = typing.get_type_hints(cls)
    except Exception:
        hints = {}
    schema: JSONSchema = {
        "type": "object",
        "properties": {n: infer_schema(hints.get(n, inspect.Parameter.empty)) for n in names},
    }
    req = [n for n in names if n in required]
    if req:
        schema["required"] = req
    return schema


def _resolve_hints(fn: Callable[..., Any], params: list[inspect.Parameter]) -> dict[str, Any]:
    """Type hints per parameter; an unresolvable forward ref costs only its own parameter."""
    try:
        return typing.get_type_hints(fn, include_extras=True)
    except Exception:
        pass
    globalns = getattr(inspect.unwrap(fn), "__globals__", {})
    hints: dict[str, Any] = {}
    for p in params:
        ann = p.annotation
        if isinstance(ann, str):
            try:
                ann = eval(ann, globalns)  # noqa: S307 - same evaluation get_type_hints performs
            except Exception:
                ann = inspect.Parameter.empty
        hints[p.name] = ann
    return hints


def _is_int_hint(annotation: Any) -> bool:
    origin = get_origin(annotation)
    if origin is typing.Annotated:
        return _is_int_hint(get_args(annotation)[0])
    if origin is Union or origin is types.UnionType:
        members = [a for a in get_args(annotation) if a is not _NONE]
        return len(members) == 1 and _is_int_hint(members[0])
    return annotation is int


# --------------------------------------------------------------------------- the tool


def _first_doc_line(fn: Callable[..., Any]) -> str:
    doc = inspect.getdoc(fn)
    return doc.strip().splitlines()[0].strip() if doc and doc.strip() else ""


def _wants_await(fn: Callable[..., Any]) -> bool:
    return inspect.iscoroutinefunction(fn) or inspect.iscoroutinefunction(getattr(fn, "__call__", None))


def _to_result(name: str, value: Any) -> ToolResult:
    if isinstance(value, ToolResult):
        return value
    if isinstance(value, str):
        return ToolResult(output=value, is_error=False)
    try:
        return ToolResult(output=json.dumps(value), is_error=False)
    except (TypeError, ValueError) as exc:
        return ToolResult(
            output=f"tool {name} returned a value that is not JSON-serialisable ({type(value).__name__}): {exc}",
            is_error=True,
        )


def _build(
    fn: Callable[..., Any],
    name: Optional[str],
    description: Optional[str],
    input_schema: Optional[JSONSchema],
    source: str,
    validate: bool,
) -> Tool:
    if name is None:
        name = getattr(fn, "__name__", None)
        if not isinstance(name, str):
            raise ToolnexusValueError(
                f"toolnexus: cannot name a tool for {fn!r} (it has no __name__, e.g. a functools.partial); "
                "pass name=..."
            )
    if description is None:
        description = _first_doc_line(fn)

    try:
        sig = inspect.signature(fn)
    except (TypeError, ValueError):
        sig = None
    params = list(sig.parameters.values()) if sig else []
    hints = _resolve_hints(fn, params)
    kept = [
        p
        for p in params
        if p.name not in _SKIPPED and p.kind not in (inspect.Parameter.VAR_POSITIONAL, inspect.Parameter.VAR_KEYWORD)
    ]
    ctx_param = next((n for n in ("ctx", "context") if sig and n in sig.parameters), None)
    int_params = {p.name for p in kept if _is_int_hint(hints.get(p.name, p.annotation))}

    if input_schema is None:
        docs = _docstring_args(inspect.getdoc(fn))
        props: dict[str, JSONSchema] = {}
        for p in kept:
            prop = infer_schema(hints.get(p.name, p.annotation))
            if docs.get(p.name):
                prop = {**prop, "description": docs[p.name]}
            props[p.name] = prop
        input_schema = {"type": "object", "properties": props, "additionalProperties": False}
        required = [p.name for p in kept if p.default is inspect.Parameter.empty]
        if required:
            input_schema["required"] = required

    schema = input_schema
    tool_name = name

    async def execute(args: Optional[dict[str, Any]] = None, ctx: Optional[ToolContext] = None) -> ToolResult:
        call_args = dict(args or {})
        if validate:
            problem = schema_error(schema, call_args)
            if problem:
                return ToolResult(output=f"invalid arguments for {tool_name}: {problem}", is_error=True)
        for key in int_params:
            value = call_args.get(key)
            if isinstance(value, float) and value.is_integer():
                call_args[key] = int(value)
        if ctx_param is not None:
            call_args[ctx_param] = ctx

        async def invoke() -> Any:
            if _wants_await(fn):
                value = fn(**call_args)
            else:
                value = await asyncio.to_thread(fn, **call_args)
            if inspect.isawaitable(value):
                value = await value
            return value

        timeout = ctx.timeout if ctx is not None else None
        deadline = asyncio.timeout(timeout)  # None: no deadline
        try:
            async with deadline:
                value = await invoke()
        except Exception as exc:  # noqa: BLE001 - the tool boundary: failures become results
            if deadline.expired():  # our deadline, not a TimeoutError the function raised itself
                return ToolResult(output=f"tool {tool_name} timed out after {timeout:g}s", is_error=True)
            return ToolResult(output=str(exc), is_error=True)
        return _to_result(tool_name, value)

    return Tool(name=name, description=description, input_schema=input_schema, source=source, execute=execute)  # type: ignore[arg-type]


def define_tool(
    fn: Optional[Callable[..., Any]] = None,
    *,
    name: Optional[str] = None,
    description: Optional[str] = None,
    input_schema: Optional[JSONSchema] = None,
    source: str = "native",
    validate: bool = True,
) -> Union[Tool, Callable[[Callable[..., Any]], Tool]]:
    """Make a `Tool` from `fn`, or return a decorator that does (`@define_tool(name=...)`)."""
    if fn is None:
        return lambda f: _build(f, name, description, input_schema, source, validate)
    return _build(fn, name, description, input_schema, source, validate)


def tool(
    fn: Optional[Callable[..., Any]] = None,
    *,
    name: Optional[str] = None,
    description: Optional[str] = None,
    input_schema: Optional[JSONSchema] = None,
    validate: bool = True,
) -> Union[Tool, Callable[[Callable[..., Any]], Tool]]:
    """`define_tool` with `source="native"`: `@tool`, `@tool(...)` or `tool(fn)`."""
    return define_tool(fn, name=name, description=description, input_schema=input_schema, source="native", validate=validate)
