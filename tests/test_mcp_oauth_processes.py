"""OAuth for a remote MCP server, as a suspension, across real processes (issue 29, the acceptance).

An authorization server and the MCP server it protects run as one real process
(`support.oauth_server`); the host is `support.oauth_agent_app`, one fresh process per step, all
sharing one SQLite store (runs, and the tokens kept encrypted beside them). The test plays the
person: it opens the authorization URL the run parked on and hands the redirect to the next
process. Both programs read the time from one clock file, so moving it past the access token's
life makes the server refuse the old token and the client refresh it.
"""

from __future__ import annotations

import json
import os
import sqlite3
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path
from urllib.parse import parse_qs, urlsplit

import httpx
import pytest

from toolnexus.mcp_auth import new_token_key

TESTS = Path(__file__).resolve().parent


@pytest.fixture
def authority(tmp_path: Path) -> Iterator[tuple[str, Path]]:
    clock = tmp_path / "clock"
    clock.write_text("0")
    proc = subprocess.Popen([sys.executable, "-m", "support.oauth_server", "--clock-file", str(clock)], cwd=TESTS,
                            stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True)
    try:
        assert proc.stdout is not None
        line = proc.stdout.readline()
        assert line.startswith("READY "), f"the authorization server did not start: {line!r}"
        yield line.split()[1], clock
    finally:
        proc.terminate()
        proc.wait(timeout=20)


def app(*args: str, key: str) -> dict:
    done = subprocess.run([sys.executable, "-m", "support.oauth_agent_app", *args], cwd=TESTS, capture_output=True,
                          text=True, timeout=120, env={**os.environ, "OAUTH_TEST_KEY": key})
    assert done.returncode == 0, f"oauth_agent_app {args[0]} exited {done.returncode}: {done.stderr[-3000:]}"
    return json.loads(done.stdout.strip().splitlines()[-1])


def sign_in(url: str) -> str:
    """The person: open the authorization URL, approve (the test server approves at once), and
    return the address the browser is sent back to."""
    response = httpx.get(url, follow_redirects=False, timeout=20)
    assert response.status_code == 302
    return response.headers["location"]


def events(base: str) -> list[dict]:
    return [json.loads(line) for line in httpx.get(f"{base}/_log", timeout=20).text.splitlines()]


def stored_bytes(db: Path) -> bytes:
    return b"".join(p.read_bytes() for p in db.parent.iterdir() if p.name.startswith(db.name))


def test_a_run_parks_on_sign_in_resumes_in_another_process_and_the_token_is_refreshed(tmp_path, authority):
    base, clock = authority
    db = tmp_path / "runs.db"
    key = new_token_key()
    common = ("--store", f"sqlite:///{db}", "--mcp", f"{base}/mcp", "--clock-file", str(clock))

    first = app("start", *common, "--run-id", "r1", key=key)
    assert first["status"] == "pending"
    assert first["tools"] == ["docs_call"] and first["status_mcp"] == {"docs": "failed"}
    request = first["pending"]
    assert request["kind"] == "auth" and request["id"].startswith("oau-")
    query = parse_qs(urlsplit(request["url"]).query)
    assert request["url"].startswith(f"{base}/authorize?")
    assert query["code_challenge_method"] == ["S256"] and query["resource"] == [f"{base}/mcp"]
    assert query["scope"] == ["docs:read"] and query["state"] == [request["data"]["state"]]

    landed = sign_in(request["url"])
    final = app("answer", *common, "--id", request["id"], "--url", landed, key=key)
    assert (final["status"], final["text"], final["run_id"]) == ("done", "hello", "r1")

    clock.write_text("3600")  # an hour later, on both sides: the 10-minute access token has expired
    again = app("again", *common, "--run-id", "r2", key=key)
    assert (again["status"], again["text"]) == ("done", "again")
    assert "docs_echo" in again["tools"] and again["status_mcp"] == {"docs": "connected"}

    log = events(base)
    grants = [(e["grant"], e["ok"]) for e in log if e["event"] == "token"]
    assert grants == [("authorization_code", True), ("refresh_token", True)]
    assert [e["event"] for e in log].count("register") == 1  # the registration made in `start` was kept
    assert {e["serial"] for e in log if e["event"] == "mcp"} == {1, 2}  # the refreshed token was used after

    # Nothing the authorization server issued is in the store in clear: tokens and the client secret
    # are encrypted with the host's key.
    secrets = httpx.get(f"{base}/_secrets", timeout=20).json()
    raw = stored_bytes(db)
    assert secrets and not any(s.encode() in raw for s in secrets)
    with sqlite3.connect(db) as conn:
        rows = conn.execute("SELECT value FROM tn_records WHERE ns LIKE 'toolnexus.mcp-oauth%'").fetchall()
    assert rows and all('"ct"' in r[0] and "access_token" not in r[0] for r in rows)
