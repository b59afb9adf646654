"""`open_store(url)`: pick a durable store by URL.

| URL | store |
|---|---|
| `memory:` | `MemoryStore` — this process only |
| `file:DIR` (also `file:///abs/dir`) | `FileStore` — a directory, several processes on one machine |
| `sqlite:///runs.db`, `sqlite:////abs/runs.db` (`?timeout=S`, `?synchronous=...`, `?retention=30d`) | `SqliteStore` — the default for one machine |
| `postgresql://user@host[:port]/db[?schema=…&pool=…&retention=30d]` (also `postgres://`) | `PostgresStore` — many workers |

`retention=` (a SQL store's, a duration: `30d`, `12h`, or seconds) is how long an ended run is
kept: `store.prune()` without `older_than`, and every worker serving the store (hourly), delete
older ones — unless the worker or the `prune` call says an age of its own, which wins.

Opening is lazy: `open_store` only parses; the first operation (or `async with`) connects and
creates or checks the schema, so a mistyped URL fails here and an unreachable server fails at
first use, each with a message naming the store.
"""  # noqa: E501 - Markdown tables, one row per line

from __future__ import annotations

from urllib.parse import parse_qsl, urlsplit

from ..durable import RunStore
from ..durable._paging import retention_of
from ..errors import ToolnexusValueError


def _sqlite_path(rest: str) -> str:
    """The path of `sqlite:` URLs the usual way: `///rel.db` is relative, `////abs.db` absolute."""
    if rest.startswith("//"):
        rest = rest[2:]
        if rest.startswith("/"):
            rest = rest[1:]
            return rest
    return rest


def open_store(url: str) -> RunStore:
    """The durable store `url` names (see the module docstring). Raises `ValueError` for a URL it
    does not understand."""
    if not isinstance(url, str) or not url.strip():
        raise ToolnexusValueError(
            "toolnexus: open_store needs a URL such as 'sqlite:///runs.db', 'memory:', 'file:DIR' "
            "or 'postgresql://user@host/db'"
        )
    url = url.strip()
    scheme, _, rest = url.partition(":")
    scheme = scheme.lower()
    if scheme == "memory" and rest in ("", "//"):
        from ._memory import MemoryStore

        return MemoryStore()
    if scheme == "file" and rest:
        from ._file import FileStore

        path = rest[2:] if rest.startswith("//") else rest
        return FileStore(path)
    if scheme == "sqlite" and rest:
        from ._sqlite import SqliteStore

        base, _, query = rest.partition("?")
        path = _sqlite_path(base)
        if not path or path == ":memory:":
            raise ToolnexusValueError(
                f"toolnexus: {url!r} names no database file (an in-memory SQLite database cannot be "
                "shared; use 'memory:' for a store in this process)"
            )
        options = dict(parse_qsl(query))
        timeout = float(options.pop("timeout", 10))
        synchronous = options.pop("synchronous", "critical").lower()
        retention = retention_of(options.pop("retention", None), f"in {url!r}")
        if options:
            raise ToolnexusValueError(f"toolnexus: unknown option(s) {', '.join(sorted(options))} in {url!r} (known: "
                                      "timeout, synchronous, retention)")
        return SqliteStore(path, timeout=timeout, synchronous=synchronous, retention=retention)
    if scheme in ("postgresql", "postgres"):
        from ._postgres import PostgresStore

        parts = urlsplit(url)
        known = {"schema", "pool", "timeout", "retention", "sslmode", "connect_timeout", "application_name"}
        unknown = sorted(k for k, _ in parse_qsl(parts.query) if k not in known)
        if unknown:
            raise ToolnexusValueError(f"toolnexus: unknown option(s) {', '.join(unknown)} in the PostgreSQL store URL "
                             f"(known: {', '.join(sorted(known))})")
        return PostgresStore(url)
    raise ToolnexusValueError(f"toolnexus: cannot open a store from {url!r}: use 'sqlite:///runs.db', 'memory:', "
                     "'file:DIR' or 'postgresql://user@host/db'")
