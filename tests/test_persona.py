"""§7E personas: soul composition from a directory and the file-backed `memory` tool."""

from __future__ import annotations

import asyncio
import os
import stat
import subprocess
import sys

import pytest

from support.mock_llm import MockLLM
from toolnexus.agents import InboxItem, agent_from_dir, start_agent
from toolnexus.agents._persona import (
    BOOTSTRAP_ORDER,
    HEARTBEAT_OK,
    HEARTBEAT_PROMPT,
    MAX_BOOTSTRAP_FILE_BYTES,
    compose_soul,
    memory_tool,
)
from toolnexus.agents._surface import Agent
from toolnexus.agents.clock import VirtualClock
from toolnexus.types import Tool


def write(d, name, text):
    (d / name).write_text(text, encoding="utf-8")


# --------------------------------------------------------------------------- pinned constants


def test_pinned_constants():
    assert BOOTSTRAP_ORDER == ["AGENTS.md", "SOUL.md", "IDENTITY.md", "USER.md", "TOOLS.md", "HEARTBEAT.md",
                               "MEMORY.md"]
    assert HEARTBEAT_OK == "HEARTBEAT_OK"
    assert MAX_BOOTSTRAP_FILE_BYTES == 2097152
    assert HEARTBEAT_PROMPT == ("Heartbeat. Read your HEARTBEAT.md section and follow it. "
                                "If nothing needs attention, reply HEARTBEAT_OK.")


def test_memory_tool_description_and_schema_are_pinned(tmp_path):
    t = memory_tool(str(tmp_path))
    assert t.name == "memory"
    assert t.source == "native"
    assert t.description == (
        "Persist durable memory. action=add appends an entry; replace swaps an existing substring; remove deletes "
        "one. target=self (MEMORY.md, default) or user (USER.md). Writes persist to disk and load at the START of "
        "your next session — they do NOT change your current context."
    )
    assert t.input_schema == {
        "type": "object",
        "properties": {
            "action": {"type": "string", "enum": ["add", "replace", "remove"]},
            "target": {"type": "string", "enum": ["self", "user"]},
            "text": {"type": "string", "description": "For add: the entry. For replace/remove: the existing text."},
            "with": {"type": "string", "description": "For replace: the replacement text."},
        },
        "required": ["action", "text"],
    }


# --------------------------------------------------------------------------- compose_soul


def test_compose_soul_joins_present_files_in_bootstrap_order(tmp_path):
    write(tmp_path, "MEMORY.md", "\n- m1\n\n")
    write(tmp_path, "SOUL.md", "  I am soul.  ")
    write(tmp_path, "AGENTS.md", "agents")
    write(tmp_path, "notes.md", "ignored: not a bootstrap file")
    soul, found = compose_soul(str(tmp_path))
    assert found == ["AGENTS.md", "SOUL.md", "MEMORY.md"]
    assert soul == "## AGENTS.md\n\nagents\n\n## SOUL.md\n\nI am soul.\n\n## MEMORY.md\n\n- m1"


def test_compose_soul_of_empty_dir_is_empty(tmp_path):
    assert compose_soul(str(tmp_path)) == ("", [])


def test_compose_soul_rejects_a_missing_directory(tmp_path):
    with pytest.raises(NotADirectoryError, match="persona directory not found: .*nope"):
        compose_soul(str(tmp_path / "nope"))


def test_oversized_file_is_cut_at_the_byte_cap_dropping_a_partial_character(tmp_path):
    # "é" is two bytes; place one so that the cap falls between its bytes
    body = b"a" * (MAX_BOOTSTRAP_FILE_BYTES - 1) + "é".encode() + b"tail"
    (tmp_path / "SOUL.md").write_bytes(body)
    soul, found = compose_soul(str(tmp_path))
    assert found == ["SOUL.md"]
    assert soul == "## SOUL.md\n\n" + "a" * (MAX_BOOTSTRAP_FILE_BYTES - 1) + "\n[truncated: exceeds 2 MB bootstrap cap]"
    assert (tmp_path / "SOUL.md").read_bytes() == body  # disk untouched


def test_file_of_exactly_the_cap_is_not_truncated(tmp_path):
    (tmp_path / "SOUL.md").write_bytes(b"b" * MAX_BOOTSTRAP_FILE_BYTES)
    soul, _ = compose_soul(str(tmp_path))
    assert soul == "## SOUL.md\n\n" + "b" * MAX_BOOTSTRAP_FILE_BYTES


def test_soul_is_a_frozen_snapshot(tmp_path):
    write(tmp_path, "MEMORY.md", "- old")
    soul, _ = compose_soul(str(tmp_path))
    write(tmp_path, "MEMORY.md", "- new")
    assert "- old" in soul and "- new" not in soul
    assert "- new" in compose_soul(str(tmp_path))[0]


# --------------------------------------------------------------------------- memory tool


async def call(tool, **args):
    return await tool.execute(args, None)


async def test_add_appends_an_entry_creating_the_file(tmp_path):
    t = memory_tool(str(tmp_path))
    r = await call(t, action="add", text="likes tea")
    assert (r.output, r.is_error) == ("ok (add → MEMORY.md); loads next session", False)
    assert (tmp_path / "MEMORY.md").read_text() == "- likes tea\n"
    await call(t, action="add", text="second")
    assert (tmp_path / "MEMORY.md").read_text() == "- likes tea\n- second\n"


async def test_add_normalises_trailing_whitespace_of_existing_file(tmp_path):
    write(tmp_path, "MEMORY.md", "# Notes\n- a\n\n\n")
    await call(memory_tool(str(tmp_path)), action="add", text="b")
    assert (tmp_path / "MEMORY.md").read_text() == "# Notes\n- a\n- b\n"


async def test_replace_swaps_every_occurrence(tmp_path):
    write(tmp_path, "MEMORY.md", "- tea\n- more tea\n")
    r = await call(memory_tool(str(tmp_path)), action="replace", text="tea", **{"with": "coffee"})
    assert (r.output, r.is_error) == ("ok (replace → MEMORY.md); loads next session", False)
    assert (tmp_path / "MEMORY.md").read_text() == "- coffee\n- more coffee\n"


async def test_remove_deletes_the_text(tmp_path):
    write(tmp_path, "MEMORY.md", "- keep\n- drop me\n")
    r = await call(memory_tool(str(tmp_path)), action="remove", text="- drop me\n")
    assert r.output == "ok (remove → MEMORY.md); loads next session"
    assert (tmp_path / "MEMORY.md").read_text() == "- keep\n"


async def test_missing_substring_is_a_loud_error_and_leaves_the_file(tmp_path):
    write(tmp_path, "MEMORY.md", "- a\n")
    for action in ("replace", "remove"):
        r = await call(memory_tool(str(tmp_path)), action=action, text="zzz", **{"with": "q"})
        assert (r.output, r.is_error) == ("not found: zzz", True)
    assert (tmp_path / "MEMORY.md").read_text() == "- a\n"


async def test_unknown_action_is_an_error(tmp_path):
    r = await call(memory_tool(str(tmp_path)), action="append", text="x")
    assert (r.output, r.is_error) == ("unknown action: append", True)
    assert not (tmp_path / "MEMORY.md").exists()


async def test_target_user_writes_user_md_and_any_other_target_memory_md(tmp_path):
    t = memory_tool(str(tmp_path))
    r = await call(t, action="add", target="user", text="Prefers dark roast")
    assert r.output == "ok (add → USER.md); loads next session"
    assert (tmp_path / "USER.md").read_text() == "- Prefers dark roast\n"
    r = await call(t, action="add", target="elsewhere", text="x")
    assert r.output == "ok (add → MEMORY.md); loads next session"


@pytest.mark.parametrize("action", ["add", "replace", "remove"])
async def test_empty_text_is_an_error_for_every_action(tmp_path, action):
    write(tmp_path, "MEMORY.md", "- a\n")
    r = await call(memory_tool(str(tmp_path)), action=action, text="", **{"with": "b"})
    assert r.is_error
    assert r.output.startswith('memory: "text" must be a non-empty string')
    assert (tmp_path / "MEMORY.md").read_text() == "- a\n"


async def test_replace_without_with_is_an_error_not_a_silent_delete(tmp_path):
    write(tmp_path, "MEMORY.md", "- a\n")
    r = await call(memory_tool(str(tmp_path)), action="replace", text="a")
    assert r.is_error and 'replace needs "with"' in r.output
    assert (tmp_path / "MEMORY.md").read_text() == "- a\n"


async def test_missing_directory_is_an_error_result(tmp_path):
    r = await call(memory_tool(str(tmp_path / "gone")), action="add", text="x")
    assert r.is_error and "persona directory not found" in r.output


async def test_writes_go_through_temp_file_and_rename_keeping_mode(tmp_path):
    path = tmp_path / "MEMORY.md"
    write(tmp_path, "MEMORY.md", "- a\n")
    os.chmod(path, 0o600)
    inode_before = os.stat(path).st_ino
    await call(memory_tool(str(tmp_path)), action="add", text="b")
    st = os.stat(path)
    assert st.st_ino != inode_before  # replaced by rename, not rewritten in place
    assert stat.S_IMODE(st.st_mode) == 0o600
    assert sorted(os.listdir(tmp_path)) == ["MEMORY.md"]  # no temp file left behind


async def test_symlinked_memory_file_is_written_through_to_its_target(tmp_path):
    real = tmp_path / "store"
    real.mkdir()
    home = tmp_path / "home"
    home.mkdir()
    (real / "MEMORY.md").write_text("- a\n")
    os.symlink(real / "MEMORY.md", home / "MEMORY.md")
    await call(memory_tool(str(home)), action="add", text="b")
    assert os.path.islink(home / "MEMORY.md")
    assert (real / "MEMORY.md").read_text() == "- a\n- b\n"


async def test_concurrent_adds_all_land(tmp_path):
    t = memory_tool(str(tmp_path))
    results = await asyncio.gather(*(call(t, action="add", text=f"entry {i}") for i in range(25)))
    assert all(not r.is_error for r in results)
    lines = (tmp_path / "MEMORY.md").read_text().splitlines()
    assert sorted(lines) == sorted(f"- entry {i}" for i in range(25))


_HOLD_LOCK = """
import fcntl, os, sys
fd = os.open(sys.argv[1], os.O_RDONLY)
fcntl.flock(fd, fcntl.LOCK_EX)
print("locked", flush=True)
sys.stdin.readline()
"""


@pytest.fixture
async def lock_holder(tmp_path):
    """A separate process holding the persona directory's flock until `release()` is called."""
    if sys.platform == "win32":
        pytest.skip("flock is POSIX")
    holder = subprocess.Popen([sys.executable, "-c", _HOLD_LOCK, str(tmp_path)], stdin=subprocess.PIPE,
                              stdout=subprocess.PIPE, text=True)

    def release():
        holder.stdin.write("\n")
        holder.stdin.flush()

    try:
        assert await asyncio.to_thread(holder.stdout.readline) == "locked\n"
        yield release
    finally:
        if holder.poll() is None:
            holder.kill()
        await asyncio.to_thread(holder.wait)
        holder.stdin.close()
        holder.stdout.close()


async def test_edit_waits_for_another_process_holding_the_directory_lock(tmp_path, lock_holder):
    edit = asyncio.create_task(call(memory_tool(str(tmp_path)), action="add", text="x"))
    done, _ = await asyncio.wait({edit}, timeout=0.3)
    assert not done, "the edit must block while another process holds the lock"
    assert not (tmp_path / "MEMORY.md").exists()
    lock_holder()
    r = await asyncio.wait_for(edit, 10)
    assert not r.is_error
    assert (tmp_path / "MEMORY.md").read_text() == "- x\n"


async def test_memory_edit_does_not_block_the_event_loop(tmp_path, lock_holder):
    """While an edit is parked on the lock (in a worker thread), the loop keeps running."""
    edit = asyncio.create_task(call(memory_tool(str(tmp_path)), action="add", text="x"))
    ticked = asyncio.Event()
    asyncio.get_running_loop().call_soon(ticked.set)
    await asyncio.wait_for(ticked.wait(), 5)  # would hang if the edit blocked the loop
    assert not edit.done()
    lock_holder()
    assert not (await asyncio.wait_for(edit, 10)).is_error


# --------------------------------------------------------------------------- agent_from_dir / start_agent


def _tool(name):
    async def execute(args=None, ctx=None):
        return None

    return Tool(name=name, description=name, input_schema={"type": "object"}, source="native", execute=execute)


def test_agent_from_dir_fills_name_does_soul_and_tools(tmp_path):
    home = tmp_path / "ava"
    home.mkdir()
    write(home, "SOUL.md", "I am Ava.")
    a = agent_from_dir(str(home) + "/", tools=[_tool("first")], uses={"tools": [_tool("second")], "other": 1},
                       model="m1")
    assert isinstance(a, Agent)
    assert a.name == "ava"
    assert a.does == f"persona agent from {home}/"
    assert a.soul == "## SOUL.md\n\nI am Ava."
    assert a.model == "m1"
    assert [t.name for t in a.uses["tools"]] == ["first", "second", "memory"]
    assert a.uses["other"] == 1


def test_agent_from_dir_respects_name_does_and_memory_false(tmp_path):
    a = agent_from_dir(str(tmp_path), name="bot", does="helps", memory=False)
    assert (a.name, a.does, a.uses["tools"]) == ("bot", "helps", [])


def test_agent_from_dir_refuses_a_soul_override(tmp_path):
    with pytest.raises(TypeError, match="composes the soul"):
        agent_from_dir(str(tmp_path), soul="other")


_SPEC = {
    "style": "openai",
    "usagePerCall": {"prompt_tokens": 1, "completion_tokens": 1, "total_tokens": 2},
    "scripts": {
        "m-beat": [
            {"always": True, "text": "<if last user message contains 'tick' then 'beat seen' else 'HEARTBEAT_OK'>"}
        ],
        "m-slow": [
            {
                "always": True,
                "blocksUntil": "released-or-aborted",
                "text": "items=<count of numbered inbox items in last user msg>",
            }
        ],
    },
}


def test_start_agent_validates_every_ms_and_needs_a_loop(tmp_path):
    a = agent_from_dir(str(tmp_path), model="m-beat")
    with pytest.raises(ValueError, match="every_ms must be a positive number"):
        start_agent(a, every_ms=0)
    with pytest.raises(RuntimeError, match="needs a running event loop"):
        start_agent(a, every_ms=1000)


def test_start_agent_rejects_unknown_runtime_options(tmp_path):
    with pytest.raises(TypeError):
        start_agent(agent_from_dir(str(tmp_path), model="m-beat"), bogus=1)


async def test_without_every_ms_the_host_drives_post_and_wake(tmp_path):
    mock = MockLLM(_SPEC)
    started = start_agent(agent_from_dir(str(tmp_path), model="m-beat"), transport=mock)
    try:
        assert started.handle.parent is started.rt.root and started.handle.state == "idle"
        assert started.rt.post(started.handle, InboxItem("external", "chat", "hello")).ok
        started.rt.wake(started.handle, "answer the inbox")
        r = await started.rt.wait(started.handle)
        assert r.text == "HEARTBEAT_OK"
    finally:
        await started.stop()
    assert started.handle.state == "closed"


async def test_async_on_report_is_awaited_and_a_raising_one_is_logged(tmp_path, caplog):
    mock = MockLLM(_SPEC)
    clock = VirtualClock()
    got: list[str] = []

    async def on_report(text):
        got.append(text)
        if len(got) == 2:
            raise ValueError("host broke")

    started = start_agent(agent_from_dir(str(tmp_path), model="m-beat"), every_ms=1000, clock=clock,
                          on_report=on_report, transport=mock)
    try:
        for _ in range(3):
            await clock.advance(1)
            await started.rt.wait(started.handle)  # the collector (an earlier waiter) reported first
    finally:
        await started.stop()
    assert got == ["beat seen", "beat seen", "beat seen"]
    assert any("heartbeat on_report for root/" in rec.getMessage() and "host broke" in rec.getMessage()
               for rec in caplog.records)


async def test_ticks_do_not_crowd_out_real_posts_during_a_long_turn(tmp_path):
    """Beyond #13: with inbox_cap=2, twenty mid-turn ticks still leave room for a real post."""
    mock = MockLLM(_SPEC)
    clock = VirtualClock()
    started = start_agent(agent_from_dir(str(tmp_path), model="m-slow"), every_ms=1000, clock=clock,
                          transport=mock, inbox_cap=2)
    h, rt = started.handle, started.rt
    try:
        await clock.advance(1)
        assert await asyncio.to_thread(mock.blocked.wait, 10)
        await clock.advance(20)  # twenty beats while the turn is blocked
        assert [(i.channel, i.ticks) for i in h.inbox] == [("timer", 20)]
        assert rt.post(h, InboxItem("external", "chat", "urgent")).ok
        mock.release()
        await rt.wait(h)
        await clock.advance(1)  # the next beat drains both items in one turn
        r = await rt.wait(h)
        assert r.text == "items=2"
        assert mock.requests[-1]["messages"][-1]["content"].endswith(
            "1. [from=external channel=chat] urgent\n2. [from=clock channel=timer] tick (x21 coalesced)")
    finally:
        mock.release()
        await started.stop()
