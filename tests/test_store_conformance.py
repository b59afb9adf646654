"""One conformance suite for every durable store: memory, file, SQLite and PostgreSQL.

Each test runs once per backend (`store_url`); the PostgreSQL cases skip without a server (set
TOOLNEXUS_TEST_POSTGRES). The rules under test: a run id is used once; the lease admits one live
writer (expired, dead-on-this-host or taken over leases excepted) and fences every commit; a
commit is one transaction; transcripts are append-only; the answer ledger is a compare-and-set;
the schema is versioned; an unreachable store says so.
"""

from __future__ import annotations

import asyncio
import os
import subprocess
import sys
from pathlib import Path

import pytest

from support.stores import SKIP_PG, postgres_base, shared_store_url, store_url  # noqa: F401 - fixtures
from toolnexus.durable import (
    AnswerAlreadyApplied,
    Changes,
    ConversationOps,
    Holder,
    LeaseLost,
    PendingRow,
    RequestWithdrawn,
    RunChanged,
    RunExists,
    RunInProgress,
    RunNotFound,
    StoreConflict,
    StoreUnavailable,
    StoreVersionError,
)
from toolnexus.durable._model import dumps
from toolnexus.stores import open_store

TTL = 30.0


def dead_holder() -> Holder:
    """A holder whose process has exited (a real child process, reaped)."""
    proc = subprocess.Popen([sys.executable, "-c", "pass"])
    proc.wait()
    me = Holder.here()
    return Holder("dead-" + me.id, me.host, proc.pid, None)


def msgs(*texts: str) -> list[str]:
    return [dumps({"role": "user", "content": t}) for t in texts]


async def commit(store, run_id, holder, **parts):
    return await store.commit(run_id, holder, Changes(**parts), lease_ttl=TTL)


def pending_row(request_id: str, run_id: str = "r1") -> PendingRow:
    return PendingRow(request_id, run_id, "root/a.1", {"id": request_id, "kind": "approval", "prompt": "ok?"},
                      ["root", "a.1"], 1.0, None)


async def test_start_run_creates_the_run_with_its_first_changes_and_refuses_a_used_id(store_url):
    me = Holder.here()
    first = Changes(status="running", handles={"root": {"id": "root"}},
                    conversations={"c": ConversationOps(0, msgs("a"))}, trace=["t1"])
    async with open_store(store_url) as store:
        version = await store.start_run("r1", kind="agents", entry_agent="a", holder=me, lease_ttl=TTL,
                                        state={"k": 1}, changes=first)
        with pytest.raises(RunExists):
            await store.start_run("r1", kind="agents", entry_agent="b", holder=Holder.here(), lease_ttl=TTL,
                                  state=None, changes=Changes(handles={"root": {"id": "other"}}))
        after = await commit(store, "r1", me, trace=["t2"])  # the lease is ours
        loaded = await store.load("r1")
    assert after == version + 1 == loaded.version
    assert (loaded.entry_agent, loaded.state, loaded.status) == ("a", {"k": 1}, "running")
    assert loaded.handles == {"root": {"id": "root"}}
    assert [m["content"] for m in loaded.conversations["c"]] == ["a"]
    assert loaded.trace == ["t1", "t2"]


async def test_a_run_id_is_used_once_and_an_unknown_one_is_reported(store_url):
    async with open_store(store_url) as store:
        me = Holder.here()
        await store.create_run("r1", kind="agents", entry_agent="a", holder=me, lease_ttl=TTL)
        with pytest.raises(RunExists, match="'r1' is already used"):
            await store.create_run("r1", kind="agents", entry_agent="a", holder=me, lease_ttl=TTL)
        with pytest.raises(RunNotFound, match="no run 'nope'"):
            await store.load("nope")
        assert [(s.run_id, s.status, s.entry_agent) for s in await store.runs()] == [("r1", "running", "a")]


async def test_the_lease_admits_one_live_holder_and_fences_its_commits(store_url):
    async with open_store(store_url) as store:
        a, b = Holder.here(), Holder.here()
        await store.create_run("r1", kind="agents", entry_agent="a", holder=a, lease_ttl=TTL)
        with pytest.raises(RunInProgress, match="is being run by process"):
            await store.acquire("r1", b, lease_ttl=TTL)
        assert await store.acquire("r1", b, lease_ttl=TTL, takeover=True) >= 1
        with pytest.raises(LeaseLost):  # a taken-over holder can no longer write
            await commit(store, "r1", a, status="running")
        await store.renew("r1", b, TTL)
        with pytest.raises(LeaseLost):
            await store.renew("r1", a, TTL)
        await store.release("r1", b)
        assert await store.acquire("r1", a, lease_ttl=TTL) >= 1  # released: free for anyone


async def test_a_commit_fenced_on_a_version_is_refused_once_the_run_moved_on(store_url):
    """A holder passes the version its last commit returned: a write it did not make (another
    runtime under the same lease) is never overwritten — whether or not the commit reads the run
    row back (trace lines), and whether it runs now or was prepared for a worker thread."""
    async with open_store(store_url) as store:
        me = Holder.here()
        await store.create_run("r1", kind="agents", entry_agent="a", holder=me, lease_ttl=TTL)
        v1 = await commit(store, "r1", me, handles={"root": {"id": "root", "n": 1}})
        v2 = await commit(store, "r1", me, handles={"root": {"id": "root", "n": 2}}, expect_version=v1)
        assert v2 == v1 + 1 == (await store.load("r1")).version
        for extra in ({}, {"trace": ["t"]}):
            with pytest.raises(RunChanged, match=f"version {v1}, store has {v2}"):
                await commit(store, "r1", me, handles={"root": {"id": "root", "n": 3}}, expect_version=v1, **extra)
        prepared = store.prepare_commit("r1", me, Changes(handles={"root": {"id": "root", "n": 4}}, expect_version=v1),
                                        lease_ttl=TTL)
        if prepared is not None:
            with pytest.raises(RunChanged):
                await asyncio.to_thread(prepared.run)
        loaded = await store.load("r1")
        assert (loaded.version, loaded.handles["root"]["n"], loaded.trace) == (v2, 2, [])
        with pytest.raises(LeaseLost):  # not our lease: that, not the version, is what refuses it
            await commit(store, "r1", Holder.here(), status="x", expect_version=v2)
        assert await commit(store, "r1", me, status="running", expect_version=v2) == v2 + 1


async def test_an_expired_lease_or_a_dead_holder_frees_the_run(store_url):
    async with open_store(store_url) as store:
        gone, me = dead_holder(), Holder.here()
        await store.create_run("r1", kind="agents", entry_agent="a", holder=gone, lease_ttl=TTL)
        await store.acquire("r1", me, lease_ttl=TTL)  # its holder died on this host
        other = Holder("elsewhere", "another-host", 1, None)
        await store.create_run("r2", kind="agents", entry_agent="a", holder=other, lease_ttl=0.0)
        await store.acquire("r2", me, lease_ttl=TTL)  # expired
        await store.create_run("r3", kind="agents", entry_agent="a", holder=other, lease_ttl=TTL)
        with pytest.raises(RunInProgress):  # a live lease on another host is never judged dead here
            await store.acquire("r3", me, lease_ttl=TTL)


async def test_commits_append_transcripts_rewind_only_what_they_drop_and_round_trip(store_url):
    async with open_store(store_url) as store:
        me = Holder.here()
        await store.create_run("r1", kind="agents", entry_agent="a", holder=me, lease_ttl=TTL)
        v1 = await commit(store, "r1", me, conversations={"c": ConversationOps(0, msgs("a", "b"))},
                          handles={"root": {"id": "root", "n": float("inf")}}, trace=["t1"])
        v2 = await commit(store, "r1", me, conversations={"c": ConversationOps(2, msgs("c", "d"))}, trace=["t2"])
        v3 = await commit(store, "r1", me, conversations={"c": ConversationOps(3, msgs("e"))},
                          calls={("c", "call-1"): {"status": "started", "name": "t", "args": {"k": "ü"}}})
        assert v1 < v2 < v3
        loaded = await store.load("r1")
        assert [m["content"] for m in loaded.conversations["c"]] == ["a", "b", "c", "e"]
        assert loaded.handles["root"] == {"id": "root", "n": float("inf")}
        assert loaded.trace == ["t1", "t2"]
        assert loaded.calls == {("c", "call-1"): {"status": "started", "name": "t", "args": {"k": "ü"}}}
        await commit(store, "r1", me, calls={("c", "call-1"): None})
        assert (await store.load("r1")).calls == {}
        await commit(store, "r1", me, conversations={"e": ConversationOps(0, msgs("q"))})
        await commit(store, "r1", me, conversations={"e": ConversationOps(0, [], 1)},  # rewound to nothing
                     handles={"e": {"id": "e"}})
        loaded = await store.load("r1")
        assert (loaded.conversations["e"], len(loaded.conversations["c"])) == ([], 4)
        assert loaded.handles == {"root": {"id": "root", "n": float("inf")}, "e": {"id": "e"}}


async def test_a_store_new_to_a_conversation_rewinds_and_appends_to_it_in_one_commit(shared_store_url):
    """Another store object (another process, say) does not know the conversation's key yet: its
    first commit both finds the key and writes the rows, a rewind included; the next appends."""
    me = Holder.here()
    async with open_store(shared_store_url) as first:
        await first.create_run("r1", kind="agents", entry_agent="a", holder=me, lease_ttl=TTL)
        v1 = await commit(first, "r1", me, conversations={"c": ConversationOps(0, msgs("a", "b", "c"), 0)})
    async with open_store(shared_store_url) as second:
        v2 = await commit(second, "r1", me, conversations={"c": ConversationOps(1, msgs("x"))}, expect_version=v1)
        await commit(second, "r1", me, conversations={"c": ConversationOps(2, msgs("y"), 2)}, expect_version=v2)
        loaded = await second.load("r1")
    assert [m["content"] for m in loaded.conversations["c"]] == ["a", "x", "y"]


async def test_the_ledger_is_a_compare_and_set(store_url):
    async with open_store(store_url) as store:
        me, other = Holder.here(), Holder.here()
        await store.create_run("r1", kind="agents", entry_agent="a", holder=me, lease_ttl=TTL)
        await commit(store, "r1", me, pending=[pending_row("p1"), pending_row("p2")], status="pending")
        assert [p.request.id for p in await store.pending()] == ["p1", "p2"]
        assert (await store.pending())[0].path == ["root", "a.1"]
        row = await store.claim("p1", me, {"id": "p1", "ok": True}, ttl=TTL, run_id="r1")
        assert row.status == "claimed" and row.answer == {"id": "p1", "ok": True}
        with pytest.raises(AnswerAlreadyApplied, match="being answered right now") as caught:
            await store.claim("p1", other, {"id": "p1", "ok": True}, ttl=TTL)
        assert caught.value.run_id == "r1"
        await store.unclaim("p1", me)
        await store.claim("p1", other, {"id": "p1", "ok": False}, ttl=TTL)  # given back: claimable again
        await commit(store, "r1", me, applied=["p1"], cancelled=["p2"])
        with pytest.raises(AnswerAlreadyApplied, match="was already answered"):
            await store.claim("p1", me, {"id": "p1", "ok": True}, ttl=TTL)
        with pytest.raises(RequestWithdrawn, match="withdrawn"):
            await store.claim("p2", me, {"id": "p2", "ok": True}, ttl=TTL)
        assert await store.pending() == []
        assert (await store.find_request("p1")).status == "applied"


async def test_a_claim_by_a_dead_process_can_be_taken_over(store_url):
    async with open_store(store_url) as store:
        me = Holder.here()
        await store.create_run("r1", kind="agents", entry_agent="a", holder=me, lease_ttl=TTL)
        await commit(store, "r1", me, pending=[pending_row("p1")])
        await store.claim("p1", dead_holder(), {"id": "p1", "ok": True}, ttl=TTL)
        row = await store.claim("p1", me, {"id": "p1", "ok": True}, ttl=TTL)
        assert row.claim["id"] == me.id


async def test_a_request_the_ledger_never_saw_is_claimed_by_id_once(store_url):
    async with open_store(store_url) as store:
        me = Holder.here()
        await store.claim("loose", me, {"id": "loose", "ok": True}, ttl=TTL)
        await store.mark_applied("loose", me)
        with pytest.raises(AnswerAlreadyApplied):
            await store.claim("loose", Holder.here(), {"id": "loose", "ok": True}, ttl=TTL)


async def test_client_conversations_are_saved_append_only_and_halts_open_requests(store_url):
    async with open_store(store_url) as store:
        assert await store.get("chat") is None
        await store.save("chat", [{"role": "user", "content": "hi"}])
        messages = await store.get("chat")
        messages.append({"role": "assistant", "content": "yo"})
        await store.save_halt("chat", messages, {"id": "h1", "kind": "input", "prompt": "more?"})
        assert [p.run_id for p in await store.pending()] == ["conversation:chat"]
        me = Holder.here()
        await store.claim("h1", me, {"id": "h1", "ok": True}, ttl=TTL)
        again = await store.get("chat")
        await store.save_applied("chat", again + [{"role": "user", "content": "x"}], "h1", me)
        assert [m["content"] for m in await store.get("chat")] == ["hi", "yo", "x"]
        assert await store.pending() == []
        assert {s.run_id: s.kind for s in await store.runs()} == {"conversation:chat": "conversation"}


async def test_a_client_conversation_may_have_any_id_even_one_a_run_uses_internally(store_url):
    async with open_store(store_url) as store:
        await store.save("record:7", [{"role": "user", "content": "hi"}, {"role": "assistant", "content": "yo"}])
        assert [m["content"] for m in await store.get("record:7")] == ["hi", "yo"]
        loaded = await store.load("conversation:record:7")
        assert ([m["content"] for m in loaded.conversations["record:7"]], loaded.handles) == (["hi", "yo"], {})


async def test_a_conversation_changed_by_another_writer_is_a_conflict_not_a_silent_overwrite(shared_store_url):
    async with open_store(shared_store_url) as one, open_store(shared_store_url) as two:
        await one.save("chat", [{"role": "user", "content": "a"}])
        mine = await one.get("chat")
        theirs = await two.get("chat")
        await two.save("chat", theirs + [{"role": "assistant", "content": "b"}])
        with pytest.raises(StoreConflict, match="changed by another writer"):
            await one.save("chat", mine + [{"role": "assistant", "content": "c"}])
        assert [m["content"] for m in await one.get("chat")] == ["a", "b"]


async def test_what_a_store_remembers_of_conversations_is_bounded_but_a_held_one_keeps_its_conflict_check(
        shared_store_url):
    async with open_store(shared_store_url) as one, open_store(shared_store_url) as two:
        one._loaded_ids.keep = 4
        await one.save("chat", [{"role": "user", "content": "a"}])
        async with one.lock("chat"):  # as a client holds it from its get to its save
            mine = await one.get("chat")
            for i in range(10):  # other conversations pass through meanwhile
                await one.save(f"other-{i}", [{"role": "user", "content": str(i)}])
            assert len(one._loaded_ids) <= 5
            theirs = await two.get("chat")
            await two.save("chat", theirs + [{"role": "assistant", "content": "b"}])
            with pytest.raises(StoreConflict, match="changed by another writer"):
                await one.save("chat", mine + [{"role": "assistant", "content": "c"}])
        assert [m["content"] for m in await one.get("chat")] == ["a", "b"]
        assert [m["content"] for m in await one.get("other-0")] == ["0"]  # forgotten here, still stored


async def test_statuses_come_back_as_plain_strings_from_every_store(store_url):
    from toolnexus.agents._vocab import TaskStatus

    me = Holder.here()
    async with open_store(store_url) as store:
        await store.start_run("r1", kind="agents", entry_agent="a", holder=me, lease_ttl=TTL, state=None,
                              changes=Changes(status=TaskStatus.DONE))
        (summary,), loaded = await store.runs(), await store.load("r1")
    assert type(summary.status) is str and type(loaded.status) is str and summary.status == "done"


async def test_delete_run_forgets_the_run_and_its_requests(store_url):
    async with open_store(store_url) as store:
        me = Holder.here()
        await store.create_run("r1", kind="agents", entry_agent="a", holder=me, lease_ttl=TTL)
        await commit(store, "r1", me, pending=[pending_row("p1")], conversations={"c": ConversationOps(0, msgs("x"))})
        await store.delete_run("r1")
        assert await store.runs() == [] and await store.pending() == [] and await store.find_request("p1") is None


async def test_the_store_survives_reopening_in_another_object(shared_store_url):
    me = Holder.here()
    async with open_store(shared_store_url) as store:
        await store.create_run("r1", kind="agents", entry_agent="a", holder=me, lease_ttl=TTL)
        await commit(store, "r1", me, conversations={"c": ConversationOps(0, msgs("x", "y"))})
    async with open_store(shared_store_url) as store:
        assert [m["content"] for m in (await store.load("r1")).conversations["c"]] == ["x", "y"]


# -- versions ----------------------------------------------------------------------------------------


def _write_newer_schema(url: str) -> None:
    """Mark the store as written by a future toolnexus (schema version 999), as a newer release would."""
    if url.startswith("file:"):
        Path(url[5:], "store.json").write_text('{"format": "toolnexus-run-store", "schema": 999}')
    elif url.startswith("sqlite:"):
        import sqlite3

        conn = sqlite3.connect(url[len("sqlite:///"):])
        conn.execute("UPDATE tn_meta SET value = '999' WHERE key = 'schema'")
        conn.commit()
        conn.close()
    else:
        import psycopg

        base, _, query = url.partition("?")
        schema = dict(p.split("=") for p in query.split("&"))["schema"]
        with psycopg.connect(base, autocommit=True) as conn:
            conn.execute(f'UPDATE "{schema}".tn_meta SET value = %s WHERE key = %s', ("999", "schema"))


async def test_a_store_written_by_a_newer_version_fails_fast(shared_store_url):
    async with open_store(shared_store_url) as store:
        await store.runs()  # creates the schema
    _write_newer_schema(shared_store_url)
    with pytest.raises(StoreVersionError, match="newer toolnexus"):
        async with open_store(shared_store_url) as store:
            await store.runs()


def _sql(url: str, statements: list[str]) -> list[tuple]:
    """Run statements on a SQL store's database as one transaction, outside toolnexus; the last one's rows."""
    rows: list[tuple] = []
    if url.startswith("sqlite:"):
        import sqlite3

        conn = sqlite3.connect(url[len("sqlite:///"):], isolation_level=None)
        try:
            conn.execute("BEGIN IMMEDIATE")
            for sql in statements:
                rows = conn.execute(sql).fetchall()
            conn.execute("COMMIT")
        finally:
            conn.close()
        return rows
    import psycopg

    base, _, query = url.partition("?")
    schema = dict(p.split("=") for p in query.split("&"))["schema"]
    with psycopg.connect(base, options=f"-c search_path={schema}") as conn:
        for sql in statements:
            cur = conn.execute(sql)
            rows = cur.fetchall() if cur.description else []
    return rows


async def test_a_database_in_the_first_schema_is_brought_up_to_date_on_open_and_keeps_its_runs(shared_store_url):
    """Schema 1 kept messages as `(cid, idx)` rows and handle records in a table of their own;
    opening such a database moves both to the one integer key, in the opening transaction, and
    every run reads back as it was."""
    if shared_store_url.startswith("file:"):
        pytest.skip("the file store has no tables")
    me = Holder.here()
    async with open_store(shared_store_url) as store:
        await store.create_run("r1", kind="agents", entry_agent="a", holder=me, lease_ttl=TTL)
        await commit(store, "r1", me, conversations={"c": ConversationOps(0, msgs("a", "b")),
                                                      "d": ConversationOps(0, msgs("z"))},
                     handles={"root": {"id": "root", "n": 1}, "root/a.1": {"id": "root/a.1", "n": 2}})
    pg = shared_store_url.startswith("postgresql")
    big, rowid = ("BIGINT", "") if pg else ("INTEGER", " WITHOUT ROWID")
    _sql(shared_store_url, [  # back to the first layout, as a database an earlier version made
        f"CREATE TABLE tn_handles (run_id TEXT NOT NULL, handle_id TEXT NOT NULL, record TEXT NOT NULL, "
        f"PRIMARY KEY (run_id, handle_id)){rowid}",
        "INSERT INTO tn_handles SELECT c.run_id, substr(c.conv_id, 8), m.message FROM tn_convs c "
        "JOIN tn_messages m ON m.k = c.cid * 4294967296 WHERE c.conv_id LIKE 'record:%'",
        "DELETE FROM tn_messages WHERE k IN (SELECT cid * 4294967296 FROM tn_convs WHERE conv_id LIKE 'record:%')",
        "DELETE FROM tn_convs WHERE conv_id LIKE 'record:%'",
        f"CREATE TABLE tn_messages_v1 (cid {big} NOT NULL, idx {big} NOT NULL, message TEXT NOT NULL, "
        f"PRIMARY KEY (cid, idx)){rowid}",
        "INSERT INTO tn_messages_v1 SELECT k / 4294967296, k % 4294967296, message FROM tn_messages",
        "DROP TABLE tn_messages", "ALTER TABLE tn_messages_v1 RENAME TO tn_messages",
        "UPDATE tn_meta SET value = '1' WHERE key = 'schema'"])
    assert len(_sql(shared_store_url, ["SELECT * FROM tn_handles"])) == 2

    async def first_look() -> list[str]:  # two store objects (two processes, say) open it at once
        async with open_store(shared_store_url) as other:
            return [r.run_id for r in await other.runs()]

    assert await asyncio.gather(first_look(), first_look()) == [["r1"], ["r1"]]
    async with open_store(shared_store_url) as store:
        loaded = await store.load("r1")
        assert {c: [m["content"] for m in ms] for c, ms in loaded.conversations.items()} == {"c": ["a", "b"],
                                                                                          "d": ["z"]}
        assert loaded.handles == {"root": {"id": "root", "n": 1}, "root/a.1": {"id": "root/a.1", "n": 2}}
        await commit(store, "r1", me, conversations={"c": ConversationOps(1, msgs("x"))},
                     handles={"root/a.1": {"id": "root/a.1", "n": 3}})
        loaded = await store.load("r1")
        assert [m["content"] for m in loaded.conversations["c"]] == ["a", "x"]
        assert loaded.handles["root/a.1"] == {"id": "root/a.1", "n": 3}
    assert _sql(shared_store_url, ["SELECT value FROM tn_meta WHERE key = 'schema'"]) == [("2",)]


async def test_a_run_written_by_a_newer_version_fails_fast(store_url):
    async with open_store(store_url) as store:
        me = Holder.here()
        await store.create_run("r1", kind="agents", entry_agent="a", holder=me, lease_ttl=TTL)
        if store_url == "memory:":
            store._runs["r1"].format = 99
        elif store_url.startswith("file:"):
            import json

            path = next(Path(store_url[5:], "runs").iterdir()) / "run.json"
            row = json.loads(path.read_text())
            row["doc"]["format"] = 99
            path.write_text(json.dumps(row))
        else:
            await store._run(_set_format_steps("r1", 99))
        with pytest.raises(StoreVersionError, match="run format 99"):
            await store.load("r1")


def _set_format_steps(run_id: str, value: int):
    from toolnexus.stores._sql import Query

    yield Query("UPDATE tn_runs SET format = ? WHERE run_id = ?", (value, run_id))


# -- atomicity and failures ------------------------------------------------------------------------


async def test_a_commit_that_fails_midway_writes_nothing(tmp_path):
    """The SQL stores run a commit as one transaction: a failure after the transcript rewind but
    before the new rows (the handle's record among them) leaves both as they were."""
    from toolnexus.stores._sqlite import SqliteStore

    class FailOnHandles(SqliteStore):
        fail = False

        def _execute(self, conn, query):
            if self.fail and query.sql.startswith("INSERT INTO tn_messages"):
                raise RuntimeError("injected crash between the rewind and the state flip")
            return super()._execute(conn, query)

    store = FailOnHandles(str(tmp_path / "r.db"))
    me = Holder.here()
    async with store:
        await store.create_run("r1", kind="agents", entry_agent="a", holder=me, lease_ttl=TTL)
        await commit(store, "r1", me, conversations={"c": ConversationOps(0, msgs("a", "b", "c"))},
                     handles={"h": {"state": "running"}})
        store.fail = True
        with pytest.raises(RuntimeError, match="injected"):
            await commit(store, "r1", me, conversations={"c": ConversationOps(1, [])},
                         handles={"h": {"state": "suspended"}})
        store.fail = False
        loaded = await store.load("r1")
        assert [m["content"] for m in loaded.conversations["c"]] == ["a", "b", "c"]
        assert loaded.handles["h"] == {"state": "running"}


async def test_a_file_store_commit_cut_after_its_redo_log_is_completed_on_next_use(tmp_path):
    from toolnexus.stores._file import FileStore

    class CutAfterRedo(FileStore):
        cut = False

        def _apply_redo(self, redo):
            if self.cut:
                raise OSError("power cut after the redo log was written")
            return super()._apply_redo(redo)

    me = Holder.here()
    store = CutAfterRedo(str(tmp_path / "fs"))
    async with store:
        await store.create_run("r1", kind="agents", entry_agent="a", holder=me, lease_ttl=TTL)
        await commit(store, "r1", me, conversations={"c": ConversationOps(0, msgs("a"))})
        store.cut = True
        with pytest.raises(StoreUnavailable):
            await commit(store, "r1", me, conversations={"c": ConversationOps(1, msgs("b"))})
    async with open_store(f"file:{tmp_path / 'fs'}") as again:
        assert [m["content"] for m in (await again.load("r1")).conversations["c"]] == ["a", "b"]


async def test_an_unreachable_postgres_server_is_a_clear_error_at_once_with_its_reason(caplog):
    import logging

    caplog.set_level(logging.WARNING)
    with pytest.raises(StoreUnavailable, match=r"cannot reach the PostgreSQL store postgresql://nobody:\*\*\*@127\.0\.0\.1:1/x"
                                               r"\?timeout=30: .*Connection refused") as failed:
        async with open_store("postgresql://nobody:s3cret@127.0.0.1:1/x?timeout=30") as store:
            await asyncio.wait_for(store.runs(), 10)  # refused at once, not after the 30 s pool timeout
    assert "s3cret" not in str(failed.value) and failed.value.__cause__ is None
    assert [r.getMessage() for r in caplog.records if r.name.startswith("psycopg")] == []  # no pool retry noise


async def test_a_sqlite_store_in_a_missing_folder_is_a_clear_error(tmp_path):
    with pytest.raises(StoreUnavailable, match="does not exist"):
        async with open_store(f"sqlite:///{tmp_path / 'no' / 'such' / 'runs.db'}") as store:
            await store.runs()


async def test_a_locked_sqlite_database_is_reported_and_loses_nothing(tmp_path):
    import sqlite3

    path = tmp_path / "r.db"
    me = Holder.here()
    async with open_store(f"sqlite:///{path}?timeout=0.2") as store:
        await store.create_run("r1", kind="agents", entry_agent="a", holder=me, lease_ttl=TTL)
        await commit(store, "r1", me, conversations={"c": ConversationOps(0, msgs("a"))})
        blocker = sqlite3.connect(path, isolation_level=None)
        blocker.execute("BEGIN EXCLUSIVE")
        try:
            with pytest.raises(StoreUnavailable, match="holds a write lock"):
                await commit(store, "r1", me, conversations={"c": ConversationOps(1, msgs("b"))})
        finally:
            blocker.execute("ROLLBACK")
            blocker.close()
        await commit(store, "r1", me, conversations={"c": ConversationOps(1, msgs("b"))})
        assert [m["content"] for m in (await store.load("r1")).conversations["c"]] == ["a", "b"]


async def test_sqlite_commits_never_run_a_checkpoint_the_store_checkpoints_in_the_background(tmp_path, monkeypatch):
    """Copying the WAL back into the database costs two fsyncs: the store does it on a connection
    and thread of its own every so many commits to the file (by any store object of this process:
    a store opened per request counts too), and a commit's own connection checkpoints only past a
    far bound (should that job fall behind)."""
    import sqlite3
    import threading

    from toolnexus.stores import _sqlite as sqlite_store

    monkeypatch.setattr(sqlite_store, "CHECKPOINT_EVERY", 4)
    done: list[tuple[str, tuple[int, int, int]]] = []
    checkpointed = threading.Event()
    real = sqlite_store._Checkpointer.run

    def checkpoint(self):
        done.append((threading.current_thread().name, real(self)))
        checkpointed.set()

    monkeypatch.setattr(sqlite_store._Checkpointer, "run", checkpoint)
    path = tmp_path / "r.db"
    me = Holder.here()
    async with open_store(f"sqlite:///{path}") as first:  # the schema: the 1st commit to the file
        await first.create_run("r1", kind="agents", entry_agent="a", holder=me, lease_ttl=TTL)  # the 2nd
        assert first._conn.execute("PRAGMA wal_autocheckpoint").fetchone() == (sqlite_store.WAL_BOUND_PAGES,)
        async with open_store(f"sqlite:///{path}") as store:  # set up already: opening it writes nothing
            await commit(store, "r1", me, conversations={"c": ConversationOps(0, msgs("a"))})  # the 3rd
            assert not checkpointed.is_set()
            await commit(
                store, "r1", me, conversations={"c": ConversationOps(1, msgs("b"))}
            )  # the 4th (counted per file)
            assert await asyncio.to_thread(checkpointed.wait, 30)
            await commit(store, "r1", me, conversations={"c": ConversationOps(2, msgs("c"))})
            assert [m["content"] for m in (await store.load("r1")).conversations["c"]] == ["a", "b", "c"]
    [(thread, (busy, frames, copied))] = done
    assert thread.startswith("toolnexus-sqlite-wal")  # off the commits' threads
    assert busy == 0 and copied == frames > 0  # everything the WAL held went into the database
    conn = sqlite3.connect(path)
    try:
        assert [r[0] for r in conn.execute("SELECT run_id FROM tn_runs")] == ["r1"]
    finally:
        conn.close()


async def test_a_sqlite_checkpoint_that_cannot_start_never_fails_the_commit_that_asked(tmp_path, monkeypatch, caplog):
    from toolnexus.stores import _sqlite as sqlite_store

    def no_thread(self):
        raise RuntimeError("can't start new thread")

    monkeypatch.setattr(sqlite_store, "CHECKPOINT_EVERY", 1)
    monkeypatch.setattr(sqlite_store._Checkpointer, "request", no_thread)
    me = Holder.here()
    async with open_store(f"sqlite:///{tmp_path / 'r.db'}") as store:
        await store.create_run("r1", kind="agents", entry_agent="a", holder=me, lease_ttl=TTL)
        assert await commit(store, "r1", me, conversations={"c": ConversationOps(0, msgs("a"))}) == 2
        assert [m["content"] for m in (await store.load("r1")).conversations["c"]] == ["a"]
    assert "could not start a checkpoint" in caplog.text


def test_open_store_parses_urls_and_refuses_unknown_ones(tmp_path):
    assert type(open_store("memory:")).__name__ == "MemoryStore"
    assert open_store("sqlite:///rel.db").path == os.path.abspath("rel.db")
    assert open_store("sqlite:////abs/runs.db").path == "/abs/runs.db"
    assert open_store(f"file:{tmp_path}").directory == str(tmp_path)
    assert "***" in repr(open_store("postgresql://u:pw@h/db")) and "pw" not in repr(open_store("postgresql://u:pw@h/db"))
    for bad in ("", "redis://x", "sqlite:///:memory:", "sqlite:///x.db?bogus=1"):
        with pytest.raises(ValueError, match="toolnexus"):
            open_store(bad)


def test_postgres_skip_message_says_how_to_enable():
    if postgres_base() is None:
        assert "TOOLNEXUS_TEST_POSTGRES" in SKIP_PG
    else:
        assert postgres_base().startswith("postgres")


async def test_many_concurrent_commits_from_two_store_objects_serialise(shared_store_url):
    """Two writers on one store (as two processes would be): each claim succeeds exactly once."""
    async with open_store(shared_store_url) as one, open_store(shared_store_url) as two:
        me = Holder.here()
        await one.create_run("r1", kind="agents", entry_agent="a", holder=me, lease_ttl=TTL)
        await commit(one, "r1", me, pending=[pending_row(f"p{i}") for i in range(8)])
        holders = [Holder.here() for _ in range(16)]

        async def try_claim(store, holder, i):
            try:
                await store.claim(f"p{i}", holder, {"id": f"p{i}", "ok": True}, ttl=TTL)
                return True
            except AnswerAlreadyApplied:
                return False

        wins = await asyncio.gather(*(try_claim(one if n % 2 else two, holders[n], n // 2) for n in range(16)))
        assert sum(wins) == 8  # each of the 8 requests claimed once


async def test_plain_records_are_kept_per_namespace_in_write_order(store_url):
    async with open_store(store_url) as store:
        assert await store.get_record("tasks", "t1") is None
        await store.put_record("tasks", "t1", {"id": "t1", "n": 1})
        await store.put_record("tasks", "t2", {"id": "t2", "n": 2})
        await store.put_record("tasks", "t1", {"id": "t1", "n": 3})
        await store.put_record("other", "t1", {"id": "x"})
        assert await store.get_record("tasks", "t1") == {"id": "t1", "n": 3}
        assert [r["id"] for r in await store.list_records("tasks")] == ["t2", "t1"]
        assert await store.list_records("none") == []


async def test_closing_a_store_does_not_wait_for_the_loops_default_executor(store_url):
    """Tools keep every default worker thread busy (slow plain functions): a store still opens,
    writes and closes at once — it never queues behind them."""
    import threading
    from concurrent.futures import ThreadPoolExecutor

    busy, release = ThreadPoolExecutor(1), threading.Event()
    loop = asyncio.get_running_loop()
    loop.set_default_executor(busy)
    held = loop.run_in_executor(None, release.wait, 30)  # the only default worker, held
    try:
        store = open_store(store_url)
        await asyncio.wait_for(store.open(), 10)
        await asyncio.wait_for(store.create_run("r1", kind="agents", entry_agent="a", holder=Holder.here(),
                                                lease_ttl=TTL), 10)
        await asyncio.wait_for(store.aclose(), 10)
        assert not held.done()  # all of it while the default executor was still busy
    finally:
        release.set()
        await held


async def test_opening_a_store_that_is_set_up_takes_no_table_lock(shared_store_url):
    """A process opening the store while another one writes must not wait for it (nor, on
    PostgreSQL, deadlock with it: the schema statements' table locks did, under load)."""
    if shared_store_url.startswith("file:"):
        pytest.skip("the file store has no tables")
    async with open_store(shared_store_url):
        pass  # set up once
    if shared_store_url.startswith("sqlite"):
        import sqlite3

        writer = sqlite3.connect(shared_store_url.removeprefix("sqlite:///"), isolation_level=None)
        writer.execute("BEGIN IMMEDIATE")  # holds the database's write lock
        writer.execute("UPDATE tn_meta SET value = value WHERE key = 'schema'")
    else:
        import psycopg

        base, _, query = shared_store_url.partition("?schema=")
        writer = psycopg.connect(base, options=f"-c search_path={query}")
        writer.execute("LOCK TABLE tn_runs IN ROW EXCLUSIVE MODE")
        writer.execute("LOCK TABLE tn_pending IN ROW EXCLUSIVE MODE")
    try:
        second = open_store(shared_store_url)
        await asyncio.wait_for(second.open(), 20)  # the old code waited here for the writer, forever
        await second.aclose()
    finally:
        writer.rollback() if not shared_store_url.startswith("sqlite") else writer.execute("ROLLBACK")
        writer.close()
