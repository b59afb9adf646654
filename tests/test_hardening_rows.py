"""One damaged row never takes the inbox down (issue #31).

A ledger row cut mid-JSON (a torn write, a bad disk, a hand edit) once made `store.pending()` —
and so `toolnexus pending` for the whole store — fail with a bare `JSONDecodeError`, and an answer
to that run failed the same way, naming neither run nor request. Now every stored row is decoded
on its own: the inbox lists the healthy runs and reports the damaged one, an answer to the damaged
run is a `RunDamaged` naming run and request, `store.check()` (and `toolnexus doctor`) lists
damaged runs, and `store.quarantine()` takes one out of service without losing a byte.

The rows are damaged through the database (another connection) or the files, never through the
store object: on the file, SQLite and PostgreSQL stores, and in real `toolnexus` processes.
"""

from __future__ import annotations

import json
import logging
from pathlib import Path
from typing import Iterator

import pytest

from support.cli_agents import PAYER
from support.cli_run import run_cli
from support.damage import cut_message, cut_request, raw_request, set_request_text
from support.llm_server import Json, LlmServer, openai_calls, openai_text
from support.stores import shared_store_url  # noqa: F401 - a fixture
from toolnexus import Answer
from toolnexus.agents import AgentRuntime, resume
from toolnexus.stores import open_store

KEY = "sk-test-ROWS-KEY-0123456789"


@pytest.fixture
def llm() -> Iterator[LlmServer]:
    with LlmServer() as server:
        yield server


def _llm(server: LlmServer) -> dict:
    return {"base_url": server.base_url + "/v1", "style": "openai", "model": "m-cli", "api_key": KEY}


async def _park_two(url: str, server: LlmServer) -> tuple[str, str]:
    """Two runs of the payer, each parked on its approval: (healthy request id, victim request id)."""
    ids = []
    for run_id, order in (("healthy-1", "A-1"), ("victim-1", "B-2")):
        server.add(Json(openai_calls(("c1", "refund", {"order": order}))))
        async with open_store(url) as store:
            r = await PAYER.run(f"refund order {order}", llm=_llm(server), store=store, run_id=run_id)
            await r.runtime.aclose()
        assert r.status == "pending"
        ids.append(r.pending.id)
    return ids[0], ids[1]


def _damage_messages(caplog: pytest.LogCaptureFixture) -> list[str]:
    return [r.getMessage() for r in caplog.records if "damaged" in r.getMessage()]


async def test_a_cut_ledger_row_leaves_the_inbox_working_and_names_run_and_request(
        shared_store_url: str, llm: LlmServer, caplog: pytest.LogCaptureFixture) -> None:
    url = shared_store_url
    healthy, victim = await _park_two(url, llm)
    original = cut_request(url, victim)
    caplog.set_level(logging.WARNING, logger="toolnexus")
    async with open_store(url) as store:
        listed = await store.pending()  # before: a bare JSONDecodeError for the whole store
        assert [(p.run_id, p.request.id) for p in listed] == [("healthy-1", healthy)]
        [said] = _damage_messages(caplog)
        assert "'victim-1'" in said and repr(victim) in said and "toolnexus doctor" in said

        with pytest.raises(Exception) as refused:
            await resume(store, Answer(id=victim, ok=True, data={"amount": 5}), agents=[PAYER], llm=_llm(llm))
        from toolnexus.stores import RunDamaged

        assert isinstance(refused.value, RunDamaged)
        assert (refused.value.run_id, refused.value.request_id) == ("victim-1", victim)
        assert "'victim-1'" in str(refused.value) and repr(victim) in str(refused.value)

        [damaged] = await store.check()
        assert damaged.run_id == "victim-1" and not damaged.quarantined
        assert [(row.request_id, row.part) for row in damaged.rows] == [(victim, "request")]

        await store.quarantine("victim-1")
        caplog.clear()
        assert [p.request.id for p in await store.pending()] == [healthy]
        assert _damage_messages(caplog) == []  # out of service: no longer reported on every listing
        [held] = await store.check()
        assert (held.run_id, held.quarantined) == ("victim-1", True)
        assert raw_request(url, victim) == original[:len(original) // 2]  # nothing lost: the raw row is kept
        statuses = {s.run_id: s.status for s in await store.runs()}
        assert statuses["healthy-1"] == "pending"
        with pytest.raises(RunDamaged, match="quarantined"):
            await resume(store, Answer(id=victim, ok=True, data={"amount": 5}), agents=[PAYER], llm=_llm(llm))

        set_request_text(url, victim, original)  # repaired by hand, then back in service
        await store.unquarantine("victim-1")
        assert await store.check() == []
        assert sorted(p.request.id for p in await store.pending()) == sorted([healthy, victim])
        llm.add(Json(openai_text("refunded")))
        final = await resume(store, Answer(id=victim, ok=True, data={"amount": 5}), agents=[PAYER], llm=_llm(llm))
        assert (final.status, final.text) == ("done", "refunded")


async def test_a_cut_ledger_row_in_a_page_is_reported_and_the_pages_go_on(
        shared_store_url: str, llm: LlmServer, caplog: pytest.LogCaptureFixture) -> None:
    """The paged and filtered inbox (`pending(limit=, after=, kind=, agent=)`) decodes each row on
    its own too: the damaged row is left out with a warning and the cursor moves past it. The
    index on the request's kind is built and kept whatever a row holds (a damaged request is
    no kind), so its queries, and the quarantine of that row, still work."""
    url = shared_store_url
    healthy, victim = await _park_two(url, llm)
    cut_request(url, victim)
    caplog.set_level(logging.WARNING, logger="toolnexus")
    async with open_store(url) as store:
        pages, after = [], None
        while True:
            page = await store.pending(limit=1, after=after)
            pages.append([p.request.id for p in page])
            after = page.next
            if after is None:
                break
        # SQL stores: two pages, the second empty (its one row damaged); the file store cannot place
        # a request it cannot read, so it leaves it out of the whole listing: one page
        assert pages in ([[healthy], []], [[healthy]])
        [said] = _damage_messages(caplog)
        assert "'victim-1'" in said and repr(victim) in said
        for filtered in (await store.pending(kind="approval", limit=10), await store.pending(agent="payer", limit=10)):
            assert [p.request.id for p in filtered] == [healthy]
        assert {s.run_id for s in await store.runs(limit=10)} == {"healthy-1", "victim-1"}
        await store.quarantine("victim-1")
        caplog.clear()
        assert [p.request.id for p in await store.pending(kind="approval", limit=10)] == [healthy]
        assert _damage_messages(caplog) == []


async def test_a_cut_transcript_message_names_the_run_and_the_conversation_on_restore(
        shared_store_url: str, llm: LlmServer) -> None:
    url = shared_store_url
    _, victim = await _park_two(url, llm)
    cut_message(url, "victim-1", "root/payer.1", 1)
    async with open_store(url) as store:
        with pytest.raises(Exception) as refused:  # before: a bare JSONDecodeError
            await AgentRuntime.restore(store, "victim-1", agents=[PAYER], llm=_llm(llm))
        from toolnexus.stores import RunDamaged

        assert isinstance(refused.value, RunDamaged) and refused.value.run_id == "victim-1"
        assert "message 1 of conversation 'root/payer.1'" in str(refused.value)
        [damaged] = await store.check()
        assert damaged.run_id == "victim-1"
        assert [row.part for row in damaged.rows] == ["message 1 of conversation 'root/payer.1'"]
        assert len(await store.pending()) == 2  # the ledger rows are healthy


async def test_stored_json_with_a_bare_nan_is_damage_not_a_number(tmp_path: Path, llm: LlmServer) -> None:
    url = f"sqlite:///{tmp_path / 'runs.db'}"
    healthy, victim = await _park_two(url, llm)
    text = raw_request(url, victim)
    assert text is not None
    set_request_text(url, victim, text.replace('"prompt":', '"amount":NaN,"prompt":', 1))
    async with open_store(url) as store:
        assert [p.request.id for p in await store.pending()] == [healthy]
        [damaged] = await store.check()
        assert damaged.run_id == "victim-1" and "NaN" in damaged.rows[0].reason


async def test_the_memory_store_checks_and_quarantines_too() -> None:
    async with open_store("memory:") as store:
        assert await store.check() == []
        with pytest.raises(Exception, match="no run 'nope'"):
            await store.quarantine("nope")


async def test_toolnexus_pending_answer_and_doctor_around_a_damaged_run(tmp_path: Path, llm: LlmServer) -> None:
    url = f"sqlite:///{tmp_path / 'runs.db'}"
    healthy, victim = await _park_two(url, llm)
    cut_request(url, victim)
    listed = run_cli("pending", "--store", url)
    assert listed.returncode == 0, listed.stderr  # before: exit 1, a bare JSONDecodeError, nothing listed
    assert listed.stdout.startswith(f"{healthy}\thealthy-1\t") and victim not in listed.stdout
    assert "'victim-1'" in listed.stderr and victim in listed.stderr and "Traceback" not in listed.stderr

    answered = run_cli("answer", "--store", url, "--id", victim, "--ok", "--data", '{"amount": 5}', "--agents",
                       "cli_agents:PAYER", "--base-url", llm.base_url + "/v1", "--api-key", KEY)
    assert answered.returncode == 1 and "'victim-1'" in answered.stderr and victim in answered.stderr
    assert "JSONDecodeError" not in answered.stderr

    doctor = run_cli("doctor", "--store", url, "--json")
    assert doctor.returncode == 1, doctor.stderr  # damage found, not yet quarantined
    [report] = json.loads(doctor.stdout)
    assert (report["run_id"], report["quarantined"], report["rows"][0]["request_id"]) == ("victim-1", False, victim)
    fixed = run_cli("doctor", "--store", url, "--quarantine")
    assert fixed.returncode == 0, fixed.stderr
    assert "victim-1" in fixed.stdout and "quarantined" in fixed.stdout
    again = run_cli("pending", "--store", url)
    assert (again.returncode, again.stderr) == (0, "") and again.stdout.startswith(healthy)


async def test_bytes_that_are_not_utf8_damage_one_sqlite_row_not_the_read(tmp_path: Path, llm: LlmServer) -> None:
    import sqlite3

    url = f"sqlite:///{tmp_path / 'runs.db'}"
    healthy, victim = await _park_two(url, llm)
    conn = sqlite3.connect(tmp_path / "runs.db", isolation_level=None)
    try:  # a bad sector's worth of bytes in the stored request (between its tokens)
        conn.execute("UPDATE tn_pending SET request = CAST(substr(request, 1, 1) || X'FFFE' || substr(request, 2) "
                     "AS TEXT) WHERE request_id = ?", (victim,))
    finally:
        conn.close()
    async with open_store(url) as store:
        assert [p.request.id for p in await store.pending()] == [healthy]  # before: StoreUnavailable for all
        [damaged] = await store.check()
        assert (damaged.run_id, damaged.rows[0].request_id) == ("victim-1", victim)
