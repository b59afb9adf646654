import asyncio
import dataclasses
import json

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
                                 "function": {"name": "refund", "arguments": "{}"}}],
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


async def refund(args=None, ctx=None):
    if ctx is not None and ctx.answer is not None and ctx.answer.ok:
        amount = (ctx.answer.data or {}).get("amount", 0)
        return ToolResult(output=f"refunded ${amount}", is_error=False)
    return pending(kind="input", prompt="How much should be refunded?")


async def main():
    refund_tool = define_tool(refund, name="refund", description="Issue a refund.")
    support = agent("support", does="handles refunds", uses={"tools": [refund_tool]})

    # Replayed on resume — the model calls the tool again before the final answer.
    scripts = {"stub-model": [tool_call_reply(), tool_call_reply(), final_reply("refund processed.")]}
    r = await support.run(
        "refund the last order",
        transport=ScriptedTransport(scripts),
        llm={"base_url": "http://mock.local", "style": "openai", "model": "stub-model", "api_key": "unused"},
    )
    assert r.status == "pending"

    # Request/Answer are dataclasses — plain, JSON-serializable data (SPEC §10). A durable
    # host can persist exactly this and reconstruct it from a queue, a webhook, another
    # process's message — anything that eventually hands the same shape back.
    wire = json.dumps(dataclasses.asdict(r.pending))
    restored = json.loads(wire)
    answer = Answer(id=restored["id"], ok=True, data={"amount": 40})

    await r.runtime.resume(answer)
    handle = r.runtime.root.children[0]
    final = await r.runtime.wait(handle)

    assert final.status == "done"
    assert final.text == "refund processed."

    await r.runtime.close(r.runtime.root)
    print("ok:", wire[:40], "... ->", final.text)


asyncio.run(main())
