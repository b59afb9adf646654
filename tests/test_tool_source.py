"""The Toolkit over the `ToolSource` protocol: any source in the order given, shadowing declared by
the source, capabilities found by protocol, `create_toolkit` composing the sources in a fixed order."""

import json
import logging

import pytest

from toolnexus import Tool, Toolkit, ToolResult, create_toolkit
from toolnexus.errors import ConfigError
from toolnexus.skill import SkillDef
from toolnexus.tool_source import SkillCatalog, StatusReporting, ToolList, ToolSource


def mk(name, source="native"):
    async def execute(args=None, ctx=None):
        return ToolResult(f"{name}:{source}:{json.dumps(args or {}, sort_keys=True)}", False)

    return Tool(name, f"{name} tool", {"type": "object", "properties": {}}, source, execute)


class Catalogue:
    """A host-written source: a tool list that changes on refresh, with per-server health."""

    kind = "catalogue"
    shadows = frozenset()

    def __init__(self, *batches, fail_close=False):
        self.batches = [list(b) for b in batches]
        self.refreshed = 0
        self.closed = 0
        self.fail_close = fail_close
        self.status = {"catalogue": "connected"}
        self.reasons = {}

    def list_tools(self):
        return list(self.batches[min(self.refreshed, len(self.batches) - 1)])

    async def refresh(self):
        self.refreshed += 1

    async def close(self):
        self.closed += 1
        if self.fail_close:
            raise OSError("catalogue socket already gone")


def names(kit):
    return [t.name for t in kit.tools()]


async def test_a_host_source_is_routed_refreshed_and_closed_without_the_toolkit_knowing_its_kind():
    source = Catalogue([mk("lookup")], [mk("lookup"), mk("browse")])
    kit = Toolkit.from_sources([source, ToolList("extra", [mk("mine")])])
    assert isinstance(source, ToolSource) and isinstance(source, StatusReporting)
    assert names(kit) == ["lookup", "mine"]
    assert (await kit.execute("lookup", {"q": 1})).output == 'lookup:native:{"q": 1}'
    assert kit.mcp_status() == {"catalogue": "connected"}

    await kit.refresh()
    assert source.refreshed == 1 and names(kit) == ["lookup", "browse", "mine"]

    await kit.close()
    await kit.close()
    assert source.closed == 1 and kit.tools() == []


def test_first_source_wins_a_name_unless_a_later_source_shadows_that_kind(caplog):
    caplog.set_level(logging.WARNING, "toolnexus")
    early = ToolList("builtin", [mk("bash", "builtin"), mk("read", "builtin")])
    rival = ToolList("a2a", [mk("read", "a2a")])  # does not shadow: loses, with the duplicate line
    mine = ToolList("extra", [mk("bash", "extra")], shadows=("builtin",))  # shadows: replaces the builtin
    kit = Toolkit.from_sources([early, rival, mine])

    assert names(kit) == ["read", "bash"]
    assert kit.get("bash").source == "extra" and kit.get("read").source == "builtin"
    assert [r.getMessage() for r in caplog.records if "duplicate" in r.getMessage()] == [
        '[toolnexus] duplicate tool name "read" — keeping first'
    ]


def test_from_sources_refuses_something_that_is_not_a_source_and_says_what_one_needs():
    with pytest.raises(ConfigError) as info:
        Toolkit.from_sources([[mk("a")]])
    assert "list is not a tool source" in str(info.value)
    assert "list_tools()" in str(info.value) and "async close()" in str(info.value)


async def test_close_closes_every_source_even_when_one_fails_and_then_raises_that_failure():
    broken, fine = Catalogue([mk("a")], fail_close=True), Catalogue([mk("b")])
    kit = Toolkit.from_sources([broken, fine])
    with pytest.raises(OSError, match="catalogue socket already gone"):
        await kit.close()
    assert broken.closed == 1 and fine.closed == 1


async def test_create_toolkit_composes_the_sources_in_the_fixed_order(tmp_path):
    skill = SkillDef(name="notes", description="How to take notes", content="Write it down.")
    kit = await create_toolkit(
        {"builtins": {"tools": {"webfetch": False}}},  # reserved keys only: an empty MCP source
        skills=[skill],
        extra_tools=[mk("bash", "custom"), mk("mine")],
    )
    try:
        assert [s.kind for s in kit.sources] == ["mcp", "skill", "builtin", "extra"]
        assert isinstance(kit.sources[1], SkillCatalog) and "notes" in kit.skills_prompt()
        tools = names(kit)
        assert tools[0] == "skill" and tools[-2:] == ["bash", "mine"]
        assert "webfetch" not in tools and kit.get("bash").source == "custom"
        assert kit.mcp_status() == {}
    finally:
        await kit.close()


async def test_the_older_duck_typed_mcp_and_skill_shapes_still_build_a_toolkit():
    class OldMcp:
        tools = [mk("m", "mcp")]
        status = {"srv": "failed"}
        reasons = {"srv": "connection refused"}
        closed = 0

        async def close(self):
            OldMcp.closed += 1

    class OldSkills:
        skills = {"s": object()}
        tool = mk("skill", "skill")

        def prompt(self):
            return "catalogue"

    kit = Toolkit(OldMcp(), OldSkills(), [mk("read", "builtin")], [], [])
    assert [s.kind for s in kit.sources] == ["mcp", "skill", "builtin", "a2a", "extra"]
    assert names(kit) == ["m", "skill", "read"]
    assert kit.mcp_status() == {"srv": "failed"} and kit.mcp_reasons() == {"srv": "connection refused"}
    assert kit.skills_prompt() == "catalogue" and len(kit.skill_infos()) == 1
    await kit.close()
    assert OldMcp.closed == 1
