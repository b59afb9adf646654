"""`http_tools_from_openapi` (core.md §8 #32): loading, schema building, `$ref` resolution and
calls against a real loopback HTTP server."""

from __future__ import annotations

import json
import logging

import pytest
import yaml

from support.http_fixtures import close_pool, server  # noqa: F401 - fixtures
from support.http_server import Reply
from toolnexus.http import http_tools_from_openapi
from toolnexus.types import ToolResult

PETS = {
    "openapi": "3.0.3",
    "info": {"title": "Pets", "version": "1"},
    "servers": [{"url": "https://{host}/v1", "variables": {"host": {"default": "pets.example"}}}],
    "paths": {
        "/pets": {
            "get": {
                "operationId": "listPets",
                "summary": "List pets",
                "description": "Newest first.",
                "parameters": [
                    {"name": "limit", "in": "query", "description": "Max items", "schema": {"type": "integer"}},
                    {"name": "tags", "in": "query", "schema": {"type": "array", "items": {"type": "string"}}},
                    {"$ref": "#/components/parameters/TraceId"},
                    {"name": "Authorization", "in": "header", "schema": {"type": "string"}},
                ],
            },
            "post": {
                "operationId": "create.pet",
                "requestBody": {
                    "required": True,
                    "content": {"application/json; charset=utf-8": {"schema": {"$ref": "#/components/schemas/NewPet"}}},
                },
            },
        },
        "/pets/{petId}": {
            "parameters": [{"name": "petId", "in": "path", "required": True, "schema": {"type": "string"}}],
            "get": {"summary": "Get a pet"},
            "put": {"operationId": "replacePet", "requestBody": {"$ref": "#/components/requestBodies/PetBody"}},
            "delete": {
                "operationId": "deletePet",
                "parameters": [{"name": "petId", "in": "path", "schema": {"type": "integer"}}],
            },
        },
        "/tags": {
            "post": {
                "operationId": "addTags",
                "requestBody": {
                    "content": {"application/json": {"schema": {"type": "array", "items": {"type": "string"}}}}
                },
            }
        },
        "/tree": {
            "post": {
                "operationId": "saveTree",
                "requestBody": {
                    "required": True,
                    "content": {"application/vnd.tree+json": {"schema": {"$ref": "#/components/schemas/Node"}}},
                },
            }
        },
    },
    "components": {
        "parameters": {
            "TraceId": {"name": "X-Trace-Id", "in": "header", "required": True, "schema": {"type": "string"}},
        },
        "schemas": {
            "NewPet": {
                "type": "object",
                "required": ["name"],
                "properties": {
                    "id": {"type": "integer", "readOnly": True},
                    "name": {"type": "string"},
                    "kind": {"$ref": "#/components/schemas/Kind"},
                },
            },
            "Kind": {"type": "string", "enum": ["cat", "dog"]},
            "Pet": {"type": "object", "properties": {"petId": {"type": "string"}, "name": {"type": "string"}}},
            "Node": {
                "type": "object",
                "properties": {
                    "label": {"type": "string"},
                    "children": {"type": "array", "items": {"$ref": "#/components/schemas/Node"}},
                },
            },
        },
        "requestBodies": {
            "PetBody": {
                "required": True,
                "content": {"application/json": {"schema": {"$ref": "#/components/schemas/Pet"}}},
            },
        },
    },
}


def spec_with(paths: dict, **top) -> dict:
    return {"openapi": "3.1.0", "info": {"title": "t", "version": "1"}, "paths": paths, **top}


async def by_name(spec, **kw) -> dict:
    return {t.name: t for t in await http_tools_from_openapi(spec, **kw)}


# ---------------------------------------------------------------- tools and schemas


async def test_one_tool_per_operation_in_document_order_with_sanitized_names():
    tools = await http_tools_from_openapi(PETS)
    assert [t.name for t in tools] == [
        "listPets", "create_pet", "get__pets__petId_", "replacePet", "deletePet", "addTags", "saveTree"]
    assert {t.source for t in tools} == {"http"}


async def test_description_joins_summary_and_description_or_falls_back_to_method_and_path():
    tools = await by_name(PETS)
    assert tools["listPets"].description == "List pets\n\nNewest first."
    assert tools["get__pets__petId_"].description == "Get a pet"
    assert tools["deletePet"].description == "DELETE /pets/{petId}"


async def test_parameters_become_properties_with_refs_resolved_and_reserved_headers_ignored():
    tools = await by_name(PETS)
    assert tools["listPets"].input_schema == {
        "type": "object",
        "properties": {
            "limit": {"type": "integer", "description": "Max items"},
            "tags": {"type": "array", "items": {"type": "string"}},
            "X-Trace-Id": {"type": "string"},
        },
        "additionalProperties": False,
        "required": ["X-Trace-Id"],
    }


async def test_operation_parameters_override_path_level_ones_and_path_params_are_required():
    tools = await by_name(PETS)
    assert tools["get__pets__petId_"].input_schema["properties"] == {"petId": {"type": "string"}}
    assert tools["deletePet"].input_schema == {
        "type": "object", "properties": {"petId": {"type": "integer"}},
        "additionalProperties": False, "required": ["petId"]}


async def test_json_object_body_is_merged_without_read_only_fields():
    tools = await by_name(PETS)
    assert tools["create_pet"].input_schema == {
        "type": "object",
        "properties": {"name": {"type": "string"}, "kind": {"type": "string", "enum": ["cat", "dog"]}},
        "additionalProperties": False,
        "required": ["name"],
    }


async def test_body_clashing_with_a_parameter_goes_under_body():
    tools = await by_name(PETS)
    assert tools["replacePet"].input_schema == {
        "type": "object",
        "properties": {
            "petId": {"type": "string"},
            "body": {"type": "object", "properties": {"petId": {"type": "string"}, "name": {"type": "string"}}},
        },
        "additionalProperties": False,
        "required": ["petId", "body"],
    }


async def test_non_object_optional_body_goes_under_body_not_required():
    tools = await by_name(PETS)
    assert tools["addTags"].input_schema == {
        "type": "object", "properties": {"body": {"type": "array", "items": {"type": "string"}}},
        "additionalProperties": False}


async def test_recursive_ref_is_expanded_once_then_cut():
    tools = await by_name(PETS)
    schema = tools["saveTree"].input_schema
    assert schema["properties"]["children"] == {"type": "array", "items": {"type": "object"}}
    json.dumps(schema)  # finite and JSON-serialisable


async def test_duplicate_names_are_renamed_with_a_warning(caplog):
    spec = spec_with({"/a": {"get": {"operationId": "op"}}, "/b": {"get": {"operationId": "op"}}}, servers=[{"url": "http://h"}])
    with caplog.at_level(logging.WARNING, logger="toolnexus"):
        tools = await http_tools_from_openapi(spec)
    assert [t.name for t in tools] == ["op", "op_2"]
    assert caplog.messages == ['[toolnexus] OpenAPI spec (dict): duplicate tool name "op" \u2014 renamed to "op_2"']


async def test_unsupported_body_types_skip_required_and_drop_optional_bodies(caplog):
    multipart = {"multipart/form-data": {"schema": {"type": "object"}}}
    spec = spec_with({
        "/up": {"post": {"operationId": "upload", "requestBody": {"required": True, "content": multipart}}},
        "/note": {"post": {"operationId": "note", "requestBody": {"content": multipart}}},
    }, servers=[{"url": "http://h"}])
    with caplog.at_level(logging.WARNING, logger="toolnexus"):
        tools = await http_tools_from_openapi(spec)
    assert [t.name for t in tools] == ["note"]
    assert tools[0].input_schema == {"type": "object", "properties": {}, "additionalProperties": False}
    assert caplog.messages == [
        "[toolnexus] OpenAPI spec (dict): POST /up request body type multipart/form-data is not supported"
        " \u2014 operation skipped",
        "[toolnexus] OpenAPI spec (dict): POST /note request body type multipart/form-data is not supported"
        " \u2014 body left out",
    ]


# ---------------------------------------------------------------- calls


async def test_call_sends_path_query_and_header_params(server):
    tools = await by_name(PETS, base_url=server.url + "/v1/")
    res = await tools["listPets"].execute({"limit": 2, "tags": ["a b", "c"], "X-Trace-Id": "t-1"})
    assert res == ToolResult("ok", False, {"status": 200})
    req = server.last
    assert (req.method, req.target) == ("GET", "/v1/pets?limit=2&tags=a+b&tags=c")
    assert req.headers["X-Trace-Id"] == "t-1"


async def test_call_encodes_path_values_and_merged_json_body(server):
    tools = await by_name(PETS, base_url=server.url)
    await tools["deletePet"].execute({"petId": "a/b"})
    assert (server.last.method, server.last.target) == ("DELETE", "/pets/a%2Fb")
    await tools["create_pet"].execute({"name": "Rex", "kind": "dog"})
    assert server.last.headers["Content-Type"] == "application/json"
    assert json.loads(server.last.body) == {"name": "Rex", "kind": "dog"}


async def test_call_sends_whole_body_property_as_json(server):
    tools = await by_name(PETS, base_url=server.url)
    await tools["replacePet"].execute({"petId": "7", "body": {"petId": "7", "name": "Tom"}})
    assert (server.last.method, server.last.target) == ("PUT", "/pets/7")
    assert json.loads(server.last.body) == {"petId": "7", "name": "Tom"}
    await tools["addTags"].execute({})
    assert server.last.body == b""


async def test_form_bodies_are_urlencoded(server):
    spec = spec_with({"/login": {"post": {"operationId": "login", "requestBody": {"required": True, "content": {
        "application/x-www-form-urlencoded": {"schema": {"type": "object", "required": ["user"], "properties": {
            "user": {"type": "string"}, "remember": {"type": "boolean"}}}}}}}}})
    (login,) = await http_tools_from_openapi(spec, base_url=server.url)
    assert login.input_schema["required"] == ["user"]
    await login.execute({"user": "ann", "remember": True})
    assert server.last.headers["Content-Type"] == "application/x-www-form-urlencoded"
    assert server.last.body == b"user=ann&remember=true"


async def test_query_styles_and_cookie_params(server):
    spec = spec_with({"/s": {"get": {"operationId": "s", "parameters": [
        {"name": "filter", "in": "query", "style": "deepObject", "schema": {"type": "object"}},
        {"name": "ids", "in": "query", "explode": False, "schema": {"type": "array"}},
        {"name": "pipes", "in": "query", "style": "pipeDelimited", "explode": False, "schema": {"type": "array"}},
        {"name": "session", "in": "cookie", "schema": {"type": "string"}},
        {"name": "q", "in": "query", "content": {"application/json": {"schema": {"type": "object"}}}},
    ]}}})
    (tool,) = await http_tools_from_openapi(spec, base_url=server.url)
    await tool.execute({"filter": {"kind": "cat"}, "ids": [1, 2], "pipes": ["a", "b"], "session": "s 1", "q": {"a": 1}})
    assert server.last.query == [("filter[kind]", "cat"), ("ids", "1,2"), ("pipes", "a|b"), ("q", '{"a":1}')]
    assert server.last.headers["Cookie"] == "session=s%201"


async def test_static_headers_expand_env_and_win_over_header_params(server, monkeypatch):
    monkeypatch.setenv("TN_OPENAPI_TOKEN", "tok-9")
    tools = await by_name(
        PETS, base_url=server.url, headers={"Authorization": "Bearer ${TN_OPENAPI_TOKEN}", "x-trace-id": "fixed"}
    )
    await tools["listPets"].execute({"X-Trace-Id": "from-model"})
    assert server.last.headers["Authorization"] == "Bearer tok-9"
    assert server.last.headers.get_all("X-Trace-Id") == ["fixed"]


async def test_unknown_argument_and_missing_path_value_are_error_results(server):
    tools = await by_name(PETS, base_url=server.url)
    res = await tools["deletePet"].execute({"petid": 1})
    assert res == ToolResult('unknown argument "petid"; expected: petId', True, {"error": "argument"})
    res = await tools["deletePet"].execute({})
    assert res == ToolResult('missing argument "petId" for the path parameter {petId}', True, {"error": "argument"})
    assert server.received == []


async def test_responses_map_like_http_tool_including_timeout(server):
    server.route("/pets/1", Reply(404, "gone"))
    server.route("/pets/2", Reply(hang=True))
    tools = await by_name(PETS, base_url=server.url, timeout=0.2)
    assert await tools["deletePet"].execute({"petId": 1}) == ToolResult("HTTP 404: gone", True, {"status": 404})
    assert await tools["deletePet"].execute({"petId": 2}) == ToolResult(
        "request timed out after 0.2s", True, {"error": "timeout"})


# ---------------------------------------------------------------- loading


async def test_first_server_url_with_variable_defaults_is_the_base_url(server):
    servers = [{"url": "http://127.0.0.1:{port}/{version}", "variables": {
        "port": {"default": str(server.port)}, "version": {"default": "v2", "enum": ["v1", "v2"]}}},
        {"url": "http://127.0.0.1:1/unused"}]
    tools = await by_name({**PETS, "servers": servers})
    await tools["deletePet"].execute({"petId": 3})
    assert (server.last.method, server.last.target) == ("DELETE", "/v2/pets/3")


async def test_operation_servers_beat_document_servers(server):
    spec = spec_with({"/a": {"get": {"operationId": "a", "servers": [{"url": server.url + "/op"}]}}},
                     servers=[{"url": "http://127.0.0.1:1"}])
    (tool,) = await http_tools_from_openapi(spec)
    assert (await tool.execute({})).is_error is False
    assert server.last.target == "/op/a"


async def test_loads_json_and_yaml_files(tmp_path, server):
    (tmp_path / "pets.json").write_text(json.dumps(PETS))
    (tmp_path / "pets.yaml").write_text(yaml.safe_dump(PETS, sort_keys=False), encoding="utf-8")
    (tmp_path / "pets.yml").write_bytes(b"\xef\xbb\xbf" + yaml.safe_dump(PETS, sort_keys=False).encode())
    (tmp_path / "pets.txt").write_text(yaml.safe_dump(PETS, sort_keys=False))
    expected = [(t.name, t.input_schema) for t in await http_tools_from_openapi(PETS)]
    for name in ("pets.json", "pets.yaml", "pets.yml", "pets.txt"):
        tools = await http_tools_from_openapi(tmp_path / name, base_url=server.url)
        assert [(t.name, t.input_schema) for t in tools] == expected, name
    await tools[0].execute({"X-Trace-Id": "x"})
    assert server.last.target == "/pets"


async def test_yaml_dates_in_schemas_become_iso_strings(tmp_path):
    text = """
openapi: 3.0
info: {title: t, version: "1"}
servers: [{url: "http://h"}]
paths:
  /x:
    get:
      operationId: x
      parameters:
        - {name: since, in: query, schema: {type: string, example: 2024-05-01}}
"""
    (tmp_path / "d.yaml").write_text(text)
    (tool,) = await http_tools_from_openapi(str(tmp_path / "d.yaml"))
    assert tool.input_schema["properties"]["since"] == {"type": "string", "example": "2024-05-01"}


async def test_loads_from_url_and_resolves_relative_server_against_it(server):
    spec = {**PETS, "servers": [{"url": "../api"}]}
    server.route("/specs/pets.yaml", Reply(200, yaml.safe_dump(spec, sort_keys=False), "application/yaml"))
    tools = await by_name(server.url + "/specs/pets.yaml")
    await tools["deletePet"].execute({"petId": 3})
    assert (server.last.method, server.last.target) == ("DELETE", "/api/pets/3")


@pytest.mark.parametrize(("spec", "message"), [
    ({"swagger": "2.0", "paths": {}}, "OpenAPI spec (dict): Swagger 2.0 is not supported; convert it to OpenAPI 3.x"),
    ({"openapi": "4.0", "paths": {}}, "OpenAPI spec (dict): not an OpenAPI 3.x document (\"openapi\" is '4.0')"),
    (spec_with({"/a": {"get": {"parameters": [{"$ref": "#/components/parameters/Nope"}]}}}, servers=[{"url": "http://h"}]),
     "OpenAPI spec (dict): $ref '#/components/parameters/Nope' at GET /a/parameters/0 does not resolve"),
    (spec_with({"/a": {"get": {"operationId": "a"}}}),
     "OpenAPI spec (dict): GET /a has no absolute server URL; pass base_url="),
    (spec_with({"/a": {"get": {"parameters": [{"$ref": "other.yaml#/P"}]}}}, servers=[{"url": "http://h"}]),
     "OpenAPI spec (dict): external $ref 'other.yaml#/P' at GET /a/parameters/0 is not supported"),
])
async def test_invalid_documents_raise_value_error_saying_what_and_where(spec, message):
    with pytest.raises(ValueError) as info:
        await http_tools_from_openapi(spec)
    assert str(info.value) == message


async def test_unreadable_sources_raise_value_error(tmp_path, server):
    missing = tmp_path / "nope.yaml"
    with pytest.raises(
        ValueError, match=r"^OpenAPI spec .*nope\.yaml: cannot read the file: No such file or directory$"
    ):
        await http_tools_from_openapi(missing)
    (tmp_path / "bad.yaml").write_text("openapi: [unclosed")
    with pytest.raises(ValueError, match=r"bad\.yaml: cannot parse it: "):
        await http_tools_from_openapi(tmp_path / "bad.yaml")
    with pytest.raises(
        ValueError, match=r"^OpenAPI spec http://127\.0\.0\.1:\d+/none\.json: download failed: HTTP 404: ok$"
    ):
        server.route("/none.json", Reply(404))
        await http_tools_from_openapi(server.url + "/none.json")
    with pytest.raises(TypeError):
        await http_tools_from_openapi(42)  # type: ignore[arg-type]
