"""Damaging a store's rows the way a torn write, a bad disk or a hand edit would: straight through
the database (or the files), with another connection, never through the store object.

`cut_request(url, request_id)` cuts a ledger row's request JSON mid-way; `cut_message(url, run_id,
conv, index)` cuts one transcript message; `raw_request(url, request_id)` reads the request text
back byte for byte (to show quarantine kept it). SQLite, PostgreSQL (`?schema=` URLs from
`support.stores`) and file stores.
"""

from __future__ import annotations

import os
import sqlite3
from typing import Any, Optional
from urllib.parse import parse_qsl, quote, urlsplit, urlunsplit

__all__ = ["cut_request", "cut_message", "raw_request", "set_request_text"]

SPAN = 1 << 32


def _sql(url: str) -> tuple[str, Any]:
    """('sqlite' | 'postgres', an open autocommit connection) for a SQL store URL."""
    if url.startswith("sqlite:"):
        path = url[len("sqlite:///"):]
        return "sqlite", sqlite3.connect(path, isolation_level=None)
    import psycopg

    parts = urlsplit(url)
    options = dict(parse_qsl(parts.query))
    schema = options.pop("schema")
    conn = psycopg.connect(urlunsplit(parts._replace(query="")), autocommit=True)
    conn.execute(f'SET search_path TO "{schema}"')
    return "postgres", conn


def _q(dialect: str, sql: str) -> str:
    return sql.replace("?", "%s") if dialect == "postgres" else sql


def _file_dir(url: str) -> str:
    return url[len("file:"):]


def _name(value: str) -> str:
    return quote(value, safe="-_.")


def _request_file(url: str, request_id: str) -> str:
    """A file store's ledger file of `request_id`: in `requests/`, or where quarantine moved it."""
    path = os.path.join(_file_dir(url), "requests", _name(request_id))
    aside = os.path.join(_file_dir(url), "quarantine", "requests", _name(request_id))
    return aside if os.path.exists(aside) else path


def raw_request(url: str, request_id: str) -> Optional[str]:
    """The ledger row's stored request text (a file store: the whole request file)."""
    if url.startswith("file:"):
        with open(_request_file(url, request_id), encoding="utf-8") as fh:
            return fh.read()
    dialect, conn = _sql(url)
    try:
        row = conn.execute(_q(dialect, "SELECT request FROM tn_pending WHERE request_id = ?"), (request_id,)).fetchone()
        return row[0] if row else None
    finally:
        conn.close()


def set_request_text(url: str, request_id: str, text: str) -> None:
    """Overwrite the stored request (a file store: the whole request file) with `text`."""
    if url.startswith("file:"):
        with open(_request_file(url, request_id), "w", encoding="utf-8") as fh:
            fh.write(text)
        return
    dialect, conn = _sql(url)
    try:
        conn.execute(_q(dialect, "UPDATE tn_pending SET request = ? WHERE request_id = ?"), (text, request_id))
    finally:
        conn.close()


def cut_request(url: str, request_id: str) -> str:
    """Cut the stored request JSON in half (mid-JSON, as a torn write would); the original text."""
    original = raw_request(url, request_id)
    assert original is not None, request_id
    set_request_text(url, request_id, original[:len(original) // 2])
    return original


def cut_message(url: str, run_id: str, conv: str, index: int, keep: int = 15) -> None:
    """Cut message `index` of conversation `conv` of `run_id` after `keep` characters."""
    if url.startswith("file:"):
        path = os.path.join(_file_dir(url), "runs", _name(run_id), "conv", _name(conv))
        with open(path, "rb") as fh:
            lines = fh.read().split(b"\n")
        lines[index] = lines[index][:keep]
        with open(path, "wb") as fh:
            fh.write(b"\n".join(lines))
        return
    dialect, conn = _sql(url)
    try:
        (cid,) = conn.execute(_q(dialect, "SELECT cid FROM tn_convs WHERE run_id = ? AND conv_id = ?"),
                              (run_id, conv)).fetchone()
        conn.execute(_q(dialect, "UPDATE tn_messages SET message = substr(message, 1, ?) WHERE k = ?"),
                     (keep, int(cid) * SPAN + index))
    finally:
        conn.close()
