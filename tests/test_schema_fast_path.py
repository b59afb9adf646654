"""`_schema._plainly_valid`, the check that spares a fresh process the `jsonschema` import for
the plain schemas tools usually have: it may only ever say "valid" where `jsonschema` does (every
"no" goes to `jsonschema`, which words the message). Property-tested against `jsonschema` itself."""

from __future__ import annotations

from hypothesis import given, strategies as st
from jsonschema import Draft202012Validator

from toolnexus._schema import _plainly_valid, schema_problems

SCALARS = st.one_of(st.none(), st.booleans(), st.integers(-5, 5), st.floats(-5, 5, allow_nan=False),
                    st.sampled_from(["", "a", "b", "1"]))
VALUES = st.recursive(SCALARS, lambda inner: st.one_of(st.lists(inner, max_size=3),
                                                       st.dictionaries(st.sampled_from(["a", "b", "c"]), inner,
                                                                       max_size=3)), max_leaves=8)
TYPES = st.sampled_from(["string", "integer", "number", "boolean", "null", "object", "array"])


@st.composite
def schemas(draw, depth: int = 0):
    schema: dict = {}
    if draw(st.booleans()):
        schema["type"] = draw(st.one_of(TYPES, st.lists(TYPES, min_size=1, max_size=2)))
    if draw(st.booleans()):
        schema["enum"] = draw(st.lists(SCALARS, min_size=1, max_size=3))
    if depth < 2 and draw(st.booleans()):
        schema["properties"] = draw(st.dictionaries(st.sampled_from(["a", "b", "c"]), schemas(depth + 1), max_size=2))
        schema["required"] = draw(st.lists(st.sampled_from(["a", "b", "c"]), max_size=2, unique=True))
        schema["additionalProperties"] = draw(st.booleans())
    if depth < 2 and draw(st.booleans()):
        schema["items"] = draw(schemas(depth + 1))
    if draw(st.booleans()):
        schema["minimum"] = 0  # beyond the plain subset: always jsonschema's call
    return schema


@given(schemas(), VALUES)
def test_the_fast_path_never_calls_valid_what_jsonschema_rejects(schema, value):
    if _plainly_valid(schema, value):
        assert Draft202012Validator(schema).is_valid(value), (schema, value)
    assert (schema_problems(schema, value) == []) == Draft202012Validator(schema).is_valid(value)


def test_an_inferred_tool_schema_is_checked_without_jsonschema():
    schema = {"type": "object", "properties": {"build": {"type": "string"}, "n": {"type": "number"},
                                               "tags": {"type": "array", "items": {"type": "string"}},
                                               "mode": {"type": "string", "enum": ["a", "b"]}},
              "additionalProperties": False, "required": ["build"]}
    assert _plainly_valid(schema, {"build": "42", "n": 2, "tags": ["x"], "mode": "a"})
    assert not _plainly_valid(schema, {"build": 42})
    assert schema_problems(schema, {"build": 42}) == ["build: 42 is not of type 'string'"]
