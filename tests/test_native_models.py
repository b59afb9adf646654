"""Native tools with pydantic-model and dataclass parameters: full schemas, validation, instances.

Models are defined both at module level and inside test functions (this file uses string
annotations, so the latter exercises resolution against the defining scope's locals).
"""

from __future__ import annotations

import dataclasses
import enum
import json
import subprocess
import sys
from typing import Optional

import pytest
from pydantic import BaseModel, Field, field_validator

from support.llm_server import RecordingTransport, anthropic_calls, anthropic_text, openai_calls, openai_text
from toolnexus import define_tool, to_anthropic, to_openai, tool
from toolnexus.client import create_client
from toolnexus.toolkit import Toolkit


class Unit(str, enum.Enum):  # noqa: UP042 - the str-mixin form users write, not StrEnum
    celsius = "celsius"
    fahrenheit = "fahrenheit"


class Place(BaseModel):
    """A place on the map."""

    city: str = Field(description="City name, e.g. Paris")
    country: Optional[str] = None


class Forecast(BaseModel):
    place: Place
    days: int = Field(ge=1, le=7, description="How many days ahead")
    unit: Unit = Unit.celsius

    @field_validator("days")
    @classmethod
    def not_four(cls, value: int) -> int:
        if value == 4:
            raise ValueError("four-day forecasts are not offered")
        return value


class TreeNode(BaseModel):
    label: str
    children: list[TreeNode] = []


def _walk(node):
    if isinstance(node, dict):
        yield node
        for v in node.values():
            yield from _walk(v)
    elif isinstance(node, list):
        for v in node:
            yield from _walk(v)


def _has_refs(schema) -> bool:
    return any("$ref" in n or "$defs" in n for n in _walk(schema))


def test_a_model_parameter_gets_pydantics_own_schema():
    @tool
    def locate(place: Place) -> str:
        """Find a place."""
        return place.city

    assert locate.input_schema == {
        "type": "object",
        "properties": {"place": Place.model_json_schema()},
        "additionalProperties": False,
        "required": ["place"],
    }
    prop = locate.input_schema["properties"]["place"]
    assert prop["properties"]["city"]["description"] == "City name, e.g. Paris"
    assert prop["description"] == "A place on the map."
    assert prop["required"] == ["city"]


def test_nested_models_and_enums_are_inlined_without_refs():
    @tool
    def forecast(request: Forecast, verbose: bool = False) -> str:
        """Weather forecast.

        Args:
            request: What to forecast.
        """
        return "ok"

    schema = forecast.input_schema
    assert not _has_refs(schema)
    req = schema["properties"]["request"]
    assert req["description"] == "What to forecast."
    assert req["required"] == ["place", "days"]
    assert req["properties"]["place"]["properties"]["city"] == {
        "description": "City name, e.g. Paris", "title": "City", "type": "string"}
    assert req["properties"]["days"]["minimum"] == 1 and req["properties"]["days"]["maximum"] == 7
    assert req["properties"]["days"]["description"] == "How many days ahead"
    assert req["properties"]["unit"]["enum"] == ["celsius", "fahrenheit"]
    assert schema["properties"]["verbose"] == {"type": "boolean"}
    # both wires get the same inlined schema
    assert to_openai([forecast])[0]["function"]["parameters"] == schema
    assert to_anthropic([forecast])[0]["input_schema"] == schema


async def test_the_function_receives_validated_instances():
    seen = []

    @tool
    def forecast(request: Forecast, places: list[Place], home: Optional[Place] = None) -> str:
        seen.append((request, places, home))
        return f"{request.place.city} {request.days} {request.unit.value}"

    r = await forecast.execute({"request": {"place": {"city": "Oslo"}, "days": 3.0, "unit": "fahrenheit"},
                                "places": [{"city": "Rome", "country": "IT"}]})
    assert (r.output, r.is_error) == ("Oslo 3 fahrenheit", False)
    request, places, home = seen[0]
    assert isinstance(request, Forecast) and isinstance(request.place, Place)
    assert request.unit is Unit.fahrenheit and request.days == 3 and isinstance(request.days, int)
    assert places == [Place(city="Rome", country="IT")] and home is None


async def test_invalid_model_arguments_name_tool_and_field_and_the_tool_does_not_run():
    ran = []

    @tool
    def forecast(request: Forecast) -> str:
        ran.append(request)
        return "ok"

    r = await forecast.execute({"request": {"place": {}, "days": 9, "unit": "kelvin"}})
    assert r.is_error is True
    assert r.output == (
        "invalid arguments for forecast: request/place/city: Field required; "
        "request/days: Input should be less than or equal to 7; "
        "request/unit: Input should be 'celsius' or 'fahrenheit'"
    )
    r = await forecast.execute({"request": {"place": {"city": "Oslo"}, "days": 4}})
    assert r.output == "invalid arguments for forecast: request/days: Value error, four-day forecasts are not offered"
    r = await forecast.execute({})
    assert r.output == "invalid arguments for forecast: 'request' is a required property"
    r = await forecast.execute({"request": "Oslo"})
    assert r.output.startswith("invalid arguments for forecast: request: Input should be a valid dictionary")
    assert ran == []


async def test_more_than_five_problems_are_counted_not_listed():
    class Wide(BaseModel):
        a: int
        b: int
        c: int
        d: int
        e: int
        f: int
        g: int

    @tool
    def wide(w: Wide) -> str:
        return "never"

    r = await wide.execute({"w": {}})
    assert r.output == ("invalid arguments for wide: w/a: Field required; w/b: Field required; w/c: Field required; "
                        "w/d: Field required; w/e: Field required (+2 more)")


async def test_dataclass_parameters_are_built_as_instances():
    class Size(enum.Enum):
        small = "s"
        large = "l"

    @dataclasses.dataclass
    class Dims:
        w: int
        h: int = 1

    @dataclasses.dataclass
    class Box:
        dims: Dims
        size: Size
        tags: list[str] = dataclasses.field(default_factory=list)

    got = []

    @tool
    def pack(box: Box) -> str:
        got.append(box)
        return "packed"

    assert pack.input_schema["properties"]["box"] == {
        "type": "object",
        "properties": {
            "dims": {"type": "object", "properties": {"w": {"type": "number"}, "h": {"type": "number"}},
                     "required": ["w"]},
            "size": {"type": "string", "enum": ["s", "l"]},
            "tags": {"type": "array", "items": {"type": "string"}},
        },
        "required": ["dims", "size"],
    }
    r = await pack.execute({"box": {"dims": {"w": 2.0}, "size": "l"}})
    assert (r.output, r.is_error) == ("packed", False)
    assert got == [Box(dims=Dims(w=2, h=1), size=Size.large, tags=[])]
    assert isinstance(got[0].dims, Dims) and got[0].size is Size.large
    r = await pack.execute({"box": {"dims": {"w": 2.5}, "size": "m"}})
    assert r.output == ("invalid arguments for pack: box/dims/w: Input should be a valid integer, got a number with a "
                        "fractional part; box/size: Input should be 's' or 'l'")
    assert len(got) == 1


async def test_a_recursive_model_keeps_its_definitions_at_the_top_of_the_schema():
    @tool
    def outline(root: TreeNode) -> str:
        return "/".join(child.label for child in root.children)

    schema = outline.input_schema
    assert schema["properties"]["root"] == {"$ref": "#/$defs/TreeNode"}
    assert set(schema["$defs"]) == {"TreeNode"}
    assert schema["$defs"]["TreeNode"]["properties"]["children"]["items"] == {"$ref": "#/$defs/TreeNode"}
    r = await outline.execute({"root": {"label": "a", "children": [{"label": "b"}, {"label": "c"}]}})
    assert (r.output, r.is_error) == ("b/c", False)
    r = await outline.execute({"root": {"label": "a", "children": [{}]}})
    assert r.output == "invalid arguments for outline: root/children/0/label: Field required"


async def test_returned_models_and_dataclasses_are_serialised_as_json():
    @dataclasses.dataclass
    class Pair:
        left: Place
        right: int

    @tool
    def make() -> Pair:
        return Pair(Place(city="Oslo"), 2)

    r = await make.execute({})
    assert (json.loads(r.output), r.is_error) == ({"left": {"city": "Oslo", "country": None}, "right": 2}, False)

    @tool
    def models() -> list:
        return [Place(city="A"), {"unit": Unit.celsius}]

    r = await models.execute({})
    assert json.loads(r.output) == [{"city": "A", "country": None}, {"unit": "celsius"}]

    @tool
    def bad() -> object:
        return object()

    r = await bad.execute({})
    assert r.is_error and r.output.startswith("tool bad returned a value that is not JSON-serialisable (object)")


async def test_validate_false_still_builds_instances_and_reports_what_pydantic_rejects():
    @define_tool(validate=False)
    def locate(place: Place) -> str:
        return type(place).__name__

    assert (await locate.execute({"place": {"city": "X"}})).output == "Place"
    assert (await locate.execute({"place": {}})).output == "invalid arguments for locate: place/city: Field required"


async def test_the_model_sees_the_validation_error_through_the_client_loop_on_both_wires():
    got = []

    @tool
    def locate(place: Place) -> str:
        got.append(place)
        return f"found {place.city}"

    for style, calls, text in (("openai", openai_calls, openai_text), ("anthropic", anthropic_calls, anthropic_text)):
        transport = RecordingTransport(calls(("c1", "locate", {"place": {"country": "NO"}})),
                                       calls(("c2", "locate", {"place": {"city": "Oslo"}})), text("done"))
        client = create_client(base_url="http://mock.local", style=style, model="m", api_key="k",
                               http_transport=transport)
        r = await client.run("where?", Toolkit(None, None, [], [], [locate]))
        assert r.text == "done"
        assert [c["output"] for c in r.tool_calls] == [
            "invalid arguments for locate: place/city: Field required", "found Oslo"]
        declared = transport.payloads[0]["tools"][0]
        params = declared["function"]["parameters"] if style == "openai" else declared["input_schema"]
        assert params["properties"]["place"]["properties"]["city"]["type"] == "string"
    assert got == [Place(city="Oslo"), Place(city="Oslo")]


def test_plain_tools_never_import_pydantic():
    code = (
        "import sys, asyncio, toolnexus\n"
        "from toolnexus import define_tool\n"
        "import dataclasses\n"
        "@dataclasses.dataclass\n"
        "class P:\n"
        "    x: int\n"
        "def f(a: int, p: P) -> str:\n"
        "    return 'ok'\n"
        "t = define_tool(f)\n"
        "print(sorted(m for m in sys.modules if m == 'pydantic' or m.startswith('pydantic.')))\n"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "[]"


def test_a_model_pydantic_cannot_describe_is_a_clear_definition_error():
    from pydantic import ConfigDict

    class Handle:
        pass

    class Opaque(BaseModel):
        model_config = ConfigDict(arbitrary_types_allowed=True)
        handle: Handle

    def use(thing: Opaque) -> str:
        return "never"

    with pytest.raises(ValueError) as info:
        define_tool(use)
    message = str(info.value)
    assert message.startswith("toolnexus: tool use: no JSON schema for parameter 'thing': ")
    assert message.endswith(" — pass input_schema=... or use JSON-friendly field types")
    explicit = define_tool(use, input_schema={"type": "object", "properties": {"thing": {"type": "object"}}})
    assert explicit.input_schema["properties"]["thing"] == {"type": "object"}
