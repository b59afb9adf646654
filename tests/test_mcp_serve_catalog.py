"""Resources, prompts, the tool-facing caller API and HTTP sessions, in process (the real-process
tour through the official client is `test_mcp_serve_surface.py`).

Covers what the tour does not: definitions that are refused with a clear error, skills' files
served and confined, a toolkit source's own resources and prompts, resource subscriptions and
`Resource.changed()`, the `ToolContext` methods outside a served request, sessions' limits and
shutdown, guards in front of sessions, the bounded event store and the new profile keys.
"""

from __future__ import annotations

import asyncio
import json
import os
from pathlib import Path
from typing import Any

import httpx
import mcp_types as mtypes
import pytest

from test_mcp_serve_kit import ACCEPT, Recorder, make_toolkit, mcp_session, served
from toolnexus import ToolContext, create_toolkit, prompt, resource, tool
from toolnexus.errors import UnsupportedOperation
from toolnexus.mcp_serve import build_mcp_server
from toolnexus.mcp_serve._events import SessionEvents
from toolnexus.resources import Prompt, PromptError, Resource, ResourceError
from toolnexus.tool_source import ToolList
from toolnexus.toolkit import Toolkit

INIT = {"protocolVersion": "2025-11-25", "capabilities": {"sampling": {}}, "clientInfo": {"name": "t", "version": "1"}}


async def _no_sampling(ctx: Any, params: Any) -> Any:
    raise AssertionError("not asked")


# ---------------------------------------------------------------------------------------- definitions


def test_a_template_needs_a_parameter_for_each_variable_and_a_static_resource_none() -> None:
    with pytest.raises(ResourceError, match="takes no parameter for id"):
        resource("items://{id}")(lambda: "x")
    with pytest.raises(ResourceError, match="needs path"):
        resource("files://one")(lambda path: path)
    with pytest.raises(ResourceError, match='must be a URI like "docs://readme"'):
        resource("readme")(lambda: "x")
    with pytest.raises(ValueError, match="complete= names nope"):
        resource("items://{id}", complete={"nope": []})(lambda id: id)


def test_template_matching_takes_one_segment_or_the_rest_and_decodes() -> None:
    one = resource("items://{id}/data")(lambda id: id)
    rest = resource("files://{+path}")(lambda path: path)
    assert one.is_template and one.variables == ("id",)
    assert one.match("items://a%2Fb/data") == {"id": "a/b"}
    assert one.match("items://a/b/data") is None
    assert rest.match("files://docs/a.md") == {"path": "docs/a.md"}


async def test_reads_shape_text_bytes_and_json_and_refuse_other_values() -> None:
    assert (await resource("a://t")(lambda: "hi").read()).text == "hi"
    got = await resource("a://b")(lambda: b"\x00\x01").read()
    assert (got.data, got.mime_type) == (b"\x00\x01", "application/octet-stream")
    assert (await resource("a://j")(lambda: {"k": [1]}).read()).text == '{"k": [1]}'
    with pytest.raises(ResourceError, match="returned a object, which is not str, bytes or JSON"):
        await resource("a://o")(lambda: object()).read()


async def test_prompt_arguments_come_from_the_signature_and_are_checked() -> None:
    @prompt
    def review(code: str, language: str = "python") -> str:
        """Review code.

        Args:
            code: The code.
        """
        return f"{language}: {code}"

    assert review.description == "Review code."
    assert [(a.name, a.description, a.required) for a in review.arguments] == [
        ("code", "The code.", True), ("language", None, False)]
    assert await review.render({"code": "x"}) == [{"role": "user", "content": {"type": "text", "text": "python: x"}}]
    with pytest.raises(PromptError, match="missing required argument code"):
        await review.render({})
    with pytest.raises(PromptError, match=r"unknown argument lang \(it takes: code, language\)"):
        await review.render({"code": "x", "lang": "go"})
    with pytest.raises(PromptError, match="argument code must be a string"):
        await review.render({"code": 3})


async def test_a_bad_prompt_message_or_a_failing_function_is_a_jsonrpc_error_naming_it() -> None:
    @prompt
    def odd() -> list:
        """Odd."""
        return [{"role": "system", "content": "x"}]

    @prompt
    def broken() -> str:
        """Broken."""
        raise KeyError("gone")

    server = build_mcp_server([], prompts=[odd, broken])
    from toolnexus.mcp_serve import serve_mcp_http_request

    async def get(name: str) -> dict:
        body = {"jsonrpc": "2.0", "id": 1, "method": "prompts/get", "params": {"name": name}}
        _, _, raw = await serve_mcp_http_request(server, "POST", "/mcp", [(b"accept", b"application/json, "
                                                 b"text/event-stream"), (b"content-type", b"application/json")],
                                                 json.dumps(body).encode())
        return json.loads(raw)["error"]

    assert (await get("odd"))["message"] == "prompt odd: a message role must be user or assistant, got 'system'"
    assert await get("broken") == {"code": -32603, "message": "prompt broken failed: 'gone'"}
    assert (await get("nope"))["message"] == "Unknown prompt: nope"


# ---------------------------------------------------------------------------------------- ToolContext API


async def test_the_tool_context_methods_do_nothing_harmful_outside_a_served_request() -> None:
    ctx = ToolContext()
    await ctx.log("info", "nobody listens")
    await ctx.progress(1, 2)
    with pytest.raises(ValueError, match="level must be one of debug, info"):
        await ctx.log("verbose", "x")
    with pytest.raises(UnsupportedOperation, match="only while the tool runs for an MCP client"):
        await ctx.sample("hi")

    @tool
    async def summarise(text: str, ctx: ToolContext) -> str:
        """Summarise."""
        await ctx.log("info", "starting")
        return await ctx.sample(f"Summarise: {text}")

    kit = await create_toolkit(builtins=False, extra_tools=[summarise])
    result = await kit.execute("summarise", {"text": "t"}, ToolContext())
    assert result.is_error and "no model to ask" in result.output


# ---------------------------------------------------------------------------------------- skills' files


def _skill(root: Path) -> Path:
    skill = root / "skills" / "pdf"
    (skill / "ref").mkdir(parents=True)
    (skill / "SKILL.md").write_text("---\nname: pdf\ndescription: PDF work\n---\nUse ref/notes.md.\n")
    (skill / "ref" / "notes.md").write_text("notes")
    (skill / "blob.bin").write_bytes(b"\xff\xfe\x00")
    (skill / ".env").write_text("SECRET=1")
    (root / "outside.txt").write_text("not the skill's")
    os.symlink(root / "outside.txt", skill / "link.txt")
    return root / "skills"


async def test_skills_files_are_served_confined_to_the_skill_directory(tmp_path: Path) -> None:
    kit = await create_toolkit(skills_dir=str(_skill(tmp_path)), builtins=False)
    async with served(kit, mcp={}) as h, mcp_session(h.url + "/mcp") as s:
        uris = [r.uri for r in (await s.list_resources()).resources]
        instructions = (await s.read_resource("skill://pdf/SKILL.md")).contents[0]
        notes = (await s.read_resource("skill://pdf/ref/notes.md")).contents[0]
        blob = (await s.read_resource("skill://pdf/blob.bin")).contents[0]
        with pytest.raises(Exception, match="resolves outside the skill's directory") as refused:
            await s.read_resource("skill://pdf/link.txt")
        with pytest.raises(Exception, match="Resource not found: skill://pdf/.env"):
            await s.read_resource("skill://pdf/.env")
    assert uris == ["skill://pdf/SKILL.md", "skill://pdf/blob.bin", "skill://pdf/link.txt", "skill://pdf/ref/notes.md"]
    assert isinstance(instructions, mtypes.TextResourceContents) and "Use ref/notes.md." in instructions.text
    assert isinstance(notes, mtypes.TextResourceContents)
    assert (notes.text, notes.mime_type) == ("notes", "text/markdown")
    assert isinstance(blob, mtypes.BlobResourceContents) and blob.blob == "//4A"
    assert "not the skill's" not in str(refused.value)


async def test_skill_files_follow_the_skill_tool_and_can_be_switched_off(tmp_path: Path) -> None:
    kit = await create_toolkit(skills_dir=str(_skill(tmp_path)), builtins=False)
    for profile in ({"skill_files": False}, {"tools": []}):
        async with served(kit, mcp=profile) as h, mcp_session(h.url + "/mcp") as s:
            listed = [] if s.initialize_result.capabilities.resources is None else (await s.list_resources()).resources
        assert listed == []


# ---------------------------------------------------------------------------------------- toolkit sources


class Handbook:
    """A toolkit source with resources and prompts of its own (a `ResourceCatalog`), as one that
    proxies a server's would be: what it lists can change between two requests."""

    kind = "handbook"
    shadows: frozenset[str] = frozenset()

    def __init__(self) -> None:
        self.pages = {"intro": "Start here.", "faq": "Ask away."}

    def list_tools(self) -> list:
        return []

    async def refresh(self) -> None:
        return None

    async def close(self) -> None:
        return None

    def served_resources(self) -> list[Resource]:
        pages = [Resource(f"handbook://{name}", lambda text=text: text, name=name, mime_type="text/markdown")
                 for name, text in self.pages.items()]
        return [*pages, Resource("handbook://logo.png", lambda: b"\x89PNG", name="logo", mime_type="image/png")]

    def served_prompts(self) -> list[Prompt]:
        return [prompt(name="look_up")(lambda topic: f"Look {topic} up in the handbook.")]


async def test_a_toolkit_source_that_is_a_resource_catalog_is_served_read_on_every_request() -> None:
    handbook = Handbook()
    kit = Toolkit.from_sources([ToolList("extra", make_toolkit(Recorder()).tools()[:1]), handbook])
    async with served(kit, mcp={}) as h, mcp_session(h.url + "/mcp") as s:
        listed = [(r.uri, r.name, r.mime_type) for r in (await s.list_resources()).resources]
        intro = (await s.read_resource("handbook://intro")).contents[0]
        logo = (await s.read_resource("handbook://logo.png")).contents[0]
        prompts = [p.name for p in (await s.list_prompts()).prompts]
        asked = (await s.get_prompt("look_up", {"topic": "leave"})).messages[0].content
        handbook.pages["howto"] = "Do it so."
        relisted = [r.uri for r in (await s.list_resources()).resources]
        howto = (await s.read_resource("handbook://howto")).contents[0]
    assert listed == [("handbook://intro", "intro", "text/markdown"), ("handbook://faq", "faq", "text/markdown"),
                      ("handbook://logo.png", "logo", "image/png")]
    assert isinstance(intro, mtypes.TextResourceContents) and intro.text == "Start here."
    assert isinstance(logo, mtypes.BlobResourceContents) and (logo.blob, logo.mime_type) == ("iVBORw==", "image/png")
    assert prompts == ["look_up"]
    assert isinstance(asked, mtypes.TextContent) and asked.text == "Look leave up in the handbook."
    assert relisted == ["handbook://intro", "handbook://faq", "handbook://howto", "handbook://logo.png"]
    assert isinstance(howto, mtypes.TextResourceContents) and howto.text == "Do it so."


# ---------------------------------------------------------------------------------------- subscriptions


async def test_a_subscribed_session_hears_of_changes_until_it_unsubscribes() -> None:
    @resource("config://app")
    def config() -> dict:
        """The app's config."""
        return {"debug": False}

    @resource("config://other")
    def other() -> str:
        return "other"

    def updated(uri: str) -> dict:
        return {"jsonrpc": "2.0", "method": "notifications/resources/updated", "params": {"uri": uri}}

    kit = make_toolkit(Recorder())
    async with served(kit, mcp={"resources": [config, other]}) as h, httpx.AsyncClient(timeout=10) as http:
        url = h.url + "/mcp"
        opened = await http.post(url, headers=ACCEPT, json={"jsonrpc": "2.0", "id": 0, "method": "initialize",
                                                            "params": INIT})
        headers = {**ACCEPT, "mcp-session-id": opened.headers["mcp-session-id"], "mcp-protocol-version": "2025-11-25"}
        await http.post(url, headers=headers, json={"jsonrpc": "2.0", "method": "notifications/initialized"})

        async def rpc(n: int, method: str, uri: str) -> str:
            body = {"jsonrpc": "2.0", "id": n, "method": method, "params": {"uri": uri}}
            return (await http.post(url, headers=headers, json=body)).text

        assert '"result":{}' in await rpc(1, "resources/subscribe", "config://app")
        assert '"result":{}' in await rpc(2, "resources/subscribe", "config://other")
        async with http.stream("GET", url, headers={**headers, "accept": "text/event-stream"}) as events:
            notes = (json.loads(line[len("data: "):]) async for line in events.aiter_lines()
                     if line.startswith("data: {"))
            await config.changed()
            first = await anext(notes)
            assert '"result":{}' in await rpc(3, "resources/unsubscribe", "config://app")
            await config.changed()  # not sent any more ...
            await other.changed()  # ... so the next update on the stream is this one
            second = await anext(notes)
    assert (first, second) == (updated("config://app"), updated("config://other"))


async def test_subscribing_without_a_session_is_refused_with_the_reason() -> None:
    @resource("config://app")
    def config() -> str:
        return "x"

    async with served(make_toolkit(Recorder()), mcp={"resources": [config]}) as h:
        async with mcp_session(h.url + "/mcp") as s:  # declares no capability: no session
            with pytest.raises(Exception, match="resources/subscribe needs a session"):
                await s.subscribe_resource("config://app")
            with pytest.raises(Exception, match="Resource not found: config://other"):
                await s.subscribe_resource("config://other")


# ---------------------------------------------------------------------------------------- sessions


async def test_stateless_requests_stream_when_they_carry_a_progress_token() -> None:
    async with served(make_toolkit(Recorder()), mcp={}) as h, httpx.AsyncClient(timeout=10) as http:
        call = {"jsonrpc": "2.0", "id": 1, "method": "tools/call",
                "params": {"name": "echo", "arguments": {"x": "s"}, "_meta": {"progressToken": "p1"}}}
        streamed = await http.post(h.url + "/mcp", headers=ACCEPT, json=call)
    assert streamed.headers["content-type"].startswith("text/event-stream")
    assert "mcp-session-id" not in streamed.headers and '"text":"echo:s"' in streamed.text


async def test_sessions_are_bounded_and_off_when_the_profile_says_so() -> None:
    body = {"jsonrpc": "2.0", "id": 0, "method": "initialize", "params": INIT}
    async with served(make_toolkit(Recorder()), mcp={"max_sessions": 1}) as h, httpx.AsyncClient(timeout=10) as http:
        first = await http.post(h.url + "/mcp", headers=ACCEPT, json=body)
        second = await http.post(h.url + "/mcp", headers=ACCEPT, json=body)
    assert first.status_code == 200 and "mcp-session-id" in first.headers
    assert (second.status_code, second.json()["error"]["message"]) == (503, "Too many open sessions")
    async with served(make_toolkit(Recorder()), mcp={"sessions": False}) as h, httpx.AsyncClient(timeout=10) as http:
        off = await http.post(h.url + "/mcp", headers=ACCEPT, json=body)
    assert off.status_code == 200 and "mcp-session-id" not in off.headers
    assert off.headers["content-type"] == "application/json"


async def test_guards_stand_in_front_of_sessions() -> None:
    async with served(make_toolkit(Recorder()), mcp={"auth_token": "tok-123456"}) as h, \
            httpx.AsyncClient(timeout=10) as http:
        opened = await http.post(h.url + "/mcp", headers={**ACCEPT, "authorization": "Bearer tok-123456"},
                                 json={"jsonrpc": "2.0", "id": 0, "method": "initialize", "params": INIT})
        sid = opened.headers["mcp-session-id"]
        rebound = await http.get(h.url + "/mcp", headers={"mcp-session-id": sid, "host": "evil.example",
                                                          "authorization": "Bearer tok-123456"})
        anonymous = await http.get(h.url + "/mcp", headers={"mcp-session-id": sid, "accept": "text/event-stream"})
    assert (rebound.status_code, anonymous.status_code) == (421, 401)


async def test_stop_ends_open_event_streams_properly() -> None:
    """An open `GET` stream is ended by `stop()` with a complete response — not cut off when the
    listener's grace period runs out, which the client would see as an incomplete body."""
    handle = await make_toolkit(Recorder()).serve("127.0.0.1:0", mcp={})
    try:
        async with httpx.AsyncClient(timeout=10) as http:
            opened = await http.post(handle.url + "/mcp", headers=ACCEPT,
                                     json={"jsonrpc": "2.0", "id": 0, "method": "initialize", "params": INIT})
            headers = {"mcp-session-id": opened.headers["mcp-session-id"], "accept": "text/event-stream",
                       "mcp-protocol-version": "2025-11-25"}
            async with http.stream("GET", handle.url + "/mcp", headers=headers) as stream:
                assert stream.status_code == 200
                await handle.stop()
                assert [line async for line in stream.aiter_lines()] == []
    finally:
        await handle.stop()  # stopped already when the test gets this far; not when it failed before


# ---------------------------------------------------------------------------------------- event store


async def test_the_event_store_keeps_recent_events_per_stream_and_drops_the_oldest() -> None:
    store = SessionEvents(max_events=3, max_bytes=10_000)
    note = mtypes.JSONRPCNotification(jsonrpc="2.0", method="notifications/progress", params={"progress": 1})
    ids = [await store.store_event(stream, note) for stream in ("a", "b", "a", "a")]
    replayed: list[str] = []

    async def collect(event: Any) -> None:
        replayed.append(event.event_id)

    assert await store.store_event("a", None)  # a priming event: kept, never replayed
    assert await store.replay_events_after(ids[0], collect) is None  # dropped: the oldest went first
    assert await store.replay_events_after(ids[2], collect) == "a"
    assert replayed == [ids[3]]
    big = SessionEvents(max_events=100, max_bytes=10)
    for _ in range(3):
        await big.store_event("s", note)
    assert big.count == 1  # over the byte cap: only the newest stays


# ---------------------------------------------------------------------------------------- profile keys


@pytest.mark.parametrize(("cfg", "message"), [
    ({"resources": ["docs://x"]}, '"resources" must be a list of Resource'),
    ({"prompts": [object()]}, '"prompts" must be a list of Prompt'),
    ({"sessions": "yes"}, '"sessions" must be true or false'),
    ({"max_sessions": 0}, '"max_sessions" must be a positive integer'),
    ({"session_idle_timeout": -1}, '"session_idle_timeout" must be a positive number of seconds'),
])
def test_new_profile_keys_are_checked(cfg: dict, message: str) -> None:
    with pytest.raises((TypeError, ValueError), match=message):
        build_mcp_server([], cfg)


async def test_stop_signals_a_call_in_a_session_and_lets_it_answer() -> None:
    rec = Recorder()
    handle = await make_toolkit(rec).serve("127.0.0.1:0", mcp={})
    try:
        async with mcp_session(handle.url + "/mcp", sampling_callback=_no_sampling) as s:
            call = asyncio.ensure_future(s.call_tool("slow", {}))
            await rec.slow_started.wait()
            await handle.stop()
            result = await call
    finally:
        await handle.stop()
    assert rec.slow_signalled.is_set()
    assert (result.content[0].text, result.is_error) == ("aborted", True)
