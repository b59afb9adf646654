"""Our own stdio MCP session at the protocol's edges, against a hand-written server process
(`support/mcp_servers/scripted.py`) that logs every message it receives; the SDK servers of the
other MCP tests cover the ordinary paths."""

from __future__ import annotations

import asyncio
import json
import subprocess
import sys
from pathlib import Path
from typing import Any, AsyncIterator

import pytest

from toolnexus import Answer
from toolnexus.mcp_source import load_mcp
from toolnexus.mcp_source._session import McpRequestError, StdioSession

SCRIPTED = str(Path(__file__).parent / "support" / "mcp_servers" / "scripted.py")


class Scripted:
    """The scripted server as a child process with a `StdioSession` on its pipes."""

    def __init__(self, log: Path) -> None:
        self.log = log
        self.items: list[Any] = []
        self.arrived: dict[str, asyncio.Event] = {}

    def seen(self, item: Any) -> None:
        self.items.append(item)
        if isinstance(item, dict) and item.get("method") == "notifications/message":
            self.arrived.setdefault(str(item["params"]["data"]), asyncio.Event()).set()

    def received(self) -> list[dict[str, Any]]:
        return [json.loads(line) for line in self.log.read_text().splitlines()]


@pytest.fixture
async def scripted(tmp_path: Path) -> AsyncIterator[tuple[Scripted, StdioSession]]:
    server = Scripted(tmp_path / "received.jsonl")
    proc = await asyncio.create_subprocess_exec(sys.executable, SCRIPTED, str(server.log),
                                                stdin=subprocess.PIPE, stdout=subprocess.PIPE)
    assert proc.stdin is not None and proc.stdout is not None
    session = StdioSession(proc.stdout, proc.stdin, name="scripted", timeout=10, max_line=1 << 20,
                           on_item=server.seen)
    session.start()
    await session.initialize()
    try:
        yield server, session
    finally:
        await session.aclose()
        proc.stdin.close()
        await proc.wait()


def texts(result: dict[str, Any]) -> str:
    return "".join(c["text"] for c in result["content"])


async def test_the_handshake_says_who_we_are_and_announces_initialized(scripted):
    server, session = scripted
    await session.call_tool("echo", {"text": "x"})  # everything before it has been read by the server
    first, second = server.received()[:2]
    assert first["method"] == "initialize" and first["params"]["protocolVersion"] == "2025-11-25"
    assert first["params"]["clientInfo"]["name"] == "toolnexus"
    assert first["params"]["capabilities"] == {}  # no elicitation bridge, so none advertised
    assert second == {"jsonrpc": "2.0", "method": "notifications/initialized"}
    assert session.server_info == {"name": "scripted", "version": "1"}


async def test_server_requests_are_answered_ping_with_an_empty_result_others_with_method_not_found(scripted):
    _, session = scripted
    result = await session.call_tool("pinger", {})
    assert texts(result) == '{} | {"code": -32601, "message": "Method not found"}'


async def test_junk_lines_and_replies_nobody_waits_for_are_skipped(scripted):
    server, session = scripted
    assert texts(await session.call_tool("noisy", {})) == "after the noise"
    assert any(type(i).__name__ == "NotJsonRpc" and "wrong stream" in str(i) for i in server.items)
    assert texts(await session.call_tool("echo", {"text": "still fine"})) == "still fine"


async def test_a_result_that_is_not_an_object_is_a_protocol_error(scripted):
    _, session = scripted
    with pytest.raises(McpRequestError, match="tools/call result that is not an object"):
        await session.call_tool("odd", {})


async def test_a_call_that_times_out_is_cancelled_at_the_server(scripted):
    server, session = scripted
    with pytest.raises(McpRequestError, match="Request 'tools/call' timed out") as caught:
        await session.call_tool("slow", {}, timeout=0.2)
    assert caught.value.code == -32001
    await session.call_tool("echo", {"text": "sync"})  # the server has read the notice by now
    call = next(m for m in server.received() if m.get("params", {}).get("name") == "slow")
    notice = next(m for m in server.received() if m.get("method") == "notifications/cancelled")
    assert notice["params"]["requestId"] == call["id"] and "timed out" in notice["params"]["reason"]


async def test_a_caller_that_gives_up_cancels_the_call_at_the_server(scripted):
    server, session = scripted
    task = asyncio.ensure_future(session.call_tool("slow", {}))
    arrived = server.arrived.setdefault("got slow call 2", asyncio.Event())  # id 1 was initialize
    await arrived.wait()
    task.cancel()
    with pytest.raises(asyncio.CancelledError):
        await task
    await session.call_tool("echo", {"text": "sync"})
    notice = next(m for m in server.received() if m.get("method") == "notifications/cancelled")
    assert notice["params"] == {"requestId": 2, "reason": "caller cancelled"}


async def test_a_dead_server_fails_waiting_and_later_requests_as_connection_closed(tmp_path, exits):
    proc = await asyncio.create_subprocess_exec(sys.executable, SCRIPTED, str(tmp_path / "log"),
                                                stdin=subprocess.PIPE, stdout=subprocess.PIPE)
    assert proc.stdin is not None and proc.stdout is not None
    closed: list[Any] = []
    session = StdioSession(proc.stdout, proc.stdin, name="s", timeout=10, max_line=1 << 20, on_closed=closed.append)
    session.start()
    exits.push_async_callback(session.aclose)
    await session.initialize()
    waiting = asyncio.ensure_future(session.call_tool("slow", {}))
    proc.kill()
    await proc.wait()
    with pytest.raises(McpRequestError, match="Connection closed") as caught:
        await waiting
    assert caught.value.code == -32000 and session.is_lost(caught.value) and closed == [None]
    with pytest.raises(McpRequestError, match="Connection closed"):
        await session.call_tool("echo", {"text": "x"})


async def test_elicitations_reach_wait_for_and_a_server_that_gives_up_stops_the_wait(tmp_path):
    asked: list[Any] = []
    second = asyncio.Event()
    cancelled = asyncio.Event()

    async def wait_for(request: Any) -> Answer:
        asked.append(request)
        if len(asked) == 1:
            return Answer(id=request.id, ok=True, data={"name": "Ada"})
        second.set()
        try:
            await asyncio.Event().wait()  # a human who never answers
        except asyncio.CancelledError:
            cancelled.set()
            raise
        raise AssertionError("unreachable")

    source = await load_mcp({"mcpServers": {"s": {"command": [sys.executable, SCRIPTED, str(tmp_path / "log")]}}},
                            wait_for=wait_for)
    try:
        ask = next(t for t in source.tools if t.name == "s_ask")
        answered = await ask.execute({})
        assert json.loads(answered.output) == {"action": "accept", "content": {"name": "Ada"}}
        assert (asked[0].kind, asked[0].prompt) == ("input", "Your name?")
        abandoned = asyncio.ensure_future(ask.execute({"give_up": True}))
        await second.wait()  # the host is being asked; now the server moves on without an answer
        echo = next(t for t in source.tools if t.name == "s_echo")
        assert (await echo.execute({"text": "next"})).output == "next"
        assert (await abandoned).output == "gave up"
        await cancelled.wait()  # the bridge's wait was cancelled, not left hanging
        init = json.loads((tmp_path / "log").read_text().splitlines()[0])
        assert init["params"]["capabilities"] == {"elicitation": {"form": {}, "url": {}}}
    finally:
        await source.close()


def test_a_toolkit_with_only_local_servers_never_imports_the_sdk():
    code = (
        "import asyncio, sys\n"
        "from toolnexus import create_toolkit\n"
        "async def main():\n"
        f"    cfg = {{'mcpServers': {{'s': {{'command': [sys.executable, {SCRIPTED!r}, '/dev/null']}}}}}}\n"
        "    toolkit = await create_toolkit(cfg)\n"
        "    assert toolkit.mcp_status() == {'s': 'connected'}, toolkit.mcp_reasons()\n"
        "    print((await toolkit.execute('s_echo', {'text': 'hi'})).output)\n"
        "    await toolkit.close()\n"
        "    print(sorted({m.split('.')[0] for m in sys.modules} & {'mcp', 'anyio', 'pydantic', 'httpx', 'httpx2'}))\n"
        "asyncio.run(main())\n")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60, check=True).stdout
    assert out.splitlines() == ["hi", "[]"]


async def test_a_request_to_a_server_that_stopped_reading_fails_cleanly_and_leaves_no_stray_error():
    """The child closed its stdin but not its stdout: the write fails, the waiting request is
    failed by the lost connection, and its future is retrieved, so asyncio reports nothing."""
    import gc

    reported: list[dict[str, Any]] = []
    loop = asyncio.get_running_loop()
    loop.set_exception_handler(lambda _loop, context: reported.append(context))
    proc = await asyncio.create_subprocess_exec(
        sys.executable, "-c", "import os, sys; os.close(0); sys.stdout.write('ready\\n'); sys.stdout.flush(); "
                              "sys.stdin = None; import time; time.sleep(30)",
        stdin=subprocess.PIPE, stdout=subprocess.PIPE)
    assert proc.stdin is not None and proc.stdout is not None
    try:
        assert await proc.stdout.readline() == b"ready\n"  # its stdin is closed now
        session = StdioSession(proc.stdout, proc.stdin, name="deaf", timeout=10, max_line=1 << 20)
        session.start()
        failure = None
        for _ in range(3):  # the first write may land in the pipe buffer before the OS says it is broken
            try:
                await session.call_tool("echo", {"text": "x" * 70000})
            except McpRequestError as exc:
                failure = exc
                break
        assert failure is not None and session.is_lost(failure)
        del failure
        await session.aclose()
        gc.collect()
        assert [c for c in reported if "never retrieved" in str(c.get("message"))] == []
    finally:
        loop.set_exception_handler(None)
        proc.kill()
        await proc.wait()
