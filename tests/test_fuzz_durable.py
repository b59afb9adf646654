"""Property test: whatever JSON-valid output a model sends, a durable run finishes, or parks and
restores — on SQLite and on PostgreSQL (issue #31).

The model's reply is generated: its text, one tool call's arguments (a JSON value written the way
Python writes it, so `NaN` and `Infinity` tokens included, or any string at all), and its final
text — with lone surrogates, non-finite numbers, nesting thousands deep and strings of hundreds of
kilobytes. The reply goes through the transport seam as JSON text, decoded as a real transport
decodes a provider's body. The one tool parks the run on an approval when it is called (its
request carries the arguments, the prompt the model's text); the run is then answered from the
store, in a fresh runtime.

Checked every time: the run ends `done` or `pending`, never `error`; a parked run is listed in the
inbox and an answer from the store finishes it; a finished run restores as finished; every body
sent to the model is strict JSON (UTF-8, no NaN, no lone surrogate escape).

`make test` runs a few examples per store; `make fuzz` many more (TOOLNEXUS_FUZZ_PROFILE=fuzz).
"""

from __future__ import annotations

import asyncio
import json
import os
import tempfile
import uuid
from typing import Any, Iterator

import pytest
from hypothesis import HealthCheck, event, given, settings, strategies as st

from support.stores import SKIP_PG, drop_schema, postgres_base
from support.strict_json import assert_strict_json
from toolnexus import Answer, Tool, ToolResult, pending
from toolnexus.agents import AgentRuntime, agent, resume
from toolnexus.client._transport import decode_json_body
from toolnexus.stores import open_store

pytestmark = pytest.mark.timeout(600)

EXAMPLES = 400 if os.environ.get("TOOLNEXUS_FUZZ_PROFILE") == "fuzz" else 8
LLM = {"base_url": "http://mock.local", "style": "openai", "model": "m", "api_key": "unused"}

surrogates = st.characters(categories=["Cs"])
hostile_char = surrogates | st.characters(codec="utf-8") | st.sampled_from(["\x00", "\ufffd", "\U0001f600", '"', "\\"])
hostile_text = (st.text(hostile_char, max_size=40)
                | st.builds(lambda c, n: c * n, st.sampled_from(["x", "\ud800", "é", "\x00"]),
                            st.integers(0, 200_000)))
numbers = st.floats(allow_nan=True, allow_infinity=True) | st.integers(-2**70, 2**70)
scalars = st.none() | st.booleans() | numbers | hostile_text


def _nest(depth: int, leaf: Any) -> Any:
    value = leaf
    for i in range(depth):
        value = [value] if i % 2 else {"k": value}
    return value


json_values = (st.recursive(scalars, lambda inner: st.lists(inner, max_size=3)
                            | st.dictionaries(hostile_text, inner, max_size=3), max_leaves=12)
               | st.builds(_nest, st.integers(0, 3000), scalars))


def _arguments(value: Any) -> str:
    """What a model's `arguments` string may hold: Python's JSON (with NaN, Infinity) of a value."""
    try:
        return json.dumps({"v": value} if not isinstance(value, dict) else value)
    except RecursionError:
        return "[" * 5000 + "]" * 5000


arguments = json_values.map(_arguments) | hostile_text


class Model:
    """A provider whose replies are the example's: decoded from JSON text, as a transport does."""

    def __init__(self, content: str, args: str, final: str) -> None:
        self.content, self.args, self.final = content, args, final
        self.bodies: list[bytes] = []

    def post(self, url: str, headers: dict[str, str], payload: dict[str, Any], timeout: float) -> Any:
        from toolnexus.client._body import encode_payload

        self.bodies.append(encode_payload(payload))
        if not any(m.get("role") == "tool" for m in payload["messages"]):
            reply: dict[str, Any] = {"choices": [{"message": {"role": "assistant", "content": self.content,
                                                              "tool_calls": [{"id": "c1", "type": "function",
                                                                              "function": {"name": "sink",
                                                                                           "arguments": self.args}}]},
                                                  "finish_reason": "tool_calls"}]}
        else:
            reply = {"choices": [{"message": {"role": "assistant", "content": self.final}, "finish_reason": "stop"}]}
        reply["usage"] = {"prompt_tokens": 1, "completion_tokens": 1, "total_tokens": 2}
        return decode_json_body(json.dumps(reply).encode(), url)

    def open(self, *args: Any) -> Any:
        raise NotImplementedError


async def sink(args: Any = None, ctx: Any = None) -> ToolResult:
    if ctx is None or ctx.answer is None:
        return pending(kind="approval", prompt=f"ok? {json.dumps(args)[:200]}", data={"args": args})
    return ToolResult(f"took {json.dumps(args, ensure_ascii=False)[:300]} with {ctx.answer.data}", False)


SINK = Tool("sink", "Takes anything.", {"type": "object"}, "native", sink)
FUZZ = agent("fz", does="takes what the model sends", uses={"tools": [SINK]})


async def _one(url: str, model: Model, answer_data: Any) -> None:
    run_id = f"fz-{uuid.uuid4().hex[:12]}"
    async with open_store(url) as store:
        r = await FUZZ.run("go", store=store, transport=model, llm=LLM, run_id=run_id)
        await r.runtime.aclose()
        assert r.status in ("done", "pending"), r.text
        event(f"first run {r.status}")
        if r.status == "pending":
            assert r.pending.id in [p.request.id for p in await store.pending() if p.run_id == run_id]
            final = await resume(store, Answer(id=r.pending.id, ok=True, data=answer_data), agents=[FUZZ],
                                 transport=model, llm=LLM)
            assert final.status == "done", final.text
        rt = await AgentRuntime.restore(store, run_id, agents=[FUZZ], transport=model, llm=LLM)
        again = await rt.wait(rt.entry)
        await rt.close(rt.root)
        assert again.status == "done", again.text
        await store.delete_run(run_id)
    for body in model.bodies:
        assert_strict_json(body)


CASE = (hostile_text, arguments, hostile_text, st.dictionaries(hostile_text, st.none() | hostile_text, max_size=2))
FUZZ_SETTINGS = settings(max_examples=EXAMPLES, suppress_health_check=[HealthCheck.too_slow,
                                                                       HealthCheck.data_too_large])


@FUZZ_SETTINGS
@given(*CASE)
def test_any_model_output_finishes_or_parks_and_restores_on_sqlite(content: str, args: str, final: str,
                                                                  answer_data: dict) -> None:
    with tempfile.TemporaryDirectory() as folder:
        asyncio.run(_one(f"sqlite:///{folder}/runs.db", Model(content, args, final), answer_data))


@pytest.fixture(scope="module")
def pg_url() -> Iterator[str]:
    base = postgres_base()
    if base is None:
        pytest.skip(SKIP_PG)
    schema = f"tn_fz_{uuid.uuid4().hex[:12]}"
    try:
        yield f"{base}?schema={schema}"
    finally:
        drop_schema(base, schema)


@FUZZ_SETTINGS
@given(*CASE)
def test_any_model_output_finishes_or_parks_and_restores_on_postgres(pg_url: str, content: str, args: str,
                                                                    final: str, answer_data: dict) -> None:
    asyncio.run(_one(pg_url, Model(content, args, final), answer_data))
