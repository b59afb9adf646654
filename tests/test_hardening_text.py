"""Hostile text and numbers from a model or a host never end a durable run (issue #31).

- **Lone surrogates.** `"\\ud800"` is valid JSON; Python decodes it to a string UTF-8 cannot
  encode. A model that sent one finished on the `memory:` store but ended in `error` on every real
  store ("'utf-8' codec can't encode character"), and a restore returned that error. Now every
  store keeps such text losslessly (escaped in its JSON), a tool call whose arguments hold one is
  not run and the model is told why, and what goes back to the provider is strict UTF-8 JSON (a
  lone surrogate shown as U+FFFD).
- **Non-finite numbers.** NaN and ±Infinity are not JSON numbers, yet `json.loads` accepts them and
  JSON Schema's `maximum` lets them through: `toolnexus answer --data '{"amount": NaN}'` ran the
  refund with `amount=nan`. Now they are refused wherever a schema validates or our JSON is read.

Real loopback HTTP model server, real stores (SQLite, PostgreSQL, file), real `toolnexus` processes.
"""

from __future__ import annotations

import contextlib
import json
import math
from pathlib import Path
from typing import Any, Iterator

import pytest

from support.cli_agents import PAYER
from support.cli_run import cli_env, run_cli
from support.llm_server import Json, LlmServer, anthropic_calls, anthropic_text, openai_calls, openai_text
from support.stores import store_url  # noqa: F401 - a fixture
from support.strict_json import assert_strict_json
from toolnexus import Answer, ToolResult, define_tool, pending
from toolnexus.agents import AgentRuntime, agent, resume
from toolnexus.stores import open_store

KEY = "sk-test-TEXT-KEY-0123456789"


@pytest.fixture
def llm() -> Iterator[LlmServer]:
    with LlmServer() as server:
        yield server


def _llm(server: LlmServer, style: str = "openai") -> dict:
    return {"base_url": server.base_url + ("/v1" if style == "openai" else ""), "style": style, "model": "m",
            "api_key": KEY}


RAN: list[str] = []


async def echo(text: str) -> str:
    """Say the text back (with a byte that decoded to a lone surrogate, as `surrogateescape` makes)."""
    RAN.append(text)
    return f"echo {text} \udcff"


WRITER = agent("writer", does="writes", uses={"tools": [define_tool(echo)]})


async def test_lone_surrogates_from_the_model_finish_on_every_store_and_restore_as_written(
        store_url: str, llm: LlmServer) -> None:
    RAN.clear()
    llm.add(Json(openai_calls(("c1", "echo", '{"text": "a\\ud800b"}'), content="thinking \ud83d")),
            Json(openai_calls(("c2", "echo", {"text": "plain"}))),
            Json(openai_text("done \ud800 \udfff")))
    async with open_store(store_url) as store, contextlib.AsyncExitStack() as stack:
        r = await WRITER.run("go", llm=_llm(llm), store=store)
        stack.push_async_callback(r.runtime.aclose)  # for a failure before the aclose below (a second one is a no-op)
        assert (r.status, r.text) == ("done", "done \ud800 \udfff"), r.text  # before: error on every real store
        before = await r.runtime.conversation_store.get("root/writer.1")
        await r.runtime.aclose()
        assert RAN == ["plain"]  # the call whose arguments held a lone surrogate was not run
        bodies = [assert_strict_json(q.body) for q in llm.requests if q.method == "POST"]
        told = [m for m in bodies[1]["messages"] if m.get("role") == "tool"]
        assert "was not run" in told[0]["content"] and "U+D800" in told[0]["content"]
        assert "thinking \ufffd" in json.dumps(bodies[1]["messages"], ensure_ascii=False)

        rt = await AgentRuntime.restore(store, r.run_id, agents=[WRITER], llm=_llm(llm))
        stack.push_async_callback(rt.close, rt.root)
        again = await rt.wait(rt.entry)
        assert (again.status, again.text) == ("done", "done \ud800 \udfff")
        assert await rt.conversation_store.get("root/writer.1") == before  # kept losslessly


async def gate(note: str, ctx: Any = None) -> ToolResult:
    """Park with hostile text in the request, then finish."""
    if ctx is None or ctx.answer is None:
        return pending(kind="approval\x00\ud800", prompt=f"ok {note}?\x00", data={"note": note + "\udc80"})
    return ToolResult(f"through {ctx.answer.data}", False)


GATE = agent("gate", does="gates", uses={"tools": [define_tool(gate)]})


async def test_a_parked_request_with_nul_and_surrogates_restores_and_answers(store_url: str, llm: LlmServer) -> None:
    llm.add(Json(openai_calls(("c1", "gate", {"note": "n"}))), Json(openai_text("fin")))
    async with open_store(store_url) as store:
        r = await GATE.run("go", llm=_llm(llm), store=store)
        await r.runtime.aclose()
        assert r.status == "pending", r.text
        [waiting] = await store.pending()
        assert (waiting.request.kind, waiting.request.prompt) == ("approval\x00\ud800", "ok n?\x00")
        assert waiting.request.data["note"] == "n\udc80"
        final = await resume(store, Answer(id=r.pending.id, ok=True, data={"v": "\ud800"}), agents=[GATE],
                             llm=_llm(llm))
        assert (final.status, final.text) == ("done", "fin")


# -- non-finite numbers ---------------------------------------------------------------------------

CAPPED = {"type": "object", "properties": {"amount": {"type": "number", "maximum": 100}}, "required": ["amount"]}
PAID: list[Any] = []


async def refund(order: str, ctx: Any = None) -> ToolResult:
    """Refund up to 100 once a human approved the amount."""
    if ctx is None or ctx.answer is None:
        return pending(kind="approval", prompt=f"Refund {order}?", data={"schema": CAPPED})
    PAID.append(ctx.answer.data["amount"])
    return ToolResult(f"refunded {ctx.answer.data['amount']}", False)


CAPPED_PAYER = agent("capped", does="refunds", uses={"tools": [define_tool(refund)]})


async def test_non_finite_answer_data_is_refused_before_anything_runs(tmp_path: Path, llm: LlmServer) -> None:
    from toolnexus.client import ResumeError

    PAID.clear()
    url = f"sqlite:///{tmp_path / 'runs.db'}"
    llm.add(Json(openai_calls(("c1", "refund", {"order": "A-1"}))), Json(openai_text("paid")))
    async with open_store(url) as store:
        r = await CAPPED_PAYER.run("go", llm=_llm(llm), store=store)
        await r.runtime.aclose()
        for bad, name in ((math.nan, "NaN"), (-math.inf, "-Infinity"), (math.inf, "Infinity")):
            with pytest.raises(ResumeError, match=f"amount: {name} is not a JSON number"):  # before: the refund ran
                await resume(store, Answer(id=r.pending.id, ok=True, data={"amount": bad}), agents=[CAPPED_PAYER],
                             llm=_llm(llm))
        assert PAID == [] and [p.request.id for p in await store.pending()] == [r.pending.id]
        final = await resume(store, Answer(id=r.pending.id, ok=True, data={"amount": 40}), agents=[CAPPED_PAYER],
                             llm=_llm(llm))
        assert (final.status, PAID) == ("done", [40])


def test_answer_from_dict_refuses_non_finite_numbers() -> None:
    with pytest.raises(ValueError, match=r"data/amount: NaN is not a JSON number"):
        Answer.from_dict({"id": "r1", "ok": True, "data": {"amount": math.nan}})
    with pytest.raises(ValueError, match=r"data/rows/1: -Infinity is not a JSON number"):
        Answer.from_dict(json.loads('{"id": "r1", "ok": true, "data": {"rows": [1, -Infinity]}}'))
    assert Answer.from_dict({"id": "r1", "ok": True, "data": {"amount": 1e308}}).data == {"amount": 1e308}


async def test_toolnexus_answer_refuses_nan_data_and_runs_nothing(tmp_path: Path, llm: LlmServer) -> None:
    url, effects = f"sqlite:///{tmp_path / 'runs.db'}", tmp_path / "effects.jsonl"
    llm.add(Json(openai_calls(("c1", "refund", {"order": "A-17"}))))
    async with open_store(url) as store:
        r = await PAYER.run("refund order A-17", llm=_llm(llm), store=store, run_id="refund-1")
        await r.runtime.aclose()
    done = run_cli("answer", "--store", url, "--id", r.pending.id, "--ok", "--data", '{"amount": NaN}', "--agents",
                   "cli_agents:PAYER", "--base-url", llm.base_url + "/v1", "--api-key", KEY,
                   env=cli_env(CLI_EFFECTS=str(effects)))
    assert done.returncode == 2, (done.returncode, done.stderr)  # before: exit 0, the refund ran with amount=nan
    assert "--data" in done.stderr and "NaN is not a JSON number" in done.stderr
    assert not effects.exists()


PAYMENTS: list[Any] = []


async def pay(amount: float) -> str:
    """Pay an amount."""
    PAYMENTS.append(amount)
    return f"paid {amount}"


PAY = agent("pay", does="pays", uses={"tools": [define_tool(pay)]})


@pytest.mark.parametrize("style", ["openai", "anthropic"])
async def test_tool_arguments_with_non_finite_numbers_are_not_run_and_the_model_is_told(
        style: str, llm: LlmServer) -> None:
    PAYMENTS.clear()
    if style == "openai":
        llm.add(Json(openai_calls(("c1", "pay", '{"amount": NaN}'), ("c2", "pay", '{"amount": 1e999}'))),
                Json(openai_calls(("c3", "pay", {"amount": 3}))), Json(openai_text("ok")))
    else:  # the provider's body itself carries NaN and -Infinity (Python's json writes them)
        llm.add(Json(anthropic_calls(("c1", "pay", {"amount": math.nan}), ("c2", "pay", {"amount": -math.inf}))),
                Json(anthropic_calls(("c3", "pay", {"amount": 3}))), Json(anthropic_text("ok")))
    r = await PAY.run("go", llm=_llm(llm, style))
    assert (r.status, PAYMENTS) == ("done", [3])  # before: pay ran with nan and inf
    second = assert_strict_json(llm.requests[1].body)
    said = json.dumps(second["messages"])
    assert said.count("was not run") == 2 and "is not a JSON number" in said


def test_schemas_refuse_non_finite_numbers_wherever_they_validate() -> None:
    from toolnexus._schema import schema_error

    capped = {"type": "number", "maximum": 100}
    assert schema_error(capped, 50) is None
    assert schema_error(capped, math.nan) == "NaN is not a JSON number"
    assert schema_error({"type": "object"}, {"a": [0, -math.inf]}) == "a/1: -Infinity is not a JSON number"
