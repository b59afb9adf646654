"""`Toolkit.serve(..., mcp=...)`: the real `/mcp` endpoint driven by the official mcp 2.x client."""

from __future__ import annotations

import asyncio
import base64
import os
import shutil
import time

import httpx
import mcp_types as mtypes
import pytest
from mcp.shared.exceptions import MCPError

from test_mcp_serve_kit import ECHO_SCHEMA, Recorder, make_toolkit, mcp_session, post_rpc, served
from toolnexus import Tool, ToolResult


async def test_initialize_reports_profile_server_info_and_tools_capability() -> None:
    async with served(make_toolkit(Recorder()), mcp={"name": "acme-tools", "version": "9.9"}) as h:
        async with mcp_session(h.url + "/mcp") as s:
            init = s.initialize_result
            assert init is not None
            assert (init.server_info.name, init.server_info.version) == ("acme-tools", "9.9")
            assert init.capabilities.tools is not None


async def test_tools_list_sends_names_and_schemas_verbatim_in_toolkit_order() -> None:
    async with served(make_toolkit(Recorder()), mcp={}) as h:
        async with mcp_session(h.url + "/mcp") as s:
            listed = (await s.list_tools()).tools
    assert [t.name for t in listed] == ["echo", "media", "fail", "soft_error", "ask", "slow"]
    assert listed[0].description == "Echo x back"
    assert listed[0].input_schema == ECHO_SCHEMA


async def test_tools_call_returns_text_output_and_is_error() -> None:
    async with served(make_toolkit(Recorder()), mcp={}) as h:
        async with mcp_session(h.url + "/mcp") as s:
            ok = await s.call_tool("echo", {"x": "hi"})
            soft = await s.call_tool("soft_error", {})
            raised = await s.call_tool("fail", {})
    assert (ok.content[0].text, ok.is_error) == ("echo:hi", False)
    assert (soft.content[0].text, soft.is_error) == ("not found: widget", True)
    assert (raised.content[0].text, raised.is_error) == ("kaboom", True)


async def test_tools_call_maps_parts_and_drops_url_only_media() -> None:
    async with served(make_toolkit(Recorder()), mcp={}) as h:
        async with mcp_session(h.url + "/mcp") as s:
            result = await s.call_tool("media", {})
    blocks = [b.model_dump(by_alias=True, exclude_none=True) for b in result.content]
    assert blocks == [
        {"type": "text", "text": "with parts"},
        {"type": "text", "text": "a text part"},
        {"type": "image", "data": "iVBORw0KGgo=", "mimeType": "image/png"},
        {"type": "audio", "data": "UklGRg==", "mimeType": "application/octet-stream"},
        {
            "type": "resource",
            "resource": {"uri": "file:///doc.pdf", "mimeType": "application/pdf", "blob": "JVBERi0="},
        },
        {
            "type": "resource_link",
            "name": "https://example.test/report.csv",
            "uri": "https://example.test/report.csv",
            "mimeType": "text/csv",
        },
    ]


async def test_tool_metadata_is_never_sent_on_the_wire() -> None:
    async with served(make_toolkit(Recorder()), mcp={}) as h, httpx.AsyncClient() as http:
        resp = await post_rpc(http, h.url + "/mcp", "tools/call", {"name": "echo", "arguments": {"x": "1"}})
    assert resp.status_code == 200
    assert "never-sent" not in resp.text and "secret" not in resp.text
    assert resp.json()["result"]["content"] == [{"type": "text", "text": "echo:1"}]


async def test_unknown_tool_is_a_jsonrpc_invalid_params_error() -> None:
    async with served(make_toolkit(Recorder()), mcp={}) as h:
        async with mcp_session(h.url + "/mcp") as s:
            with pytest.raises(MCPError) as err:
                await s.call_tool("nope", {})
    assert err.value.code == mtypes.INVALID_PARAMS
    assert err.value.message == "Unknown tool: nope"


async def test_on_call_gets_name_source_ms_is_error_and_async_callbacks_are_awaited() -> None:
    events: list[dict] = []

    async def on_call(event: dict) -> None:
        await asyncio.sleep(0)
        events.append(event)

    async with served(make_toolkit(Recorder()), mcp={}, on_call=on_call) as h:
        async with mcp_session(h.url + "/mcp") as s:
            await s.call_tool("echo", {"x": "1"})
            await s.call_tool("fail", {})
            with pytest.raises(MCPError):
                await s.call_tool("nope", {})
    assert [(e["name"], e["source"], e["is_error"]) for e in events] == [
        ("echo", "native", False),
        ("fail", "custom", True),
    ]
    assert all(set(e) == {"name", "source", "ms", "is_error"} and isinstance(e["ms"], float) for e in events)


async def test_on_call_errors_are_swallowed() -> None:
    calls: list[str] = []

    def on_call(event: dict) -> None:
        calls.append(event["name"])
        raise ValueError("observer bug")

    async with served(make_toolkit(Recorder()), mcp={}, on_call=on_call) as h:
        async with mcp_session(h.url + "/mcp") as s:
            result = await s.call_tool("echo", {"x": "ok"})
    assert calls == ["echo"]
    assert (result.content[0].text, result.is_error) == ("echo:ok", False)


async def test_tools_list_works_without_initialize_and_no_session_id_is_issued() -> None:
    async with served(make_toolkit(Recorder()), mcp={}) as h, httpx.AsyncClient() as http:
        resp = await post_rpc(http, h.url + "/mcp", "tools/list")
        init = await post_rpc(
            http,
            h.url + "/mcp",
            "initialize",
            {"protocolVersion": "2025-11-25", "capabilities": {}, "clientInfo": {"name": "t", "version": "1"}},
        )
    assert resp.status_code == 200
    assert resp.headers["content-type"] == "application/json"
    assert [t["name"] for t in resp.json()["result"]["tools"]][:2] == ["echo", "media"]
    assert init.status_code == 200 and "mcp-session-id" not in init.headers


async def test_query_string_on_mcp_path_still_hits_mcp() -> None:
    async with served(make_toolkit(Recorder()), mcp={}) as h, httpx.AsyncClient() as http:
        resp = await post_rpc(http, h.url + "/mcp?client=x", "tools/list")
    assert resp.status_code == 200 and "result" in resp.json()


async def test_post_without_event_stream_accept_is_406() -> None:
    async with served(make_toolkit(Recorder()), mcp={}) as h, httpx.AsyncClient() as http:
        resp = await post_rpc(http, h.url + "/mcp", "tools/list", accept="application/json")
    assert resp.status_code == 406


async def test_get_mcp_is_answered_405_at_once_and_the_server_keeps_serving() -> None:
    """The MCP Inspector's sequence: initialize, initialized, GET /mcp (event stream), list/call/list."""
    async with served(make_toolkit(Recorder()), mcp={}) as h, httpx.AsyncClient(timeout=5) as http:
        url = h.url + "/mcp"
        client_info = {"name": "inspector", "version": "0"}
        init = {"protocolVersion": "2025-11-25", "capabilities": {}, "clientInfo": client_info}
        assert (await post_rpc(http, url, "initialize", init)).status_code == 200
        note = await http.post(url, json={"jsonrpc": "2.0", "method": "notifications/initialized"}, headers={
            "accept": "application/json, text/event-stream"})
        assert note.status_code == 202
        get = await http.get(url, headers={"accept": "text/event-stream"})
        assert (get.status_code, get.headers["allow"]) == (405, "POST")
        assert (await post_rpc(http, url, "tools/list")).status_code == 200
        call = await post_rpc(http, url, "tools/call", {"name": "echo", "arguments": {"x": "after-get"}})
        assert call.json()["result"]["content"][0]["text"] == "echo:after-get"
        assert (await post_rpc(http, url, "tools/list")).status_code == 200
        async with mcp_session(url) as s:  # and the official client completes list/call/list too
            await s.list_tools()
            assert (await s.call_tool("echo", {"x": "2"})).content[0].text == "echo:2"
            await s.list_tools()
        started = time.perf_counter()
        await h.stop()
        assert time.perf_counter() - started < 2.0


async def test_stop_is_idempotent_prompt_and_frees_the_port() -> None:
    handle = await make_toolkit(Recorder()).serve("127.0.0.1:0", mcp={})
    started = time.perf_counter()
    await asyncio.gather(handle.stop(), handle.stop())
    await handle.stop()
    await handle.close()
    assert time.perf_counter() - started < 2.0
    assert not handle.running
    async with httpx.AsyncClient() as http:
        with pytest.raises(httpx.ConnectError):
            await http.get(handle.url + "/mcp")


async def test_a_tool_registered_after_serve_is_listed_and_callable() -> None:
    toolkit = make_toolkit(Recorder())

    async def late(args: dict, ctx=None) -> ToolResult:
        return ToolResult("late!", False)

    async with served(toolkit, mcp={}) as h:
        async with mcp_session(h.url + "/mcp") as s:
            assert "late" not in [t.name for t in (await s.list_tools()).tools]
            toolkit.register(Tool("late", "registered later", {"type": "object"}, "native", late))
            assert "late" in [t.name for t in (await s.list_tools()).tools]
            assert (await s.call_tool("late", {})).content[0].text == "late!"


async def test_profile_tools_allow_list_limits_list_and_call() -> None:
    async with served(make_toolkit(Recorder()), mcp={"tools": ["soft_error", "echo", "ghost"]}) as h:
        async with mcp_session(h.url + "/mcp") as s:
            assert [t.name for t in (await s.list_tools()).tools] == ["echo", "soft_error"]
            with pytest.raises(MCPError, match="Unknown tool: media"):
                await s.call_tool("media", {})


async def test_empty_mcp_dict_is_a_present_profile_that_exposes_everything() -> None:
    async with served(make_toolkit(Recorder(), mcp_server_config={"tools": []}), mcp={}) as h:
        async with mcp_session(h.url + "/mcp") as s:
            assert len((await s.list_tools()).tools) == 6


async def test_config_mcpServer_block_is_the_profile_when_mcp_is_none() -> None:
    toolkit = make_toolkit(Recorder(), mcp_server_config={"name": "from-config", "tools": ["echo"]})
    async with served(toolkit) as h:
        async with mcp_session(h.url + "/mcp") as s:
            assert s.initialize_result.server_info.name == "from-config"
            assert [t.name for t in (await s.list_tools()).tools] == ["echo"]


async def test_no_profile_means_mcp_and_every_other_path_is_404_not_found() -> None:
    async with served(make_toolkit(Recorder())) as h, httpx.AsyncClient() as http:
        mcp = await post_rpc(http, h.url + "/mcp", "tools/list")
        other = await http.get(h.url + "/.well-known/agent-card.json")
    assert (mcp.status_code, mcp.text) == (404, "not found")
    assert (other.status_code, other.text) == (404, "not found")


async def test_execute_gets_a_ctx_whose_signal_fires_when_the_client_disconnects() -> None:
    rec = Recorder()
    async with served(make_toolkit(rec), mcp={}) as h, httpx.AsyncClient(timeout=10) as http:
        request = asyncio.create_task(post_rpc(http, h.url + "/mcp", "tools/call", {"name": "slow", "arguments": {}}))
        await asyncio.wait_for(rec.slow_started.wait(), 5)
        assert not rec.slow_signalled.is_set()
        request.cancel()  # httpx drops the connection
        with pytest.raises(asyncio.CancelledError):
            await request
        await asyncio.wait_for(rec.slow_signalled.wait(), 5)
    ctx = rec.contexts["slow"][0]
    assert ctx is not None and ctx.answer is None


async def test_stop_fires_the_signal_of_calls_in_flight_so_they_answer_before_shutdown() -> None:
    rec = Recorder()
    handle = await make_toolkit(rec).serve("127.0.0.1:0", mcp={})
    async with httpx.AsyncClient(timeout=10) as http:
        request = asyncio.create_task(post_rpc(http, handle.url + "/mcp", "tools/call", {"name": "slow"}))
        await asyncio.wait_for(rec.slow_started.wait(), 5)
        started = time.perf_counter()
        await handle.stop()
        stop_took = time.perf_counter() - started
        reply = await request
    assert stop_took < 1.5  # well inside the 2 s grace: the tool was told, not cancelled
    assert rec.slow_signalled.is_set()
    assert reply.json()["result"] == {"content": [{"type": "text", "text": "aborted"}], "isError": True}


async def test_every_execution_gets_a_tool_context() -> None:
    rec = Recorder()
    async with served(make_toolkit(rec), mcp={}) as h:
        async with mcp_session(h.url + "/mcp") as s:
            await s.call_tool("echo", {"x": "1"})
    (ctx,) = rec.contexts["echo"]
    assert ctx is not None and isinstance(ctx.signal, asyncio.Event) and not ctx.signal.is_set()


async def test_served_file_part_blob_round_trips_base64_untouched() -> None:
    payload = base64.b64encode(b"\x00\x01binary").decode()

    async def blob(args: dict, ctx=None) -> ToolResult:
        return ToolResult("", False, parts=[{"type": "file", "data": payload}])

    toolkit = make_toolkit(Recorder())
    toolkit.register(Tool("blob", "binary file", {"type": "object"}, "native", blob))
    async with served(toolkit, mcp={"tools": ["blob"]}) as h:
        async with mcp_session(h.url + "/mcp") as s:
            result = await s.call_tool("blob", {})
    resource = result.content[1].resource
    assert (resource.uri, resource.mime_type, resource.blob) == ("file:///part", "application/octet-stream", payload)


INSPECTOR_CLI = os.environ.get("TOOLNEXUS_MCP_INSPECTOR_CLI")


@pytest.mark.skipif(
    not INSPECTOR_CLI or not shutil.which("node"),
    reason="opt-in: set TOOLNEXUS_MCP_INSPECTOR_CLI to @modelcontextprotocol/inspector-cli's build/index.js",
)
async def test_mcp_inspector_cli_completes_list_call_list() -> None:
    async def inspector(*args: str) -> str:
        proc = await asyncio.create_subprocess_exec(
            "node", INSPECTOR_CLI, url, *args, stdout=asyncio.subprocess.PIPE, stderr=asyncio.subprocess.PIPE
        )
        try:
            out, err = await asyncio.wait_for(proc.communicate(), 20)
        finally:
            if proc.returncode is None:
                proc.kill()
                await proc.wait()
        assert proc.returncode == 0, err.decode()
        return out.decode()

    async with served(make_toolkit(Recorder()), mcp={}) as h:
        url = h.url + "/mcp"
        assert '"echo"' in await inspector("--method", "tools/list")
        called = await inspector("--method", "tools/call", "--tool-name", "echo", "--tool-arg", "x=inspected")
        assert "echo:inspected" in called
        assert '"media"' in await inspector("--method", "tools/list")
