"""The client loop: turns, usage, tools, hooks, body shaping and suspension, via the transport seam.

The model is scripted behind the transport seam (the seed's `ScriptedTransport` or a recording
sync transport); tools and the toolkit are real.
"""

from __future__ import annotations

import asyncio
import logging

import pytest

from support.llm_server import (
    RecordingTransport,
    ScriptedTransport,
    anthropic_calls,
    anthropic_text,
    openai_calls,
    openai_text,
)
from toolnexus.client import RunResult, create_client
from toolnexus.toolkit import Toolkit, create_toolkit
from toolnexus.types import Answer, Tool, ToolResult, pending


def make_tool(name, fn, source="native"):
    async def execute(args=None, ctx=None):
        return await fn(args or {}, ctx)

    return Tool(name, f"{name} tool", {"type": "object", "properties": {}}, source, execute)


def kit(*tools):
    return Toolkit(None, None, [], [], list(tools))


def client(transport, style="openai", **kw):
    kw.setdefault("api_key", "k")
    return create_client(base_url="http://mock.local", style=style, model="m", http_transport=transport, **kw)


async def echo(args, ctx):
    return ToolResult(f"echo {args.get('x')}", False)


# -- the seed flow ------------------------------------------------------------------------------


def seed_call():
    return openai_calls(("c1", "approve", "{}"))


async def approve(args, ctx):
    if ctx is not None and ctx.answer is not None and ctx.answer.ok:
        return ToolResult(output="approved and deployed", is_error=False)
    return pending(kind="approval", prompt="OK to deploy?")


async def test_seed_scripted_transport_halts_durably_without_wait_for():
    events = []
    c = create_client(base_url="http://mock.local", style="openai", model="stub-model", api_key="unused",
                      http_transport=ScriptedTransport({"stub-model": [seed_call()]}), on_metric=events.append)
    r = await c.ask("deploy", kit(make_tool("approve", approve)), id="conv")
    assert (r.status, r.text, r.limit, r.turns) == ("pending", "OK to deploy?", None, 1)
    assert r.pending.kind == "approval" and r.pending.prompt == "OK to deploy?"
    assert r.messages[-1] == {"role": "tool", "tool_call_id": "c1", "content": "OK to deploy?"}
    assert r.tool_calls == [{"name": "approve", "args": {}, "output": "OK to deploy?", "is_error": True,
                             "metadata": None}]
    assert await c.conversation_store.get("conv") == r.messages
    tool_events = [e for e in events if e["event"] == "tool"]
    assert tool_events[0]["pending"] is True and tool_events[0]["is_error"] is False
    assert 'pending="true"' in c.metrics()


async def test_seed_scripted_transport_resolves_inline_with_wait_for():
    seen = []

    async def wait_for(request):
        seen.append(request.prompt)
        return Answer(id=request.id, ok=True)

    c = create_client(base_url="http://mock.local", style="openai", model="stub-model", api_key="unused",
                      http_transport=ScriptedTransport({"stub-model": [seed_call(), openai_text("deployed.")]}),
                      wait_for=wait_for)
    r = await c.run("deploy", kit(make_tool("approve", approve)))
    assert (r.status, r.text, r.turns) == ("done", "deployed.", 2)
    assert seen == ["OK to deploy?"]
    assert r.tool_calls[0]["output"] == "approved and deployed"
    assert r.usage == {"prompt_tokens": 9, "completion_tokens": 3, "total_tokens": 12}


# -- turns, usage, model, system prompt ---------------------------------------------------------


async def test_usage_summed_and_model_sent_verbatim_on_every_turn():
    t = RecordingTransport(openai_calls(("a", "echo", {"x": 1})), openai_calls(("b", "echo", {"x": 2})),
                           openai_text("fin", prompt=10, completion=5, total=99))
    c = create_client(base_url="http://mock.local", style="openai", model="Org/Model-X:free", api_key="k",
                      http_transport=t)
    r = await c.run("go", kit(make_tool("echo", echo)))
    assert [p["model"] for p in t.payloads] == ["Org/Model-X:free"] * 3
    assert r.turns == 3 and r.text == "fin"
    assert r.usage == {"prompt_tokens": 22, "completion_tokens": 9, "total_tokens": 16 + 99}


async def test_before_llm_model_override_applies_to_that_turn_only():
    t = RecordingTransport(openai_calls(("a", "echo", {})), openai_text("fin"))
    seen, metrics = [], []

    def before_llm(ev):
        seen.append(ev["model"])
        return {"model": "other"} if ev["turn"] == 1 else None

    def after_llm(ev):
        seen.append(("after", ev["model"], ev["turn"]))

    c = client(t, hooks={"before_llm": before_llm, "after_llm": after_llm}, on_metric=metrics.append)
    r = await c.run("go", kit(make_tool("echo", echo)))
    assert [p["model"] for p in t.payloads] == ["m", "other"]
    assert seen == ["m", ("after", "m", 0), "m", ("after", "other", 1)]
    assert [e["model"] for e in metrics if e["event"] == "llm"] == ["m", "other"]
    assert r.model == "other"


async def test_system_prompt_joined_with_skills_prompt():
    from toolnexus.skill._model import SkillDef

    tk = await create_toolkit(skills=[SkillDef(name="greet", content="Say hi.", description="greets")], builtins=False)
    t = RecordingTransport(openai_text("ok"), anthropic_text("ok"))
    await client(t, system_prompt="Be brief.").run("hi", tk)
    assert t.payloads[0]["messages"][0] == {"role": "system", "content": "Be brief.\n\n" + tk.skills_prompt()}
    await client(t, style="anthropic", system_prompt="Be brief.").run("hi", tk)
    assert t.payloads[1]["system"] == "Be brief.\n\n" + tk.skills_prompt()
    assert tk.skills_prompt()


@pytest.mark.parametrize("base_url", ["http://127.0.0.1:8080/v1", "http://[::1]:11434/v1", "http://localhost:1234",
                                      "https://api.localhost/v1", "http://127.1.2.3"])
async def test_a_loopback_base_url_without_a_key_sends_the_agent_runtimes_placeholder(monkeypatch, base_url):
    """A local server takes no key: as the agent runtime does, the client sends `unused` instead of failing."""
    for name in ("OPENROUTER_API_KEY", "OPENAI_API_KEY", "ANTHROPIC_API_KEY"):
        monkeypatch.delenv(name, raising=False)
    t = RecordingTransport(openai_text("local"))
    result = await create_client(base_url=base_url, style="openai", model="m", http_transport=t).run("hi")
    assert result.text == "local" and t.calls[-1][1]["Authorization"] == "Bearer unused"


@pytest.mark.parametrize("base_url", ["https://api.openai.com/v1", "http://10.0.0.5:8080/v1",
                                      "http://127.0.0.1.nip.io/v1", "http://0.0.0.0:8080/v1"])
async def test_any_other_base_url_without_a_key_keeps_the_pinned_error(monkeypatch, base_url):
    for name in ("OPENROUTER_API_KEY", "OPENAI_API_KEY", "ANTHROPIC_API_KEY"):
        monkeypatch.delenv(name, raising=False)
    t = RecordingTransport(openai_text("never"))
    with pytest.raises(RuntimeError) as e:
        await create_client(base_url=base_url, style="openai", model="m", http_transport=t).run("hi")
    assert str(e.value) == "No API key: set api_key or OPENROUTER_API_KEY / OPENAI_API_KEY / ANTHROPIC_API_KEY"
    assert t.payloads == []


async def test_openai_system_message_only_added_when_history_is_empty():
    t = RecordingTransport(openai_text("a"), openai_text("b"))
    c = client(t, system_prompt="S")
    r = await c.run("one")
    await c.run("two", history=r.messages)
    assert t.payloads[1]["messages"] == [{"role": "system", "content": "S"}, {"role": "user", "content": "one"},
                                         {"role": "assistant", "content": "a"}, {"role": "user", "content": "two"}]


async def test_api_key_resolved_from_environment(monkeypatch):
    for name in ("OPENROUTER_API_KEY", "OPENAI_API_KEY", "ANTHROPIC_API_KEY"):
        monkeypatch.delenv(name, raising=False)
    t = RecordingTransport(anthropic_text("a"), anthropic_text("b"), openai_text("c"))
    c = create_client(base_url="http://x", style="anthropic", model="m", http_transport=t)
    with pytest.raises(RuntimeError) as e:
        await c.run("hi")
    assert str(e.value) == "No API key: set api_key or OPENROUTER_API_KEY / OPENAI_API_KEY / ANTHROPIC_API_KEY"
    assert t.payloads == []
    monkeypatch.setenv("OPENAI_API_KEY", "oa")
    monkeypatch.setenv("ANTHROPIC_API_KEY", "an")
    await c.run("hi")
    assert t.calls[-1][1]["x-api-key"] == "an"
    monkeypatch.setenv("OPENROUTER_API_KEY", "or")
    await c.run("hi")
    assert t.calls[-1][1]["x-api-key"] == "or"
    await create_client(base_url="http://x", style="openai", model="m", http_transport=t, api_key="explicit").run("x")
    assert t.calls[-1][1]["Authorization"] == "Bearer explicit"


# -- max_turns -----------------------------------------------------------------------------------


async def test_max_turns_exhausted_is_incomplete_with_limit():
    t = RecordingTransport(*[openai_calls((f"c{i}", "echo", {})) for i in range(2)])
    r = await client(t, max_turns=2).run("go", kit(make_tool("echo", echo)))
    assert (r.status, r.limit, r.text, r.turns) == ("incomplete", "maxTurns", "", 2)


async def test_max_turns_text_never_comes_from_history():
    history = [{"role": "user", "content": "old"}, {"role": "assistant", "content": "stale answer"}]
    t = RecordingTransport(openai_calls(("c", "echo", {})))
    r = await client(t, max_turns=1).run("go", kit(make_tool("echo", echo)), history=history)
    assert (r.status, r.limit, r.text) == ("incomplete", "maxTurns", "")


async def test_max_turns_text_from_this_runs_assistant_content_is_done():
    t = RecordingTransport(openai_calls(("c", "echo", {}), content="partial words"))
    r = await client(t, max_turns=1).run("go", kit(make_tool("echo", echo)))
    assert (r.status, r.limit, r.text) == ("done", None, "partial words")


async def test_max_turns_zero_makes_no_call():
    t = RecordingTransport()
    r = await client(t, max_turns=0).run("go")
    assert (r.turns, r.status, r.limit) == (0, "incomplete", "maxTurns") and t.payloads == []


async def test_anthropic_max_turns_text_is_empty():
    t = RecordingTransport(anthropic_calls(("c", "echo", {}), text="thinking aloud"))
    r = await client(t, style="anthropic", max_turns=1).run("go", kit(make_tool("echo", echo)))
    assert (r.status, r.limit, r.text) == ("incomplete", "maxTurns", "")


# -- parallel tool calls -------------------------------------------------------------------------


async def test_parallel_calls_run_concurrently_and_results_follow_call_order():
    first_may_finish = asyncio.Event()
    finished = []

    async def slow(args, ctx):
        await first_may_finish.wait()  # only the second call can release this: proves concurrency
        finished.append("slow")
        return ToolResult("slow done", False)

    async def fast(args, ctx):
        finished.append("fast")
        first_may_finish.set()
        return ToolResult("fast done", False)

    t = RecordingTransport(openai_calls(("c1", "slow", {}), ("c2", "fast", {})), openai_text("ok"))
    r = await asyncio.wait_for(client(t).run("go", kit(make_tool("slow", slow), make_tool("fast", fast))), 5)
    assert finished == ["fast", "slow"]
    assert [m.get("tool_call_id") for m in r.messages if m["role"] == "tool"] == ["c1", "c2"]
    assert [x["output"] for x in r.tool_calls] == ["slow done", "fast done"]


async def test_raising_hook_fails_the_run_and_cancels_sibling_calls():
    sibling_cancelled = asyncio.Event()
    started = asyncio.Event()
    metrics = []

    async def sleeper(args, ctx):
        started.set()
        try:
            await asyncio.Event().wait()
        except asyncio.CancelledError:
            sibling_cancelled.set()
            raise

    async def before_tool(ev):
        if ev["name"] == "boom":
            await started.wait()
            raise ValueError("gate exploded")

    t = RecordingTransport(openai_calls(("c1", "sleeper", {}), ("c2", "boom", {})))
    c = client(t, hooks={"before_tool": before_tool}, on_metric=metrics.append)
    with pytest.raises(ValueError, match="gate exploded"):
        await asyncio.wait_for(c.run("go", kit(make_tool("sleeper", sleeper), make_tool("boom", echo))), 5)
    assert sibling_cancelled.is_set()
    assert metrics[-1]["event"] == "run" and metrics[-1]["error"] == "gate exploded"
    assert 'toolnexus_run_errors_total{model="m"} 1' in c.metrics()


# -- hooks ---------------------------------------------------------------------------------------


async def test_before_tool_rewrites_args_and_after_tool_replaces_result():
    class Hooks:
        not_callable = 3
        before_llm = "not callable either"

        async def before_tool(self, ev):
            return {"args": {"x": ev["args"]["x"] * 10}}

        def after_tool(self, ev):
            return {"result": ToolResult(ev["result"].output + "!", False)}

    t = RecordingTransport(openai_calls(("c1", "echo", {"x": 4})), openai_text("ok"))
    r = await client(t, hooks=Hooks()).run("go", kit(make_tool("echo", echo)))
    assert r.tool_calls == [{"name": "echo", "args": {"x": 40}, "output": "echo 40!", "is_error": False,
                             "metadata": None}]
    assert t.payloads[1]["messages"][-1] == {"role": "tool", "tool_call_id": "c1", "content": "echo 40!"}


async def test_before_tool_short_circuit_skips_execute_and_after_tool_but_emits_metric():
    ran, metrics = [], []

    async def tool_fn(args, ctx):
        ran.append(1)
        return ToolResult("real", False)

    hooks = {"before_tool": lambda ev: {"result": ToolResult("denied", True)},
             "after_tool": lambda ev: ran.append("after")}
    t = RecordingTransport(openai_calls(("c1", "t", {})), openai_text("ok"))
    r = await client(t, hooks=hooks, on_metric=metrics.append).run("go", kit(make_tool("t", tool_fn)))
    assert ran == [] and r.tool_calls[0]["output"] == "denied" and r.tool_calls[0]["is_error"] is True
    tool_events = [e for e in metrics if e["event"] == "tool"]
    assert len(tool_events) == 1 and tool_events[0]["is_error"] is True and "pending" not in tool_events[0]
    assert set(tool_events[0]) == {"event", "tool", "source", "is_error", "ms", "model"}


async def test_before_llm_can_replace_messages_and_empty_tools_omit_keys():
    def before_llm(ev):
        assert ev["tools"] and ev["turn"] == 0
        return {"messages": [{"role": "user", "content": "replaced"}], "tools": []}

    t = RecordingTransport(openai_text("ok"))
    r = await client(t, hooks={"before_llm": before_llm}).run("orig", kit(make_tool("echo", echo)))
    assert t.payloads[0] == {"model": "m", "messages": [{"role": "user", "content": "replaced"}]}
    assert r.messages == [{"role": "user", "content": "replaced"}, {"role": "assistant", "content": "ok"}]


async def test_without_toolkit_no_tools_keys_and_calls_get_unknown_tool():
    t = RecordingTransport(openai_calls(("c1", "ghost", {})), openai_text("ok"))
    r = await client(t).run("go")
    assert list(t.payloads[0]) == ["model", "messages"]
    assert r.tool_calls[0]["output"] == "unknown tool: ghost" and r.tool_calls[0]["is_error"] is True


async def test_request_params_merge_then_body_transform_and_forbidden_keys_warn_once(caplog):
    seen = []

    def body_transform(body):
        seen.append(dict(body))
        body["in_place"] = True
        return None

    t = RecordingTransport(openai_calls(("c", "echo", {})), openai_text("ok"))
    c = client(t, request_params={"temperature": 0.1, "model": "override", "messages": [], "stream": True},
               body_transform=body_transform)
    with caplog.at_level(logging.WARNING, logger="toolnexus"):
        await c.run("go", kit(make_tool("echo", echo)))
    assert [p["model"] for p in t.payloads] == ["override", "override"]
    assert all(p["temperature"] == 0.1 and p["in_place"] is True and "stream" not in p for p in t.payloads)
    assert list(seen[0]) == ["model", "messages", "tools", "tool_choice", "temperature"]
    lines = [r.getMessage() for r in caplog.records]
    assert lines == ['[toolnexus] request_params key "messages" is not allowed — ignored (use body_transform)',
                     '[toolnexus] request_params key "stream" is not allowed — ignored (use body_transform)']


async def test_body_transform_return_value_replaces_body():
    t = RecordingTransport(openai_text("ok"))
    await client(t, body_transform=lambda b: {"model": b["model"], "messages": b["messages"], "x": 1}).run("go")
    assert t.payloads[0] == {"model": "m", "messages": [{"role": "user", "content": "go"}], "x": 1}


# -- suspension (suspension.md §5) ---------------------------------------------------------------


def suspending(name, prompt, outcome="ok", log=None):
    async def fn(args, ctx):
        if log is not None:
            log.append((name, None if ctx is None else ctx.answer.id))
        if ctx is not None and ctx.answer is not None:
            if outcome == "again":
                return pending(kind="input", prompt="again?")
            return ToolResult(f"{name} resolved with {ctx.answer.data}", False)
        return pending(kind="approval", prompt=prompt, id=f"req-{name}")

    return make_tool(name, fn)


async def test_wait_for_resolves_suspensions_serially_in_call_order():
    order, metrics = [], []
    gate = asyncio.Event()

    async def wait_for(request):
        order.append(("wait", request.id))
        if request.id == "req-a":
            gate.set()
        return Answer(id=request.id, ok=True, data={"v": request.id})

    t = RecordingTransport(openai_calls(("c1", "a", {}), ("c2", "b", {})), openai_text("ok"))
    c = client(t, wait_for=wait_for, on_metric=metrics.append,
               hooks={"after_tool": lambda ev: order.append(("after", ev["name"]))})
    r = await c.run("go", kit(suspending("a", "A?", log=order), suspending("b", "B?", log=order)))
    assert order[:2] in ([("a", None), ("b", None)], [("b", None), ("a", None)])
    assert order[2:] == [("wait", "req-a"), ("a", "req-a"), ("after", "a"), ("wait", "req-b"), ("b", "req-b"),
                         ("after", "b")]
    assert [x["output"] for x in r.tool_calls] == ["a resolved with {'v': 'req-a'}", "b resolved with {'v': 'req-b'}"]
    tool_events = [e for e in metrics if e["event"] == "tool"]
    assert [e.get("pending") for e in tool_events] == [True, True, None, None]


@pytest.mark.parametrize("answer", [None, Answer(id="req-a", ok=False, reason="declined")])
async def test_declined_or_missing_answer_gives_pinned_error_without_retry(answer):
    log = []
    t = RecordingTransport(openai_calls(("c1", "a", {})), openai_text("ok"))
    r = await client(t, wait_for=lambda req: answer).run("go", kit(suspending("a", "Proceed?", log=log)))
    assert r.tool_calls[0]["output"] == "declined/expired: Proceed?" and r.tool_calls[0]["is_error"] is True
    assert log == [("a", None)]


async def test_resuspending_retry_becomes_unresolved():
    t = RecordingTransport(openai_calls(("c1", "a", {})), openai_text("ok"))
    r = await client(t, wait_for=lambda req: Answer(id=req.id, ok=True)).run(
        "go", kit(suspending("a", "Proceed?", outcome="again")))
    assert r.tool_calls[0]["output"] == "unresolved: Proceed?"


async def test_before_tool_pending_short_circuit_resolves_by_running_the_real_tool():
    calls = []

    async def real(args, ctx):
        calls.append(ctx.answer.ok if ctx else None)
        return ToolResult("ran", False)

    gate = {"before_tool": lambda ev: {"result": pending(kind="approval", prompt="allow?")}}
    t = RecordingTransport(openai_calls(("c1", "danger", {})), openai_text("ok"))
    r = await client(t, hooks=gate, wait_for=lambda req: Answer(id=req.id, ok=True)).run(
        "go", kit(make_tool("danger", real)))
    assert calls == [True] and r.tool_calls[0]["output"] == "ran"


async def test_durable_halt_keeps_earlier_results_and_drops_later_calls_openai():
    ran = []

    async def plain(args, ctx):
        ran.append(args["n"])
        return ToolResult(f"plain {args['n']}", False)

    t = RecordingTransport(openai_calls(("c1", "plain", {"n": 1}), ("c2", "gate", {}), ("c3", "plain", {"n": 3})))
    r = await client(t).run("go", kit(make_tool("plain", plain), suspending("gate", "May I?")))
    assert sorted(ran) == [1, 3]
    assert r.messages[-2:] == [{"role": "tool", "tool_call_id": "c1", "content": "plain 1"},
                               {"role": "tool", "tool_call_id": "c2", "content": "May I?"}]
    assert [x["name"] for x in r.tool_calls] == ["plain", "gate"]
    assert (r.status, r.pending.id, r.text, r.tool_call_count) == ("pending", "req-gate", "May I?", 2)


async def test_durable_halt_anthropic_placeholder_shares_the_user_message():
    async def plain(args, ctx):
        return ToolResult("plain", False)

    t = RecordingTransport(anthropic_calls(("u1", "plain", {}), ("u2", "gate", {})))
    r = await client(t, style="anthropic").run("go", kit(make_tool("plain", plain), suspending("gate", "May I?")))
    assert r.messages[-1] == {"role": "user", "content": [
        {"type": "tool_result", "tool_use_id": "u1", "content": "plain", "is_error": False},
        {"type": "tool_result", "tool_use_id": "u2", "content": "May I?", "is_error": True}]}
    assert r.status == "pending"


async def test_pending_url_is_not_part_of_placeholder():
    async def login(args, ctx):
        return pending(kind="authorization", prompt="Log in", url="https://auth.example/authorize")

    t = RecordingTransport(openai_calls(("c1", "login", {})))
    r = await client(t).run("go", kit(make_tool("login", login)))
    assert r.messages[-1]["content"] == "Log in" and r.text == "Log in"


@pytest.mark.parametrize("style", ["openai", "anthropic"])
async def test_unbalanced_trailing_turn_is_balanced_before_first_call(style):
    t = RecordingTransport(openai_calls(("c1", "plain", {}), ("c2", "gate", {}), ("c3", "plain", {}))
                           if style == "openai" else
                           anthropic_calls(("c1", "plain", {}), ("c2", "gate", {}), ("c3", "plain", {})),
                           openai_text("fine") if style == "openai" else anthropic_text("fine"))
    c = client(t, style=style)
    tk = kit(make_tool("plain", echo), suspending("gate", "May I?"))
    halted = await c.ask("go", tk, id="conv")
    assert halted.status == "pending"
    r = await c.ask("never mind", tk, id="conv")
    assert r.text == "fine"
    sent = t.payloads[1]["messages"]
    if style == "openai":
        assert [m.get("tool_call_id") for m in sent if m["role"] == "tool"] == ["c1", "c2", "c3"]
        assert sent[-2] == {"role": "tool", "tool_call_id": "c3", "content": "no result supplied on resume for plain"}
        assert sent[-1] == {"role": "user", "content": "never mind"}
    else:
        results = sent[-2]["content"]
        assert [b["tool_use_id"] for b in results] == ["c1", "c2", "c3"]
        assert results[-1] == {"type": "tool_result", "tool_use_id": "c3",
                               "content": "no result supplied on resume for plain", "is_error": True}
    balanced = list(r.messages)
    t.replies.append(openai_text("again") if style == "openai" else anthropic_text("again"))
    await c.run("more", tk, history=balanced)
    assert t.payloads[2]["messages"][: len(balanced)] == balanced


# -- memory --------------------------------------------------------------------------------------


async def test_ask_with_id_persists_and_continues():
    t = RecordingTransport(openai_text("one"), openai_text("two"))
    c = client(t)
    await c.ask("first", id="chat")
    r = await c.ask("second", id="chat")
    assert [m["content"] for m in r.messages] == ["first", "one", "second", "two"]
    assert await c.conversation_store.get("chat") == r.messages
    assert c.conversation_store is c.store


async def test_concurrent_asks_on_one_id_lose_no_turn():
    arrivals = []

    class YieldingTransport:
        async def post(self, url, headers, payload, timeout):
            arrivals.append(len(payload["messages"]))
            await asyncio.sleep(0)  # a real await point: without the per-id lock the other ask runs here
            return openai_text(f"reply{len(arrivals)}")

    c = client(YieldingTransport())
    await asyncio.gather(c.ask("a", id="same"), c.ask("b", id="same"))
    stored = await c.store.get("same")
    assert len(stored) == 4 and arrivals == [1, 3]


async def test_conversation_send_and_reset():
    t = RecordingTransport(openai_text("one"), openai_text("two"), openai_text("three"))
    conv = client(t).conversation()
    await conv.send("a")
    r = await conv.send("b")
    assert len(r.messages) == 4 and conv.messages is r.messages
    conv.reset()
    await conv.send("c")
    assert t.payloads[2]["messages"] == [{"role": "user", "content": "c"}]


# -- metrics -------------------------------------------------------------------------------------


async def test_metric_events_carry_pinned_keys():
    events = []
    t = RecordingTransport(openai_calls(("c", "echo", {})), openai_text("ok"))
    await client(t, on_metric=events.append).run("go", kit(make_tool("echo", echo, source="custom")))
    assert [e["event"] for e in events] == ["llm", "tool", "llm", "run"]
    assert set(events[0]) == {"event", "model", "status", "ms", "prompt_tokens", "completion_tokens", "attempts"}
    assert (events[0]["status"], events[0]["prompt_tokens"], events[0]["attempts"]) == ("ok", 6, 1)
    assert events[1]["source"] == "custom" and isinstance(events[1]["ms"], float)
    assert {k: events[3][k] for k in ("model", "turns", "tool_calls", "total_tokens")} == {
        "model": "m", "turns": 2, "tool_calls": 1, "total_tokens": 12}
    assert "error" not in events[3]


async def test_raising_on_metric_does_not_fail_the_run(caplog):
    def sink(ev):
        raise RuntimeError("sink down")

    t = RecordingTransport(openai_text("ok"))
    c = client(t, on_metric=sink)
    with caplog.at_level(logging.WARNING, logger="toolnexus"):
        r = await c.run("go")
    assert r.text == "ok"
    assert [r.getMessage() for r in caplog.records] == [
        "[toolnexus] on_metric raised RuntimeError: sink down — event dropped for this sink"]
    assert 'toolnexus_llm_requests_total{model="m",status="ok"} 1' in c.metrics()


async def test_empty_metrics_text_is_byte_exact():
    assert client(RecordingTransport()).metrics() == (
        "# HELP toolnexus_llm_requests_total Total LLM requests.\n"
        "# TYPE toolnexus_llm_requests_total counter\n"
        "# HELP toolnexus_llm_tokens_total Total tokens, by type.\n"
        "# TYPE toolnexus_llm_tokens_total counter\n"
        "# HELP toolnexus_llm_request_duration_seconds LLM request duration in seconds.\n"
        "# TYPE toolnexus_llm_request_duration_seconds histogram\n"
        "# HELP toolnexus_tool_calls_total Total tool calls.\n"
        "# TYPE toolnexus_tool_calls_total counter\n"
        "# HELP toolnexus_tool_duration_seconds Tool execution duration in seconds.\n"
        "# TYPE toolnexus_tool_duration_seconds histogram\n"
        "# HELP toolnexus_run_errors_total Total run errors.\n"
        "# TYPE toolnexus_run_errors_total counter\n")


async def test_run_result_is_plain_dataclass_with_defaults():
    r = RunResult(text="", messages=[])
    assert (r.tool_calls, r.tool_call_count, r.turns, r.model, r.status, r.limit, r.pending) == (
        [], 0, 0, "", "done", None, None)
    assert r.usage == {"prompt_tokens": 0, "completion_tokens": 0, "total_tokens": 0}


async def test_transport_timeout_is_seconds_left_or_120():
    t = RecordingTransport(openai_text("a"), openai_text("b"))
    await client(t).run("x")
    await client(t, timeout_ms=5000).run("x")
    assert t.calls[0][2] == 120.0 and 4.0 < t.calls[1][2] <= 5.0


async def test_resolve_concurrently_lets_a_host_collect_all_requests_first():
    collected = []
    all_in = asyncio.Event()

    async def wait_for(request):
        collected.append(request.id)
        if len(collected) == 2:
            all_in.set()
        await all_in.wait()  # serial resolution would deadlock here
        return Answer(id=request.id, ok=True, data={"v": request.id})

    t = RecordingTransport(openai_calls(("c1", "a", {}), ("c2", "b", {})), openai_text("ok"))
    c = client(t, wait_for=wait_for, resolve_concurrently=True)
    r = await asyncio.wait_for(c.run("go", kit(suspending("a", "A?"), suspending("b", "B?"))), 5)
    assert sorted(collected) == ["req-a", "req-b"]
    assert [x["output"] for x in r.tool_calls] == ["a resolved with {'v': 'req-a'}", "b resolved with {'v': 'req-b'}"]


async def test_relay_calls_are_stamped_and_merged_at_a_durable_halt():
    from toolnexus.relay import relay_tool

    t = RecordingTransport(openai_calls(("c1", "lookup", '{"q":  "a"}'), ("c2", "lookup", '{"q": "b"}')))
    r = await client(t).run("go", kit(relay_tool("lookup", "host-side lookup")))
    assert r.status == "pending" and r.pending.kind == "tool_call"
    assert r.pending.data["calls"] == [
        {"id": "c1", "name": "lookup", "input": {"q": "a"}, "arguments": '{"q":  "a"}'},
        {"id": "c2", "name": "lookup", "input": {"q": "b"}, "arguments": '{"q": "b"}'}]
    assert r.messages[-1] == {"role": "tool", "tool_call_id": "c1",
                              "content": "relay tool call lookup to the caller for execution"}
