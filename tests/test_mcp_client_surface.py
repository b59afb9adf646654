"""The MCP client surface beyond tools: resources, prompts, log and progress notifications (hooks and
traces), sampling under a policy, and our `clientInfo` — over stdio (our own session) and over
streamable HTTP (the SDK's), against one real server (`support.mcp_servers.rich`, the SDK's
`MCPServer`).
"""

from __future__ import annotations

import base64
import sys
from pathlib import Path

import pytest
import pytest_asyncio
from opentelemetry.sdk.trace import TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter

from support.mcp_servers.http_servers import serve_app
from support.mcp_servers.rich import PNG, build
from toolnexus import __version__, create_toolkit, otel
from toolnexus.client import create_in_process_client
from toolnexus.mcp_source import McpOptions, SamplingPolicy, mcp_source_of

pytestmark = [pytest.mark.asyncio(loop_scope="module"),
              pytest.mark.filterwarnings("ignore::mcp.shared.exceptions.MCPDeprecationWarning")]
RICH = str(Path(__file__).parent / "support" / "mcp_servers" / "rich.py")
HEARD: list[tuple[str, dict]] = []
ASKED: list[dict] = []


def generate(request: dict) -> dict:
    """The host's model: answers sampling requests and drives the traced run below."""
    ASKED.append(request["body"])
    if request["tools"]:  # the traced run: call `rich_work` once, then finish
        if not any(m.get("role") == "tool" for m in request["messages"]):
            return {"tool_calls": [{"name": "rich_work", "args": {"steps": 2}}]}
        return {"content": "done"}
    return {"content": "Paris"}


@pytest.fixture(scope="module", params=["stdio", "http"])
def where(request):
    if request.param == "stdio":
        yield {"command": [sys.executable, RICH]}
        return
    with serve_app(build().streamable_http_app()) as base:
        yield {"url": base + "/mcp"}


@pytest_asyncio.fixture(loop_scope="module", scope="module")
async def toolkit(where):
    HEARD.clear()
    client = create_in_process_client(model="m-sample", generate=generate)
    hooks = {"mcp_log": lambda e: HEARD.append(("log", e)), "mcp_progress": lambda e: HEARD.append(("progress", e))}
    options = McpOptions(hooks=hooks, sampling=SamplingPolicy(client=client, servers=["rich"], max_tokens=64))
    config = {"mcpServers": {"rich": {**where, "resourceTools": True, "promptTools": True, "timeout": 30000},
                             "plain": {**where, "timeout": 30000}}}
    kit = await create_toolkit(config, builtins=False, mcp_options=options)
    yield kit
    await kit.close()


async def test_resources_are_listed_and_read_text_binary_and_from_a_template(toolkit):
    source = mcp_source_of(toolkit)
    assert toolkit.mcp_status() == {"rich": "connected", "plain": "connected"}
    resources = {r.uri: r for r in await source.list_resources("rich")}
    assert set(resources) == {"docs://readme", "docs://logo"}
    assert resources["docs://readme"].mime_type == "text/markdown"
    assert [t.uri_template for t in await source.list_resource_templates("rich")] == ["docs://pages/{name}"]
    [text] = await source.read_resource("rich", "docs://readme")
    assert text["text"].startswith("# Rich")
    [blob] = await source.read_resource("rich", "docs://logo")
    assert base64.b64decode(blob["blob"]) == PNG and blob["mimeType"] == "image/png"
    [page] = await source.read_resource("rich", "docs://pages/intro")
    assert page["text"] == "page intro"
    everyone = await source.list_resources()  # every connected server that has resources
    assert {r.server for r in everyone} == {"rich", "plain"}


async def test_prompts_are_listed_and_got_with_arguments_embedded_resources_and_images(toolkit):
    source = mcp_source_of(toolkit)
    prompts = {p.name: p for p in await source.list_prompts("rich")}
    assert set(prompts) == {"review", "show_logo"}
    assert [a["name"] for a in prompts["review"].arguments] == ["code"]
    got = await source.get_prompt("rich", "review", {"code": "x = 1"})
    assert got.messages[0]["role"] == "user" and "x = 1" in got.messages[0]["content"]["text"]
    shown = await source.get_prompt("rich", "show_logo")
    assert [m["content"]["type"] for m in shown.messages] == ["resource", "image"]
    with pytest.raises(ValueError, match='no connected MCP server "nope"'):
        await source.get_prompt("nope", "review")


async def test_models_reach_resources_and_prompts_through_tools_when_the_entry_asks(toolkit):
    names = [t.name for t in toolkit.tools()]
    assert {"rich_list_resources", "rich_read_resource", "rich_list_prompts", "rich_get_prompt"} <= set(names)
    assert not any(n.startswith("plain_list") or n.startswith("plain_get") for n in names)  # not asked for
    listed = await toolkit.execute("rich_list_resources", {})
    assert "docs://readme — readme (text/markdown)" in listed.output and "docs://pages/{name}" in listed.output
    logo = await toolkit.execute("rich_read_resource", {"uri": "docs://logo"})
    assert not logo.is_error and logo.parts[0]["type"] == "file" and logo.parts[0]["mimeType"] == "image/png"
    prompt = await toolkit.execute("rich_get_prompt", {"name": "review", "arguments": {"code": "y = 2"}})
    assert prompt.output == "Review a piece of code.\n\nuser: Please review:\ny = 2"
    missing = await toolkit.execute("rich_read_resource", {})
    assert missing.is_error and '"uri"' in missing.output


async def test_log_and_progress_notifications_reach_the_hooks_and_the_calls_span(toolkit):
    exporter = InMemorySpanExporter()
    provider = TracerProvider()
    provider.add_span_processor(SimpleSpanProcessor(exporter))
    otel.instrument(tracer_provider=provider)
    HEARD.clear()
    try:
        client = create_in_process_client(model="m-sample", generate=generate)
        result = await client.run("work", toolkit)
    finally:
        otel.uninstrument()
        provider.shutdown()
    assert result.text == "done"
    progress = [e for kind, e in HEARD if kind == "progress"]
    assert [(e["progress"], e["total"], e["tool"], e["server"]) for e in progress] == [(1, 2, "work", "rich"),
                                                                                      (2, 2, "work", "rich")]
    assert [e["data"] for kind, e in HEARD if kind == "log"] == ["step 1 of 2", "step 2 of 2"]
    [span] = [s for s in exporter.get_finished_spans() if s.name == "execute_tool rich_work"]
    assert [e.name for e in span.events] == ["mcp.log", "mcp.progress", "mcp.log", "mcp.progress"]
    assert span.events[1].attributes["mcp.progress"] == 1 and span.events[0].attributes["mcp.data"] == "step 1 of 2"


async def test_sampling_is_answered_by_the_hosts_model_only_for_servers_the_policy_lists(toolkit):
    ASKED.clear()
    answered = await toolkit.execute("rich_ask_model", {"question": "Capital of France?"})
    assert answered.output == "m-sample: Paris"
    [body] = ASKED
    assert body["max_tokens"] == 64  # the server asked for 4000; the policy caps it
    assert body["messages"][0] == {"role": "system", "content": "Answer in one word."}
    refused = await toolkit.execute("plain_ask_model", {"question": "Capital of France?"})
    assert refused.output.startswith("refused") and len(ASKED) == 1  # `plain` is not listed: never asked


async def test_we_introduce_ourselves_as_toolnexus(toolkit):
    said = await toolkit.execute("rich_client_info", {})
    assert said.output == f"toolnexus {__version__}"
