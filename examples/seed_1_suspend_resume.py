import asyncio

from toolnexus import Answer, ToolResult, define_tool, pending
from toolnexus.agents import agent


class ScriptedTransport:
    """Canned OpenAI-shaped replies, popped per model — no network, no real LLM."""

    def __init__(self, scripts):
        self._scripts = {k: list(v) for k, v in scripts.items()}

    def post(self, url, headers, payload, timeout):
        return self._scripts[payload.get("model")].pop(0)

    def open(self, url, headers, payload, timeout):
        raise NotImplementedError


def tool_call_reply():
    return {
        "choices": [{
            "message": {
                "role": "assistant", "content": None,
                "tool_calls": [{"id": "c1", "type": "function",
                                 "function": {"name": "approve", "arguments": "{}"}}],
            },
            "finish_reason": "tool_calls",
        }],
        "usage": {"prompt_tokens": 6, "completion_tokens": 2, "total_tokens": 8},
    }


def final_reply(text):
    return {
        "choices": [{"message": {"role": "assistant", "content": text}}],
        "usage": {"prompt_tokens": 3, "completion_tokens": 1, "total_tokens": 4},
    }


async def approve(args=None, ctx=None):
    if ctx is not None and ctx.answer is not None and ctx.answer.ok:
        return ToolResult(output="approved and deployed", is_error=False)
    return pending(kind="approval", prompt="OK to deploy?")


async def main():
    approve_tool = define_tool(approve, name="approve", description="Deploy after approval.")
    approver = agent("approver", does="deploys after human approval", uses={"tools": [approve_tool]})

    # The resumed turn REPLAYS from a rolled-back transcript (§10 idempotency), so the
    # model calls the tool a second time before it ever sees the final answer — that's
    # why `tool_call_reply` appears twice: once to trigger the original suspension, once
    # on the resumed replay, where `wait_for` now resolves it inline.
    scripts = {"stub-model": [tool_call_reply(), tool_call_reply(), final_reply("deployed.")]}
    r = await approver.run(
        "deploy the latest build",
        transport=ScriptedTransport(scripts),
        llm={"base_url": "http://mock.local", "style": "openai", "model": "stub-model", "api_key": "unused"},
    )

    assert r.status == "pending"
    assert r.pending.kind == "approval"
    assert r.runtime is not None  # the live runtime, holding the suspended tree

    answer = Answer(id=r.pending.id, ok=True)
    await r.runtime.resume(answer)

    # The spawned handle is the runtime root's only child (Agent.run spawned it there).
    handle = r.runtime.root.children[0]
    final = await r.runtime.wait(handle)

    assert final.status == "done"
    assert final.text == "deployed."

    await r.runtime.close(r.runtime.root)
    print("ok:", final.status, "|", final.text)


asyncio.run(main())
