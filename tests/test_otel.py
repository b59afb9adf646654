"""OpenTelemetry spans (`toolnexus.otel`), checked with the SDK's in-memory exporter.

The model is scripted behind the transport seam (or a loopback server for streaming); tools,
the loop, the agent runtime and the OpenTelemetry SDK are real.
"""

from __future__ import annotations

import subprocess
import sys
from typing import Any

import pytest
from opentelemetry import trace
from opentelemetry.sdk.trace import TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter
from opentelemetry.trace import StatusCode

from support.llm_server import LlmServer, RecordingTransport, Sse, openai_calls, openai_sse, openai_text
from toolnexus import define_tool, otel, pending
from toolnexus.agents import agent
from toolnexus.client import ProviderError, create_client
from toolnexus.toolkit import Toolkit
from toolnexus.types import Answer, Tool, ToolResult


@pytest.fixture
def spans():
    exporter = InMemorySpanExporter()
    provider = TracerProvider()
    provider.add_span_processor(SimpleSpanProcessor(exporter))
    otel.instrument(tracer_provider=provider)
    try:
        yield exporter
    finally:
        otel.uninstrument()
        provider.shutdown()


def tree(exporter: InMemorySpanExporter) -> list[tuple[int, str]]:
    """(depth, name) in start order, depth-first."""
    finished = sorted(exporter.get_finished_spans(), key=lambda s: s.start_time)
    children: dict[Any, list] = {}
    for s in finished:
        children.setdefault(s.parent.span_id if s.parent else None, []).append(s)
    out: list[tuple[int, str]] = []

    def walk(parent: Any, depth: int) -> None:
        for s in children.get(parent, []):
            out.append((depth, s.name))
            walk(s.context.span_id, depth + 1)

    walk(None, 0)
    return out


def named(exporter: InMemorySpanExporter, name: str) -> list:
    return sorted((s for s in exporter.get_finished_spans() if s.name == name), key=lambda s: s.start_time)


@define_tool
def add(a: int, b: int) -> str:
    """Add."""
    return str(a + b)


@define_tool
def fail() -> str:
    """Always fails."""
    raise KeyError("missing")


def kit(*tools):
    return Toolkit(None, None, [], [], list(tools))


def test_semantic_convention_names_match_the_installed_package():
    from opentelemetry.semconv._incubating.attributes import gen_ai_attributes as gen_ai
    from opentelemetry.semconv.attributes import error_attributes, server_attributes

    known = {v for k, v in vars(gen_ai).items() if k.startswith("GEN_AI_")}
    known |= {error_attributes.ERROR_TYPE, server_attributes.SERVER_ADDRESS, server_attributes.SERVER_PORT}
    assert set(otel.ATTRIBUTES) <= known
    ops = gen_ai.GenAiOperationNameValues
    assert {ops.CHAT.value, ops.INVOKE_AGENT.value, ops.EXECUTE_TOOL.value} == {"chat", "invoke_agent", "execute_tool"}
    assert gen_ai.GenAiProviderNameValues.OPENAI.value == "openai"
    assert gen_ai.GenAiProviderNameValues.ANTHROPIC.value == "anthropic"
    assert gen_ai.GenAiOutputTypeValues.JSON.value == "json"


def test_nothing_loads_opentelemetry_unless_instrumented():
    code = (
        "import sys, asyncio\n"
        "from toolnexus import define_tool\n"
        "from toolnexus.client import create_in_process_client\n"
        "from toolnexus.toolkit import Toolkit\n"
        "from toolnexus.agents import agent\n"
        "@define_tool\n"
        "def add(a: int, b: int) -> str:\n"
        "    return str(a + b)\n"
        "replies = iter([{'tool_calls': [{'name': 'add', 'arguments': {'a': 1, 'b': 2}}]}, {'content': '3'}])\n"
        "c = create_in_process_client(model='m', generate=lambda r: next(replies))\n"
        "r = asyncio.run(c.run('sum', Toolkit(None, None, [], [], [add])))\n"
        "assert r.text == '3', r\n"
        "a = agent('a', does='d', uses={'tools': [add]})\n"
        "a = asyncio.run(a.run('hi', in_process=lambda r: {'content': 'ok'}))\n"
        "assert a.text == 'ok', a\n"
        "print(sorted(m for m in sys.modules if m.startswith('opentelemetry')))\n"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "[]"


def test_without_the_extra_the_import_says_what_to_install():
    code = ("import sys\n"
            "sys.modules['opentelemetry'] = None\n"
            "try:\n"
            "    import toolnexus.otel\n"
            "except ImportError as exc:\n"
            "    print(exc)\n")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "toolnexus.otel needs OpenTelemetry: pip install 'toolnexus[otel]'"


async def test_a_run_with_two_llm_calls_and_two_tool_calls(spans):
    first = dict(openai_calls(("c1", "add", {"a": 1, "b": 2}), ("c2", "fail", {})), model="gpt-real", id="resp-1")
    transport = RecordingTransport(first, openai_text("3", prompt=10, completion=4))
    client = create_client(base_url="https://llm.example.test:8443/v1", style="openai", model="gpt-alias",
                           api_key="k", http_transport=transport)
    result = await client.ask("add 1 and 2", kit(add, fail), id="conv-7")
    assert result.text == "3"

    assert tree(spans) == [(0, "invoke_agent"), (1, "chat gpt-alias"), (1, "execute_tool add"),
                           (1, "execute_tool fail"), (1, "chat gpt-alias")]
    run = named(spans, "invoke_agent")[0]
    common = {"gen_ai.provider.name": "openai", "gen_ai.system": "openai", "server.address": "llm.example.test",
              "server.port": 8443}
    assert dict(run.attributes) == {
        "gen_ai.operation.name": "invoke_agent", "gen_ai.request.model": "gpt-alias", **common,
        "gen_ai.conversation.id": "conv-7", "gen_ai.response.model": "gpt-real",
        "gen_ai.usage.input_tokens": 16, "gen_ai.usage.output_tokens": 6,
        "toolnexus.run.status": "done", "toolnexus.run.turns": 2, "toolnexus.run.tool_calls": 2,
        "toolnexus.run.finish_reason": "stop",
    }
    assert run.status.status_code is StatusCode.UNSET
    chat1, chat2 = named(spans, "chat gpt-alias")
    assert chat1.kind is trace.SpanKind.CLIENT
    assert dict(chat1.attributes) == {
        "gen_ai.operation.name": "chat", "gen_ai.request.model": "gpt-alias", "gen_ai.request.stream": False,
        **common, "gen_ai.response.model": "gpt-real", "gen_ai.response.id": "resp-1",
        "gen_ai.response.finish_reasons": ("tool_calls",), "gen_ai.usage.input_tokens": 6,
        "gen_ai.usage.output_tokens": 2,
    }
    assert chat2.attributes["gen_ai.usage.input_tokens"] == 10
    assert chat2.attributes["gen_ai.response.finish_reasons"] == ("stop",)
    ok, bad = named(spans, "execute_tool add")[0], named(spans, "execute_tool fail")[0]
    assert dict(ok.attributes) == {"gen_ai.operation.name": "execute_tool", "gen_ai.tool.name": "add",
                                   "gen_ai.tool.type": "function", "toolnexus.tool.source": "native",
                                   "gen_ai.tool.call.id": "c1"}
    assert ok.status.status_code is StatusCode.UNSET
    assert bad.attributes["gen_ai.tool.call.id"] == "c2" and bad.attributes["error.type"] == "tool_error"
    assert bad.status.status_code is StatusCode.ERROR
    assert bad.status.description == "the tool returned an error result"
    # no prompt, completion, argument or result text is recorded anywhere
    recorded = repr([dict(s.attributes) for s in spans.get_finished_spans()])
    assert "add 1 and 2" not in recorded and "missing" not in recorded


async def test_a_failed_llm_call_marks_the_chat_and_run_spans(spans):
    transport = RecordingTransport(ProviderError(500, "upstream down", None))
    client = create_client(base_url="http://mock.local", style="anthropic", model="claude-x", api_key="k",
                           http_transport=transport, retries=0)
    with pytest.raises(ProviderError):
        await client.run("hi")
    assert tree(spans) == [(0, "invoke_agent"), (1, "chat claude-x")]
    chat, run = named(spans, "chat claude-x")[0], named(spans, "invoke_agent")[0]
    for span in (chat, run):
        assert span.status.status_code is StatusCode.ERROR
        assert span.status.description == "ProviderError: LLM 500: upstream down (POST http://mock.local/v1/messages)"
        assert span.attributes["error.type"] == "500"
        assert [e.name for e in span.events] == ["exception"]
    assert run.attributes["toolnexus.run.status"] == "error"
    assert run.attributes["gen_ai.provider.name"] == "anthropic"


async def test_a_streamed_run_and_an_abandoned_stream(spans):
    with LlmServer() as server:
        server.add(Sse(openai_sse("hel", "lo")), Sse(openai_sse("never", "read")))
        async with create_client(base_url=server.base_url, style="openai", model="m", api_key="k") as client:
            events = [e async for e in client.stream("hi")]
            assert events[-1]["result"].text == "hello"
            stream = client.stream("again")
            async for _ in stream:
                break
            await stream.aclose()
    first, second = named(spans, "invoke_agent")
    assert first.attributes["toolnexus.run.status"] == "done"
    assert named(spans, "chat m")[0].attributes["gen_ai.request.stream"] is True
    assert second.attributes["toolnexus.run.status"] == "cancelled"


def approval_tool(name: str = "deploy") -> Tool:
    async def execute(args: Any = None, ctx: Any = None) -> ToolResult:
        if ctx is not None and ctx.answer is not None:
            return ToolResult("deployed" if ctx.answer.ok else "not deployed", not ctx.answer.ok)
        return pending(kind="approval", prompt="OK to deploy?")

    return Tool(name, "deploys", {"type": "object", "properties": {}}, "native", execute)


async def test_a_durable_suspension_and_its_resume(spans):
    transport = RecordingTransport(openai_calls(("c1", "deploy", {})), openai_text("deployed."))
    client = create_client(base_url="http://mock.local", style="openai", model="m", api_key="k",
                           http_transport=transport)
    halted = await client.run("deploy it", kit(approval_tool()))
    assert halted.status == "pending"
    request = halted.pending
    resumed = await client.run_with_answer(kit(approval_tool()), halted.messages, request,
                                           Answer(id=request.id, ok=True))
    assert resumed.text == "deployed."

    assert tree(spans) == [(0, "invoke_agent"), (1, "chat m"), (1, "execute_tool deploy"),
                           (0, "invoke_agent"), (1, "execute_tool deploy"), (1, "chat m")]
    halt_run, resume_run = named(spans, "invoke_agent")
    suspended = {"toolnexus.request.id": request.id, "toolnexus.request.kind": "approval"}
    assert halt_run.attributes["toolnexus.run.status"] == "pending"
    assert {k: halt_run.attributes[k] for k in suspended} == suspended
    assert [(e.name, dict(e.attributes)) for e in halt_run.events] == [("toolnexus.suspended", suspended)]
    first_call, retry = named(spans, "execute_tool deploy")
    assert first_call.attributes["toolnexus.tool.pending"] is True
    assert [(e.name, dict(e.attributes)) for e in first_call.events] == [("toolnexus.suspended", suspended)]
    assert first_call.status.status_code is StatusCode.UNSET

    assert resume_run.attributes["toolnexus.run.resumed"] is True
    assert resume_run.attributes["toolnexus.run.status"] == "done"
    assert [(e.name, dict(e.attributes)) for e in resume_run.events] == [
        ("toolnexus.resumed", {**suspended, "toolnexus.answer.ok": True})]
    assert retry.attributes["toolnexus.tool.resumed"] is True
    assert retry.attributes["toolnexus.answer.ok"] is True
    assert retry.attributes["toolnexus.request.id"] == request.id


async def test_an_in_process_answer_shows_the_wait_and_the_rerun(spans):
    async def wait_for(request):
        return Answer(id=request.id, ok=False, reason="declined")

    transport = RecordingTransport(openai_calls(("c1", "deploy", {})), openai_text("ok, not deployed"))
    client = create_client(base_url="http://mock.local", style="openai", model="m", api_key="k",
                           http_transport=transport, wait_for=wait_for)
    r = await client.run("deploy", kit(approval_tool()))
    assert r.tool_calls[0]["output"] == "declined/expired: OK to deploy?"
    assert tree(spans) == [(0, "invoke_agent"), (1, "chat m"), (1, "execute_tool deploy"),
                           (1, "toolnexus.wait_for"), (1, "chat m")]
    wait = named(spans, "toolnexus.wait_for")[0]
    assert wait.attributes["toolnexus.request.kind"] == "approval"
    assert wait.attributes["toolnexus.answer.ok"] is False


async def test_agent_turns_are_named_and_a_sub_agent_nests_under_its_task_call(spans):
    def generate(request: dict[str, Any]) -> dict[str, Any]:
        last = request["messages"][-1]
        if last["role"] == "tool":
            return {"content": "lead-done"}
        if last["content"] == "go":
            return {"tool_calls": [{"id": "t1", "name": "task", "arguments": {"agent": "helper", "prompt": "sub"}}]}
        return {"content": "helper-done"}

    lead = agent("lead", does="leads", team=[agent("helper", does="helps")])
    r = await lead.run("go", in_process=generate)
    assert r.text == "lead-done"
    assert tree(spans) == [(0, "invoke_agent lead"), (1, "chat inherit"), (1, "execute_tool task"),
                           (2, "invoke_agent helper"), (3, "chat inherit"), (1, "chat inherit")]
    lead_span, helper_span = named(spans, "invoke_agent lead")[0], named(spans, "invoke_agent helper")[0]
    assert lead_span.attributes["gen_ai.agent.name"] == "lead"
    assert helper_span.attributes["gen_ai.agent.name"] == "helper"
    assert lead_span.attributes["gen_ai.conversation.id"] != helper_span.attributes["gen_ai.conversation.id"]


async def test_an_agent_suspension_and_resume_are_visible(spans):
    def generate(request: dict[str, Any]) -> dict[str, Any]:
        if request["messages"][-1]["role"] == "tool":
            return {"content": "shipped"}
        return {"tool_calls": [{"id": "d1", "name": "deploy", "arguments": {}}]}

    deployer = agent("deployer", does="deploys", uses={"tools": [approval_tool()]})
    first = await deployer.run("ship it", in_process=generate)
    async with first.runtime:  # closed however the asserts end
        assert first.status == "pending"
        done = await first.runtime.resume(Answer(id=first.pending.id, ok=True))
        assert done.text == "shipped"
    # without a store the turn is replayed: the answer is bound to the halted call inside the toolkit
    assert tree(spans) == [
        (0, "invoke_agent deployer"), (1, "chat inherit"), (1, "execute_tool deploy"),
        (0, "invoke_agent deployer"), (1, "chat inherit"), (1, "execute_tool deploy"), (1, "chat inherit"),
    ]
    halted, replayed = named(spans, "invoke_agent deployer")
    request = {"toolnexus.request.id": first.pending.id, "toolnexus.request.kind": "approval"}
    assert halted.attributes["toolnexus.run.status"] == "pending"
    assert [(e.name, dict(e.attributes)) for e in halted.events] == [("toolnexus.suspended", request)]
    assert replayed.attributes["toolnexus.run.status"] == "done"
    assert [(e.name, dict(e.attributes)) for e in replayed.events] == [
        ("toolnexus.resumed", {"toolnexus.request.id": first.pending.id, "toolnexus.answer.ok": True})]
    assert replayed.attributes["toolnexus.answer.ok"] is True
    halted_call, replayed_call = named(spans, "execute_tool deploy")
    assert halted_call.attributes["toolnexus.tool.pending"] is True
    assert "toolnexus.tool.pending" not in replayed_call.attributes


async def test_uninstrument_stops_tracing(spans):
    otel.uninstrument()
    assert otel.is_instrumented() is False
    client = create_client(base_url="http://mock.local", style="openai", model="m", api_key="k",
                           http_transport=RecordingTransport(openai_text("hi")))
    assert (await client.run("hi")).text == "hi"
    assert spans.get_finished_spans() == ()


async def test_a_durable_agent_resume_continues_the_halted_call(spans):
    from toolnexus.stores import open_store

    def generate(request: dict[str, Any]) -> dict[str, Any]:
        if request["messages"][-1]["role"] == "tool":
            return {"content": "shipped"}
        return {"tool_calls": [{"id": "d1", "name": "deploy", "arguments": {}}]}

    deployer = agent("deployer", does="deploys", uses={"tools": [approval_tool()]})
    async with open_store("memory:") as store:
        first = await deployer.run("ship it", in_process=generate, store=store)
        async with first.runtime:  # closed however the asserts end
            assert first.status == "pending"
            done = await first.runtime.resume(Answer(id=first.pending.id, ok=True))
            assert done.text == "shipped"
    # with a store the halted call is continued: no second model call for it, the re-run is marked
    assert tree(spans) == [
        (0, "invoke_agent deployer"), (1, "chat inherit"), (1, "execute_tool deploy"),
        (0, "invoke_agent deployer"), (1, "execute_tool deploy"), (1, "chat inherit"),
    ]
    halted, continued = named(spans, "invoke_agent deployer")
    assert halted.attributes["toolnexus.run.status"] == "pending"
    assert continued.attributes["toolnexus.run.resumed"] is True
    assert [e.name for e in continued.events] == ["toolnexus.resumed"]
    rerun = named(spans, "execute_tool deploy")[-1]
    assert (rerun.attributes["toolnexus.tool.resumed"], rerun.attributes["toolnexus.answer.ok"]) == (True, True)
