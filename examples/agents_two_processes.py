"""The founding example 3, split across two processes that share only a JSON file.

Process A (`python agents_two_processes.py suspend STATE.json`) runs a gated worker until its tool
suspends, and writes the runtime snapshot plus the pending `Request` to STATE.json. Process B
(`python agents_two_processes.py resume STATE.json`) builds a fresh runtime from the same agent
definition, restores the snapshot, answers the request and finishes: the counters continue from
the checkpoint (3 turns, 20 tokens), with no duplicate handle.

Run both steps at once with `python agents_two_processes.py` (it spawns the two processes).
"""

import asyncio
import dataclasses
import json
import subprocess
import sys

from toolnexus import Answer, Request, ToolResult, define_tool, pending
from toolnexus.agents import AgentRuntime, agent


class ScriptedTransport:
    """Canned OpenAI-shaped replies — no network, no real LLM. Each process gets its own copy."""

    def __init__(self, replies):
        self._replies = list(replies)

    def post(self, url, headers, payload, timeout):
        return self._replies.pop(0)

    def open(self, url, headers, payload, timeout):
        raise NotImplementedError


def tool_call_reply():
    return {
        "choices": [{"message": {"role": "assistant", "content": None, "tool_calls": [
            {"id": "c1", "type": "function", "function": {"name": "gate", "arguments": "{}"}}]},
            "finish_reason": "tool_calls"}],
        "usage": {"prompt_tokens": 6, "completion_tokens": 2, "total_tokens": 8},
    }


def final_reply(text):
    return {"choices": [{"message": {"role": "assistant", "content": text}}],
            "usage": {"prompt_tokens": 3, "completion_tokens": 1, "total_tokens": 4}}


async def gate(args=None, ctx=None):
    if ctx is not None and ctx.answer is not None and ctx.answer.ok:
        return ToolResult(output="through the gate", is_error=False)
    return pending(kind="approval", prompt="let it through?")


WORKER = agent("worker", does="does gated work",
               uses={"tools": [define_tool(gate, name="gate", description="Gated action.")]})
LLM = {"base_url": "http://mock.local", "style": "openai", "model": "stub-model", "api_key": "unused"}


async def suspend(path):
    r = await WORKER.run("do the gated thing", transport=ScriptedTransport([tool_call_reply()]), llm=LLM)
    assert r.status == "pending"
    state = {"snapshot": await r.runtime.snapshot(), "pending": dataclasses.asdict(r.pending)}
    with open(path, "w", encoding="utf-8") as fh:
        json.dump(state, fh)
    await r.runtime.close(r.runtime.root)
    print("suspended:", r.pending.prompt, "| tokens so far:", r.runtime.inspect(r.runtime.root.children[0]).tokens)


async def resume(path):
    with open(path, encoding="utf-8") as fh:
        state = json.load(fh)
    rt = await AgentRuntime.from_snapshot(
        state["snapshot"], registry=WORKER.registry(),
        transport=ScriptedTransport([tool_call_reply(), final_reply("done.")]), llm=LLM)
    request = Request.from_dict(state["pending"])
    await rt.resume(Answer(id=request.id, ok=True))
    handle = rt.root.children[0]
    final = await rt.wait(handle)
    assert len(rt.root.children) == 1  # the restored handle resumed; nothing was spawned again
    assert final.status == "done" and final.text == "done."
    assert final.turns == 3 and final.total_tokens == 20 == rt.inspect(handle).tokens
    await rt.close(rt.root)
    print("ok: resumed in a fresh process | turns:", final.turns, "| tokens:", final.total_tokens)


def main():
    if len(sys.argv) == 3:
        step = {"suspend": suspend, "resume": resume}[sys.argv[1]]
        asyncio.run(step(sys.argv[2]))
        return
    import tempfile

    with tempfile.TemporaryDirectory() as tmp:
        path = f"{tmp}/state.json"
        for step in ("suspend", "resume"):
            out = subprocess.run([sys.executable, __file__, step, path], check=True, capture_output=True, text=True)
            print(out.stdout, end="")


if __name__ == "__main__":
    main()
