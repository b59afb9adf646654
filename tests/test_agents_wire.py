"""The runtime's default wire: real HTTP over one pooled keep-alive connection, closed with root."""

from support.llm_server import Json, LlmServer, openai_calls, openai_text
from toolnexus import ToolResult, define_tool
from toolnexus.agents import agent


async def test_default_transport_is_pooled_http_shared_by_every_turn_and_closed_with_root():
    async def lookup(args=None, ctx=None):
        return ToolResult(output="42", is_error=False)

    worker = agent("worker", does="looks things up",
                   uses={"tools": [define_tool(lookup, name="lookup", description="Look up.")]})
    with LlmServer() as server:
        server.add(Json(openai_calls(("c1", "lookup", {}))), Json(openai_text("the answer is 42")))
        r = await worker.run("find it", llm={"base_url": server.base_url, "style": "openai",
                                             "model": "m", "api_key": "k"})
        assert (r.status, r.text, r.turns) == ("done", "the answer is 42", 2)
        assert [req.path for req in server.requests] == ["/chat/completions", "/chat/completions"]
        assert {req.connection for req in server.requests} == {1}  # one keep-alive connection for both turns
        assert server.requests[0].headers["authorization"] == "Bearer k"
        assert r.runtime.root.state == "closed"
        assert r.runtime.transport._idle == {}  # the pool was closed with the root


async def test_the_api_key_is_found_like_the_client_finds_it(monkeypatch):
    """Without `llm["api_key"]`, the runtime sends the key the environment holds (as the client
    does), not the placeholder; with neither, the placeholder `unused`."""
    worker = agent("worker", does="answers")
    for var in ("OPENROUTER_API_KEY", "OPENAI_API_KEY", "ANTHROPIC_API_KEY"):
        monkeypatch.delenv(var, raising=False)
    with LlmServer() as server:
        server.add(Json(openai_text("one")), Json(openai_text("two")), Json(openai_text("three")))
        llm = {"base_url": server.base_url, "style": "openai", "model": "m"}
        await worker.run("a", llm=llm)
        monkeypatch.setenv("OPENAI_API_KEY", "sk-env-openai")
        await worker.run("b", llm=llm)
        monkeypatch.setenv("OPENROUTER_API_KEY", "sk-env-router")
        await worker.run("c", llm=llm)
    assert [r.headers["authorization"] for r in server.requests] == [
        "Bearer unused", "Bearer sk-env-openai", "Bearer sk-env-router"]
