"""The harness loop pieces: completion gate, guardrails, todo verifier, spec helpers, `Loop`."""

from __future__ import annotations

import asyncio
import inspect

import pytest

from support.mock_llm import MockLLM
from toolnexus.agents import Budget, agent
from toolnexus.agents._loop import (
    LOOP_UNSUPPORTED_FIELDS,
    Completion,
    GuardedHooks,
    Loop,
    Outcome,
    RunOptions,
    Verdict,
    all_todos_done,
    guarded_hooks,
    harness,
    loop_unsupported,
    resolve_hooks,
    run_gated,
)
from toolnexus.client._result import RunResult
from toolnexus.native import define_tool
from toolnexus.toolkit import create_toolkit
from toolnexus.types import ToolResult

GUARD_TYPE_ERROR = (
    'guardrail returned {}: a guardrail must return a str synchronously ("" or "allow" to permit, any other '
    "string to deny). Do asynchronous work in hooks.before_tool, which is awaited."
)


def result(text="answer", status="done", turns=1, tokens=40, calls=(), limit=None):
    return RunResult(
        text=text,
        messages=[],
        tool_calls=[dict(c) for c in calls],
        tool_call_count=len(calls),
        turns=turns,
        usage={"prompt_tokens": tokens - 10, "completion_tokens": 10, "total_tokens": tokens},
        status=status,
        limit=limit,
    )


class ScriptedAsk:
    """The `ask` seam: hands out prepared results and records every prompt it was sent."""

    def __init__(self, *results):
        self.results = list(results)
        self.prompts: list[str] = []

    async def __call__(self, prompt):
        self.prompts.append(prompt)
        return self.results.pop(0)


class Verifier:
    def __init__(self, *verdicts):
        self.verdicts = list(verdicts)
        self.seen = []

    def __call__(self, r):
        self.seen.append(r.text)
        return self.verdicts.pop(0)


# --------------------------------------------------------------------------- run_gated


async def test_without_completion_run_gated_is_one_plain_ask():
    r = result()
    ask = ScriptedAsk(r)
    assert await run_gated(ask, "do it", None) is r
    assert ask.prompts == ["do it"]
    assert (r.turns, r.usage["total_tokens"]) == (1, 40)


@pytest.mark.parametrize("attempts", [0, -1, 1.5, True, "2", None])
async def test_invalid_max_attempts_is_rejected(attempts):
    with pytest.raises(ValueError) as e:
        await run_gated(ScriptedAsk(result()), "p", Completion(verify=lambda r: Verdict(True), max_attempts=attempts))
    assert str(e.value) == "toolnexus: Completion.max_attempts must be an integer >= 1"


async def test_default_completion_must_set_max_attempts():
    with pytest.raises(ValueError, match=r"^toolnexus: Completion.max_attempts must be an integer >= 1$"):
        await run_gated(ScriptedAsk(result()), "p", Completion(verify=lambda r: Verdict(True)))


async def test_missing_verify_is_rejected():
    with pytest.raises(ValueError) as e:
        await run_gated(ScriptedAsk(result()), "p", Completion(verify=None, max_attempts=2))
    assert str(e.value) == "toolnexus: Completion.verify is required"


async def test_failed_verification_reasks_with_the_reason_and_counts_every_attempt():
    calls1 = [{"name": "a", "args": {}, "output": "1", "is_error": False, "metadata": None}]
    calls2 = [{"name": "b", "args": {}, "output": "2", "is_error": False, "metadata": None}]
    ask = ScriptedAsk(result("first", calls=calls1), result("second", calls=calls2, turns=2))
    verify = Verifier(Verdict(False, "tests fail"), Verdict(True))
    r = await run_gated(ask, "build it", Completion(verify=verify, max_attempts=3))
    assert ask.prompts == ["build it", "Your work did not verify: tests fail. Fix it and finish."]
    assert verify.seen == ["first", "second"]
    assert r.text == "second" and r.status == "done"
    # beyond #9: totals are every attempt's, so 2 calls x 40 tokens and 1 + 2 turns
    assert r.turns == 3
    assert r.usage == {"prompt_tokens": 60, "completion_tokens": 20, "total_tokens": 80}
    assert [c["name"] for c in r.tool_calls] == ["a", "b"]
    assert r.tool_call_count == 2


async def test_exhausted_attempts_end_incomplete_with_completion_limit():
    ask = ScriptedAsk(result(), result(), result())
    verify = Verifier(Verdict(False, "r1"), Verdict(False, "r2"), Verdict(False, "r3"))
    r = await run_gated(ask, "p", Completion(verify=verify, max_attempts=3))
    assert (r.status, r.limit, r.text) == ("incomplete", "completion", "completion.verify failed 3x: r3")
    assert r.usage["total_tokens"] == 120 and r.turns == 3
    assert ask.prompts[1:] == ["Your work did not verify: r1. Fix it and finish.",
                               "Your work did not verify: r2. Fix it and finish."]


async def test_empty_reason_reads_unspecified():
    r = await run_gated(ScriptedAsk(result(), result()), "p",
                        Completion(verify=Verifier(Verdict(False), Verdict(False, "")), max_attempts=2))
    assert r.text == "completion.verify failed 2x: unspecified"


async def test_async_verify_and_bool_verdicts_are_accepted():
    async def verify(r):
        return r.text == "good"

    ask = ScriptedAsk(result("bad"), result("good"))
    r = await run_gated(ask, "p", Completion(verify=verify, max_attempts=2))
    assert r.text == "good" and ask.prompts[1] == "Your work did not verify: unspecified. Fix it and finish."


async def test_verify_returning_garbage_is_a_type_error():
    with pytest.raises(TypeError, match="Completion.verify must return a Verdict, got str"):
        await run_gated(ScriptedAsk(result()), "p", Completion(verify=lambda r: "yes", max_attempts=1))


async def test_non_done_first_attempt_is_returned_unjudged_and_unannotated():
    verify = Verifier()
    first = result("hit maxTurns", status="incomplete", limit="maxTurns")
    r = await run_gated(ScriptedAsk(first), "p", Completion(verify=verify, max_attempts=3))
    assert r is first and r.text == "hit maxTurns" and verify.seen == []


async def test_budget_stop_mid_retry_is_annotated_with_the_failed_verification():
    ask = ScriptedAsk(result("draft"), result("out of turns", status="incomplete", limit="maxTurns"))
    r = await run_gated(ask, "p", Completion(verify=Verifier(Verdict(False, "no tests")), max_attempts=3))
    assert r.status == "incomplete" and r.limit == "maxTurns"
    assert r.text == "out of turns [while verifying: attempt 2 last failed: no tests]"
    assert r.usage["total_tokens"] == 80


async def test_pending_mid_retry_is_neither_judged_nor_annotated():
    verify = Verifier(Verdict(False, "no tests"))
    ask = ScriptedAsk(result("draft"), result("approve?", status="pending"))
    r = await run_gated(ask, "p", Completion(verify=verify, max_attempts=3))
    assert (r.status, r.text) == ("pending", "approve?")
    assert verify.seen == ["draft"]
    assert r.turns == 2


# --------------------------------------------------------------------------- all_todos_done


def todowrite(todos):
    return {"name": "todowrite", "args": {"todos": todos}, "output": "", "is_error": False,
            "metadata": {"todos": todos}}


def test_all_todos_done_reads_the_last_todowrite_call():
    open_list = [{"id": "1", "text": "write code", "completed": True},
                 {"id": "2", "text": "run tests", "completed": False},
                 {"id": "3", "text": "ship", "completed": None}]
    r = result(calls=[todowrite([{"id": "1", "text": "x", "completed": True}]),
                      {"name": "bash", "args": {}, "output": "", "is_error": False, "metadata": None},
                      todowrite(open_list)])
    assert all_todos_done(r) == Verdict(False, "2 item(s) still open: run tests; ship")
    r.tool_calls.append(todowrite([{"id": "1", "text": "x", "completed": True}]))
    assert all_todos_done(r) == Verdict(True)


def test_all_todos_done_without_a_todo_list_is_ok():
    assert all_todos_done(result()) == Verdict(True)
    bad = todowrite([])
    bad["metadata"] = {"todos": "not a list"}
    assert all_todos_done(result(calls=[bad])) == Verdict(True)
    none_meta = todowrite([])
    none_meta["metadata"] = None
    assert all_todos_done(result(calls=[none_meta])) == Verdict(True)


async def test_all_todos_done_drives_the_gate():
    ask = ScriptedAsk(result("wip", calls=[todowrite([{"id": "1", "text": "docs", "completed": False}])]),
                      result("done", calls=[todowrite([{"id": "1", "text": "docs", "completed": True}])]))
    r = await run_gated(ask, "p", Completion(verify=all_todos_done, max_attempts=2))
    assert r.text == "done"
    assert ask.prompts[1] == "Your work did not verify: 1 item(s) still open: docs. Fix it and finish."


# --------------------------------------------------------------------------- guardrails


def test_no_guardrails_returns_the_hooks_object_itself():
    hooks = {"before_llm": lambda ev: None}
    assert guarded_hooks(None, hooks) is hooks
    assert guarded_hooks([], hooks) is hooks
    assert guarded_hooks([], None) is None


async def test_first_deny_wins_and_short_circuits_the_tool():
    seen = []

    def allow(ev):
        seen.append("allow")
        return "allow"

    def deny(ev):
        seen.append("deny")
        return "no shell"

    def never(ev):
        seen.append("never")
        return "x"

    hooks = guarded_hooks([allow, deny, never], None)
    out = await hooks["before_tool"]({"name": "bash", "args": {}, "id": "c1", "turn": 0})
    assert seen == ["allow", "deny"]
    assert out == {"result": ToolResult("denied: no shell", is_error=True)}


@pytest.mark.parametrize("prior_is_async", [False, True])
async def test_when_all_permit_the_prior_before_tool_runs(prior_is_async):
    events = []

    def sync_prior(ev):
        events.append(ev["name"])
        return {"args": {"rewritten": True}}

    async def async_prior(ev):
        return sync_prior(ev)

    original = {"before_tool": async_prior if prior_is_async else sync_prior, "after_llm": print}
    hooks = guarded_hooks([lambda ev: None, lambda ev: "", lambda ev: "allow"], original)
    assert isinstance(hooks, dict) and hooks is not original
    assert hooks["after_llm"] is print
    assert original["before_tool"] in (sync_prior, async_prior)  # caller's mapping untouched
    assert await hooks["before_tool"]({"name": "read", "args": {}, "id": "c", "turn": 0}) == {
        "args": {"rewritten": True}}
    assert events == ["read"]


async def test_hooks_object_is_copied_including_class_hook_methods():
    class Tracer:
        def __init__(self):
            self.label = "t"

        def before_llm(self, ev):
            return None

    tracer = Tracer()
    hooks = guarded_hooks([lambda ev: None], tracer)
    assert hooks["label"] == "t"
    assert hooks["before_llm"] == tracer.before_llm
    assert await hooks["before_tool"]({"name": "x"}) is None


async def test_coroutine_verdict_is_a_pinned_type_error_and_is_closed():
    made = []

    async def check():
        return "allow"

    def async_rail(ev):
        made.append(check())
        return made[-1]

    hooks = guarded_hooks([async_rail], None)
    with pytest.raises(TypeError) as e:
        await hooks["before_tool"]({"name": "x"})
    assert str(e.value) == GUARD_TYPE_ERROR.format("a coroutine")
    assert inspect.getcoroutinestate(made[0]) == inspect.CORO_CLOSED


async def test_non_string_verdict_names_its_type():
    hooks = guarded_hooks([lambda ev: 0], None)
    with pytest.raises(TypeError) as e:
        await hooks["before_tool"]({"name": "x"})
    assert str(e.value) == GUARD_TYPE_ERROR.format("int")


async def test_future_verdict_is_cancelled():
    fut = asyncio.get_running_loop().create_future()
    hooks = guarded_hooks([lambda ev: fut], None)
    with pytest.raises(TypeError) as e:
        await hooks["before_tool"]({"name": "x"})
    assert str(e.value) == GUARD_TYPE_ERROR.format("Future")
    assert fut.cancelled()


def test_guardrails_only_compose_over_the_runtime_hooks():
    """Beyond #12: a def with only guardrails keeps a runtime-wide compactor/tracer."""

    def runtime_compactor(ev):
        return None

    runtime_hooks = {"before_llm": runtime_compactor}
    def_hooks = guarded_hooks([lambda ev: None], None)
    assert isinstance(def_hooks, GuardedHooks)
    resolved = resolve_hooks(def_hooks, runtime_hooks)
    assert resolved["before_llm"] is runtime_compactor
    assert callable(resolved["before_tool"])
    # a def with its own hooks still replaces (resolution never merges)
    own = guarded_hooks([lambda ev: None], {"after_llm": print})
    assert resolve_hooks(own, runtime_hooks) is own
    assert resolve_hooks(None, runtime_hooks) is runtime_hooks
    assert resolve_hooks(def_hooks, None) is def_hooks
    plain = {"after_tool": print}
    assert resolve_hooks(plain, runtime_hooks) is plain


async def test_composed_guardrails_still_deny_before_the_runtime_before_tool():
    calls = []
    runtime_hooks = {"before_tool": lambda ev: calls.append(ev["name"])}
    resolved = resolve_hooks(guarded_hooks([lambda ev: "nope" if ev["name"] == "rm" else None], None), runtime_hooks)
    assert (await resolved["before_tool"]({"name": "rm"}))["result"].output == "denied: nope"
    assert await resolved["before_tool"]({"name": "ls"}) is None
    assert calls == ["ls"]


# --------------------------------------------------------------------------- spec helpers


def test_harness_is_the_identity_on_agent_specs():
    spec = harness(does="x", soul="s", model="m")
    assert spec == {"does": "x", "soul": "s", "model": "m"}
    assert type(spec) is dict


def test_loop_unsupported_lists_truthy_fields_in_pinned_order():
    assert LOOP_UNSUPPORTED_FIELDS == ("tools", "team", "waitFor", "onMetric")
    assert loop_unsupported({}) == []
    assert loop_unsupported({"uses": {"tools": []}, "team": [], "wait_for": None}) == []
    full = {"on_metric": print, "wait_for": print, "team": ["a"], "uses": {"tools": ["t"]}}
    assert loop_unsupported(full) == ["tools", "team", "waitFor", "onMetric"]
    assert loop_unsupported({"waitFor": print, "uses": {"other": 1}}) == ["waitFor"]

    class Spec:
        uses = {"tools": ["t"]}
        team = []
        on_metric = print

    assert loop_unsupported(Spec()) == ["tools", "onMetric"]


def test_outcome_and_run_options_defaults():
    assert Outcome() == Outcome(text="", status="done", stopped_by="", attempts=0, turns=0, result=None)
    assert RunOptions().model == ""


# --------------------------------------------------------------------------- Loop on a real client

_SCRIPTS = {
    "style": "openai",
    "usagePerCall": {"prompt_tokens": 30, "completion_tokens": 10, "total_tokens": 40},
    "scripts": {
        # answers "draft" first, "fixed" once the gate has complained
        "m-gate": [{"always": True,
                    "text": "<if last user message contains 'did not verify' then 'fixed' else 'draft'>"}],
        "m-shell": [{"whenToolMsgs": 0, "toolCalls": [{"name": "shell", "args": {"cmd": "rm -rf /"}}]},
                    {"whenToolMsgs": ">=1", "text": "tool said: <last tool msg content>"}],
        "m-loopy": [{"always": True, "toolCalls": [{"name": "shell", "args": {"cmd": "ls"}}]}],
        "per-call": [{"always": True, "text": "per-call model answered"}],
    },
}
OPTIONS = {"base_url": "http://mock.local", "style": "openai", "api_key": "unused", "retries": 0}


@pytest.fixture
def mock():
    return MockLLM(_SCRIPTS)


@pytest.fixture
async def shell_kit():
    ran: list[str] = []

    async def shell(cmd: str) -> str:
        """Run a command."""
        ran.append(cmd)
        return f"ran {cmd}"

    kit = await create_toolkit(builtins=False, extra_tools=[define_tool(shell, name="shell")])
    kit.ran = ran
    return kit


def _gate(ok_text: str, max_attempts: int = 2) -> Completion:
    return Completion(verify=lambda r: Verdict(r.text == ok_text, "says draft"), max_attempts=max_attempts)


async def test_loop_soul_becomes_system_prompt_and_spec_model_applies(mock):
    loop = Loop(agent("a", does="x", soul="You are A.", model="m-gate"), {**OPTIONS, "http_transport": mock}, None)
    assert loop.status == "idle" and loop.turns == 0
    out = await loop.run("hello")
    assert out == Outcome(text="draft", status="done", stopped_by="", attempts=1, turns=1, result=out.result)
    assert mock.requests[0]["model"] == "m-gate"
    assert mock.requests[0]["messages"][0] == {"role": "system", "content": "You are A."}
    assert loop.status == "idle" and loop.turns == 1


async def test_loop_caller_settings_win_over_the_spec(mock):
    spec = agent("a", does="x", soul="spec soul", model="m-loopy")
    loop = Loop(spec, {**OPTIONS, "http_transport": mock, "model": "m-gate", "system_prompt": "caller soul"}, None)
    await loop.run("hi")
    assert mock.requests[0]["model"] == "m-gate"
    assert mock.requests[0]["messages"][0]["content"] == "caller soul"


async def test_loop_inherit_model_takes_the_spec_model_and_soul_file_is_read(mock, tmp_path):
    (tmp_path / "soul.md").write_text("file soul", encoding="utf-8")
    spec = agent("a", does="x", soul_file=str(tmp_path / "soul.md"), model="m-gate")
    await Loop(spec, {**OPTIONS, "http_transport": mock, "model": "inherit"}, None).run("hi")
    assert mock.requests[0]["model"] == "m-gate"
    assert mock.requests[0]["messages"][0]["content"] == "file soul"


async def test_loop_without_any_model_is_a_clear_error(mock):
    loop = Loop(harness(does="x"), {**OPTIONS, "http_transport": mock}, None)
    with pytest.raises(ValueError, match="Loop needs a model"):
        await loop.run("hi")
    assert loop.status == "error" and isinstance(loop.error, ValueError)


async def test_per_call_model_goes_to_request_params(mock):
    loop = Loop(agent("a", does="x", model="m-gate"), {**OPTIONS, "http_transport": mock}, None)
    out = await loop.run("hi", model="per-call")
    assert out.text == "per-call model answered"
    assert mock.requests[0]["model"] == "per-call"
    out = await loop.run("hi", RunOptions(model="per-call"))
    assert out.text == "per-call model answered"
    assert (await loop.run("hi")).text == "draft"  # the per-call model applied to that run only


async def test_completion_threads_history_across_attempts_of_one_run_only(mock):
    spec = agent("a", does="x", soul="S", model="m-gate", completion=_gate("fixed"))
    loop = Loop(spec, {**OPTIONS, "http_transport": mock}, None)
    out = await loop.run("write it")
    assert (out.text, out.status, out.attempts, out.turns) == ("fixed", "done", 2, 2)
    second = mock.requests[1]["messages"]
    assert [m["role"] for m in second] == ["system", "user", "assistant", "user"]
    assert second[-1]["content"] == "Your work did not verify: says draft. Fix it and finish."
    assert out.result.usage["total_tokens"] == 80  # both attempts counted
    await loop.run("again")
    assert [m["role"] for m in mock.requests[2]["messages"]] == ["system", "user"]  # fresh history
    assert loop.turns == 4


async def test_completion_exhausted_stops_by_the_gate_text(mock):
    spec = agent("a", does="x", model="m-gate", completion=_gate("never", max_attempts=2))
    loop = Loop(spec, {**OPTIONS, "http_transport": mock}, None)
    out = await loop.run("go")
    assert (out.status, out.attempts) == ("incomplete", 2)
    assert out.text == out.stopped_by == "completion.verify failed 2x: says draft"
    assert loop.status == "incomplete"


async def test_budget_max_turns_fills_in_and_a_turn_stop_is_reported(mock, shell_kit):
    spec = agent("a", does="x", model="m-loopy", budget=Budget(max_turns=2))
    loop = Loop(spec, {**OPTIONS, "http_transport": mock}, shell_kit)
    out = await loop.run("go")
    assert (out.status, out.stopped_by, out.turns) == ("incomplete", "run reported incomplete", 2)
    assert len(mock.requests) == 2 and loop.status == "incomplete"
    explicit = Loop(spec, {**OPTIONS, "http_transport": mock, "max_turns": 3}, shell_kit)
    assert (await explicit.run("go")).turns == 3


async def test_guardrails_deny_tools_and_compose_over_caller_hooks(mock, shell_kit):
    seen_llm: list[int] = []
    opts = {**OPTIONS, "http_transport": mock, "hooks": {"before_llm": lambda ev: seen_llm.append(ev["turn"])}}
    spec = agent("a", does="x", model="m-shell", guardrails=[lambda ev: "no rm" if "rm" in ev["args"]["cmd"] else None])
    out = await Loop(spec, opts, shell_kit).run("clean up")
    assert out.text == "tool said: denied: no rm"
    assert shell_kit.ran == []
    assert seen_llm == [0, 1]  # the caller's hooks survived the guardrails


async def test_an_exception_sets_error_status_and_propagates(mock):
    loop = Loop(agent("a", does="x", model="no-such-script"), {**OPTIONS, "http_transport": mock}, None)
    with pytest.raises(LookupError, match="no script for model"):
        await loop.run("hi")
    assert loop.status == "error" and isinstance(loop.error, LookupError)


async def test_a_second_concurrent_run_is_refused():
    release = asyncio.Event()
    entered = asyncio.Event()

    async def slow_verify(r):
        entered.set()
        await release.wait()
        return Verdict(True)

    mock = MockLLM(_SCRIPTS)
    loop = Loop(agent("a", does="x", model="m-gate", completion=Completion(verify=slow_verify, max_attempts=1)),
                {**OPTIONS, "http_transport": mock}, None)
    first = asyncio.create_task(loop.run("one"))
    await entered.wait()
    assert loop.status == "running"
    with pytest.raises(RuntimeError, match="already running"):
        await loop.run("two")
    release.set()
    assert (await first).text == "draft"


def test_loop_warns_once_about_fields_it_ignores(caplog):
    helper = agent("helper", does="h")
    Loop(agent("warned", does="x", team=[helper], on_metric=print), OPTIONS, None)
    Loop(agent("warned", does="x", team=[helper], on_metric=print), OPTIONS, None)
    lines = [r.getMessage() for r in caplog.records if "warned" in r.getMessage()]
    assert lines == ["[toolnexus] Loop runs warned on a single client and ignores: team, onMetric "
                     "(use Agent.run for those)"]


def test_agent_loop_builds_a_loop():
    a = agent("a", does="x")
    loop = a.loop(OPTIONS, None)
    assert isinstance(loop, Loop) and loop.status == "idle"


# --------------------------------------------------------------------------- through the runtime


async def test_runtime_counts_every_gate_attempt(mock):
    """Beyond #9: an agent that verifies on attempt 2 reports both attempts' turns and tokens."""
    a = agent("a", does="x", model="m-gate", completion=_gate("fixed"))
    r = await a.run("go", transport=mock)
    assert (r.status, r.text) == ("done", "fixed")
    assert (r.turns, r.total_tokens) == (2, 80)


async def test_agent_guardrails_keep_the_runtime_wide_hooks(mock):
    """Beyond #12: an agent with only guardrails keeps the runtime's before_llm (e.g. a compactor)."""
    seen_llm: list[int] = []
    ran: list[str] = []

    async def shell(cmd: str) -> str:
        """Run a command."""
        ran.append(cmd)
        return "ran"

    a = agent("a", does="x", model="m-shell", uses={"tools": [define_tool(shell, name="shell")]},
              guardrails=[lambda ev: "no rm"])
    r = await a.run("clean", transport=mock, hooks={"before_llm": lambda ev: seen_llm.append(ev["turn"])})
    assert r.text == "tool said: denied: no rm"
    assert ran == []
    assert seen_llm == [0, 1]
