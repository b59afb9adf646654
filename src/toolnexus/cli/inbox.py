"""What the durable-run inbox commands (`pending`, `answer`) share: the `--store` flag and errors.

`--store URL` names a durable run store (`toolnexus.stores.open_store`: `sqlite:///runs.db`,
`postgresql://…`, `file:DIR`); it is the store the agent runs were started with (or where
`toolnexus run --once --store URL` parked its run). Without the flag, `$TOOLNEXUS_STORE` is used. Exit codes
beyond the dispatcher's: 3 the answered run now waits on another request (or ended incomplete),
4 the request was already answered (or withdrawn) — nothing was applied.
"""

from __future__ import annotations

import os
from typing import Any

from .common import CliExit
from .flags import Flag

__all__ = ["RUN_STORE_FLAG", "EXIT_WAITING", "EXIT_ALREADY_ANSWERED", "open_run_store", "STORE_ENV"]

STORE_ENV = "TOOLNEXUS_STORE"
RUN_STORE_FLAG = Flag("store", "URL", "the durable run store: sqlite:///runs.db, postgresql://user@host/db or file:DIR "
                      f"(else ${STORE_ENV})")
EXIT_WAITING = 3
EXIT_ALREADY_ANSWERED = 4


def open_run_store(opts: dict[str, Any]) -> Any:
    """The store `--store` names; a missing or malformed URL is a usage error (exit 2)."""
    from ..stores import open_store

    url = opts.get("store") or os.environ.get(STORE_ENV)
    if not url:
        raise CliExit(2, "error: --store URL is required (e.g. --store sqlite:///runs.db)")
    try:
        return open_store(url)
    except ValueError as exc:
        raise CliExit(2, f"error: {exc}") from None
