"""What an MCP peer may declare, and what it may leave running (issue 31: "One MCP server can break
every LLM call", "Escaped grandchildren").

Real stdio servers (tests/support/mcp_servers/hostile.py): one declares names, schemas and
descriptions providers refuse or cannot afford; one floods `tools/list`; one starts a grandchild
that leaves its session with `setsid`. Each test failed on the code before the limits and the
containment existed (see the module docstrings of `mcp_source/limits.py` and `contain.py`).
"""

from __future__ import annotations

import json
import os
import re
import sys
import time
from pathlib import Path

import pytest

from support.cli_run import run_cli
from toolnexus import create_toolkit
from toolnexus.mcp_source import McpOptions, _contain as contain, list_mcp_tools, load_mcp_with_context

HOSTILE = str(Path(__file__).parent / "support" / "mcp_servers" / "hostile.py")
PROVIDER_NAME = re.compile(r"^[a-zA-Z0-9_-]{1,64}$")


def gone(pid: int, seconds: float = 5.0) -> bool:
    """Whether `pid` is gone (or a zombie nobody has reaped yet: it no longer runs) within `seconds`."""
    deadline = time.monotonic() + seconds
    while True:
        try:
            with open(f"/proc/{pid}/stat") as fh:
                if fh.read().rsplit(")", 1)[1].split()[0] in ("Z", "X"):
                    return True
        except FileNotFoundError:
            return True
        if time.monotonic() >= deadline:
            return False
        time.sleep(0.02)


def hostile(*args: str) -> dict:
    return {"command": [sys.executable, HOSTILE, *args]}


async def test_names_schemas_and_descriptions_a_provider_refuses_are_dropped_with_a_reason():
    source = await load_mcp_with_context({"mcpServers": {"h": hostile("names")}})
    try:
        assert source.status == {"h": "connected"}
        names = [t.name for t in source.tools]
        assert names == ["h_ok", "h_echo_v1", "h_wordy"]
        assert all(PROVIDER_NAME.match(n) for n in names)
        wordy = source.tools[2]
        assert len(wordy.description) <= 8192 and wordy.description.startswith("w" * 100)
        reasons = {d.name: d.reason for d in source.dropped["h"]}
        assert set(reasons) == {"x" * 79 + "…", "日本語", "bad\\x00name", "y" * 70, "echo_v1", "big", "listy"}
        assert "5000 characters" in reasons["x" * 79 + "…"] and "128" in reasons["x" * 79 + "…"]
        assert "no ASCII letter or digit" in reasons["日本語"]
        assert "control character" in reasons["bad\\x00name"]
        assert "72 characters" in reasons["y" * 70] and "64" in reasons["y" * 70]
        assert 'same name as "echo.v1"' in reasons["echo_v1"]
        assert "input schema is" in reasons["big"] and "65536" in reasons["big"]
        assert "not a JSON object" in reasons["listy"]
    finally:
        await source.close()


async def test_the_inventory_applies_the_same_limits():
    inventory = await list_mcp_tools({"mcpServers": {"h": hostile("names")}})
    assert [t.name for t in inventory.tools["h"]] == ["ok", "echo.v1", "wordy"]
    assert len(inventory.dropped["h"]) == 7


async def test_a_server_listing_100000_tools_is_read_no_further_than_the_limit(tmp_path):
    log = tmp_path / "lists.log"
    source = await load_mcp_with_context({"mcpServers": {"f": hostile("flood", "100000", "500", str(log))}})
    try:
        assert len(source.tools) == 1000
        assert log.read_text().count("list") == 2  # two pages of 500, then it stopped asking
        [summary] = source.dropped["f"]
        assert "more than 1000 tools" in summary.reason
    finally:
        await source.close()


async def test_the_limits_are_settings():
    options = McpOptions(limits=contain_limits(max_tools=3))
    source = await load_mcp_with_context({"mcpServers": {"f": hostile("flood", "10", "10", os.devnull)}},
                                         options=options)
    try:
        assert [t.name for t in source.tools] == ["f_t0", "f_t1", "f_t2"]
    finally:
        await source.close()


def contain_limits(**kw):
    from toolnexus.mcp_source import PeerLimits

    return PeerLimits(**kw)


def test_toolnexus_tools_shows_what_was_dropped_and_why(tmp_path):
    config = tmp_path / "mcp.json"
    config.write_text(json.dumps({"mcpServers": {"h": hostile("names")}}))
    done = run_cli("tools", "--config", str(config), "--no-builtins")
    assert done.returncode == 0, done.stderr
    lines = done.stdout.splitlines()
    assert lines[0] == "# mcp h: connected (7 tools dropped)"
    assert any(line.startswith("#   dropped big: its input schema is ") for line in lines)
    assert "h_ok\t(mcp)" in lines and not any(line.startswith("h_x") for line in lines)
    as_json = json.loads(run_cli("tools", "--config", str(config), "--no-builtins", "--json").stdout)
    assert {d["name"] for d in as_json["mcp_dropped"]["h"]} >= {"big", "listy", "echo_v1"}


MODES = ["subreaper"] + (["cgroup"] if contain.cgroup_usable() else [])


@pytest.mark.parametrize("mode", MODES)
async def test_a_grandchild_that_left_the_session_is_stopped_on_close(tmp_path, mode):
    pidfile = tmp_path / "escapee.pid"
    source = await load_mcp_with_context({"mcpServers": {"g": hostile("grandchild", str(pidfile))}},
                                         options=McpOptions(containment=mode))
    try:
        assert source.status == {"g": "connected"}
        escapee = int(pidfile.read_text())
        assert not gone(escapee, 0)
        assert os.getsid(escapee) != os.getsid(os.getpid())  # it really left our session and the server's
    finally:
        await source.close()
    assert gone(escapee, 0)  # close() returned only once it was stopped


async def test_a_toolkit_closes_the_escapee_too(tmp_path):
    pidfile = tmp_path / "escapee.pid"
    toolkit = await create_toolkit({"mcpServers": {"g": hostile("grandchild", str(pidfile))}}, builtins=False)
    try:
        escapee = int(pidfile.read_text())
        assert not gone(escapee, 0)
    finally:
        await toolkit.close()
    assert gone(escapee, 0)
