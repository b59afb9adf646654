"""Property tests for configuration and documents read from outside: the MCP server map, the
builtins dict (with the webfetch allow-list), the A2A agents block, skills (frontmatter, data
skills), OpenAPI documents and `Answer`s from JSON. Nothing but our clear errors, never a hang
(issue #11, fuzzing)."""

from __future__ import annotations

import asyncio
import json

import pytest
from hypothesis import HealthCheck, given, settings, strategies as st

from fuzz_strategies import json_values, words
from toolnexus._redact import REDACTED, mask_headers
from toolnexus.a2a import parse_agents_config
from toolnexus.builtin import select_builtins
from toolnexus.builtin._settings import settings_from_config
from toolnexus.errors import ToolnexusError
from toolnexus.http import http_tools_from_openapi
from toolnexus.mcp_source._config import parse_mcp_config, read_config_file, server_spec
from toolnexus.skill import SkillDef, load_skills
from toolnexus.skill._frontmatter import parse_frontmatter
from toolnexus.types import Answer

pytestmark = pytest.mark.timeout(60)

MCP_KEYS = words("mcpServers", "servers", "mcp", "command", "args", "env", "environment", "cwd", "url", "headers",
                 "timeout", "callTimeout", "enabled", "disabled", "tools", "type", "inheritEnv", "builtins")


@given(json_values(MCP_KEYS))
def test_mcp_server_maps_parse_or_fail_with_our_error(data):
    try:
        servers = parse_mcp_config(data) if isinstance(data, dict) else parse_mcp_config({"mcpServers": data})
    except ToolnexusError:
        return
    if not isinstance(servers, dict):
        return
    for name, cfg in servers.items():
        try:
            spec = server_spec(str(name), cfg)
        except ToolnexusError as exc:
            assert isinstance(exc, ValueError)
            continue
        # The repr shows header names with every value masked and only the number of environment
        # variables, never their values.
        shown = repr(spec)
        if spec.remote:
            assert f"headers={mask_headers(spec.headers)!r}" in shown
            assert not spec.headers or REDACTED in shown
        else:
            assert f"env=<{len(spec.env)} variables>" in shown


@given(st.text(max_size=200) | st.sampled_from(["[" * 50000, "{/* x */}", "// c\n{}", '{"a": 1,}', "\ufeff{}"]))
def test_config_files_load_or_fail_with_our_error(tmp_path_factory, text):
    path = tmp_path_factory.mktemp("cfg") / "c.json"
    path.write_text(text, encoding="utf-8")
    try:
        read_config_file(str(path))
    except ToolnexusError:
        pass


BUILTIN_KEYS = words("disabled", "enabled", "tools", "shell", "base_dir", "baseDir", "confine_to_base_dir",
                     "webfetch_allow", "webfetchAllow", "bash_max_timeout_ms", "bash", "read")


@given(json_values(BUILTIN_KEYS) | st.fixed_dictionaries({"webfetch_allow": st.lists(
    st.text(max_size=20) | words("10.0.0.0/8", "::1", "*.example.com", "localhost", "300.1.1.1", "1.2.3.4/33"),
    max_size=4)}))
def test_builtins_configs_apply_or_fail_with_our_error(cfg):
    if isinstance(cfg, dict) and isinstance(cfg.get("base_dir") or cfg.get("baseDir"), str):
        return  # a base_dir is a real path: not what this test is about
    try:
        settings_from_config(cfg)
        select_builtins(cfg)
    except ToolnexusError:
        pass


A2A_KEYS = words("card", "headers", "timeout", "pollEvery", "contextId", "blocking", "enabled", "disabled")


@given(json_values(A2A_KEYS))
def test_a2a_agent_blocks_parse_or_fail_with_our_error(block):
    try:
        agents = parse_agents_config(block if isinstance(block, dict) else {"a": block})
    except ToolnexusError:
        return
    assert all(isinstance(a.card, str) for a in agents)


FRONT = st.sampled_from(["---\n", "---\r\n", "name: x\n", "description: Use when: y\n", "name: yes\n", "- a\n",
                         "key: [1, 2\n", "&a x\n", "*a\n", "description: |\n  multi\n", "\ufeff", "---", "name:\n",
                         "!!python/object:os.system\n", "'q': \"r\"\n", "{" * 200 + "\n"]) | st.text(max_size=20)


@given(st.lists(FRONT, max_size=12))
def test_frontmatter_never_raises(parts):
    fm = parse_frontmatter("".join(parts))
    assert all(isinstance(k, str) and isinstance(v, str) for k, v in fm.fields.items())


@given(st.lists(st.builds(SkillDef, name=st.text(max_size=10), content=st.text(max_size=30),
                          description=st.none() | st.text(max_size=10),
                          resources=st.none() | st.lists(st.text(max_size=8), max_size=3),
                          base=st.none() | st.text(max_size=10)), max_size=5),
       st.none() | st.dictionaries(st.text(max_size=6), st.booleans(), max_size=3))
def test_data_skills_load_or_fail_with_our_error(defs, flt):
    try:
        source = load_skills(skills=defs, filter=flt)
    except ToolnexusError:
        return
    assert isinstance(source.prompt(), str)


OPENAPI_KEYS = words("openapi", "paths", "get", "post", "parameters", "name", "in", "schema", "$ref", "requestBody",
                     "content", "application/json", "servers", "url", "operationId", "components", "schemas",
                     "required", "type", "properties", "path", "query", "header", "cookie", "/items/{id}", "id")


@settings(suppress_health_check=[HealthCheck.too_slow, HealthCheck.function_scoped_fixture])
@given(json_values(OPENAPI_KEYS, max_leaves=40), st.sampled_from(["3.0.3", "3.1.0", "2.0", None, 3]))
def test_openapi_documents_import_or_fail_with_our_error(doc, version):
    if isinstance(doc, dict) and version is not None:
        doc = {**doc, "openapi": version}

    async def load():
        return await http_tools_from_openapi(doc, base_url="http://127.0.0.1:9")

    try:
        tools = asyncio.run(load())
    except ToolnexusError:
        return
    assert all(t.source == "http" for t in tools)


@given(st.dictionaries(words("id", "ok", "data", "reason", "extra"), json_values(max_leaves=5), max_size=5))
def test_answers_from_json_are_valid_or_refused_with_our_error(mapping):
    try:
        answer = Answer.from_dict(json.loads(json.dumps(mapping)))
    except ToolnexusError as exc:
        assert isinstance(exc, (TypeError, ValueError))
        return
    assert isinstance(answer.ok, bool) and isinstance(answer.id, str)
