"""`toolnexus run`, the installed script against a scripted model on a real loopback server.

Covers every exit code of `run` (0, 1, 3, 130), `--json`, the REPL over pipes (conversation kept,
`/reset`, errors keep it going, end of input), the REPL on a real pseudo-terminal (a suspension
prompt answered at the terminal; the progress indicator; Ctrl-C cancelling a turn and keeping the
conversation), `--verbose` tool lines, and that the API key never appears in anything the command
prints.
"""

from __future__ import annotations

import json
import os
import pty
import re
import select
import signal
import subprocess
import time
from typing import Iterator, Optional

import pytest

from support.cli_run import TOOLNEXUS, cli_env, run_cli
from support.llm_server import Hang, Json, LlmServer, openai_calls, openai_text

KEY = "sk-test-CLI-KEY-0123456789"
TOOLS = ("--no-builtins", "--tools-from", "cli_tools:TOOLS")


@pytest.fixture
def llm() -> Iterator[LlmServer]:
    with LlmServer() as server:
        yield server


def _model(llm: LlmServer) -> list[str]:
    return ["--base-url", llm.base_url + "/v1", "--model", "m-test", "--api-key", KEY]


def _no_key(*outputs: str) -> None:
    for text in outputs:
        assert KEY not in text


def test_once_prints_the_answer_and_exits_0(llm: LlmServer) -> None:
    llm.add(Json(openai_calls(("c1", "echo", {"x": "ping"}))), Json(openai_text("pong received")))
    done = run_cli("run", *TOOLS, *_model(llm), "--system", "Be brief.", "--once", "ping it")
    assert (done.returncode, done.stdout, done.stderr) == (0, "pong received\n", "")
    first = llm.requests[0].json
    assert first["model"] == "m-test" and first["messages"][0] == {"role": "system", "content": "Be brief."}
    assert [t["function"]["name"] for t in first["tools"]] == ["echo", "fail", "ask", "approve"]
    assert llm.requests[0].headers["authorization"] == f"Bearer {KEY}"
    assert llm.requests[1].json["messages"][-1]["content"] == "echo:ping"
    _no_key(done.stdout, done.stderr)


def test_verbose_shows_each_tool_call_as_it_starts_and_ends_on_stderr_only(llm: LlmServer) -> None:
    calls = Json(openai_calls(("c1", "echo", {"x": "ping"}), ("c2", "fail", {})))
    llm.add(calls, Json(openai_text("done")), calls, Json(openai_text("done")))
    done = run_cli("run", *TOOLS, *_model(llm), "--verbose", "--once", "go")
    assert (done.returncode, done.stdout) == (0, "done\n")
    lines = done.stderr.splitlines()
    assert '→ echo {"x": "ping"}' in lines and "→ fail {}" in lines
    assert any(re.fullmatch(r"← echo ok \d+ ms", line) for line in lines), done.stderr
    failed = r"← fail error \d+ ms: tool fail failed: RuntimeError: kaboom from fail"
    assert any(re.fullmatch(failed, line) for line in lines), done.stderr
    quiet = run_cli("run", *TOOLS, *_model(llm), "--once", "go")  # without --verbose: nothing on stderr
    assert (quiet.returncode, quiet.stdout, quiet.stderr) == (0, "done\n", "")


async def test_on_a_terminal_the_spinner_names_the_tool_that_is_running() -> None:
    """The live line: `⠋ running lookup… 1s` while a tool runs, back to waiting for the model after it."""
    import io

    from toolnexus import ToolResult
    from toolnexus.cli._activity import Activity
    from toolnexus.cli._common import Console
    from toolnexus.cli._interactive import Progress

    err = io.StringIO()
    console = Console(io.StringIO(), err)
    progress = Progress(console, enabled=True)
    try:
        hooks = Activity(console, progress).hooks()
        hooks["before_llm"]({})
        assert progress.label == "waiting for the model"
        hooks["after_llm"]({})
        hooks["before_tool"]({"name": "lookup", "id": "c1", "args": {"term": "x"}})
        assert progress.label == "running lookup"
        hooks["after_tool"]({"name": "lookup", "id": "c1", "args": {"term": "x"}, "result": ToolResult("ok", False)})
        assert progress.label == "waiting for the model"
    finally:
        progress.stop()  # the spinner's thread ends however the test does
    assert "→" not in err.getvalue()  # no --verbose: no tool lines, only the spinner
    quiet = Activity(Console(io.StringIO(), io.StringIO()), Progress(console, enabled=False))
    assert quiet.hooks() == {}  # no terminal and no --verbose: the client gets no hooks at all


def test_the_key_can_come_from_the_environment(llm: LlmServer) -> None:
    llm.add(Json(openai_text("from env")))
    done = run_cli("run", "--no-builtins", "--base-url", llm.base_url + "/v1", "--model", "m", "--once", "x",
                   env=cli_env(OPENAI_API_KEY=KEY))
    assert (done.returncode, done.stdout) == (0, "from env\n")
    assert llm.requests[0].headers["authorization"] == f"Bearer {KEY}"


def test_a_run_that_raises_is_error_exit_1_and_never_shows_the_key(llm: LlmServer) -> None:
    llm.add(Json({"error": {"message": f"invalid request for key {KEY}"}}, status=400))
    done = run_cli("run", *TOOLS, *_model(llm), "--once", "hi")
    assert done.returncode == 1 and done.stdout == ""
    assert done.stderr.startswith("error: ") and done.stderr.count("\n") == 1 and "400" in done.stderr
    assert "«redacted»" in done.stderr
    _no_key(done.stdout, done.stderr)


def test_a_pending_run_prints_its_text_and_exits_3(llm: LlmServer) -> None:
    llm.add(Json(openai_calls(("c1", "ask", {}))))
    done = run_cli("run", *TOOLS, *_model(llm), "--once", "greet me")
    assert (done.returncode, done.stdout, done.stderr) == (3, "What is your name?\n", "status: pending\n")


def test_json_output_for_scripts(llm: LlmServer) -> None:
    llm.add(Json(openai_calls(("c1", "approve", {}))))
    done = run_cli("run", *TOOLS, *_model(llm), "--once", "ship it", "--json")
    result = json.loads(done.stdout)
    assert done.returncode == 3 and done.stderr == ""
    assert result["status"] == "pending" and result["text"] == "Deploy to production?"
    assert result["pending"]["kind"] == "approval" and set(result["pending"]) == {
        "id", "kind", "prompt", "url", "data", "expiresAt"}
    assert result["turns"] == 1 and result["limit"] is None


def test_an_incomplete_run_exits_3(llm: LlmServer) -> None:
    llm.add(*[Json(openai_calls((f"c{i}", "echo", {"x": str(i)}))) for i in range(10)])
    done = run_cli("run", *TOOLS, *_model(llm), "--once", "loop forever")
    assert done.returncode == 3 and done.stderr == "status: incomplete\n"
    assert len(llm.requests) == 10


def _wait_arrived(llm: LlmServer) -> None:
    assert llm.arrived.wait(30), "the model request never arrived"


def test_ctrl_c_during_once_exits_130(llm: LlmServer) -> None:
    llm.add(Hang())
    proc = subprocess.Popen([TOOLNEXUS, "run", *TOOLS, *_model(llm), "--once", "wait"], env=cli_env(),
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    try:
        _wait_arrived(llm)
        proc.send_signal(signal.SIGINT)
        out, err = proc.communicate(timeout=30)
    finally:
        proc.kill()
    assert proc.returncode == 130 and "Traceback" not in err
    _no_key(out, err)


def test_ctrl_c_in_a_repl_fed_by_a_pipe_still_exits_130(llm: LlmServer) -> None:
    """Only a person at a terminal gets "Ctrl-C cancels the turn"; a script piping prompts keeps the plain exit."""
    llm.add(Hang())
    proc = subprocess.Popen([TOOLNEXUS, "run", *TOOLS, *_model(llm)], env=cli_env(), stdin=subprocess.PIPE,
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    try:
        assert proc.stdin is not None
        proc.stdin.write("wait\n")
        proc.stdin.flush()
        _wait_arrived(llm)
        proc.send_signal(signal.SIGINT)
        out, err = proc.communicate(timeout=30)
    finally:
        proc.kill()
    assert proc.returncode == 130 and "Traceback" not in err and "cancelled" not in err


def test_the_repl_keeps_the_conversation_until_reset(llm: LlmServer) -> None:
    llm.add(Json(openai_text("one")), Json(openai_text("two")), Json(openai_text("three")))
    done = run_cli("run", *TOOLS, *_model(llm), input="my name is Ada\n\n   \nwhat is it?\n/reset\nwhat is it?\nexit\n")
    assert done.returncode == 0 and done.stdout == "one\ntwo\nthree\n"
    assert done.stderr.startswith("toolnexus agent ready. Type a prompt (Ctrl-D or 'exit' to quit).\n> ")
    assert "(new conversation)" in done.stderr and "waiting for the model" not in done.stderr  # not a TTY
    users = [[m["content"] for m in r.json["messages"] if m["role"] == "user"] for r in llm.requests]
    assert users == [["my name is Ada"], ["my name is Ada", "what is it?"], ["what is it?"]]


def test_the_repl_reports_errors_and_pending_and_goes_on_then_leaves_at_end_of_input(llm: LlmServer) -> None:
    llm.add(Json({"error": {"message": "overloaded"}}, status=400), Json(openai_calls(("c1", "ask", {}))),
            Json(openai_text("still here")))
    done = run_cli("run", *TOOLS, *_model(llm), input="first\nsecond\nthird\n")
    assert done.returncode == 0
    assert done.stdout == "What is your name?\nstill here\n"
    assert "error: " in done.stderr and "status: pending" in done.stderr
    _no_key(done.stdout, done.stderr)


class Terminal:
    """A child process on a real pseudo-terminal; reads are bounded by a deadline."""

    def __init__(self, args: list[str], env: Optional[dict[str, str]] = None) -> None:
        self.master, slave = pty.openpty()
        self.proc = subprocess.Popen(args, stdin=slave, stdout=slave, stderr=slave,
                                     env=env if env is not None else cli_env(TERM="dumb"),
                                     start_new_session=True)
        os.close(slave)
        self.seen = ""

    def expect(self, text: str, timeout: float = 30) -> str:
        deadline = time.monotonic() + timeout
        while text not in self.seen:
            left = deadline - time.monotonic()
            if left <= 0:
                raise AssertionError(f"never saw {text!r}; got {self.seen[-500:]!r}")
            ready, _, _ = select.select([self.master], [], [], left)
            if ready:
                try:
                    chunk = os.read(self.master, 4096)
                except OSError:  # the child closed the terminal
                    chunk = b""
                if not chunk:
                    raise AssertionError(f"terminal closed before {text!r}; got {self.seen[-500:]!r}")
                self.seen += chunk.decode("utf-8", "replace")
        return self.seen

    def send(self, line: str) -> None:
        os.write(self.master, line.encode() + b"\r")

    def close(self) -> int:
        try:
            return self.proc.wait(timeout=30)
        finally:
            self.proc.kill()
            self.proc.wait(timeout=30)  # reaped, even when a failed test left it waiting for input
            os.close(self.master)


def test_on_a_terminal_the_repl_answers_a_suspension_and_the_run_goes_on(llm: LlmServer) -> None:
    llm.add(Json(openai_calls(("c1", "ask", {}))), Json(openai_text("Nice to meet you, Ada.")))
    term = Terminal([TOOLNEXUS, "run", *TOOLS, *_model(llm)])
    try:
        term.expect("> ")
        term.send("introduce yourself")
        term.expect("? What is your name?")
        term.expect("answer (/decline to decline): ")
        term.send("Ada")
        term.expect("Nice to meet you, Ada.")
        term.send("exit")
    finally:
        code = term.close()
    assert code == 0
    assert llm.requests[1].json["messages"][-1] == {"role": "tool", "tool_call_id": "c1", "content": "hello Ada"}
    _no_key(term.seen)


def test_on_a_terminal_ctrl_c_cancels_the_turn_keeps_the_conversation_and_twice_at_the_prompt_leaves(
        llm: LlmServer) -> None:
    llm.add(Json(openai_text("one")), Hang(), Json(openai_text("Ada.")))
    term = Terminal([TOOLNEXUS, "run", *TOOLS, *_model(llm)])
    try:
        term.expect("> ")
        term.send("my name is Ada")
        term.expect("one")
        term.send("take your time")
        _wait_arrived(llm)
        term.expect("waiting for the model")  # the progress indicator, on a terminal only
        os.killpg(term.proc.pid, signal.SIGINT)  # what Ctrl-C sends
        term.expect("(cancelled — the conversation so far is kept)")
        assert llm.disconnected.wait(30), "the cancelled turn's request was not abandoned"
        term.send("what is my name?")
        term.expect("Ada.")
        seen = len(term.seen)
        os.killpg(term.proc.pid, signal.SIGINT)  # at an idle prompt: a hint, not an exit
        term.expect("(Ctrl-C again or Ctrl-D to leave)")
        assert term.proc.poll() is None
        os.killpg(term.proc.pid, signal.SIGINT)
    finally:
        code = term.close()
    assert code == 130 and "Traceback" not in term.seen[seen:]
    users = [m["content"] for m in llm.requests[2].json["messages"] if m["role"] == "user"]
    assert users == ["my name is Ada", "what is my name?"]  # the cancelled prompt is gone, the rest kept
    _no_key(term.seen)


def test_anthropic_style_with_the_key_from_its_variable(llm: LlmServer) -> None:
    from support.llm_server import anthropic_text

    llm.add(Json(anthropic_text("bonjour")))
    done = run_cli("run", "--no-builtins", "--style", "anthropic", "--base-url", llm.base_url, "--model", "claude-t",
                   "--once", "salut", env=cli_env(ANTHROPIC_API_KEY=KEY))
    assert (done.returncode, done.stdout) == (0, "bonjour\n")
    sent = llm.requests[0]
    assert sent.headers["x-api-key"] == KEY and sent.json["model"] == "claude-t"
    _no_key(done.stdout, done.stderr)
