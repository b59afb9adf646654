"""What the durable-run inbox commands (`pending`, `answer`) share: the `--store` flag and errors.

`--store URL` names a durable run store (`toolnexus.stores.open_store`: `sqlite:///runs.db`,
`postgresql://…`, `file:DIR`); it is the store the agent runs were started with (or where
`toolnexus run --once --store URL` parked its run). Without the flag, `$TOOLNEXUS_STORE` is used. Exit codes
beyond the dispatcher's: 3 the answered run now waits on another request (or ended incomplete),
4 the request was already answered (or withdrawn) — nothing was applied.

These verbs only ever work on runs a store already holds, so they never create one: a SQLite file
or a `file:` folder that does not exist is a usage error saying so (a mistyped path would
otherwise become an empty store that reports nothing pending), and `memory:` — a store of this
process alone — is refused. A PostgreSQL URL names a server the store lives in; it is used as is.
"""

from __future__ import annotations

import os
from typing import Any

from ._common import CliExit
from ._flags import Flag

STORE_ENV = "TOOLNEXUS_STORE"
RUN_STORE_FLAG = Flag("store", "URL", "the durable run store: sqlite:///runs.db, postgresql://user@host/db or file:DIR "
                      f"(else ${STORE_ENV})")
EXIT_WAITING = 3
EXIT_ALREADY_ANSWERED = 4


def open_run_store(opts: dict[str, Any], *, existing: bool = True) -> Any:
    """The store `--store` names; a missing or malformed URL — or, with `existing`, a store that
    does not exist yet (see the module docstring) — is a usage error (exit 2)."""
    from ..stores import open_store

    url = opts.get("store") or os.environ.get(STORE_ENV)
    if not url:
        raise CliExit(2, "error: --store URL is required (e.g. --store sqlite:///runs.db)")
    try:
        store = open_store(url)
    except ValueError as exc:
        raise CliExit(2, f"error: {exc}") from None
    if existing:
        _must_exist(url, store)
    return store


def _must_exist(url: str, store: Any) -> None:
    from ..stores import FileStore, MemoryStore, SqliteStore

    if isinstance(store, MemoryStore):
        raise CliExit(2, f"error: --store {url} is a store of one process: it holds no runs here (name the store "
                         "the runs were started with, e.g. sqlite:///runs.db)")
    if isinstance(store, SqliteStore) and not os.path.isfile(store.path):
        raise CliExit(2, f"error: --store {url}: no SQLite database at {store.path} (nothing was created; check the "
                         "path — sqlite:///runs.db is relative to this folder, sqlite:////abs/runs.db absolute)")
    if isinstance(store, FileStore) and not os.path.isdir(store.directory):
        raise CliExit(2, f"error: --store {url}: no store folder at {store.directory} (nothing was created; check "
                         "the path)")
