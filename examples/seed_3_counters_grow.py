import asyncio

from toolnexus import Answer, ToolResult, define_tool, pending
from toolnexus.agents import agent


class ScriptedTransport:
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
                                 "function": {"name": "gate", "arguments": "{}"}}],
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


async def gate(args=None, ctx=None):
    if ctx is not None and ctx.answer is not None and ctx.answer.ok:
        return ToolResult(output="through the gate", is_error=False)
    return pending(kind="approval", prompt="let it through?")


async def main():
    gate_tool = define_tool(gate, name="gate", description="Gated action.")
    worker = agent("worker", does="does gated work", uses={"tools": [gate_tool]})

    # Replayed on resume: tool call, tool call again (resolved inline), final answer.
    scripts = {"stub-model": [tool_call_reply(), tool_call_reply(), final_reply("done.")]}
    r = await worker.run(
        "do the gated thing",
        transport=ScriptedTransport(scripts),
        llm={"base_url": "http://mock.local", "style": "openai", "model": "stub-model", "api_key": "unused"},
    )
    assert r.status == "pending"
    handle = r.runtime.root.children[0]
    tokens_before = r.runtime.inspect(handle).tokens  # the suspending attempt already rolled up

    await r.runtime.resume(Answer(id=r.pending.id, ok=True))
    final = await r.runtime.wait(handle)

    assert final.status == "done"
    # 1 turn for the attempt that suspended + 2 for the replay = the handle's lifetime count.
    assert final.turns == 3
    assert final.total_tokens > 0

    tokens_after = r.runtime.inspect(handle).tokens
    assert tokens_after > tokens_before  # the Handle's lifetime counter really does only grow
    assert final.total_tokens == tokens_after  # same number, read two ways

    await r.runtime.close(r.runtime.root)
    print("ok: handle tokens", tokens_before, "->", tokens_after, "| resumed turns:", final.turns)


asyncio.run(main())
