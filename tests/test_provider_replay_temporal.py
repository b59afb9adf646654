"""An agent run as a Temporal workflow on the OpenAI Responses API wire (`style="responses"`).

The workflow, its activities and the dev server are real (`support.temporal_server`); the model
answers with the Responses fixtures (tests/fixtures/providers/responses, each naming its source)
behind the transport seam, so the workflow's LLM activity carries Responses-shaped bodies both ways.
"""

from __future__ import annotations

from typing import Any

import pytest

pytest.importorskip("temporalio", reason="the Temporal tests need the SDK: pip install 'toolnexus[temporal]'")

from support.provider_replay import load
from support.temporal_server import run_id, temporal_server, worker  # noqa: F401 - fixture
from toolnexus import Answer, ToolResult, define_tool, pending
from toolnexus.agents import agent


class Replies:
    """A transport answering with fixture bodies in order, recording what it was sent."""

    def __init__(self, *names: str) -> None:
        self.replies = [load(n).json for n in names]
        self.sent: list[dict[str, Any]] = []

    def post(self, url: str, headers: dict, payload: dict, timeout: float) -> Any:
        self.sent.append({"url": url, **payload})
        return self.replies.pop(0)

    def open(self, *args: Any) -> Any:
        raise NotImplementedError


async def gate(args: Any = None, ctx: Any = None) -> Any:
    if ctx is not None and ctx.answer is not None and ctx.answer.ok:
        return ToolResult(output="through", is_error=False)
    return pending(kind="approval", prompt="let it through?")


WORKER = agent("worker", does="gated", uses={"tools": [define_tool(gate, name="gate", description="g")]})
LLM = {"base_url": "http://llm.invalid/v1", "style": "responses", "model": "gpt-5-mini", "api_key": "unused"}


async def test_a_workflow_suspends_and_resumes_on_the_responses_wire(temporal_server):
    model = Replies("responses/gate_call.json", "responses/text.json")
    async with worker(temporal_server, agents=[WORKER], llm=LLM, transport=model) as host:
        rid = run_id("responses")
        first = await host.start("worker", "go", run_id=rid, wait=True)
        assert (first.status, first.pending.prompt) == ("pending", "let it through?")
        final = await host.answer(Answer(id=first.pending.id, ok=True))
    assert final.status == "done" and final.text.startswith("In a peaceful grove")
    assert [s["url"] for s in model.sent] == ["http://llm.invalid/v1/responses"] * 2
    items = model.sent[1]["input"]
    assert items[1]["type"] == "reasoning" and items[1]["encrypted_content"]
    assert items[-1] == {"type": "function_call_output", "call_id": "call_gate0001", "output": "through"}
