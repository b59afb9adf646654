"""Toolkit assembly order, dedupe, disable_tools, register, execute routing, close."""

import json
import logging

import pytest

from toolnexus import Tool, Toolkit, ToolResult, create_toolkit, define_tool
from toolnexus.skill import SkillDef


def mk(name, source="native", out=None):
    async def execute(args=None, ctx=None):
        return ToolResult(out or f"{name}:{source}:{json.dumps(args, sort_keys=True)}", False)

    return Tool(name, f"{name} tool", {"type": "object", "properties": {}}, source, execute)


class FakeMcp:
    def __init__(self, tools):
        self.tools = tools
        self.status = {"srv": "connected"}
        self.closed = 0

    async def close(self):
        self.closed += 1


def names(tk):
    return [t.name for t in tk.tools()]


def dup_lines(caplog):
    return [r.getMessage() for r in caplog.records if "duplicate tool name" in r.getMessage()]


def test_assembly_order_and_first_wins_with_pinned_duplicate_warning(caplog):
    caplog.set_level(logging.WARNING, "toolnexus")
    mcp = FakeMcp([mk("m1", "mcp"), mk("shared", "mcp")])
    tk = Toolkit(mcp, None, [mk("bash", "builtin"), mk("shared", "builtin"), mk("read", "builtin")],
                 [mk("a1", "a2a")], [mk("x1"), mk("read"), mk("a1")])
    # builtins shadowed by extras are dropped silently; otherwise MCP > builtin > agents > extras
    assert names(tk) == ["m1", "shared", "bash", "a1", "x1", "read"]
    assert tk.get("read").source == "native"
    assert dup_lines(caplog) == [
        '[toolnexus] duplicate tool name "shared" — keeping first',
        '[toolnexus] duplicate tool name "a1" — keeping first',
    ]
    assert tk.mcp_status() == {"srv": "connected"}


async def test_refresh_does_not_repeat_a_duplicate_warning(caplog):
    caplog.set_level(logging.WARNING, "toolnexus")
    tk = Toolkit(FakeMcp([mk("shared", "mcp")]), None, [mk("shared", "builtin")], [], [])
    await tk.refresh()
    await tk.refresh()
    assert names(tk) == ["shared"] and tk.get("shared").source == "mcp"
    assert dup_lines(caplog) == ['[toolnexus] duplicate tool name "shared" — keeping first']


def test_disable_tools_applies_to_any_source_and_an_extra_shadowing_a_builtin_removes_both(caplog):
    caplog.set_level(logging.WARNING, "toolnexus")
    tk = Toolkit(None, None, [mk("bash", "builtin"), mk("grep", "builtin")], [], [mk("bash"), mk("x")],
                 disable_tools=["bash", "x", "nonexistent"])
    assert names(tk) == ["grep"]
    assert '[toolnexus] disable_tools name "nonexistent" matched no tool' in [r.getMessage() for r in caplog.records]


def test_register_appends_first_wins_honours_disable_and_does_not_shadow_builtins(caplog):
    caplog.set_level(logging.WARNING, "toolnexus")
    tk = Toolkit(None, None, [mk("bash", "builtin")], [], [], disable_tools=["off"])
    assert tk.register(mk("bash"), mk("new"), mk("off")) is tk
    assert names(tk) == ["bash", "new"]
    assert tk.get("bash").source == "builtin"
    assert dup_lines(caplog) == ['[toolnexus] duplicate tool name "bash" — keeping first']


async def test_execute_routes_and_unknown_names_list_close_matches():
    tk = Toolkit(None, None, [], [], [mk("search_docs"), mk("search_code")])
    assert (await tk.execute("search_docs", {"q": 1})).output == 'search_docs:native:{"q": 1}'
    r = await tk.execute("zzz")
    assert r == ToolResult("Unknown tool: zzz", True)
    r = await tk.execute("search_doc")
    assert r.is_error and r.output.startswith("Unknown tool: search_doc (did you mean: search_docs")


async def test_execute_accepts_json_string_and_reports_bad_json():
    tk = Toolkit(None, None, [], [], [mk("t")])
    assert (await tk.execute("t", '{"a": 2}')).output == 't:native:{"a": 2}'
    assert (await tk.execute("t", "")).output == "t:native:{}"
    bad = await tk.execute("t", "{nope")
    assert bad.is_error and bad.output.startswith("invalid arguments for t: not valid JSON")
    arr = await tk.execute("t", "[1]")
    assert arr.is_error and arr.output == "invalid arguments for t: expected a JSON object, got list"


async def test_a_raising_tool_becomes_an_error_result():
    async def execute(args=None, ctx=None):
        raise KeyError("k")

    tk = Toolkit(None, None, [], [], [Tool("bad", "", {}, "custom", execute)])
    r = await tk.execute("bad", {})
    assert r == ToolResult("tool bad failed: KeyError: 'k'", True, {"error_type": "KeyError"})


async def test_close_is_idempotent_and_empties_the_toolkit():
    mcp = FakeMcp([mk("m", "mcp")])
    async with Toolkit(mcp, None, [], [], [mk("t")]) as tk:
        assert names(tk) == ["m", "t"]
    await tk.close()
    assert mcp.closed == 1
    assert tk.tools() == [] and tk.get("t") is None
    r = await tk.execute("t", {})
    assert r.is_error and r.output == "toolkit closed: cannot run t"


def test_invalid_tool_names_are_warned_once(caplog):
    caplog.set_level(logging.WARNING, "toolnexus")
    Toolkit(None, None, [], [], [mk("has space")])
    Toolkit(None, None, [], [], [mk("has space")])
    msgs = [r.getMessage() for r in caplog.records if "has space" in r.getMessage()]
    assert len(msgs) == 1 and "does not match" in msgs[0]


async def test_create_toolkit_defaults_to_all_ten_builtins_then_extras():
    tk = await create_toolkit(extra_tools=[mk("mine")])
    assert names(tk) == ["bash", "read", "write", "edit", "grep", "glob", "webfetch", "question",
                         "apply_patch", "todowrite", "mine"]
    assert tk.skills_prompt() == ""


async def test_create_toolkit_builtins_option_beats_config_and_config_dict_reserved_keys():
    tk = await create_toolkit({"builtins": {"tools": {"bash": False}}, "a2a": {"name": "x"}, "mcpServer": {}})
    assert "bash" not in names(tk) and "read" in names(tk)
    assert tk.a2a_config == {"name": "x"} and tk.mcp_server_config == {}
    assert tk.mcp_status() == {}
    tk2 = await create_toolkit({"builtins": False}, builtins=True)
    assert "bash" in names(tk2)
    assert names(await create_toolkit(builtins=False)) == []


async def test_reserved_keys_are_read_from_a_config_file_too(tmp_path):
    cfg = tmp_path / "tn.json"
    cfg.write_text('{\n  // comments are fine\n  "mcpServers": {},\n  "builtins": false\n}\n')
    tk = await create_toolkit(str(cfg))
    assert names(tk) == []


async def test_malformed_config_file_is_a_clear_error(tmp_path):
    cfg = tmp_path / "bad.json"
    cfg.write_text("{oops")
    with pytest.raises(ValueError, match=r"config file .*bad\.json is not valid JSON"):
        await create_toolkit(str(cfg))


async def test_skills_from_data_and_provider_with_disable_skills(caplog):
    caplog.set_level(logging.WARNING, "toolnexus")

    def provider():
        return [SkillDef(name="p1", content="P", description="from provider")]

    tk = await create_toolkit(skills=[SkillDef(name="d1", content="D", description="data")],
                              skill_provider=provider, builtins=False, disable_skills=["p1", "ghost"])
    assert names(tk) == ["skill"]
    prompt = tk.skills_prompt()
    assert "- **d1**: data" in prompt and "p1" not in prompt
    assert '[toolnexus] skill filter name "ghost" matched no skill' in [r.getMessage() for r in caplog.records]


async def test_failing_skill_provider_logs_pinned_line_and_contributes_nothing(caplog):
    caplog.set_level(logging.WARNING, "toolnexus")

    async def provider():
        raise RuntimeError("db down")

    tk = await create_toolkit(skill_provider=provider, builtins=False)
    assert names(tk) == ["skill"]
    assert "[toolnexus] skill provider failed: db down" in [r.getMessage() for r in caplog.records]


async def test_provider_returning_wrong_items_is_reported_not_fatal(caplog):
    caplog.set_level(logging.WARNING, "toolnexus")
    tk = await create_toolkit(skill_provider=lambda: ["not a SkillDef"], builtins=False)
    assert names(tk) == ["skill"]
    assert ("[toolnexus] skill provider failed: expected a list of SkillDef, got an item of type str"
            in [r.getMessage() for r in caplog.records])


async def test_failing_a2a_agent_logs_pinned_line(caplog):
    caplog.set_level(logging.WARNING, "toolnexus")
    tk = await create_toolkit({"agents": {"x": {"card": "http://127.0.0.1:9/card"}}}, builtins=False)
    assert names(tk) == []
    assert any(r.getMessage().startswith('[toolnexus] A2A agent "http://127.0.0.1:9/card" failed: ')
               for r in caplog.records)


def test_relay_tool_named_like_a_builtin_is_rejected():
    with pytest.raises(ValueError) as e:
        Toolkit(None, None, [], [], [mk("read", "relay"), mk("bash", "relay"), mk("ok", "relay")])
    assert str(e.value) == "toolnexus: relay tool name collides with a built-in tool: bash, read"


async def test_toolkit_create_classmethod_matches_factory():
    tk = await Toolkit.create(builtins=False, extra_tools=[define_tool(lambda: "x", name="lam")])
    assert names(tk) == ["lam"]
    assert (await tk.execute("lam")).output == "x"
