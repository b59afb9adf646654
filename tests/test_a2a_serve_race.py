"""Two `toolnexus serve --a2a` processes on one store race twenty answers to one question.

The refund runs once, the task ends `completed`, and no poll of either server ever reports a
state the task did not end in (`failed`, or `working` again after `completed`): a task's terminal
state is final and true, however many servers share its store.
"""

from __future__ import annotations

import json
import threading
import time
from concurrent.futures import ThreadPoolExecutor
from contextlib import ExitStack
from typing import Any, Iterator

import httpx
import pytest

from support.cli_run import ServeProcess, cli_env
from support.llm_server import Json, LlmServer, openai_calls, openai_text

KEY = "sk-test-RACE-KEY-0123456789"
V1 = {"A2A-Version": "1.0", "content-type": "application/json"}
TERMINAL = {"TASK_STATE_COMPLETED", "TASK_STATE_FAILED", "TASK_STATE_CANCELED", "TASK_STATE_REJECTED"}


@pytest.fixture
def llm() -> Iterator[LlmServer]:
    with LlmServer() as server:
        yield server


def _rpc(url: str, method: str, params: dict[str, Any], client: httpx.Client) -> dict[str, Any]:
    body = {"jsonrpc": "2.0", "id": 1, "method": method, "params": params}
    return client.post(url + "/", content=json.dumps(body), headers=V1, timeout=30).json()


def _message(text: str, n: int, task_id: str = "") -> dict[str, Any]:
    message: dict[str, Any] = {"messageId": f"m-{n}", "role": "ROLE_USER", "parts": [{"text": text}]}
    if task_id:
        message["taskId"] = task_id
    return {"message": message}


def test_twenty_answers_across_two_servers_apply_once_and_never_report_failed(llm: LlmServer, tmp_path) -> None:
    log = tmp_path / "refunds.log"
    llm.add(Json(openai_calls(("c1", "refund", {}))), *[Json(openai_text("refund done")) for _ in range(30)])
    env = cli_env(TOOLNEXUS_TEST_REFUND_LOG=str(log))
    args = ("--a2a", "--no-builtins", "--tools-from", "refund_tools:TOOLS", "--addr", "127.0.0.1:0",
            "--base-url", llm.base_url + "/v1", "--model", "m-race", "--api-key", KEY,
            "--description", "refunds", "--store", f"sqlite:///{tmp_path / 'tasks.db'}")
    first, second = ServeProcess(*args, env=env), ServeProcess(*args, env=env)
    with ExitStack() as running, httpx.Client() as client:
        with ThreadPoolExecutor(2) as starting:  # both servers start at once
            started = [starting.submit(server.__enter__) for server in (first, second)]
            for server, start in zip((first, second), started, strict=True):
                if start.exception() is None:
                    running.push(server.__exit__)  # stopped however the test ends
            for start in started:
                start.result()
        asked = _rpc(first.url, "SendMessage", _message("refund order 7", 0), client)["result"]["task"]
        assert asked["status"]["state"] == "TASK_STATE_INPUT_REQUIRED", asked
        task_id = asked["id"]
        polled: dict[str, list[str]] = {first.url: [], second.url: []}  # each poller's states, in order
        answered: list[str] = []
        stop = threading.Event()
        together = threading.Barrier(20, timeout=30)  # all twenty answers leave at once

        def poll(url: str) -> None:
            with httpx.Client() as own:
                while not stop.wait(0.01):  # a poller's pace, not a synchronisation
                    polled[url].append(_rpc(url, "GetTask", {"id": task_id}, own)["result"]["status"]["state"])

        def answer(n: int) -> None:
            with httpx.Client() as own:
                url = (first, second)[n % 2].url
                own.get(url + "/.well-known/agent-card.json")  # the connection is open before the race
                together.wait()
                reply = _rpc(url, "SendMessage", {**_message("12 EUR", n, task_id)}, own)
                answered.append(reply["result"]["task"]["status"]["state"] if "result" in reply
                                else f"error {reply['error']['code']}")

        pollers = [threading.Thread(target=poll, args=(s.url,)) for s in (first, second)]
        answers = [threading.Thread(target=answer, args=(n,)) for n in range(1, 21)]
        for t in pollers + answers:
            t.start()
        for t in answers:
            t.join(60)
        deadline = time.monotonic() + 30
        final = {}
        while time.monotonic() < deadline:  # both servers must agree on the one true outcome
            final = {s.url: _rpc(s.url, "GetTask", {"id": task_id}, client)["result"] for s in (first, second)}
            if all(t["status"]["state"] in TERMINAL for t in final.values()):
                break
            time.sleep(0.05)  # polling a real condition, bounded above
        stop.set()
        for t in pollers:
            t.join(30)
    assert log.read_text().count("refunded") == 1, log.read_text()
    assert [t["status"]["state"] for t in final.values()] == ["TASK_STATE_COMPLETED"] * 2, final
    # one answer taken, the other nineteen told why (-32004), none of them a failure
    assert answered.count("error -32004") == 19 and "TASK_STATE_FAILED" not in answered, answered
    for states in polled.values():  # each poller asks in turn: once it saw the outcome, it sees nothing else
        assert "TASK_STATE_FAILED" not in states, states
        done_at = states.index("TASK_STATE_COMPLETED") if "TASK_STATE_COMPLETED" in states else len(states)
        assert set(states[done_at:]) <= {"TASK_STATE_COMPLETED"}, states
