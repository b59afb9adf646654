"""Core types: Request/Answer wire form, suspension helpers, sanitize, adapters."""

import dataclasses
import json
import re

import pytest

import toolnexus
from toolnexus import (
    Answer,
    Request,
    Tool,
    ToolContext,
    ToolResult,
    answer_declined,
    answer_output,
    auth_required,
    pending,
    pending_of,
    sanitize,
    to_anthropic,
    to_gemini,
    to_openai,
)


async def _noop(args=None, ctx=None):
    return ToolResult("x", False)


def test_dataclass_field_order_is_positional_contract():
    positional = [f.name for f in dataclasses.fields(Tool) if not f.kw_only]
    assert positional == ["name", "description", "input_schema", "source", "execute"]
    # ours, keyword-only so the positional contract is untouched: declared safe to re-run after a crash
    # and (approvals) whether its calls wait for a human, and where inside its source it comes from
    assert [(f.name, f.default) for f in dataclasses.fields(Tool) if f.kw_only] == [
        ("idempotent", False), ("needs_approval", False), ("origin", None)]
    assert [f.name for f in dataclasses.fields(ToolResult)] == ["output", "is_error", "metadata", "parts"]
    # pinned fields first, then ours (additive, defaulted): the request a retry answers; the MCP caller keyword-only
    assert [f.name for f in dataclasses.fields(ToolContext) if not f.kw_only] == [
        "signal",
        "timeout",
        "answer",
        "request",
    ]
    assert [(f.name, f.default) for f in dataclasses.fields(ToolContext) if f.kw_only] == [("caller", None)]
    assert [f.name for f in dataclasses.fields(Request)] == ["id", "kind", "prompt", "url", "data", "expiresAt"]
    # pinned fields first, then the additive approval fields (all defaulted)
    assert [f.name for f in dataclasses.fields(Answer)] == ["id", "ok", "data", "reason", "message", "arguments",
                                                            "always", "by", "via"]
    assert ToolResult("x", False, {"a": 1}).metadata == {"a": 1}


def test_request_and_answer_round_trip_through_asdict_and_json_with_pinned_keys():
    req = Request(id="pnd-1", kind="input", prompt="How much?", data={"schema": {"type": "object"}})
    wire = json.dumps(dataclasses.asdict(req))
    assert list(json.loads(wire)) == ["id", "kind", "prompt", "url", "data", "expiresAt"]
    assert Request(**json.loads(wire)) == req
    ans = Answer(id="pnd-1", ok=False, reason="declined")
    assert list(json.loads(json.dumps(dataclasses.asdict(ans))))[:4] == ["id", "ok", "data", "reason"]
    assert Answer(**json.loads(json.dumps(dataclasses.asdict(ans)))) == ans
    # the additive fields round-trip as plain JSON too, and a 0.21 payload (pinned keys only) still reads
    full = Answer(id="pnd-1", ok=True, message="fine", arguments={"n": 2}, always=True, by="alice", via="cli")
    assert Answer.from_dict(json.loads(json.dumps(dataclasses.asdict(full)))) == full
    assert Answer.from_dict({"id": "pnd-1", "ok": False, "data": None, "reason": "declined"}) == ans
    # payloads that omit absent keys, and from_dict ignoring unknown keys
    assert Request(**{"id": "a", "kind": "k", "prompt": "p"}) == Request("a", "k", "p")
    assert Request.from_dict({"id": "a", "kind": "k", "prompt": "p", "extra": 1}) == Request("a", "k", "p")
    assert Answer.from_dict({"id": "a", "ok": True, "zzz": 0}) == Answer("a", True)


def test_pending_builds_error_result_with_request_and_generated_id():
    r = pending(kind="approval", prompt="OK to deploy?")
    assert r.is_error is True and r.output == "OK to deploy?"
    req = r.metadata["pending"]
    assert isinstance(req, Request) and req.kind == "approval" and req.prompt == "OK to deploy?"
    assert re.fullmatch(r"pnd-[0-9a-f]+-\d+", req.id)
    other = pending(kind="approval", prompt="again").metadata["pending"]
    assert other.id != req.id
    assert int(other.id.rsplit("-", 1)[1]) == int(req.id.rsplit("-", 1)[1]) + 1


def test_pending_with_url_appends_url_line_and_keeps_given_id():
    r = pending(
        kind="authorization", prompt="Log in", url="https://x/auth", id="fixed", expiresAt="2030-01-01T00:00:00Z"
    )
    assert r.output == "Log in\nhttps://x/auth"
    assert r.metadata["pending"] == Request(
        "fixed", "authorization", "Log in", "https://x/auth", None, "2030-01-01T00:00:00Z"
    )


def test_auth_required_is_authorization_pending_with_default_prompt():
    r = auth_required("https://idp/authorize")
    req = r.metadata["pending"]
    assert (req.kind, req.prompt, req.url) == ("authorization", "Authorization required to continue", "https://idp/authorize")
    assert r.output == "Authorization required to continue\nhttps://idp/authorize"


def test_pending_of_reads_tool_results_coerces_mappings_and_run_results():
    r = pending(kind="input", prompt="p", id="i1")
    assert pending_of(r) is r.metadata["pending"]
    coerced = pending_of(ToolResult("p", True, {"pending": {"id": "i2", "kind": "input", "prompt": "p"}}))
    assert coerced == Request("i2", "input", "p")
    assert pending_of(ToolResult("p", True, {"pending": {"id": 3}})) is None
    assert pending_of(ToolResult("ok", False)) is None
    assert pending_of(None) is None

    @dataclasses.dataclass
    class FakeRun:
        status: str
        pending: object = None

    assert pending_of(FakeRun("pending", Request("a", "k", "p"))) == Request("a", "k", "p")
    assert pending_of(FakeRun("done", Request("a", "k", "p"))) is None


def test_answer_helpers_and_their_pinned_errors():
    assert answer_output("x", "out") == Answer("x", True, {"output": "out"})
    assert answer_declined("x") == Answer("x", False, None, "declined")
    assert answer_declined("x", "expired").reason == "expired"
    with pytest.raises(TypeError) as e:
        answer_output("x", 3)
    assert str(e.value) == "toolnexus: Answer output must be a str, got int"
    with pytest.raises(ValueError) as e:
        answer_declined("x", "nope")
    assert str(e.value) == "toolnexus: Answer reason must be \"declined\", \"cancelled\" or \"expired\", got 'nope'"


def test_sanitize_replaces_each_code_point():
    assert sanitize("a.b/ü😀") == "a_b___"
    assert sanitize("ok_Name-1") == "ok_Name-1"


def test_adapters_emit_exact_shapes_in_order_with_deep_copied_schemas():
    schema = {"type": "object", "properties": {"q": {"type": "string"}}}
    tools = [Tool("a", "", schema, "native", _noop), Tool("b", "B", {}, "native", _noop)]
    oa = to_openai(tools)
    assert oa == [
        {"type": "function", "function": {"name": "a", "description": "", "parameters": schema}},
        {"type": "function", "function": {"name": "b", "description": "B", "parameters": {}}},
    ]
    assert to_anthropic(tools)[0] == {"name": "a", "description": "", "input_schema": schema}
    assert to_gemini(tools) == [{"functionDeclarations": [
        {"name": "a", "description": "", "parameters": schema}, {"name": "b", "description": "B", "parameters": {}}]}]
    assert to_gemini([]) == [{"functionDeclarations": []}]
    oa[0]["function"]["parameters"]["properties"]["q"]["type"] = "number"
    assert schema["properties"]["q"]["type"] == "string"


def test_every_public_name_resolves():
    for name in toolnexus.__all__:
        assert getattr(toolnexus, name) is not None, name


@pytest.mark.parametrize("module", ["types", "toolkit", "adapters", "native", "http", "skill", "builtin", "mcp_source",
                                    "mcp_serve", "a2a", "serve", "translate", "client", "agents", "relay"])
def test_documented_module_paths_stay_importable(module):
    import importlib

    mod = importlib.import_module(f"toolnexus.{module}")
    assert getattr(mod, "__all__", None), f"toolnexus.{module} declares no __all__"
    for name in mod.__all__:
        assert hasattr(mod, name), f"toolnexus.{module}.__all__ names {name!r}, which it does not define"


def test_importing_the_package_does_not_load_the_heavy_parts():
    import subprocess
    import sys

    code = "import sys, toolnexus; print(sorted(m for m in ('mcp', 'httpx', 'jsonschema', 'yaml') if m in sys.modules))"
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout
    assert out.strip() == "[]"
