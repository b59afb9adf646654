"""`toolnexus pending` and `toolnexus answer`: the durable-run inbox from a shell.

Runs are started in this process on a SQLite store against a loopback mock model; the INSTALLED
console script then lists and answers them in fresh processes. Every exit code, and that the API
key never appears in output.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Iterator

import pytest

from support.cli_agents import ASKER, PAYER
from support.cli_run import cli_env, run_cli
from support.llm_server import Json, LlmServer, openai_calls, openai_text
from toolnexus.stores import open_store

KEY = "sk-test-INBOX-KEY-0123456789"


@pytest.fixture
def llm() -> Iterator[LlmServer]:
    with LlmServer() as server:
        yield server


def _llm(server: LlmServer) -> dict:
    return {"base_url": server.base_url + "/v1", "style": "openai", "model": "m-cli", "api_key": KEY}


def _model_flags(server: LlmServer) -> list[str]:
    return ["--base-url", server.base_url + "/v1", "--model", "m-cli", "--api-key", KEY]


async def _park(url: str, server: LlmServer, agent=PAYER, run_id: str = "refund-1") -> str:
    async with open_store(url) as store:
        r = await agent.run("refund order A-17", llm=_llm(server), store=store, run_id=run_id)
        await r.runtime.aclose()
        assert r.status == "pending"
        return r.pending.id


async def test_pending_lists_the_inbox_in_lines_and_json(llm: LlmServer, tmp_path: Path) -> None:
    url = f"sqlite:///{tmp_path / 'runs.db'}"
    async with open_store(url) as store:  # an empty store: nothing waits yet
        assert await store.pending() == []
    empty = run_cli("pending", "--store", url)
    llm.add(Json(openai_calls(("c1", "refund", {"order": "A-17"}))))
    request_id = await _park(url, llm)
    lines = run_cli("pending", "--store", url)
    as_json = run_cli("pending", "--store", url, "--json")
    assert (empty.returncode, empty.stdout) == (0, "")
    assert lines.returncode == 0
    assert lines.stdout == f"{request_id}\trefund-1\tapproval\troot/payer.1\tRefund order A-17? Say how much.\n"
    [item] = json.loads(as_json.stdout)
    assert (item["id"], item["run_id"], item["kind"], item["path"]) == (request_id, "refund-1", "approval",
                                                                        ["root", "payer.1"])
    assert item["request"]["data"]["schema"]["required"] == ["amount"] and item["expires_at"] is None


async def test_pending_pages_by_default_says_how_to_go_on_and_all_prints_every_page(tmp_path: Path) -> None:
    """51 waiting requests: a page of 50 by default with the `more:` hint on stderr, `--after`
    the next page, `--limit N` pages of N, `--all` every one (and no hint)."""
    from support.fleet_agents import GATEKEEPER, LLM, MODEL

    url = f"sqlite:///{tmp_path / 'runs.db'}"
    async with open_store(url) as store:
        for i in range(51):
            r = await GATEKEEPER.run(f"g{i}", store=store, run_id=f"g{i:02d}", llm=LLM, transport=MODEL)
            await r.runtime.aclose()
        oldest_first = [p.run_id for p in await store.pending()]
    assert sorted(oldest_first) == [f"g{i:02d}" for i in range(51)]

    def listed(*args: str) -> tuple[list[str], str]:
        done = run_cli("pending", "--store", url, *args)
        assert done.returncode == 0, done.stderr
        return [line.split("\t")[1] for line in done.stdout.splitlines()], done.stderr

    def cursor(hint: str) -> str:
        assert hint.startswith("more: toolnexus pending ... --after "), hint
        return hint.split()[-1]

    first, hint = listed()
    assert first == oldest_first[:50]
    rest, last_hint = listed("--after", cursor(hint))
    assert (rest, last_hint) == (oldest_first[50:], "")
    small, hint = listed("--limit", "20")
    assert small == oldest_first[:20]
    second, _ = listed("--limit", "20", "--after", cursor(hint))
    assert second == oldest_first[20:40]
    assert listed("--all", "--limit", "20") == (oldest_first, "")
    assert listed("--all") == (oldest_first, "")
    as_json = run_cli("pending", "--store", url, "--json", "--limit", "3")
    assert [item["run_id"] for item in json.loads(as_json.stdout)] == oldest_first[:3]
    assert as_json.stderr.startswith("more: toolnexus pending ... --after ")
    bad = run_cli("pending", "--store", url, "--limit", "0")
    assert bad.returncode == 2 and "--limit takes a whole number >= 1" in bad.stderr


async def test_answer_resumes_the_run_once_and_a_second_answer_is_exit_4(llm: LlmServer, tmp_path: Path) -> None:
    url, effects = f"sqlite:///{tmp_path / 'runs.db'}", tmp_path / "effects.jsonl"
    llm.add(Json(openai_calls(("c1", "refund", {"order": "A-17"}))), Json(openai_text("refund issued")))
    request_id = await _park(url, llm)
    env = cli_env(CLI_EFFECTS=str(effects))
    args = ("answer", "--store", url, "--id", request_id, "--ok", "--data", '{"amount": 40}', "--agents",
            "cli_agents:PAYER", *_model_flags(llm))
    done = run_cli(*args, env=env)
    again = run_cli(*args, env=env)
    assert (done.returncode, done.stdout, done.stderr) == (0, "refund issued\n", "")
    assert again.returncode == 4 and again.stdout == ""
    assert again.stderr == (f"error: toolnexus: request {request_id!r} of run 'refund-1' was already answered; "
                            "this answer was not applied\n")
    assert [json.loads(x) for x in effects.read_text().splitlines()] == [{"order": "A-17", "amount": 40}]
    assert run_cli("pending", "--store", url).stdout == ""
    for out in (done.stdout, done.stderr, again.stdout, again.stderr):
        assert KEY not in out


async def test_answer_in_json_and_a_decline(llm: LlmServer, tmp_path: Path) -> None:
    url = f"sqlite:///{tmp_path / 'runs.db'}"
    llm.add(Json(openai_calls(("c1", "refund", {"order": "A-17"}))), Json(openai_text("no refund then")))
    request_id = await _park(url, llm)
    done = run_cli("answer", "--store", url, "--id", request_id, "--decline", "--agents", "cli_agents:PAYER",
                   "--json", *_model_flags(llm))
    assert done.returncode == 0
    out = json.loads(done.stdout)
    assert (out["status"], out["text"], out["run_id"], out["pending"]) == ("done", "no refund then", "refund-1", None)
    sent = [r.json["messages"] for r in llm.requests if r.method == "POST"]
    assert sent[-1][-1]["content"] == "declined/expired: Refund order A-17? Say how much."


async def test_an_answer_the_schema_refuses_is_exit_2_and_changes_nothing(llm: LlmServer, tmp_path: Path) -> None:
    url = f"sqlite:///{tmp_path / 'runs.db'}"
    llm.add(Json(openai_calls(("c1", "refund", {"order": "A-17"}))))
    request_id = await _park(url, llm)
    bad = run_cli("answer", "--store", url, "--id", request_id, "--ok", "--data", '{"amount": "lots"}', "--agents",
                  "cli_agents:PAYER", *_model_flags(llm))
    assert (
        bad.returncode == 2
        and "does not match the request's schema: amount: 'lots' is not of type 'number'" in bad.stderr
    )
    assert run_cli("pending", "--store", url).stdout.startswith(request_id)


async def test_a_run_that_waits_again_is_exit_3_with_the_new_prompt(llm: LlmServer, tmp_path: Path) -> None:
    url = f"sqlite:///{tmp_path / 'runs.db'}"
    llm.add(
        Json(openai_calls(("c1", "confirm", {"step": "one"}))), Json(openai_calls(("c2", "confirm", {"step": "two"})))
    )
    request_id = await _park(url, llm, agent=ASKER, run_id="ask-1")
    waiting = run_cli("answer", "--store", url, "--id", request_id, "--ok", "--agents", "cli_agents:ASKER",
                      *_model_flags(llm))
    assert (waiting.returncode, waiting.stdout, waiting.stderr) == (3, "Confirm two?\n", "status: pending\n")
    [line] = run_cli("pending", "--store", url).stdout.splitlines()
    assert line.split("\t")[1:4] == ["ask-1", "approval", "root/asker.1"] and line.split("\t")[0] != request_id


async def test_unknown_requests_and_missing_flags(tmp_path: Path) -> None:
    url = f"sqlite:///{tmp_path / 'runs.db'}"
    async with open_store(url) as store:  # the store exists, and holds nothing
        assert await store.pending() == []
    base = ("--agents", "cli_agents:PAYER", "--base-url", "http://127.0.0.1:9/v1", "--api-key", KEY)
    unknown = run_cli("answer", "--store", url, "--id", "pnd-nope", "--ok", *base)
    assert unknown.returncode == 1 and "no request 'pnd-nope' is pending" in unknown.stderr
    cases = {
        ("answer", "--id", "x", "--ok", *base): "error: --store URL is required",
        ("answer", "--store", url, "--ok", *base): "error: --id REQUEST_ID is required",
        ("answer", "--store", url, "--id", "x", *base): "error: pass exactly one of --approve, --reject, --edit JSON",
        ("answer", "--store", url, "--id", "x", "--ok", "--data", "[1]", *base): "error: --data must be a JSON object",
        (
            "answer",
            "--store",
            url,
            "--id",
            "x",
            "--ok",
            "--base-url",
            "http://h",
            "--api-key",
            KEY,
        ): "error: --agents MODULE:ATTR is required",
        (
            "answer",
            "--store",
            url,
            "--id",
            "x",
            "--ok",
            "--agents",
            "cli_agents:PAYER",
            "--api-key",
            KEY,
        ): "error: --base-url is required",
        (
            "answer",
            "--store",
            url,
            "--id",
            "x",
            "--ok",
            "--agents",
            "nowhere:X",
            "--base-url",
            "http://h",
            "--api-key",
            KEY,
        ): 'error: --agents "nowhere:X": cannot import nowhere',
        ("pending", "--store", "redis://x"): "error: toolnexus: cannot open a store from 'redis://x'",
    }
    for args, message in cases.items():
        done = run_cli(*args)
        assert done.returncode == 2, (args, done.stderr)
        assert done.stderr.startswith(message), (args, done.stderr)
