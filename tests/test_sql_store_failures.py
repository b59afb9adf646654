"""The SQL stores when a transaction fails half-way: nothing of it is kept, not even in the
store object's own caches.

A real failure inside the database: a trigger that refuses inserts into the message table (as a
full disk or a dropped connection would fail a statement after others in the same transaction
succeeded). SQLite always; PostgreSQL when TOOLNEXUS_TEST_POSTGRES is set.
"""

from __future__ import annotations

import sqlite3
from pathlib import Path
from typing import Any, Callable, Iterator

import pytest

from support.stores import SKIP_PG, drop_schema, postgres_base
from toolnexus.durable import Changes, ConversationOps, Holder, RunNotFound, StoreUnavailable
from toolnexus.durable._model import dumps
from toolnexus.stores import open_store

TTL = 30.0


def msgs(*texts: str) -> list[str]:
    return [dumps({"role": "user", "content": t}) for t in texts]


def _sqlite(tmp_path: Path) -> Iterator[tuple[str, Callable[[bool], None]]]:
    path = tmp_path / "runs.db"

    def refuse_messages(on: bool) -> None:
        conn = sqlite3.connect(path, isolation_level=None)
        try:
            if on:
                conn.execute("CREATE TRIGGER tn_test_refuse BEFORE INSERT ON tn_messages "
                             "BEGIN SELECT RAISE(ABORT, 'no space left (test)'); END")
            else:
                conn.execute("DROP TRIGGER tn_test_refuse")
        finally:
            conn.close()

    yield f"sqlite:///{path}", refuse_messages


def _postgres() -> Iterator[tuple[str, Callable[[bool], None]]]:
    import uuid

    import psycopg

    base = postgres_base()
    if base is None:
        pytest.skip(SKIP_PG)
    schema = f"tn_t_{uuid.uuid4().hex[:12]}"

    def refuse_messages(on: bool) -> None:
        with psycopg.connect(base, autocommit=True) as conn:
            if on:
                conn.execute(f'CREATE OR REPLACE FUNCTION "{schema}".tn_test_refuse() RETURNS trigger AS $$ '
                             "BEGIN RAISE EXCEPTION 'no space left (test)'; END $$ LANGUAGE plpgsql")
                conn.execute(f'CREATE TRIGGER tn_test_refuse BEFORE INSERT ON "{schema}".tn_messages '
                             f'FOR EACH ROW EXECUTE FUNCTION "{schema}".tn_test_refuse()')
            else:
                conn.execute(f'DROP TRIGGER tn_test_refuse ON "{schema}".tn_messages')

    try:
        yield f"{base}{'&' if '?' in base else '?'}schema={schema}", refuse_messages
    finally:
        drop_schema(base, schema)


@pytest.fixture(params=["sqlite", "postgres"])
def failing(request: Any, tmp_path: Path) -> Iterator[tuple[str, Callable[[bool], None]]]:
    yield from (_sqlite(tmp_path) if request.param == "sqlite" else _postgres())


async def test_a_rolled_back_commit_leaves_no_conversation_key_behind(failing: Any) -> None:
    url, refuse_messages = failing
    me = Holder.here()
    async with open_store(url) as store:
        await store.create_run("r1", kind="agents", entry_agent="a", holder=me, lease_ttl=TTL)
        refuse_messages(True)
        first = Changes(conversations={"root/a.1": ConversationOps(0, msgs("hello"))})
        with pytest.raises(StoreUnavailable, match="no space left"):
            await store.commit("r1", me, first, lease_ttl=TTL)  # the conversation's key was made, then rolled back
        refuse_messages(False)
        again = Changes(conversations={"root/a.1": ConversationOps(0, msgs("hello", "again"))})
        await store.commit("r1", me, again, lease_ttl=TTL)
        loaded = await store.load("r1")
    assert [m["content"] for m in loaded.conversations["root/a.1"]] == ["hello", "again"]


async def test_a_new_run_and_its_first_state_land_together_or_not_at_all(failing: Any) -> None:
    url, refuse_messages = failing
    me = Holder.here()
    first = Changes(status="running", handles={"root": {"id": "root"}},
                    conversations={"root/a.1": ConversationOps(0, msgs("go"))}, trace=["root: created"])
    async with open_store(url) as store:
        refuse_messages(True)
        with pytest.raises(StoreUnavailable, match="no space left"):
            await store.start_run("r1", kind="agents", entry_agent="a", holder=me, lease_ttl=TTL, state={"s": 1},
                                  changes=first)
        with pytest.raises(RunNotFound):
            await store.load("r1")  # no run row without its first state
        assert await store.runs() == []
        refuse_messages(False)
        version = await store.start_run("r1", kind="agents", entry_agent="a", holder=me, lease_ttl=TTL,
                                        state={"s": 1}, changes=first)
        loaded = await store.load("r1")
    assert (loaded.version, loaded.entry_agent, loaded.state) == (version, "a", {"s": 1})
    assert loaded.handles == {"root": {"id": "root"}}
    assert [m["content"] for m in loaded.conversations["root/a.1"]] == ["go"]
    assert loaded.trace == ["root: created"]


async def test_the_conversation_key_cache_is_bounded_and_a_miss_finds_the_stored_key(failing: Any) -> None:
    url, _ = failing
    me = Holder.here()
    async with open_store(url) as store:
        store._keys.keep = 8  # type: ignore[attr-defined]
        await store.create_run("r1", kind="agents", entry_agent="a", holder=me, lease_ttl=TTL)
        convs = [f"root/a.{i}" for i in range(20)]
        for conv in convs:
            await store.commit("r1", me, Changes(conversations={conv: ConversationOps(0, msgs("one"))}), lease_ttl=TTL)
        assert len(store._keys) <= 8  # type: ignore[attr-defined]
        for conv in convs:  # the first ones were forgotten: their keys are looked up, not made anew
            await store.commit("r1", me, Changes(conversations={conv: ConversationOps(1, msgs("two"), 1)}),
                               lease_ttl=TTL)
        loaded = await store.load("r1")
    assert {c: [m["content"] for m in ms] for c, ms in loaded.conversations.items()} == {
        c: ["one", "two"] for c in convs}
