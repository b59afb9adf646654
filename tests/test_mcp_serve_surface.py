"""The whole MCP server surface of a real `toolnexus serve` process, through the official `mcp` client.

One `toolnexus serve --mcp` process (streamable HTTP) serves `support/served_items.py` for the
module; stdio gets its own `toolnexus serve --mcp-stdio` child. Covered: resources (list, read
text / binary, templates, completion), prompts (list, get with arguments, an embedded resource,
an image), and over HTTP what needs the client's side of the wire: elicitation for a tool's
`pending(kind="input")`, log and progress notifications, sampling, SSE polling resumed with
`Last-Event-ID`, and the session's end.
"""

from __future__ import annotations

import json
from contextlib import asynccontextmanager
from typing import Any, AsyncIterator, Iterator

import httpx
import mcp_types as mtypes
import pytest
from mcp.client.session import ClientSession
from mcp.client.stdio import StdioServerParameters, stdio_client

from support.cli_run import SUPPORT, TOOLNEXUS, ServeProcess
from support.served_items import PNG
from test_mcp_serve_kit import ACCEPT, mcp_session

SERVED = ("--no-builtins", "--tools-from", "served_items:ITEMS")
# The official client warns that logging leaves the 2026-07-28 revision; these clients speak 2025-11-25.
pytestmark = pytest.mark.filterwarnings("ignore:The logging capability is deprecated")


@pytest.fixture(scope="module")
def server() -> Iterator[ServeProcess]:
    with ServeProcess("--mcp", *SERVED, "--addr", "127.0.0.1:0") as proc:
        yield proc


async def _tour(s: ClientSession) -> None:
    """Resources and prompts, every shape; the same answers over every transport."""
    listed = await s.list_resources()
    assert [(r.uri, r.name, r.mime_type) for r in listed.resources] == [
        ("notes://readme", "readme", "text/markdown"), ("notes://logo", "logo", None)]
    templates = (await s.list_resource_templates()).resource_templates
    assert [(t.uri_template, t.description) for t in templates] == [("users://{user}/profile", "A user's profile.")]

    text = (await s.read_resource("notes://readme")).contents[0]
    assert isinstance(text, mtypes.TextResourceContents)
    assert (text.uri, text.mime_type, text.text) == ("notes://readme", "text/markdown", "# Read me")
    blob = (await s.read_resource("notes://logo")).contents[0]
    assert isinstance(blob, mtypes.BlobResourceContents)
    assert (blob.mime_type, blob.blob) == ("application/octet-stream", PNG)
    filled = (await s.read_resource("users://ada%20l/profile")).contents[0]
    assert isinstance(filled, mtypes.TextResourceContents) and filled.mime_type == "application/json"
    assert json.loads(filled.text) == {"user": "ada l", "langs": ["python"]}

    prompts = (await s.list_prompts()).prompts
    assert [p.name for p in prompts] == ["greet", "review", "with_readme", "with_image"]
    assert [(a.name, a.description, a.required) for a in prompts[1].arguments or []] == [
        ("code", "The code to review.", True), ("language", "Its language.", False)]
    got = await s.get_prompt("review", {"code": "print(1)", "language": "go"})
    assert [(m.role, m.content.text) for m in got.messages if isinstance(m.content, mtypes.TextContent)] == [
        ("user", "Review this go code:"), ("assistant", "Sure, show me."), ("user", "print(1)")]
    embedded = (await s.get_prompt("with_readme")).messages[0].content
    assert isinstance(embedded, mtypes.EmbeddedResource)
    assert embedded.resource.model_dump(by_alias=True, exclude_none=True) == {
        "uri": "notes://readme", "mimeType": "text/markdown", "text": "# Read me"}
    image = (await s.get_prompt("with_image")).messages[0].content
    assert isinstance(image, mtypes.ImageContent) and (image.data, image.mime_type) == (PNG, "image/png")

    by_prompt = await s.complete(mtypes.PromptReference(type="ref/prompt", name="review"),
                                 {"name": "language", "value": "p"})
    assert by_prompt.completion.values == ["python", "perl"]
    by_template = await s.complete(mtypes.ResourceTemplateReference(type="ref/resource", uri="users://{user}/profile"),
                                   {"name": "user", "value": "a"})
    assert by_template.completion.values == ["ada", "alan"]


async def test_resources_and_prompts_over_stdio_through_the_official_client() -> None:
    logs: list[Any] = []

    async def on_log(params: Any) -> None:
        logs.append((params.level, params.data))

    params = StdioServerParameters(command=TOOLNEXUS, args=["serve", "--mcp-stdio", *SERVED],
                                   env={"PYTHONPATH": SUPPORT})
    async with stdio_client(params) as (read, write):
        async with ClientSession(read, write, logging_callback=on_log) as s:
            init = await s.initialize()
            assert init.capabilities.resources is not None and init.capabilities.prompts is not None
            assert init.capabilities.completions is not None and init.capabilities.logging is not None
            await _tour(s)
            await s.set_logging_level("info")
            assert (await s.call_tool("chatty", {})).content[0].text == "chatted"
    assert logs == [("info", {"step": "working"}), ("warning", "careful")]


async def test_resources_and_prompts_over_http_through_the_official_client(server: ServeProcess) -> None:
    async with mcp_session(server.url + "/mcp") as s:
        await _tour(s)
        with pytest.raises(Exception, match="Resource not found: notes://nope"):
            await s.read_resource("notes://nope")
        with pytest.raises(Exception, match="missing required argument code"):
            await s.get_prompt("review", {})


async def test_an_http_client_that_declared_elicitation_is_asked_and_the_tool_gets_the_answer(
        server: ServeProcess) -> None:
    asked: list[Any] = []

    async def elicit(ctx: Any, params: Any) -> mtypes.ElicitResult:
        asked.append((params.message, params.requested_schema))
        return mtypes.ElicitResult(action="accept", content={"name": "Ada"})

    async with mcp_session(server.url + "/mcp", elicitation_callback=elicit) as s:
        result = await s.call_tool("ask", {"greeting": "welcome"})
    assert (result.content[0].text, result.is_error) == ("welcome Ada", False)
    schema = {"type": "object", "properties": {"name": {"type": "string"}}, "required": ["name"]}
    assert asked == [("What is your name?", schema)]


async def test_progress_notifications_reach_http_clients_with_and_without_a_session(server: ServeProcess) -> None:
    async def sample(ctx: Any, params: Any) -> mtypes.CreateMessageResult:
        raise AssertionError("not asked")

    for options in ({}, {"sampling_callback": sample}):  # stateless, then in a session
        seen: list[tuple[float, Any, Any]] = []

        async def on_progress(progress: float, total: Any, message: Any, seen: list[Any] = seen) -> None:
            seen.append((progress, total, message))

        async with mcp_session(server.url + "/mcp", **options) as s:
            result = await s.call_tool("steps", {}, progress_callback=on_progress)
        assert result.content[0].text == "stepped"
        assert seen == [(1, 3, "step 1 of 3"), (2, 3, "step 2 of 3"), (3, 3, "step 3 of 3")]


async def test_log_notifications_reach_an_http_client_at_the_level_it_set(server: ServeProcess) -> None:
    logs: list[Any] = []

    async def on_log(params: Any) -> None:
        logs.append((params.level, params.logger, params.data))

    async def sample(ctx: Any, params: Any) -> mtypes.CreateMessageResult:
        raise AssertionError("not asked")

    async with mcp_session(server.url + "/mcp", logging_callback=on_log, sampling_callback=sample) as s:
        await s.call_tool("chatty", {})
        everything = list(logs)
        logs.clear()
        await s.set_logging_level("warning")
        await s.call_tool("chatty", {})
    assert everything == [("debug", None, "a detail"), ("info", "chatty", {"step": "working"}),
                          ("warning", None, "careful")]
    assert logs == [("warning", None, "careful")]


async def test_a_served_tool_samples_the_http_clients_model(server: ServeProcess) -> None:
    asked: list[Any] = []

    async def sample(ctx: Any, params: mtypes.CreateMessageRequestParams) -> mtypes.CreateMessageResult:
        asked.append((params.messages[0].content.text, params.max_tokens, params.system_prompt))
        return mtypes.CreateMessageResult(role="assistant", content=mtypes.TextContent(type="text", text="42"),
                                          model="test-model")

    async with mcp_session(server.url + "/mcp", sampling_callback=sample) as s:
        result = await s.call_tool("ask_model", {"question": "the answer?"})
    assert (result.content[0].text, result.is_error) == ("model says: 42", False)
    assert asked == [("the answer?", 50, "Be brief.")]

    async with mcp_session(server.url + "/mcp") as s:  # declared no sampling: a clear error, nothing sent
        refused = await s.call_tool("ask_model", {"question": "x"})
    assert refused.is_error and "did not declare sampling" in refused.content[0].text


@asynccontextmanager
async def _raw_session(url: str, http: httpx.AsyncClient) -> AsyncIterator[dict[str, str]]:
    """Open a session by hand (2025-11-25, declaring sampling); yields the headers later requests send."""
    init = {"protocolVersion": "2025-11-25", "capabilities": {"sampling": {}},
            "clientInfo": {"name": "t", "version": "1"}}
    opened = await http.post(url, headers=ACCEPT, json={"jsonrpc": "2.0", "id": 0, "method": "initialize",
                                                        "params": init})
    assert opened.status_code == 200 and opened.headers["content-type"].startswith("text/event-stream")
    headers = {**ACCEPT, "mcp-session-id": opened.headers["mcp-session-id"], "mcp-protocol-version": "2025-11-25"}
    note = await http.post(url, headers=headers, json={"jsonrpc": "2.0", "method": "notifications/initialized"})
    assert note.status_code == 202
    yield headers


def _events(text: str) -> list[dict[str, str]]:
    events = []
    for block in text.strip().split("\n\n"):
        fields = dict(line.split(": ", 1) if ": " in line else (line.rstrip(":"), "") for line in block.splitlines())
        events.append(fields)
    return events


async def test_a_closed_call_stream_resumes_with_last_event_id(server: ServeProcess) -> None:
    url = server.url + "/mcp"
    async with httpx.AsyncClient(timeout=10) as http, _raw_session(url, http) as headers:
        call = {"jsonrpc": "2.0", "id": 7, "method": "tools/call", "params": {"name": "poll_me", "arguments": {}}}
        first = await http.post(url, headers=headers, json=call)
        (priming,) = _events(first.text)  # the stream ends after its priming event: no result on it
        assert priming["data"] == "" and priming["retry"] == "500" and priming["id"]
        replayed: list[Any] = []
        async with http.stream("GET", url, headers={**headers, "last-event-id": priming["id"],
                                                    "accept": "text/event-stream"}) as resumed:
            async for line in resumed.aiter_lines():  # the resumed stream stays open: stop at the result
                if line.startswith("data: {"):
                    replayed.append(json.loads(line[len("data: "):]))
                    break
    assert replayed == [{"jsonrpc": "2.0", "id": 7, "result": {
        "content": [{"type": "text", "text": "answered after the stream was closed"}], "isError": False}}]


async def test_a_deleted_session_is_gone_and_an_unknown_one_is_404(server: ServeProcess) -> None:
    url = server.url + "/mcp"
    async with httpx.AsyncClient(timeout=10) as http, _raw_session(url, http) as headers:
        listed = await http.post(url, headers=headers, json={"jsonrpc": "2.0", "id": 1, "method": "tools/list"})
        assert listed.status_code == 200 and "ask_model" in listed.text
        assert (await http.delete(url, headers=headers)).status_code == 200
        after = await http.post(url, headers=headers, json={"jsonrpc": "2.0", "id": 2, "method": "tools/list"})
        unknown = await http.post(url, headers={**headers, "mcp-session-id": "nope"},
                                  json={"jsonrpc": "2.0", "id": 3, "method": "tools/list"})
    assert (after.status_code, unknown.status_code) == (404, 404)
    assert unknown.json()["error"]["message"] == "Session not found"
