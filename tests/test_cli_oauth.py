"""`toolnexus run` signs in to an MCP server behind OAuth at the terminal (a real process, a real pty).

The model calls the server's sign-in gateway tool; the run parks on `kind="auth"`; the terminal
shows the authorization address and listens on the request's loopback redirect address. The test
plays the browser: it opens the address (the test authorization server approves at once) and
follows the redirect back to the command's loopback listener — the sign-in completes, the tool
runs, and the model hears its result. A person whose browser runs elsewhere pastes the address
instead (second test).
"""

from __future__ import annotations

import json
import re
import socket
from pathlib import Path

import httpx
import pytest

from support.cli_run import TOOLNEXUS, cli_env
from support.llm_server import Json, LlmServer, openai_calls, openai_text
from test_cli_run import Terminal
from test_mcp_oauth_processes import authority  # noqa: F401 - the fixture

KEY = "sk-cli-oauth-0123456789"


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


@pytest.fixture
def llm():
    with LlmServer() as server:
        yield server


def _start(tmp_path: Path, llm: LlmServer, mcp_url: str) -> tuple[Terminal, int]:
    port = _free_port()
    config = tmp_path / "config.json"
    config.write_text(json.dumps({"mcpServers": {"docs": {
        "url": mcp_url, "oauth": {"redirectUri": f"http://127.0.0.1:{port}/callback"}}}}))
    llm.add(Json(openai_calls(("c1", "docs_call", {"tool": "whoami", "arguments": {}}))), Json(openai_text("all done")))
    args = [TOOLNEXUS, "run", "--base-url", llm.base_url + "/v1", "--model", "m", "--api-key", KEY, "--no-builtins",
            "--config", str(config), "--once", "who am I?"]
    return Terminal(args, env=cli_env(TERM="dumb", BROWSER="true")), port


def _authorization_url(term: Terminal) -> str:
    seen = term.expect("open this address to sign in: ")
    term.expect("(/decline to decline): ")
    match = re.search(r"open this address to sign in: (\S+)", term.seen)
    assert match, seen[-500:]
    return match.group(1)


def test_the_browser_comes_back_to_the_terminal_and_the_run_goes_on(authority, llm, tmp_path):  # noqa: F811
    base, _clock = authority
    term, port = _start(tmp_path, llm, base + "/mcp")
    try:
        url = _authorization_url(term)
        back = httpx.get(url, follow_redirects=False, timeout=20).headers["location"]
        assert back.startswith(f"http://127.0.0.1:{port}/callback?")
        landed = httpx.get(back, timeout=20)  # the browser, back at the command's loopback listener
        assert landed.status_code == 200 and "Signed in" in landed.text
        term.expect("signed in")
        term.expect("all done")
    finally:
        code = term.close()
    assert code == 0
    sent = llm.requests[-1].json["messages"][-1]
    assert (sent["role"], sent["tool_call_id"], sent["content"]) == ("tool", "c1", "signed in")  # whoami ran
    assert KEY not in term.seen


def test_a_pasted_address_signs_in_too(authority, llm, tmp_path):  # noqa: F811
    base, _clock = authority
    term, _port = _start(tmp_path, llm, base + "/mcp")
    try:
        url = _authorization_url(term)
        back = httpx.get(url, follow_redirects=False, timeout=20).headers["location"]
        term.send(back)  # the browser ran on another machine: the person pastes where it ended
        term.expect("all done")
    finally:
        code = term.close()
    assert code == 0
    assert llm.requests[-1].json["messages"][-1]["content"] == "signed in"


def test_decline_at_the_sign_in_tells_the_model(authority, llm, tmp_path):  # noqa: F811
    base, _clock = authority
    term, _port = _start(tmp_path, llm, base + "/mcp")
    try:
        _authorization_url(term)
        term.send("/decline")
        term.expect("all done")
    finally:
        code = term.close()
    assert code == 0
    assert llm.requests[-1].json["messages"][-1]["content"].startswith("declined/expired: ")
