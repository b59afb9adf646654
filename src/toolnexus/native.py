"""Native tools: turn a plain Python function into a `Tool`.

`define_tool(fn)` / `@tool` infer the JSON schema from type hints and the docstring, and wrap
the call so that nothing but cancellation crosses the tool boundary as an exception: a raise, a
non-JSON return value, arguments that violate the schema or an exceeded `ctx.timeout` all come
back as error `ToolResult`s the model can read.

Choices beyond the plain 0.21 behaviour, all deliberate:
- Richer inference: `Literal`/`Enum` give `enum`, `list[T]` gives `items`, dataclasses and
  TypedDicts give nested objects, and a Google-style `Args:` section gives each property a
  `description`.
- `int`: the schema says `{"type": "number"}` by default (0.21's, kept so existing tools show
  models the same schema), but an `int` parameter never receives a fraction: an integral float
  such as `2.0` is passed as `2`, and `2.5` is refused with an error result the model can read
  ("invalid arguments for add: a: 2.5 is not an integer"); the function does not run.
  `int_schema="integer"` (on `define_tool` / `@tool` / `infer_schema`) opts into the precise
  JSON Schema type for every `int` hint — parameters, list items, dataclass and TypedDict fields,
  integer enums — so the model is told, and the validator checks nested values too. New code
  should pass it; the default stays for 0.21 compatibility.
- The `Tool.execute` shape, `def approve(args=None, ctx=None)` (an untyped `args` defaulting to
  None beside a `ctx`), is what 0.21 examples wrote for a tool without parameters: `args` is
  left out of the schema (it would show the model a parameter that means nothing) and stays None.
- Arguments are validated against the tool's schema before the call (`validate=False` opts out),
  so a model gets "invalid arguments for add: 'a' is a required property" instead of a
  `TypeError` from deep inside.
- Parameters typed as a pydantic `BaseModel` (or a dataclass, or a container of either such as
  `list[Model]` / `Model | None`) get the model's full schema — pydantic's own, with `$ref`s
  inlined (see `_typed.py` for why) — and are validated by pydantic before the call: the function
  receives the validated *instance*, and a bad value comes back as "invalid arguments for
  <tool>: <param>/<field>: <reason>" without the function running. Stdlib dataclasses keep the
  schema inferred here (so defining one never imports pydantic) and are built by pydantic when
  called. A pydantic model or dataclass *returned* by a tool is serialised as its JSON data.
- Forward references are resolved per parameter: one unresolvable hint costs only that
  parameter its schema. String annotations (`from __future__ import annotations`) may name
  classes local to the function that defines the tool: the defining scope's locals are consulted.
- A function that raises reaches the model as `str(exc)` (the pinned text), but is not lost to
  whoever debugs it: the type and traceback are logged on the `toolnexus` logger at DEBUG, and
  the result's `metadata["error_type"]` names the class (`"KeyError"`). Running out of
  `ctx.timeout` is not the tool's exception: that result has no `error_type`.
- `needs_approval=True | predicate | ApprovalRule` (ours) makes the tool wait for a human's
  approval before its body runs (`toolnexus.approvals`): the returned tool is already gated, so
  even a direct `tool.execute(args)` asks first. The predicate gets the arguments and the context
  and may be async (approve a refund under $100 silently, ask above).
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
import sys
import types
import typing
from collections.abc import Callable
from typing import Any, Literal, Optional, Union, get_args, get_origin, overload

from . import _write_ahead
from ._diag import tool_raised
from ._schema import schema_error
from ._typed import Adapter, ArgumentProblems, involves_model, involves_pydantic, json_default, pydantic_schema
from .approvals import enforce, rule_of
from .errors import ToolnexusValueError
from .types import JSONSchema, Tool, ToolContext, ToolResult

__all__ = ["define_tool", "tool", "infer_schema"]

_SKIPPED = {"ctx", "context", "self", "cls"}
_NONE = type(None)
IntSchema = Literal["number", "integer"]
_INT_SCHEMAS = ("number", "integer")


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


def _enum_schema(values: list[Any], int_schema: IntSchema = "number") -> JSONSchema:
    schema: JSONSchema = {"enum": values}
    kinds = {type(v) for v in values}
    if kinds == {str}:
        schema = {"type": "string", "enum": values}
    elif kinds == {bool}:
        schema = {"type": "boolean", "enum": values}
    elif kinds == {int}:
        schema = {"type": int_schema, "enum": values}
    elif kinds and kinds <= {int, float}:
        schema = {"type": "number", "enum": values}
    return schema


def _check_int_schema(int_schema: Any) -> IntSchema:
    if int_schema not in _INT_SCHEMAS:
        raise ToolnexusValueError(f'toolnexus: int_schema must be "number" (the default) or "integer", '
                                  f"got {int_schema!r}")
    return int_schema


def infer_schema(annotation: Any, localns: Optional[dict[str, Any]] = None, *,
                 int_schema: IntSchema = "number") -> JSONSchema:
    """The JSON schema of one parameter annotation (`{}` when nothing useful is known).

    `localns` resolves string annotations inside dataclasses and TypedDicts defined locally;
    `int_schema="integer"` gives `int` hints the precise JSON Schema type (see the module docstring)."""
    if annotation is inspect.Parameter.empty or annotation is Any or isinstance(annotation, str):
        return {}
    origin = get_origin(annotation)
    if origin is typing.Annotated:
        return infer_schema(get_args(annotation)[0], localns, int_schema=int_schema)
    if origin is Union or origin is types.UnionType:
        members = [a for a in get_args(annotation) if a is not _NONE]
        return infer_schema(members[0], localns, int_schema=int_schema) if len(members) == 1 else {}
    if origin is typing.Literal:
        return _enum_schema(list(get_args(annotation)), int_schema)
    if annotation is bool:
        return {"type": "boolean"}
    if annotation is int:
        return {"type": int_schema}
    if annotation is float:
        return {"type": "number"}
    if annotation is str:
        return {"type": "string"}
    if annotation in (list, tuple, set):
        return {"type": "array"}
    if origin in (list, set, frozenset) or (origin is tuple and get_args(annotation)[-1:] == (Ellipsis,)):
        schema: JSONSchema = {"type": "array"}
        items = infer_schema(get_args(annotation)[0], localns, int_schema=int_schema) if get_args(annotation) else {}
        if items:
            schema["items"] = items
        return schema
    if origin is tuple:
        return {"type": "array"}
    if annotation is dict or origin is dict:
        return {"type": "object"}
    if isinstance(annotation, type) and issubclass(annotation, enum.Enum):
        return _enum_schema([m.value for m in annotation], int_schema)
    if isinstance(annotation, type) and dataclasses.is_dataclass(annotation):
        return _object_schema(
            annotation,
            [f.name for f in dataclasses.fields(annotation)],
            {
                f.name
                for f in dataclasses.fields(annotation)
                if f.default is dataclasses.MISSING and f.default_factory is dataclasses.MISSING
            },
            localns,
            int_schema,
        )
    if typing.is_typeddict(annotation):
        return _object_schema(annotation, list(annotation.__annotations__), set(annotation.__required_keys__), localns,
                              int_schema)
    return {}


def _object_schema(cls: type, names: list[str], required: set[str], localns: Optional[dict[str, Any]] = None,
                   int_schema: IntSchema = "number") -> JSONSchema:
    try:
        hints = typing.get_type_hints(cls, localns=localns)
    except Exception:
        hints = {}
    schema: JSONSchema = {
        "type": "object",
        "properties": {n: infer_schema(hints.get(n, inspect.Parameter.empty), localns, int_schema=int_schema)
                       for n in names},
    }
    req = [n for n in names if n in required]
    if req:
        schema["required"] = req
    return schema


def _caller_locals(fn: Any, depth: int) -> Optional[dict[str, Any]]:
    """The locals of the scope defining the tool, when `fn` has string annotations to resolve."""
    annotations = getattr(fn, "__annotations__", None)
    if not isinstance(annotations, dict) or not any(isinstance(a, str) for a in annotations.values()):
        return None
    try:
        frame = sys._getframe(depth + 1)
    except ValueError:  # pragma: no cover - no such frame
        return None
    return dict(frame.f_locals) if frame.f_code.co_name != "<module>" else None


def _resolve_hints(fn: Callable[..., Any], params: list[inspect.Parameter],
                   localns: Optional[dict[str, Any]] = None) -> dict[str, Any]:
    """Type hints per parameter; an unresolvable forward ref costs only its own parameter."""
    try:
        return typing.get_type_hints(fn, localns=localns, include_extras=True)
    except Exception:
        pass
    globalns = getattr(inspect.unwrap(fn), "__globals__", {})
    hints: dict[str, Any] = {}
    for p in params:
        ann = p.annotation
        if isinstance(ann, str):
            try:
                ann = eval(ann, globalns, localns)
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
    return inspect.iscoroutinefunction(fn) or inspect.iscoroutinefunction(type(fn).__call__)


def _to_result(name: str, value: Any) -> ToolResult:
    if isinstance(value, ToolResult):
        return value
    if isinstance(value, str):
        return ToolResult(output=value, is_error=False)
    try:
        return ToolResult(output=json.dumps(value, default=json_default), is_error=False)
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
    idempotent: bool = False,
    localns: Optional[dict[str, Any]] = None,
    int_schema: IntSchema = "number",
    needs_approval: Any = False,
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
    hints = _resolve_hints(fn, params, localns)
    ctx_param = next((n for n in ("ctx", "context") if sig and n in sig.parameters), None)
    kept = [
        p
        for p in params
        if p.name not in _SKIPPED and p.kind not in (inspect.Parameter.VAR_POSITIONAL, inspect.Parameter.VAR_KEYWORD)
        and not (ctx_param is not None and _is_execute_args(p))
    ]
    int_params = {p.name for p in kept if _is_int_hint(hints.get(p.name, p.annotation))}
    # parameters pydantic validates and builds (models, dataclasses, containers of them)
    models = {p.name: Adapter(hints[p.name], p.name, localns) for p in kept if involves_model(hints.get(p.name))}

    schema = input_schema
    if input_schema is None:
        input_schema = _inferred_schema(name, fn, kept, hints, localns, int_schema)
        # the model-typed properties are pydantic's to check (better messages, custom validators)
        schema = {**input_schema, "properties": {k: ({} if k in models else v)
                                                 for k, v in input_schema["properties"].items()}}
    tool_name = name
    awaits = _wants_await(fn)  # else: run on a worker thread

    async def execute(args: Optional[dict[str, Any]] = None, ctx: Optional[ToolContext] = None) -> ToolResult:
        call_args = dict(args or {})
        if validate:
            problem = schema_error(schema, call_args)
            if problem:
                return ToolResult(output=f"invalid arguments for {tool_name}: {problem}", is_error=True)
        if models:
            problems: list[str] = []
            for key, adapter in models.items():
                if key in call_args:
                    try:
                        call_args[key] = adapter.validate(call_args[key])
                    except ArgumentProblems as exc:
                        problems.extend(exc.problems)
            if problems:
                text = ArgumentProblems(problems).text()
                return ToolResult(output=f"invalid arguments for {tool_name}: {text}", is_error=True)
        for key in int_params:
            value = call_args.get(key)
            if isinstance(value, float):
                if not value.is_integer():  # never hand an `int` parameter a fraction the model sent
                    return ToolResult(output=f"invalid arguments for {tool_name}: {key}: {value!r} is not an integer",
                                      is_error=True)
                call_args[key] = int(value)
        if ctx_param is not None:
            call_args[ctx_param] = ctx

        async def invoke() -> Any:
            if awaits:
                value = fn(**call_args)
            else:  # a durable run's start record for this call is written on the same thread, first
                value = await _write_ahead.to_thread(fn, **call_args)
            if inspect.isawaitable(value):
                value = await value
            return value

        timeout = ctx.timeout if ctx is not None else None
        deadline = asyncio.timeout(timeout)  # None: no deadline
        try:
            async with deadline:
                value = await invoke()
        except Exception as exc:
            if deadline.expired():  # our deadline, not a TimeoutError the function raised itself
                return ToolResult(output=f"tool {tool_name} timed out after {timeout:g}s", is_error=True)
            return ToolResult(output=str(exc), is_error=True, metadata=tool_raised(tool_name, exc))
        return _to_result(tool_name, value)

    if not awaits:
        _write_ahead.taking(execute)
    rule_of(needs_approval, f"define_tool({name!r}) needs_approval")  # a wrong type fails here, by name
    built = Tool(name=name, description=description, input_schema=input_schema, source=source,  # type: ignore[arg-type]
                 execute=execute, idempotent=bool(idempotent), needs_approval=needs_approval)
    # an approval is asked only for a call whose arguments pass the schema check
    return enforce(built, precheck=(lambda a: schema_error(schema, a)) if validate else None)


def _is_execute_args(p: inspect.Parameter) -> bool:
    """`args=None`, untyped, beside a `ctx`: the `Tool.execute` shape, not a parameter for the model."""
    return p.name == "args" and p.default is None and p.annotation is inspect.Parameter.empty


def _inferred_schema(name: str, fn: Callable[..., Any], kept: list[inspect.Parameter],
                     hints: dict[str, Any], localns: Optional[dict[str, Any]],
                     int_schema: IntSchema = "number") -> JSONSchema:
    """The inferred input schema; a recursive model's definitions go to a top-level `$defs`."""
    docs = _docstring_args(inspect.getdoc(fn))
    props: dict[str, JSONSchema] = {}
    defs: dict[str, Any] = {}
    for p in kept:
        hint = hints.get(p.name, p.annotation)
        if involves_pydantic(hint):
            try:
                prop, kept_defs = pydantic_schema(hint)
            except Exception as exc:  # e.g. a field pydantic has no JSON schema for
                raise ToolnexusValueError(f"toolnexus: tool {name}: no JSON schema for parameter {p.name!r}: {exc} — "
                                 "pass input_schema=... or use JSON-friendly field types") from None
            for key, body in kept_defs.items():
                if key in defs and defs[key] != body:
                    raise ToolnexusValueError(f"toolnexus: tool {name}: two different recursive models are both named "
                                     f"{key!r}; rename one of them")
                defs[key] = body
        else:
            prop = infer_schema(hint, localns, int_schema=int_schema)
        if docs.get(p.name):
            prop = {**prop, "description": docs[p.name]}
        props[p.name] = prop
    schema: JSONSchema = {"type": "object", "properties": props, "additionalProperties": False}
    required = [p.name for p in kept if p.default is inspect.Parameter.empty]
    if required:
        schema["required"] = required
    if defs:
        schema["$defs"] = defs
    return schema


@overload
def define_tool(fn: Callable[..., Any], *, name: Optional[str] = ..., description: Optional[str] = ...,
            input_schema: Optional[JSONSchema] = ..., source: str = ..., validate: bool = ..., idempotent: bool = ...,
            int_schema: IntSchema = ...,
            needs_approval: Any = ...) -> Tool: ...


@overload
def define_tool(fn: None = ..., *, name: Optional[str] = ..., description: Optional[str] = ...,
            input_schema: Optional[JSONSchema] = ..., source: str = ..., validate: bool = ...,
            idempotent: bool = ..., int_schema: IntSchema = ...,
            needs_approval: Any = ...) -> Callable[[Callable[..., Any]], Tool]: ...


def define_tool(
    fn: Optional[Callable[..., Any]] = None,
    *,
    name: Optional[str] = None,
    description: Optional[str] = None,
    input_schema: Optional[JSONSchema] = None,
    source: str = "native",
    validate: bool = True,
    idempotent: bool = False,
    int_schema: IntSchema = "number",
    needs_approval: Any = False,
) -> Union[Tool, Callable[[Callable[..., Any]], Tool]]:
    """Make a `Tool` from `fn`, or return a decorator that does (`@define_tool(name=...)`).

    `idempotent=True` declares that running the tool twice with the same arguments is harmless:
    a durable run that crashed while the tool ran re-runs it, instead of asking the host.
    `int_schema="integer"` writes `int` hints as JSON Schema `integer` instead of 0.21's `number`.
    `needs_approval=True` (or a predicate `(args, ctx) -> bool`, sync or async, or an
    `ApprovalRule`) makes every call (or the calls the predicate picks) wait for a human's
    approval before the function runs; the function itself holds no approval logic.
    """
    return _define(fn, name, description, input_schema, source, validate, idempotent, _check_int_schema(int_schema),
                   needs_approval)


def _define(fn: Optional[Callable[..., Any]], name: Optional[str], description: Optional[str],
            input_schema: Optional[JSONSchema], source: str, validate: bool,
            idempotent: bool, int_schema: IntSchema,
            needs_approval: Any = False) -> Union[Tool, Callable[[Callable[..., Any]], Tool]]:
    """`define_tool` / `tool`; the frame two levels up is the scope that defines the tool."""
    if fn is None:
        return lambda f: _build(f, name, description, input_schema, source, validate, idempotent,
                                _caller_locals(f, 1), int_schema, needs_approval)
    return _build(fn, name, description, input_schema, source, validate, idempotent, _caller_locals(fn, 2),
                  int_schema, needs_approval)


@overload
def tool(fn: Callable[..., Any], *, name: Optional[str] = ..., description: Optional[str] = ...,
            input_schema: Optional[JSONSchema] = ..., validate: bool = ..., idempotent: bool = ...,
            int_schema: IntSchema = ...,
            needs_approval: Any = ...) -> Tool: ...


@overload
def tool(fn: None = ..., *, name: Optional[str] = ..., description: Optional[str] = ...,
            input_schema: Optional[JSONSchema] = ..., validate: bool = ...,
            idempotent: bool = ..., int_schema: IntSchema = ...,
            needs_approval: Any = ...) -> Callable[[Callable[..., Any]], Tool]: ...


def tool(
    fn: Optional[Callable[..., Any]] = None,
    *,
    name: Optional[str] = None,
    description: Optional[str] = None,
    input_schema: Optional[JSONSchema] = None,
    validate: bool = True,
    idempotent: bool = False,
    int_schema: IntSchema = "number",
    needs_approval: Any = False,
) -> Union[Tool, Callable[[Callable[..., Any]], Tool]]:
    """`define_tool` with `source="native"`: `@tool`, `@tool(...)` or `tool(fn)` (`needs_approval` as there)."""
    return _define(fn, name, description, input_schema, "native", validate, idempotent, _check_int_schema(int_schema),
                   needs_approval)
