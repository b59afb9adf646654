"""MCP source against real stdio MCP servers (tests/support/mcp_servers/demo.py subprocesses).

One shared load (module scope) holds most servers; tests that kill, cancel or close get their own.
The refresh test mutates the shared `demo` server's tool list, so it runs last in this file.
"""

import asyncio
import json
import os
import re
import sys
import time
from types import SimpleNamespace

import pytest
import pytest_asyncio

from support.mcp_servers.helpers import DEMO, captured_warnings, demo_cmd, pid_alive, read_pid
from toolnexus.mcp_source import load_mcp, load_mcp_with_context
from toolnexus.types import Answer, ToolContext

pytestmark = pytest.mark.asyncio(loop_scope="module")

REQUESTS = []


def wait_for(req):
    REQUESTS.append(req)
    if req.kind == "input":
        return Answer(req.id, True, {"name": "zed"})
    return Answer(req.id, False, reason="declined")


@pytest.fixture(scope="module")
def fifo(tmp_path_factory):
    path = str(tmp_path_factory.mktemp("mcp") / "ready")
    os.mkfifo(path)
    return path


@pytest_asyncio.fixture(loop_scope="module", scope="module")
async def shared(fifo):
    config = {
        "mcpServers": {
            "demo": {"command": sys.executable, "args": [DEMO]},  # Claude-desktop form
            "off": {"command": demo_cmd(), "disabled": True},
            "$schema": "https://example.com/mcp.schema.json",
            "missing": {"command": ["/nonexistent/tn-mcp-server"]},
            "paged": {
                "command": demo_cmd("--page-size", "3"),
                "inheritEnv": ["TN_SHARED"],
                "environment": {"TN_GIVEN": "given"},
                "tools": {"echo": True, "getenv": True, "nope": True},
            },
            "dup": {"command": demo_cmd("--dup-cursor")},
            "endless": {"command": demo_cmd("--endless")},
            "slow": {"command": demo_cmd("--ready-fifo", fifo, "--delay", "30"), "timeout": 400},
            "victim": {"command": demo_cmd(), "callTimeout": 400},
        }
    }
    saved = {k: os.environ.get(k) for k in ("TN_SECRET", "TN_SHARED")}
    os.environ.update(TN_SECRET="hide", TN_SHARED="pass")
    try:
        with captured_warnings() as lines:
            load = asyncio.ensure_future(load_mcp(config, wait_for=wait_for))
            slow_pid = await read_pid(fifo)
            source = await load
    finally:
        for k, v in saved.items():
            os.environ.pop(k) if v is None else os.environ.__setitem__(k, v)
    yield source, lines, slow_pid
    await source.close()


def tool(source, name):
    return next(t for t in source.tools if t.name == name)


async def run(source, name, args=None, ctx=None):
    return await tool(source, name).execute(args, ctx)


async def test_statuses_keep_config_order_and_failures_stay_isolated(shared):
    source, lines, _ = shared
    assert list(source.status.items()) == [
        ("demo", "connected"), ("off", "disabled"), ("$schema", "failed"), ("missing", "failed"),
        ("paged", "connected"), ("dup", "failed"), ("endless", "failed"), ("slow", "failed"),
        ("victim", "connected"),
    ]
    assert lines == [
        '[toolnexus] MCP server "$schema" failed: server config must be an object, got str',
        '[toolnexus] MCP server "missing" failed: cannot start "/nonexistent/tn-mcp-server": no such executable '
        '(check "command", or install it)',
        '[toolnexus] MCP server "dup" failed: MCP list returned duplicate cursor: same',
        '[toolnexus] MCP server "endless" failed: MCP list exceeded 1000 pages',
        '[toolnexus] MCP server "slow" failed: timed out',
        '[toolnexus] server "paged" tools filter name "nope" matched no tool',
    ]


async def test_a_timed_out_server_child_is_killed_and_reaped(shared):
    assert not pid_alive(shared[2])


async def test_tools_are_server_prefixed_sanitized_and_closed(shared):
    source = shared[0]
    demo = [t.name for t in source.tools if t.name.startswith("demo_")]
    assert demo[:3] == ["demo_echo", "demo_structured", "demo_fail"] and "demo_dotted_name" in demo
    echo = tool(source, "demo_echo")
    assert (echo.description, echo.source) == ("Echo the text back", "mcp")
    assert echo.input_schema == {
        "type": "object",
        "properties": {"text": {"type": "string"}},
        "required": ["text"],
        "additionalProperties": False,
    }
    assert tool(source, "demo_dotted_name").description == ""


async def test_every_page_is_listed_before_the_allowlist_applies(shared):
    # page size 3: getenv is on the third page
    assert [t.name for t in shared[0].tools if t.name.startswith("paged_")] == ["paged_echo", "paged_getenv"]


async def test_execute_maps_text_structured_errors_and_parts(shared):
    s = shared[0]
    assert (await run(s, "demo_echo", {"text": "hi"})).output == "hi"
    r = await run(s, "demo_structured")
    assert (r.output, r.is_error, r.metadata) == ('{"result": "hi"}', False, {"server": "demo"})
    r = await run(s, "demo_fail")
    assert (r.output, r.is_error) == ("first\n\nsecond", True)
    assert (await run(s, "demo_fail_blank")).output == "MCP tool returned an error"
    assert (await run(s, "demo_mixed")).output == "plain text\nresource text"
    r = await run(s, "demo_media")
    assert r.output.splitlines() == [
        "image (image/png, 8 bytes)", "audio (audio/wav, 3 bytes)",
        "file (application/octet-stream, 0 bytes)", "file (application/octet-stream, 2 bytes)",
    ]
    assert r.parts[2] == {
        "type": "file",
        "mimeType": "application/octet-stream",
        "url": "https://example.com/a.txt",
        "name": "a.txt",
    }
    assert r.parts[3] == {"type": "file", "mimeType": "application/octet-stream", "data": "AAA=", "name": "file:///b.bin"}


async def test_a_json_rpc_error_becomes_an_error_result_naming_the_server(shared):
    r = await run(shared[0], "demo_rpc_error")
    assert (r.output, r.is_error, r.metadata, r.parts) == ("boom from rpc_error", True, {"server": "demo"}, None)


async def test_inherit_env_passes_only_listed_variables_to_the_child(shared):
    s = shared[0]
    assert (await run(s, "paged_getenv", {"name": "TN_SECRET"})).output == "<unset>"
    assert (await run(s, "paged_getenv", {"name": "TN_SHARED"})).output == "pass"
    assert (await run(s, "paged_getenv", {"name": "TN_GIVEN"})).output == "given"
    assert (await run(s, "demo_getenv", {"name": "TN_SECRET"})).output == "hide"  # default: full env


async def test_elicitations_are_bridged_to_wait_for_inline(shared):
    REQUESTS.clear()
    r = await run(shared[0], "demo_ask")
    assert json.loads(r.output) == {"action": "accept", "content": {"name": "zed"}}
    assert (await run(shared[0], "demo_ask_url")).output == "decline"
    form, url = REQUESTS
    assert re.fullmatch(r"elc-[0-9a-f]+-\d+", form.id)
    assert (form.kind, form.prompt) == ("input", "Your name?")
    assert form.data == {"schema": {"type": "object", "properties": {"name": {"type": "string"}}}}
    assert (url.kind, url.prompt, url.url) == ("authorization", "Log in", "https://auth.example/login")


async def cancelled_count(source):
    return json.loads((await run(source, "demo_stats")).output)["cancelled"]


async def test_ctx_timeout_bounds_a_call_and_the_server_is_told_to_cancel(shared):
    s = shared[0]
    before = await cancelled_count(s)
    started = time.monotonic()
    r = await run(s, "demo_sleep", {"seconds": 30}, ToolContext(timeout=0.3))
    assert time.monotonic() - started < 5
    assert r.is_error and "timed out" in r.output and r.metadata == {"server": "demo"}
    assert await cancelled_count(s) == before + 1


async def test_call_timeout_config_bounds_calls_separately_from_the_connect_timeout(shared):
    started = time.monotonic()
    r = await run(shared[0], "victim_sleep", {"seconds": 30})
    assert r.is_error and "timed out" in r.output and time.monotonic() - started < 5


async def test_a_fired_signal_abandons_the_call_and_sends_cancelled(shared):
    s = shared[0]
    before = await cancelled_count(s)
    signal = asyncio.Event()
    call = asyncio.ensure_future(run(s, "demo_sleep", {"seconds": 30}, ToolContext(signal=signal)))
    await cancelled_count(s)  # answered in order on the same pipe: the sleep request has arrived
    signal.set()
    r = await call
    assert (r.output, r.is_error, r.metadata) == ("MCP call cancelled", True, {"server": "demo"})
    assert await cancelled_count(s) == before + 1


async def test_a_signal_already_aborted_by_its_flag_sends_no_call(shared):
    s = shared[0]
    before = await cancelled_count(s)
    fired = SimpleNamespace(aborted=True)  # the signal_fired rule, not only asyncio.Event
    r = await asyncio.wait_for(run(s, "demo_sleep", {"seconds": 30}, ToolContext(signal=fired)), 5)
    assert (r.output, r.is_error, r.metadata) == ("MCP call cancelled", True, {"server": "demo"})
    assert await cancelled_count(s) == before  # nothing was sent, so nothing had to be cancelled


async def test_a_killed_child_is_replaced_by_one_lazy_reconnect(shared):
    s = shared[0]
    old = int((await run(s, "victim_pid")).output)
    died = await run(s, "victim_crash")  # the server SIGKILLs itself mid-call
    assert died.is_error and died.metadata == {"server": "victim"}
    r = await run(s, "victim_pid")
    assert not r.is_error and int(r.output) != old
    assert not pid_alive(old)
    assert (await run(s, "victim_echo", {"text": "back"})).output == "back"


async def test_cancel_aborts_an_in_flight_connect_at_once_and_kills_the_child(tmp_path):
    ready = str(tmp_path / "ready")
    os.mkfifo(ready)
    cancel = asyncio.Event()
    config = {
        "s": {"command": demo_cmd("--ready-fifo", ready, "--delay", "30")},
        "d": {"command": ["x"], "enabled": False},
    }
    load = asyncio.ensure_future(load_mcp_with_context(config, cancel=cancel))
    pid = await read_pid(ready)
    started = time.monotonic()
    cancel.set()
    with pytest.raises(asyncio.CancelledError):
        await load
    assert time.monotonic() - started < 5  # aborted, not the 30 s start-up (latency goals live in benchmarks/)
    assert not pid_alive(pid)


async def test_cancelling_the_loading_task_kills_the_child_and_propagates(tmp_path):
    ready = str(tmp_path / "ready")
    os.mkfifo(ready)
    load = asyncio.ensure_future(load_mcp({"s": {"command": demo_cmd("--ready-fifo", ready, "--delay", "30")}}))
    pid = await read_pid(ready)
    load.cancel()
    with pytest.raises(asyncio.CancelledError):
        await load
    assert not pid_alive(pid)


async def test_a_preset_cancel_spawns_nothing():
    cancel = asyncio.Event()
    cancel.set()
    with pytest.raises(asyncio.CancelledError):
        await load_mcp_with_context({"s": {"command": ["/nonexistent/never-run"]}}, cancel=cancel)


async def test_close_works_from_another_task_is_idempotent_and_reaps_the_child():
    source = await asyncio.ensure_future(load_mcp({"one": {"command": demo_cmd()}}))  # loaded in another task
    pid = int((await run(source, "one_pid")).output)
    await source.close()
    assert not pid_alive(pid)
    await source.close()
    r = await run(source, "one_echo", {"text": "x"})
    assert (r.output, r.is_error) == ('MCP server "one" is closed', True)


async def test_refresh_picks_up_tools_added_server_side(shared):
    s = shared[0]
    assert not s.stale
    assert (await run(s, "demo_grow")).output == "extra1"
    # the list_changed notification precedes the call's response on the pipe
    assert s.stale and "demo_extra1" not in [t.name for t in s.tools]
    tools = await s.refresh()
    assert tools is s.tools and not s.stale
    assert "demo_extra1" in [t.name for t in s.tools]
    assert [t.name for t in s.tools if t.name.startswith("paged_")] == ["paged_echo", "paged_getenv"]
    assert (await run(s, "demo_extra1")).output == "extra1"
