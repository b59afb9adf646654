"""`toolnexus serve` over HTTP: the installed script, a scripted model on loopback, real clients.

Covers the URL line and stderr lines, SIGINT/SIGTERM → exit 0, nothing to serve / unsafe
exposure / a bad store → exit 2, a taken port → exit 1, profiles switched on by the config, the
card fields from flags, a file task store, and that neither the API key nor the token is printed.
"""

from __future__ import annotations

import json
import signal
import socket
import time
from typing import Iterator

import httpx
import pytest

from support.cli_run import ServeProcess, run_cli
from support.llm_server import Json, LlmServer, openai_text

KEY = "sk-test-SERVE-KEY-0123456789"
TOKEN = "serve-token-abcdef"
TOOLS = ("--no-builtins", "--tools-from", "cli_tools:TOOLS")
ADDR = ("--addr", "127.0.0.1:0")
MCP_HEADERS = {"accept": "application/json, text/event-stream", "content-type": "application/json"}


@pytest.fixture
def llm() -> Iterator[LlmServer]:
    with LlmServer() as server:
        yield server


def _model(llm: LlmServer) -> list[str]:
    return ["--base-url", llm.base_url + "/v1", "--model", "m-serve", "--api-key", KEY]


def _mcp_call(url: str, name: str, args: dict, **headers: str) -> httpx.Response:
    body = {"jsonrpc": "2.0", "id": 1, "method": "tools/call", "params": {"name": name, "arguments": args}}
    return httpx.post(url + "/mcp", content=json.dumps(body), headers={**MCP_HEADERS, **headers})


def _poll_task(url: str, task_id: str, headers: dict[str, str]) -> dict:
    deadline = time.monotonic() + 30
    while True:
        body = {"jsonrpc": "2.0", "id": 2, "method": "GetTask", "params": {"id": task_id}}
        task = httpx.post(url + "/", content=json.dumps(body), headers=headers).json()["result"]
        if task["status"]["state"] in ("completed", "failed") or time.monotonic() > deadline:
            return task
        time.sleep(0.02)  # polling a real condition, bounded above


def test_nothing_to_serve_is_exit_2() -> None:
    done = run_cli("serve", *ADDR)
    assert (done.returncode, done.stderr, done.stdout) == (2, "error: nothing to serve: pass --a2a and/or --mcp\n", "")


def test_serving_builtins_without_a_token_is_refused_with_the_way_out() -> None:
    done = run_cli("serve", "--mcp", *ADDR)
    assert done.returncode == 2 and done.stdout == ""
    assert "refusing to serve built-in tools bash" in done.stderr and "--auth-token" in done.stderr
    assert "--allow-unauthenticated-builtins" in done.stderr


def test_mcp_over_http_prints_the_url_and_stops_cleanly_on_sigterm() -> None:
    with ServeProcess("--mcp", *TOOLS, *ADDR, "--mcp-tool", "echo") as served:
        reply = _mcp_call(served.url, "echo", {"x": "cli"})
        hidden = _mcp_call(served.url, "fail", {})
    assert served.url.startswith("http://127.0.0.1:") and served.returncode == 0
    assert reply.json()["result"]["content"] == [{"type": "text", "text": "echo:cli"}]
    assert hidden.json()["error"]["message"] == "Unknown tool: fail"
    assert served.stderr == f"mcp: {served.url}/mcp\n"


def test_a2a_and_mcp_with_a_token_card_flags_a_file_store_and_sigint(llm: LlmServer, tmp_path) -> None:
    llm.add(Json(openai_text("served answer")))
    store = tmp_path / "tasks"
    args = ("--a2a", "--mcp", *TOOLS, *ADDR, *_model(llm), "--auth-token", TOKEN, "--name", "CLI Agent",
            "--description", "from flags", "--agent-version", "2.0.0", "--store", f"file:{store}")
    auth = {"authorization": f"Bearer {TOKEN}"}
    with ServeProcess(*args, stop_signal=signal.SIGINT) as served:
        anonymous = httpx.get(served.url + "/.well-known/agent-card.json")
        card = httpx.get(served.url + "/.well-known/agent-card.json", headers=auth).json()
        send = {"jsonrpc": "2.0", "id": 1, "method": "SendMessage", "params": {
            "message": {"role": "user", "messageId": "m", "parts": [{"kind": "text", "text": "hello"}]}}}
        task = httpx.post(served.url + "/", content=json.dumps(send), headers=auth).json()["result"]
        done = _poll_task(served.url, task["id"], auth)
        mcp = _mcp_call(served.url, "echo", {"x": "both"}, **auth)
        on_disk = json.loads((store / f"{task['id']}.json").read_text())
    assert served.returncode == 0
    assert anonymous.status_code == 401
    assert (card["name"], card["description"], card["version"]) == ("CLI Agent", "from flags", "2.0.0")
    assert done["status"]["state"] == "completed"
    assert done["artifacts"][0]["parts"][0]["text"] == "served answer"
    assert {**{k: v for k, v in on_disk.items() if k != "history"}, "status": {"state": "completed"}} == done
    assert mcp.json()["result"]["content"][0]["text"] == "echo:both"
    assert served.stderr == f"a2a: {served.url}/.well-known/agent-card.json\nmcp: {served.url}/mcp\n"
    for text in (served.stdout, served.stderr):
        assert KEY not in text and TOKEN not in text


def test_profiles_can_come_from_the_config_with_flags_laid_over(tmp_path) -> None:
    config = tmp_path / "serve.json"
    config.write_text(json.dumps({"mcpServer": {"name": "from-config", "tools": ["echo", "ask"]}}))
    with ServeProcess("--config", str(config), *TOOLS, *ADDR, "--mcp-name", "from-flag") as served:
        body = {"jsonrpc": "2.0", "id": 1, "method": "tools/list"}
        listed = httpx.post(served.url + "/mcp", content=json.dumps(body), headers=MCP_HEADERS).json()
    assert [t["name"] for t in listed["result"]["tools"]] == ["echo", "ask"]
    assert served.returncode == 0 and served.stderr == f"mcp: {served.url}/mcp\n"


def test_a2a_needs_a_model_and_a_key() -> None:
    no_model = run_cli("serve", "--a2a", *TOOLS, *ADDR)
    no_key = run_cli("serve", "--a2a", *TOOLS, *ADDR, "--base-url", "http://llm.invalid/v1", "--model", "m")
    assert (no_model.returncode, no_model.stderr) == (2, "error: --base-url and --model are required\n")
    assert no_key.returncode == 2 and no_key.stderr.startswith("error: No API key")


def test_a_bad_store_is_a_usage_error() -> None:
    done = run_cli("serve", "--a2a", *TOOLS, *ADDR, "--base-url", "http://127.0.0.1:9", "--model", "m",
                   "--api-key", KEY, "--store", "redis://cache")
    assert done.returncode == 2
    assert done.stderr == 'error: Unknown A2A store: "redis://cache" (expected "memory" or "file:<dir>")\n'


def test_a_taken_port_is_exit_1() -> None:
    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen()
        port = taken.getsockname()[1]
        done = run_cli("serve", "--mcp", *TOOLS, "--addr", f"127.0.0.1:{port}")
    assert done.returncode == 1 and done.stderr.startswith("error: ") and "Traceback" not in done.stderr
    assert done.stdout == ""


def _skill(root, name: str, description: str) -> None:
    (root / name).mkdir(parents=True)
    (root / name / "SKILL.md").write_text(f"---\nname: {name}\ndescription: {description}\n---\nBody.\n")


def test_the_card_lists_skills_from_skills_folders_filtered_by_a2a_skill(tmp_path) -> None:
    _skill(tmp_path / "a", "triage", "Sort tickets")
    _skill(tmp_path / "b", "summarise", "Summarise threads")
    args = ("--a2a", *TOOLS, *ADDR, "--base-url", "http://127.0.0.1:9", "--model", "m", "--api-key", KEY,
            "--skills", str(tmp_path / "a"), "--skills", str(tmp_path / "b"))
    with ServeProcess(*args) as every:
        all_skills = httpx.get(every.url + "/.well-known/agent-card.json").json()["skills"]
    with ServeProcess(*args, "--a2a-skill", "summarise") as filtered:
        some = httpx.get(filtered.url + "/.well-known/agent-card.json").json()["skills"]
    assert [s["id"] for s in all_skills] == ["triage", "summarise"]
    assert some == [{"id": "summarise", "name": "summarise", "description": "Summarise threads", "tags": ["summarise"]}]
    assert every.returncode == filtered.returncode == 0


def _send_message(url: str, headers: dict[str, str], text: str, task_id: str | None = None) -> dict:
    message = {"role": "user", "messageId": f"m-{text}", "parts": [{"kind": "text", "text": text}]}
    if task_id:
        message["taskId"] = task_id
    body = {"jsonrpc": "2.0", "id": 1, "method": "SendMessage", "params": {"message": message,
                                                                          "configuration": {"blocking": False}}}
    return httpx.post(url + "/", content=json.dumps(body), headers=headers).json()["result"]


def _wait_task(url: str, task_id: str, headers: dict[str, str], states: set[str]) -> dict:
    deadline = time.monotonic() + 30
    while True:
        body = {"jsonrpc": "2.0", "id": 2, "method": "GetTask", "params": {"id": task_id}}
        task = httpx.post(url + "/", content=json.dumps(body), headers=headers).json()["result"]
        if task["status"]["state"] in states or time.monotonic() > deadline:
            return task
        time.sleep(0.02)  # polling a real condition, bounded above


def test_an_input_required_task_survives_a_server_restart_with_a_sqlite_store(llm: LlmServer, tmp_path) -> None:
    from support.llm_server import openai_calls

    llm.add(Json(openai_calls(("c1", "approve", {}))), Json(openai_text("all deployed")))
    args = ("--a2a", *TOOLS, *ADDR, *_model(llm), "--auth-token", TOKEN, "--store", f"sqlite:///{tmp_path / 'a2a.db'}")
    auth = {"authorization": f"Bearer {TOKEN}"}
    with ServeProcess(*args, stop_signal=signal.SIGKILL) as first:  # the server dies, nothing is drained
        task = _send_message(first.url, auth, "deploy please")
        asked = _wait_task(first.url, task["id"], auth, {"input-required"})
    assert asked["status"]["state"] == "input-required"
    assert asked["status"]["message"]["parts"] == [{"kind": "text", "text": "Deploy to production?"}]
    with ServeProcess(*args) as second:  # a new process on the same store
        again = _wait_task(second.url, task["id"], auth, {"input-required"})
        _send_message(second.url, auth, "yes", task_id=task["id"])
        done = _wait_task(second.url, task["id"], auth, {"completed", "failed"})
    assert again["status"]["state"] == "input-required" and again["contextId"] == task["contextId"]
    assert done["status"]["state"] == "completed", done
    assert done["artifacts"][0]["parts"][0]["text"] == "all deployed"
    sent = [r.json["messages"] for r in llm.requests if r.method == "POST"]
    assert len(sent) == 2 and sent[1][-2]["tool_calls"][0]["function"]["name"] == "approve"
    assert sent[1][-1] == {"role": "tool", "tool_call_id": "c1", "content": "deployed"}


@pytest.mark.parametrize("flags", [(), ("--no-approve", "*")], ids=["default", "no-approve"])
def test_served_bash_asks_first_unless_told_otherwise(flags: tuple[str, ...], tmp_path) -> None:
    """Over MCP, a caller that cannot be asked (a plain `tools/call`, no elicitation) gets the
    approval's prompt as an error and nothing runs; `--no-approve '*'` (the documented way out)
    serves bash as it is."""
    target = tmp_path / "pwned.txt"
    auth = {"authorization": f"Bearer {TOKEN}"}
    with ServeProcess("--mcp", *ADDR, "--auth-token", TOKEN, *flags) as served:
        reply = _mcp_call(served.url, "bash", {"command": f"echo pwned > {target}"}, **auth).json()["result"]
    assert served.returncode == 0
    if not flags:
        assert reply["isError"] is True and not target.exists()
        assert reply["content"][0]["text"].startswith(f'Approve bash {{"command": "echo pwned > {target}"}}? (builtin)')
    else:
        assert reply.get("isError") is not True and target.read_text() == "pwned\n"
