"""End to end: `create_toolkit({"mcpServers": …})` with a real stdio MCP server."""

from support.mcp_servers.helpers import demo_cmd, pid_alive
from toolnexus import create_toolkit


async def test_toolkit_lists_runs_reports_status_and_reaps_the_server_on_close(caplog):
    tk = await create_toolkit(
        {
            "mcpServers": {
                "my srv": {"command": demo_cmd(), "tools": {"echo": True, "pid": True, "dotted.name": True}},
                "off": {"command": demo_cmd(), "disabled": True},
                "broken": {"command": ["/nonexistent/tn-mcp-server"]},
            },
            "builtins": False,
        }
    )
    try:
        assert [t.name for t in tk.tools()] == ["my_srv_echo", "my_srv_pid", "my_srv_dotted_name"]
        assert tk.mcp_status() == {"my srv": "connected", "off": "disabled", "broken": "failed"}
        r = await tk.execute("my_srv_echo", {"text": "through the toolkit"})
        assert (r.output, r.is_error, r.metadata) == ("through the toolkit", False, {"server": "my srv"})
        assert tk.to_openai()[0]["function"]["parameters"]["additionalProperties"] is False
        pid = int((await tk.execute("my_srv_pid", {})).output)
        assert pid_alive(pid)
    finally:
        await tk.close()
    assert not pid_alive(pid)
    assert '[toolnexus] MCP server "broken" failed:' in caplog.text


async def test_toolkit_refresh_picks_up_server_side_tools_and_keeps_registered_ones():
    from toolnexus import define_tool

    tk = await create_toolkit({"mcpServers": {"srv": {"command": demo_cmd()}}}, builtins=False,
                              extra_tools=[define_tool(lambda: "x", name="mine")], disable_tools=["srv_pid"])
    try:
        tk.register(define_tool(lambda: "late", name="late"))
        before = [t.name for t in tk.tools()]
        assert "srv_extra1" not in before and "srv_pid" not in before
        assert (await tk.execute("srv_grow", {})).output == "extra1"  # the server adds a tool
        assert await tk.refresh() is tk
        after = [t.name for t in tk.tools()]
        assert "srv_extra1" in after and "srv_pid" not in after
        assert after[-2:] == ["mine", "late"]  # sources first, then extras, then registered
        assert (await tk.execute("srv_extra1", {})).output == "extra1"
    finally:
        await tk.close()
