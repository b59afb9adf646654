"""Durable resume across processes: a run halts in one process and is answered in another.

The model asks for two things at once: `lookup_order`, a relay tool that the *host* runs, and
`refund`, which needs a person to say how much (its Request carries a JSON schema for the answer).
No `wait_for` is configured, so each suspension halts the run and the host keeps plain JSON: the
transcript and the `Request`. Every later step is a fresh process with a fresh client. It loads
that JSON, answers, and calls `run_with_answer` (or `ask_with_answer` with a JSON-file store).
Two parallel suspensions become two halts in a row, and the model only sees the finished turn.

    python examples/client_resume.py                  # all steps in child processes, scripted model
    python examples/client_resume.py start DIR  [--base-url URL] [--mode run|ask]
    python examples/client_resume.py answer DIR [--base-url URL] [--mode run|ask]

With `--base-url`, the model is an OpenAI-style endpoint at that URL. Without it, a scripted
transport plays the model and refuses any request whose tool calls lack results.
"""

import argparse
import asyncio
import dataclasses
import json
import sys
import tempfile
from pathlib import Path

from toolnexus import (
    Answer,
    RelayResult,
    Request,
    ToolResult,
    create_client,
    define_tool,
    is_relay_request,
    pending,
    relay_answer,
    relay_calls_of,
    relay_tool,
)
from toolnexus.toolkit import Toolkit

CONVERSATION = "order-42"
AMOUNT_SCHEMA = {"type": "object", "properties": {"amount": {"type": "number", "minimum": 0}}, "required": ["amount"]}
ORDERS = {"42": "order 42: paid $40 by card"}


# -- the tools (the same code in every process) -------------------------------------------------------


async def refund(order: str, ctx=None):
    """Refund part of an order; a person decides the amount.

    Args:
        order: the order number
    """
    if ctx is not None and ctx.answer is not None and ctx.answer.ok:
        return ToolResult(output=f"refunded ${ctx.answer.data['amount']} on order {order}", is_error=False)
    return pending(kind="input", prompt=f"How much should be refunded on order {order}?",
                   data={"schema": AMOUNT_SCHEMA})


def toolkit():
    return Toolkit(None, None, [], [], [
        relay_tool("lookup_order", "Look an order up in the shop's back office.",
                   {"type": "object", "properties": {"order": {"type": "string"}}, "required": ["order"]}),
        define_tool(refund),
    ])


# -- the model: a real endpoint, or a script that insists on balanced turns ---------------------------


class ScriptedModel:
    """Replies `reply` to every request, after checking each tool call has exactly one result."""

    def __init__(self, reply):
        self.reply = reply

    def post(self, url, headers, payload, timeout):
        messages = payload["messages"]
        for i, m in enumerate(messages):
            calls = [c["id"] for c in m.get("tool_calls") or []]
            answered = [r.get("tool_call_id") for r in messages[i + 1 : i + 1 + len(calls)]]
            if calls != answered:
                raise AssertionError(f"unbalanced turn sent to the model: calls {calls}, results {answered}")
        return self.reply

    def open(self, url, headers, payload, timeout):
        raise NotImplementedError


def calls_reply():
    calls = [("c1", "lookup_order"), ("c2", "refund")]
    return {"choices": [{"message": {"role": "assistant", "content": None, "tool_calls": [
        {"id": cid, "type": "function", "function": {"name": name, "arguments": '{"order": "42"}'}}
        for cid, name in calls]}, "finish_reason": "tool_calls"}],
            "usage": {"prompt_tokens": 12, "completion_tokens": 4, "total_tokens": 16}}


def final_reply():
    return {"choices": [{"message": {"role": "assistant", "content": "Refunded $40 on order 42."}}],
            "usage": {"prompt_tokens": 30, "completion_tokens": 8, "total_tokens": 38}}


def make_client(base_url, reply):
    transport = None if base_url else ScriptedModel(reply)
    return create_client(base_url=base_url or "http://scripted.invalid/v1", style="openai", model="shop-model",
                         api_key="unused", http_transport=transport)


# -- plain JSON on disk ---------------------------------------------------------------------------


def read_json(path):
    return json.loads(path.read_text(encoding="utf-8"))


def write_json(path, value):
    path.write_text(json.dumps(value, indent=1), encoding="utf-8")


class JsonFileStore:
    """A ConversationStore in one JSON file: nothing survives in memory between steps."""

    def __init__(self, path):
        self.path = path

    def _load(self):
        return read_json(self.path) if self.path.exists() else {}

    async def get(self, id):
        return (await asyncio.to_thread(self._load)).get(id)

    async def save(self, id, messages):
        data = await asyncio.to_thread(self._load)
        data[id] = messages
        await asyncio.to_thread(write_json, self.path, data)


# -- the host's two steps ------------------------------------------------------------------------------


def host_answer(request):
    """What a host does with a Request: run relayed calls itself, or ask a person (here: $40)."""
    if is_relay_request(request):
        return relay_answer(request.id, [RelayResult(c.id, ORDERS.get(c.input.get("order"), "no such order"))
                                         for c in relay_calls_of(request)])
    return Answer(id=request.id, ok=True, data={"amount": 40})


async def keep(folder, mode, result):
    """Save the halt (the Request, and in `run` mode the transcript) or clear it; report one line."""
    if mode == "run":
        await asyncio.to_thread(write_json, folder / "transcript.json", result.messages)
    if result.status == "pending":
        await asyncio.to_thread(write_json, folder / "pending.json", dataclasses.asdict(result.pending))
        print(f"halted: {result.pending.kind}: {result.pending.prompt}")
    else:
        (folder / "pending.json").unlink()
        print(f"{result.status}: {result.text}")


async def start(folder, mode, base_url):
    async with make_client(base_url, calls_reply()) as client:
        if mode == "ask":
            client.store = JsonFileStore(folder / "conversations.json")
            result = await client.ask("Refund order 42, please.", toolkit(), id=CONVERSATION)
        else:
            result = await client.run("Refund order 42, please.", toolkit())
    await keep(folder, mode, result)


async def answer(folder, mode, base_url):
    request = Request(**read_json(folder / "pending.json"))
    reply = host_answer(request)
    async with make_client(base_url, final_reply()) as client:
        if mode == "ask":
            client.store = JsonFileStore(folder / "conversations.json")
            result = await client.ask_with_answer(toolkit(), CONVERSATION, request, reply)
        else:
            history = read_json(folder / "transcript.json")
            result = await client.run_with_answer(toolkit(), history, request, reply)
    await keep(folder, mode, result)


# -- standalone: every step in a child process ---------------------------------------------------------


async def step(*args):
    proc = await asyncio.create_subprocess_exec(sys.executable, __file__, *args, stdout=asyncio.subprocess.PIPE,
                                                stderr=asyncio.subprocess.PIPE)
    out, err = await proc.communicate()
    if proc.returncode != 0:
        raise SystemExit(f"step {args[0]} failed:\n{err.decode()}")
    line = out.decode().strip()
    print(f"[process {args[0]}] {line}")
    return line


async def standalone():
    with tempfile.TemporaryDirectory() as folder:
        lines = [await step("start", folder)]
        while lines[-1].startswith("halted:"):
            lines.append(await step("answer", folder))
    assert lines[-1] == "done: Refunded $40 on order 42.", lines
    print(f"ok: {len(lines)} processes, {len(lines) - 1} answers -> {lines[-1][len('done: '):]}")


def main():
    if len(sys.argv) == 1:
        asyncio.run(standalone())
        return
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("step", choices=["start", "answer"])
    parser.add_argument("folder", type=Path)
    parser.add_argument("--base-url")
    parser.add_argument("--mode", choices=["run", "ask"], default="run")
    args = parser.parse_args()
    run_step = start if args.step == "start" else answer
    asyncio.run(run_step(args.folder, args.mode, args.base_url))


if __name__ == "__main__":
    main()
