"""Durable runs across real processes: park in one, answer in another, crash and come back.

Every step is a fresh `python -m support.durable_app` process sharing one store (SQLite unless
the test says PostgreSQL). SIGKILL tests kill the child while it is inside a tool or waiting on
an LLM call and restore the run in a new process.
"""

from __future__ import annotations

import asyncio
import json
import sqlite3
from pathlib import Path

import pytest

from support.llm_server import Hang, Json, LlmServer, openai_calls, openai_text
from support.stores import kill, postgres_url, read_until, run_app, sqlite_records, start_app  # noqa: F401 - fixture


def sqlite(tmp_path: Path) -> str:
    return f"sqlite:///{tmp_path / 'runs.db'}"


# A coroutine tool has its start committed before it is called; a plain function, run on a worker
# thread, has it written by that thread just before the function runs: both must survive a SIGKILL.
TOOL_KINDS = pytest.mark.parametrize("kind", [[], ["--plain-function"]], ids=["coroutine", "plain-function"])


def effects_of(path: Path) -> list[dict]:
    return [json.loads(line) for line in path.read_text().splitlines()] if path.exists() else []


def test_a_run_parked_in_one_process_finishes_in_another(tmp_path):
    store = sqlite(tmp_path)
    first = run_app("start", "--store", store, "--run-id", "r1")
    assert first["status"] == "pending" and first["run_id"] == "r1"
    inbox = run_app("inbox", "--store", store)
    assert [(p["run_id"], p["id"], p["path"]) for p in inbox["pending"]] == [("r1", first["pending"]["id"],
                                                                              ["root", "worker.1"])]
    final = run_app("answer", "--store", store, "--id", first["pending"]["id"])
    assert (final["status"], final["text"], final["run_id"]) == ("done", "done.", "r1")
    assert run_app("inbox", "--store", store) == {"pending": [], "runs": [{"run_id": "r1", "status": "done"}]}


def test_the_founding_example_3_split_across_two_processes_keeps_its_numbers(tmp_path):
    store = sqlite(tmp_path)
    first = run_app("start", "--store", store, "--run-id", "seed3", "--mode", "replay")
    assert (first["status"], first["turns"], first["total_tokens"]) == ("pending", 1, 8)
    final = run_app("answer", "--store", store, "--id", first["pending"]["id"], "--mode", "replay")
    assert (final["status"], final["text"], final["turns"], final["total_tokens"]) == ("done", "done.", 3, 20)
    after = run_app("restore", "--store", store, "--run-id", "seed3")
    assert after["tree"] == ["root/worker.1"]  # no duplicate child


def test_a_three_level_team_parked_at_the_leaf_resumes_in_another_process(tmp_path):
    store = sqlite(tmp_path)
    first = run_app("start", "--store", store, "--team", "top", "--run-id", "team")
    assert first["status"] == "pending" and first["pending"]["data"]["path"] == ["root", "top.1"]
    assert first["tree"] == ["root/top.1", "root/top.1/mid.1", "root/top.1/mid.1/leaf.1"]
    final = run_app("answer", "--store", store, "--team", "top", "--id", first["pending"]["id"])
    assert (final["status"], final["text"]) == ("done", "top: mid: leaf: secret-token")
    assert final["turns"] > first["turns"] and final["total_tokens"] > first["total_tokens"]  # cumulative
    after = run_app("restore", "--store", store, "--team", "top", "--run-id", "team")
    assert after["tree"] == first["tree"]  # no duplicate child


def test_two_parallel_pending_children_are_answered_from_two_processes(tmp_path):
    store = sqlite(tmp_path)
    first = run_app("start", "--store", store, "--team", "fan", "--run-id", "fan")
    ids = [p["id"] for p in run_app("inbox", "--store", store)["pending"]]
    assert first["status"] == "pending" and len(ids) == 2
    middle = run_app("answer", "--store", store, "--team", "fan", "--id", ids[0])
    assert middle["status"] == "pending" and middle["pending"]["id"] == ids[1]
    final = run_app("answer", "--store", store, "--team", "fan", "--id", ids[1])
    assert final["status"] == "done"
    assert final["text"] == "fan: child: through the gate + child: through the gate"


def test_a_double_answer_is_refused_in_the_second_process(tmp_path):
    store = sqlite(tmp_path)
    first = run_app("start", "--store", store)
    run_app("answer", "--store", store, "--id", first["pending"]["id"])
    again = run_app("answer", "--store", store, "--id", first["pending"]["id"], expect=3)
    assert again["error"] == "AnswerAlreadyApplied" and again["run_id"] == first["run_id"]


async def test_two_processes_racing_one_answer_on_postgres_apply_it_once(postgres_url, tmp_path):
    effects = tmp_path / "effects.jsonl"
    parked = run_app("start", "--store", postgres_url, "--run-id", "race")
    answer = ("answer", "--store", postgres_url, "--id", parked["pending"]["id"], "--effects", str(effects))
    racers = [await start_app(*answer), await start_app(*answer)]
    outs = [await asyncio.wait_for(p.communicate(), 60) for p in racers]
    assert sorted(p.returncode for p in racers) == [0, 3], outs
    lines = [json.loads(out.decode().strip().splitlines()[-1]) for out, _ in outs]
    winner = next(x for x in lines if "status" in x)
    loser = next(x for x in lines if "error" in x)
    assert (winner["status"], winner["text"]) == ("done", "done.")
    assert loser["error"] == "AnswerAlreadyApplied" and loser["run_id"] == "race"
    assert len(effects_of(effects)) == 1  # the resumed tool ran once


@TOOL_KINDS
async def test_sigkill_inside_a_tool_parks_the_call_as_in_doubt_until_the_host_decides(tmp_path, kind):
    store, effects = sqlite(tmp_path), tmp_path / "effects.jsonl"
    child = await start_app("start", "--store", store, "--team", "payer", "--run-id", "pay", "--effects",
                            str(effects), "--hang-in-tool", *kind)
    await read_until(child, "IN_TOOL")
    await kill(child)
    assert len(effects_of(effects)) == 1  # the refund took effect once before the crash

    restored = run_app("restore", "--store", store, "--team", "payer", "--run-id", "pay", "--effects", str(effects),
                       *kind)
    assert restored["status"] == "pending"
    request = restored["pending"]
    assert request["kind"] == "in_doubt"
    assert request["data"]["tool"] == "refund" and request["data"]["arguments"] == {"order": "A-17", "amount": 40}
    assert "refund" in request["prompt"] and "may or may not" in request["prompt"]
    assert len(effects_of(effects)) == 1  # not silently re-run

    declined = run_app("answer", "--store", store, "--team", "payer", "--id", request["id"], "--decline",
                       "--effects", str(effects), *kind)
    assert declined["status"] == "done" and declined["text"].startswith("paid: not run: the tool refund")
    assert len(effects_of(effects)) == 1


def move_journal_to_its_own_table(path: Path, run_id: str) -> int:
    """Store `run_id`'s journal as an earlier version did: rows of `tn_calls`, not entries of the
    handles' records. How many entries moved."""
    conn = sqlite3.connect(path)
    try:
        moved = 0
        for hid, record, key in sqlite_records(conn, run_id):
            rec = json.loads(record)
            for call_id, entry in (rec.pop("calls", None) or {}).items():
                conn.execute("INSERT INTO tn_calls (run_id, conv_id, call_id, entry) VALUES (?, ?, ?, ?)",
                             (run_id, hid, call_id, json.dumps(entry)))
                moved += 1
            conn.execute("UPDATE tn_messages SET message = ? WHERE k = ?", (json.dumps(rec), key))
        conn.commit()
        return moved
    finally:
        conn.close()


def journal_rows(path: Path, run_id: str) -> list[str]:
    conn = sqlite3.connect(path)
    try:
        return [r[0] for r in conn.execute("SELECT call_id FROM tn_calls WHERE run_id = ?", (run_id,)).fetchall()]
    finally:
        conn.close()


async def test_a_call_in_doubt_an_earlier_version_journaled_in_its_own_table_is_still_found(tmp_path):
    store, effects = sqlite(tmp_path), tmp_path / "effects.jsonl"
    child = await start_app("start", "--store", store, "--team", "payer", "--run-id", "pay", "--effects",
                            str(effects), "--hang-in-tool")
    await read_until(child, "IN_TOOL")
    await kill(child)
    assert move_journal_to_its_own_table(tmp_path / "runs.db", "pay") == 1

    restored = run_app("restore", "--store", store, "--team", "payer", "--run-id", "pay", "--effects", str(effects))
    request = restored["pending"]
    assert request["kind"] == "in_doubt" and request["data"]["tool"] == "refund"
    assert len(effects_of(effects)) == 1  # not silently re-run

    declined = run_app("answer", "--store", store, "--team", "payer", "--id", request["id"], "--decline",
                       "--effects", str(effects))
    assert declined["status"] == "done" and declined["text"].startswith("paid: not run: the tool refund")
    assert journal_rows(tmp_path / "runs.db", "pay") == []  # the old row went once its call was settled


@TOOL_KINDS
async def test_sigkill_inside_a_tool_then_answer_ok_runs_it_once_more(tmp_path, kind):
    store, effects = sqlite(tmp_path), tmp_path / "effects.jsonl"
    child = await start_app("start", "--store", store, "--team", "payer", "--run-id", "pay", "--effects",
                            str(effects), "--hang-in-tool", *kind)
    await read_until(child, "IN_TOOL")
    await kill(child)
    restored = run_app("restore", "--store", store, "--team", "payer", "--run-id", "pay", "--effects", str(effects),
                       *kind)
    final = run_app("answer", "--store", store, "--team", "payer", "--id", restored["pending"]["id"],
                    "--effects", str(effects), *kind)
    assert (final["status"], final["text"]) == ("done", "paid: refunded A-17")
    assert len(effects_of(effects)) == 2  # the host chose to run it again: exactly one more time


@TOOL_KINDS
async def test_sigkill_inside_an_idempotent_tool_simply_runs_it_again(tmp_path, kind):
    store, effects = sqlite(tmp_path), tmp_path / "effects.jsonl"
    child = await start_app("start", "--store", store, "--team", "payer", "--run-id", "pay", "--effects",
                            str(effects), "--hang-in-tool", "--idempotent", *kind)
    await read_until(child, "IN_TOOL")
    await kill(child)
    restored = run_app("restore", "--store", store, "--team", "payer", "--run-id", "pay", "--effects", str(effects),
                       "--idempotent", *kind)
    assert (restored["status"], restored["text"]) == ("done", "paid: refunded A-17")
    assert len(effects_of(effects)) == 2


async def test_a_live_holder_refuses_restore_until_it_dies(tmp_path):
    store, effects = sqlite(tmp_path), tmp_path / "effects.jsonl"
    child = await start_app("start", "--store", store, "--team", "payer", "--run-id", "pay", "--effects",
                            str(effects), "--hang-in-tool")
    await read_until(child, "IN_TOOL")
    try:
        refused = run_app("restore", "--store", store, "--team", "payer", "--run-id", "pay", expect=4)
        assert refused["error"] == "RunInProgress" and f"process {child.pid}" in refused["message"]
    finally:
        await kill(child)
    assert run_app("restore", "--store", store, "--team", "payer", "--run-id", "pay")["status"] == "pending"


async def test_sigkill_during_an_llm_call_sends_it_again_after_restore(tmp_path):
    store = sqlite(tmp_path)
    with LlmServer() as server:
        server.add(Hang())
        child = await start_app("start", "--store", store, "--team", "chatter", "--run-id", "talk", "--base-url",
                                server.base_url)
        await asyncio.wait_for(asyncio.to_thread(server.arrived.wait), 30)
        await kill(child)
        server.add(Json(openai_text("hello after the crash")))
        restored = run_app("restore", "--store", store, "--team", "chatter", "--run-id", "talk", "--base-url",
                           server.base_url)
    assert (restored["status"], restored["text"]) == ("done", "hello after the crash")
    sent = [r.json["messages"] for r in server.requests if r.method == "POST"]
    assert sent[0] == sent[1]  # the cut request, sent again as it was
    assert any("recovering from the last commit" in line for line in restored["trace"])


_ = openai_calls
