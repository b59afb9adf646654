"""Native tools: schema inference, invocation, and the error boundary."""

import asyncio
import dataclasses
import enum
import functools
from typing import Annotated, Literal, Optional, TypedDict

import pytest

from toolnexus import ToolContext, ToolResult, define_tool, tool
from toolnexus.native import infer_schema


def test_pinned_add_example():
    @tool
    def add(a: int, b: int = 0, ctx: ToolContext | None = None) -> str:
        """Add two numbers.

        Longer text is ignored."""
        return str(a + b)

    assert add.name == "add" and add.description == "Add two numbers." and add.source == "native"
    assert add.input_schema == {
        "type": "object",
        "properties": {"a": {"type": "number"}, "b": {"type": "number"}},
        "additionalProperties": False,
        "required": ["a"],
    }
    assert list(add.input_schema) == ["type", "properties", "additionalProperties", "required"]


def test_type_table_including_optional_and_pep604_unions():
    class Color(enum.Enum):
        RED = "red"
        BLUE = "blue"

    def f(a, b: bool, c: float, d: str, e: list, g: tuple, h: dict, i: Optional[str], j: int | None,
          k: Annotated[str, "x"], l: bytes,  # noqa: E741 - the parameter names are the schema keys checked below
          m: int | str, n: dict[str, int], o: frozenset):
        pass

    props = define_tool(f).input_schema["properties"]
    assert props == {
        "a": {}, "b": {"type": "boolean"}, "c": {"type": "number"}, "d": {"type": "string"},
        "e": {"type": "array"}, "g": {"type": "array"}, "h": {"type": "object"}, "i": {"type": "string"},
        "j": {"type": "number"}, "k": {"type": "string"}, "l": {}, "m": {}, "n": {"type": "object"}, "o": {},
    }
    assert "required" in define_tool(f).input_schema


def test_richer_inference_literal_enum_items_dataclass_typeddict_and_docstring_args():
    class Color(enum.Enum):
        RED = "red"
        BLUE = "blue"

    @dataclasses.dataclass
    class Point:
        x: float
        y: float = 0.0

    class Opts(TypedDict):
        verbose: bool

    def f(mode: Literal["fast", "slow"], color: Color, tags: list[str], p: Point, o: Opts, nums: set[int] = None):
        """Do things.

        Args:
            mode: How to run.
            tags: Labels to
                attach.
        """

    props = define_tool(f).input_schema["properties"]
    assert props["mode"] == {"type": "string", "enum": ["fast", "slow"], "description": "How to run."}
    assert props["color"] == {"type": "string", "enum": ["red", "blue"]}
    assert props["tags"] == {"type": "array", "items": {"type": "string"}, "description": "Labels to attach."}
    assert props["p"] == {
        "type": "object",
        "properties": {"x": {"type": "number"}, "y": {"type": "number"}},
        "required": ["x"],
    }
    assert props["o"] == {"type": "object", "properties": {"verbose": {"type": "boolean"}}, "required": ["verbose"]}
    assert props["nums"] == {"type": "array", "items": {"type": "number"}}


def test_unresolvable_forward_ref_costs_only_its_parameter():
    def f(a: "NoSuchType", b: int):  # noqa: F821
        pass

    assert define_tool(f).input_schema["properties"] == {"a": {}, "b": {"type": "number"}}


def test_skipped_parameters_and_explicit_overrides():
    def f(self, ctx, a: str, *args, context=None, **kw):
        pass

    t = define_tool(f, name="custom", description="", input_schema={"type": "object"}, source="custom")
    assert (t.name, t.description, t.input_schema, t.source) == ("custom", "", {"type": "object"}, "custom")
    assert list(define_tool(f).input_schema["properties"]) == ["a"]

    @define_tool(name="deco")
    def g(x: str) -> str:
        return x

    assert g.name == "deco"


def test_partial_without_name_is_a_clear_value_error():
    def base(a: int, b: int) -> int:
        return a + b

    with pytest.raises(ValueError, match="pass name="):
        define_tool(functools.partial(base, 1))
    assert define_tool(functools.partial(base, 1), name="inc").name == "inc"


async def test_return_mapping_and_ctx_injection():
    @tool
    def as_dict(x: str, ctx=None) -> dict:
        return {"x": x, "has_ctx": ctx is not None}

    assert (await as_dict.execute({"x": "é"}, ToolContext())).output == '{"x": "\\u00e9", "has_ctx": true}'

    @tool
    def none() -> None:
        return None

    assert (await none.execute({})).output == "null"

    @tool
    async def passthrough() -> ToolResult:
        return ToolResult("raw", False, {"k": 1})

    assert await passthrough.execute() == ToolResult("raw", False, {"k": 1})


async def test_raise_and_non_serialisable_return_become_error_results():
    @tool
    def boom() -> str:
        raise RuntimeError("kaput")

    assert await boom.execute({}) == ToolResult("kaput", True, {"error_type": "RuntimeError"})

    @tool
    def weird() -> object:
        return object()

    r = await weird.execute({})
    assert r.is_error and "not JSON-serialisable (object)" in r.output


async def test_schema_violations_are_reported_before_the_call():
    calls = []

    @tool
    def add(a: int, b: int = 0) -> str:
        calls.append(a)
        return str(a + b)

    r = await add.execute({"b": 2})
    assert r.is_error and r.output == "invalid arguments for add: 'a' is a required property"
    r = await add.execute({"a": "x"})
    assert r.is_error and r.output == "invalid arguments for add: a: 'x' is not of type 'number'"
    r = await add.execute({"a": 1, "zzz": 1})
    assert r.is_error and "zzz" in r.output
    assert calls == []

    @tool(validate=False)
    def loose(a: int) -> str:
        return "ran"

    assert (await loose.execute({})).output.endswith("loose() missing 1 required positional argument: 'a'")


async def test_integral_floats_are_coerced_for_int_parameters():
    @tool
    def kind(n: int, m: Optional[int] = None, f: float = 0.0) -> str:
        return f"{type(n).__name__} {type(m).__name__} {type(f).__name__}"

    assert (await kind.execute({"n": 3.0, "m": 2.0, "f": 1.0})).output == "int int float"
    assert (await kind.execute({"n": 3, "f": 1.5})).output == "int NoneType float"


async def test_an_int_parameter_never_receives_a_fraction_the_model_sent():
    ran = []

    @tool
    def add(a: int, b: int = 0) -> int:
        """Add two numbers."""
        ran.append((a, b))
        return a + b

    assert add.input_schema["properties"]["a"] == {"type": "number"}  # the pinned 0.21 schema is kept
    refused = await add.execute({"a": 2.5, "b": 1})
    assert (refused.is_error, refused.output) == (True, "invalid arguments for add: a: 2.5 is not an integer")
    assert ran == []
    done = await add.execute({"a": 2.0, "b": 1})
    assert (done.is_error, done.output, ran) == (False, "3", [(2, 1)])


async def test_int_schema_integer_is_the_precise_schema_everywhere_an_int_appears():
    @dataclasses.dataclass
    class Span:
        start: int
        ratio: float = 1.0

    class Level(enum.Enum):
        LOW = 1
        HIGH = 2

    @tool(int_schema="integer")
    def plan(n: int, ids: list[int], span: Span, level: Level, maybe: Optional[int] = None, w: float = 0) -> str:
        return f"{n} {ids}"

    props = plan.input_schema["properties"]
    assert props["n"] == props["maybe"] == {"type": "integer"} and props["w"] == {"type": "number"}
    assert props["ids"] == {"type": "array", "items": {"type": "integer"}}
    assert props["span"]["properties"] == {"start": {"type": "integer"}, "ratio": {"type": "number"}}
    assert props["level"] == {"type": "integer", "enum": [1, 2]}
    nested = await plan.execute({"n": 1, "ids": [1, 2.5], "span": {"start": 0}, "level": 1})
    assert nested.is_error
    assert nested.output.startswith("invalid arguments for plan: ids/1: 2.5 is not of type 'integer'")
    ok = await plan.execute({"n": 2.0, "ids": [1], "span": {"start": 0}, "level": 2})
    assert (ok.is_error, ok.output) == (False, "2 [1]")
    assert define_tool(lambda a: a, name="f", int_schema="integer").input_schema["properties"] == {"a": {}}
    assert infer_schema(list[int], int_schema="integer") == {"type": "array", "items": {"type": "integer"}}
    with pytest.raises(ValueError, match='int_schema must be "number" \\(the default\\) or "integer", got \'int\''):
        define_tool(lambda a: a, name="f", int_schema="int")  # type: ignore[arg-type]


async def test_the_execute_shape_args_none_ctx_none_shows_the_model_no_parameter():
    """`def approve(args=None, ctx=None)` (the README's and 0.21's shape) has no parameter for the model."""
    seen = []

    async def approve(args=None, ctx=None):
        seen.append((args, ctx))
        return "approved"

    t = define_tool(approve, name="approve", description="Deploy after approval.")
    assert t.input_schema == {"type": "object", "properties": {}, "additionalProperties": False}
    assert (await t.execute({})).output == "approved" and seen == [(None, None)]

    def search(args: dict, ctx=None) -> str:  # a typed `args` is a real parameter
        return "x"

    assert list(define_tool(search).input_schema["properties"]) == ["args"]

    def plain(args=None) -> str:  # no ctx: not the execute shape, so still shown
        return "x"

    assert list(define_tool(plain).input_schema["properties"]) == ["args"]


async def test_sync_callable_returning_awaitable_and_async_call_objects_are_awaited():
    async def later():
        return "awaited"

    def sync_returns_coro():
        return later()

    assert (await define_tool(sync_returns_coro).execute({})).output == "awaited"

    class Callable_:
        __name__ = "obj"

        async def __call__(self, q: str) -> str:
            return q * 2

    assert (await define_tool(Callable_()).execute({"q": "ab"})).output == "abab"


async def test_sync_functions_run_off_the_event_loop():
    import threading

    @tool
    def where() -> str:
        return threading.current_thread().name

    assert (await where.execute({})).output != threading.current_thread().name


async def test_ctx_timeout_is_enforced():
    gate = asyncio.Event()

    @tool
    async def slow() -> str:
        await gate.wait()
        return "late"

    r = await slow.execute({}, ToolContext(timeout=0.01))
    assert r == ToolResult("tool slow timed out after 0.01s", True)


async def test_a_timeout_error_the_function_raises_is_its_own_error_result():
    @tool
    def upstream() -> str:
        raise TimeoutError("upstream timed out")

    raised = ToolResult("upstream timed out", True, {"error_type": "TimeoutError"})
    assert await upstream.execute({}) == raised
    # with a deadline that did not expire, the error is still the function's, not ours
    assert await upstream.execute({}, ToolContext(timeout=30)) == raised


async def test_cancellation_propagates():
    started = asyncio.Event()

    @tool
    async def hang() -> str:
        started.set()
        await asyncio.Event().wait()
        return ""

    task = asyncio.create_task(hang.execute({}))
    await started.wait()
    task.cancel()
    with pytest.raises(asyncio.CancelledError):
        await task
