"""The web inbox without a browser: httpx against the ASGI app (and a real uvicorn for the event
stream), on a real SQLite store, answers applied by a real fleet `Worker`. Logins (token, proxy
header, callback), CSRF, no answer by GET, escaping, security headers, paging and filters, who
may answer (groups, the two-person rule on login identities), signed links (once, expiry, another
request, rate limit), the audit trail `toolnexus show` prints. The browser itself:
`tests/browser/` (`make test-browser`).
"""

from __future__ import annotations

import asyncio
import json
import re
from typing import Any, Optional

import httpx
import pytest

from support.inbox_kit import AGENTS, FINANCE, LLM, MODEL, TWO_PEOPLE, effects, park
from toolnexus.approvals import Answerers
from toolnexus.fleet import Worker
from toolnexus.inbox import CallbackAuth, HeaderAuth, Inbox, LinkSigner, RateLimit, TokenAuth, serve_inbox
from toolnexus.stores import open_store

TOKEN = "inbox-token-123"
SECRET = "a-secret-of-more-than-16-bytes"


@pytest.fixture
async def store(tmp_path):
    async with open_store(f"sqlite:///{tmp_path / 'runs.db'}") as s:
        yield s


def client(app: Any, ip: str = "127.0.0.1") -> httpx.AsyncClient:
    return httpx.AsyncClient(transport=httpx.ASGITransport(app=app, client=(ip, 40000)), base_url="http://127.0.0.1")


def csrf_of(html: str) -> str:
    found = re.search(r'name="csrf" value="([^"]+)"', html)
    assert found, "the page has a CSRF field"
    return found.group(1)


async def login(c: httpx.AsyncClient, name: str = "alice") -> None:
    page = await c.get("/login")
    r = await c.post("/login", data={"csrf": csrf_of(page.text), "name": name, "token": TOKEN, "next": "/"})
    assert r.status_code == 303, r.text


async def answer(c: httpx.AsyncClient, rid: str, **form: str) -> httpx.Response:
    page = await c.get(f"/r/{rid}")
    return await c.post(f"/r/{rid}", data={"csrf": csrf_of(page.text), **form})


async def apply_all(store: Any) -> None:
    w = Worker(store, agents=AGENTS, llm=LLM, transport=MODEL, poll_interval=0.1)
    await w.start()
    await w.step()
    await w.wait_idle()
    await w.drain()


def inbox(store: Any, **kw: Any) -> Inbox:
    kw.setdefault("auth", TokenAuth(TOKEN))
    return Inbox(store, secret=SECRET, **kw)


async def test_every_page_needs_a_login_and_a_wrong_token_gets_nothing(store):
    r0 = await park(store, {"order": "A-1", "amount": 5}, "run-login")
    async with client(inbox(store)) as c:
        for path in ("/", f"/r/{r0.pending.id}"):
            r = await c.get(path)
            assert r.status_code == 303 and r.headers["location"].startswith("/login?next=")
        assert (await c.get("/events")).status_code == 401
        page = await c.get("/login")
        bad = await c.post("/login", data={"csrf": csrf_of(page.text), "name": "mallory", "token": "guess-guess"})
        assert bad.status_code == 401 and "not right" in bad.text
        assert (await c.get("/")).status_code == 303
        await login(c)
        listed = await c.get("/")
        assert listed.status_code == 200 and r0.pending.id in listed.text and "alice" in listed.text


async def test_a_proxy_header_counts_only_from_a_trusted_proxy_and_a_callback_names_whom_it_likes(store):
    await park(store, {"order": "A-2", "amount": 5}, "run-proxy")
    app = inbox(store, auth=HeaderAuth("X-Forwarded-Email"))
    async with client(app) as c:
        r = await c.get("/", headers={"X-Forwarded-Email": "carol@example.com"})
        assert r.status_code == 200 and "carol@example.com" in r.text
        assert (await c.get("/")).status_code == 401  # no header: not signed in (no login page of ours)
    async with client(app, ip="10.1.2.3") as c:  # not the proxy: the header means nothing
        assert (await c.get("/", headers={"X-Forwarded-Email": "carol@example.com"})).status_code == 401
    cb = inbox(store, auth=CallbackAuth(lambda scope: "dave" if scope["path"] != "/nobody" else None))
    async with client(cb) as c:
        assert "dave" in (await c.get("/")).text


async def test_no_form_is_accepted_without_its_csrf_token_or_from_another_site(store):
    r0 = await park(store, {"order": "A-3", "amount": 5}, "run-csrf")
    rid = r0.pending.id
    async with client(inbox(store)) as c:
        await login(c)
        forged = await c.post(f"/r/{rid}", data={"csrf": "forged", "decision": "approve"})
        assert forged.status_code == 403
        missing = await c.post(f"/r/{rid}", data={"decision": "approve"})
        assert missing.status_code == 403
        page = await c.get(f"/r/{rid}")
        cross = await c.post(f"/r/{rid}", data={"csrf": csrf_of(page.text), "decision": "approve"},
                             headers={"Origin": "https://evil.example"})
        assert cross.status_code == 403
        got = await c.get(f"/r/{rid}?decision=approve")  # a GET never answers
        assert got.status_code == 200
    assert [p.request.id for p in await store.pending()] == [rid]
    assert (await store.find_request(rid)).status == "open"


async def test_a_prompt_holding_a_script_is_shown_as_text_with_the_security_headers(store):
    r0 = await park(store, {"order": "<script>alert(1)</script>", "amount": 5, "note": "\"><img src=x onerror=1>"},
                    "run-xss")
    async with client(inbox(store)) as c:
        await login(c)
        for path in ("/", "/?fragment=rows", f"/r/{r0.pending.id}"):
            r = await c.get(path)
            assert "<script>alert" not in r.text and "<img src=x" not in r.text
            assert "&lt;script&gt;alert(1)&lt;/script&gt;" in r.text
            csp = r.headers["content-security-policy"]
            assert "script-src 'self'" in csp and "unsafe-inline" not in csp and "frame-ancestors 'none'" in csp
            assert r.headers["x-frame-options"] == "DENY" and r.headers["x-content-type-options"] == "nosniff"
            assert r.headers["referrer-policy"] == "same-origin" and r.headers["cache-control"] == "no-store"
        assert "<script" not in re.sub(r'<script src="[^"]+" defer></script>', "", r.text)  # no inline script
        js = await c.get("/static/inbox.js")
        assert js.status_code == 200 and js.headers["content-type"].startswith("text/javascript")


async def test_pages_and_filters(store):
    for i in range(3):
        await park(store, {"order": f"P-{i}", "amount": i + 1}, f"run-page-{i}")
    fin = await park(store, {"order": "F-1", "amount": 9}, "run-fin", who=FINANCE)
    app = inbox(store, page_size=2, answerers=Answerers({"finance": ["fay"]}))
    async with client(app) as c:
        await login(c, "alice")
        first = await c.get("/")
        assert first.text.count('<tr data-id="') == 2
        after = re.search(r'href="/\?after=([^"]+)"', first.text).group(1)
        second = await c.get(f"/?after={after}")
        assert second.text.count('<tr data-id="') == 2 and "First page" in second.text
        seen = set(re.findall(r'<tr data-id="([^"]+)"', first.text + second.text))
        assert len(seen) == 4
        only = await c.get("/?assignee=finance")
        assert re.findall(r'<tr data-id="([^"]+)"', only.text) == [fin.pending.id]
        mine = await c.get("/?mine=1")  # alice is not in finance
        assert fin.pending.id not in mine.text and mine.text.count('<tr data-id="') == 2
        assert (await c.get("/?agent=finance")).text.count('<tr data-id="') == 1
        assert (await c.get("/?kind=input")).text.count('<tr data-id="') == 0
        assert (await c.get("/?older_than=1d")).text.count('<tr data-id="') == 0
        assert (await c.get("/?after=not-a-cursor")).status_code == 400


async def test_approve_with_edits_and_reject_with_a_message_reach_the_runs_with_who_when_and_how(store, tmp_path,
                                                                                                 monkeypatch, capsys):
    monkeypatch.setenv("INBOX_EFFECTS", str(tmp_path / "fx.jsonl"))
    a = await park(store, {"order": "E-1", "amount": 250}, "run-edit")
    b = await park(store, {"order": "R-1", "amount": 900}, "run-reject")
    async with client(inbox(store)) as c:
        await login(c, "alice")
        r = await answer(c, a.pending.id, decision="approve", **{"arg.order": "E-1", "arg.amount": "200",
                                                                  "arg.note": ""})
        assert r.status_code == 303
        assert "Approved." in (await c.get(r.headers["location"])).text
        r = await answer(c, b.pending.id, decision="reject", message="over 500 needs a manager")
        assert r.status_code == 303
        again = await answer(c, b.pending.id, decision="approve")  # a second answer changes nothing
        assert again.status_code == 409 and "answered meanwhile" in again.text
    await apply_all(store)
    assert effects(tmp_path / "fx.jsonl") == [{"order": "E-1", "amount": 200, "note": ""}]
    runs = {s.run_id: s.status for s in await store.runs()}
    assert runs == {"run-edit": "done", "run-reject": "done"}
    loaded = await store.load("run-reject")
    texts = json.dumps(loaded.conversations)
    assert "declined/expired" in texts and "over 500 needs a manager" in texts
    from toolnexus.cli import main

    assert await asyncio.to_thread(main, ["show", "run-edit", "--store", store.url]) == 0
    out = capsys.readouterr().out
    assert re.search(r"→ ok arguments=\{.*\"amount\": 200.*\} \(by alice via inbox at \d{4}-\d\d-\d\dT", out), out


async def test_who_may_answer_a_groups_request_and_two_approvals_from_two_logins(store):
    fin = await park(store, {"order": "G-1", "amount": 5}, "run-group", who=FINANCE)
    two = await park(store, {"order": "T-1", "amount": 5}, "run-two", who=TWO_PEOPLE)
    app = inbox(store, answerers=Answerers({"finance": ["fay"]}))
    async with client(app) as bob:
        await login(bob, "bob")
        page = await bob.get(f"/r/{fin.pending.id}")
        assert "You cannot answer this request" in page.text and 'name="decision"' not in page.text
        refused = await bob.post(f"/r/{fin.pending.id}", data={"csrf": csrf_of(page.text), "decision": "approve"})
        assert refused.status_code == 400 and "not in it" in refused.text
        assert (await answer(bob, two.pending.id, decision="approve")).status_code == 303
    await apply_all(store)
    again = [p for p in await store.pending() if p.run_id == "run-two"][0]
    assert again.request.id == two.pending.id + ".a1"
    async with client(app) as bob:
        await login(bob, "bob")  # the same login cannot be the second approver
        r = await answer(bob, again.request.id, decision="approve")
        assert r.status_code == 400 and "bob already approved this call" in r.text
    async with client(app) as fay:
        await login(fay, "fay")
        assert (await answer(fay, fin.pending.id, decision="approve")).status_code == 303
        assert (await answer(fay, again.request.id, decision="approve")).status_code == 303
    await apply_all(store)
    assert {s.run_id: s.status for s in await store.runs()} == {"run-group": "done", "run-two": "done"}


async def test_a_signed_link_answers_once_and_never_by_get_nor_expired_nor_for_another_request(store, capsys):
    a = await park(store, {"order": "L-1", "amount": 5}, "run-link-a")
    b = await park(store, {"order": "L-2", "amount": 5}, "run-link-b")
    links = LinkSigner(SECRET, "http://127.0.0.1")
    app = inbox(store, links=links, link_limit=RateLimit(per_minute=60, burst=30))
    url = links.url(a.pending.id, "approve", "erin")
    path = url.removeprefix("http://127.0.0.1")
    async with client(app) as c:  # no login: the link is the credential
        shown = await c.get(path)
        assert shown.status_code == 200 and "Nothing has been done yet" in shown.text and "erin" in shown.text
        assert (await store.find_request(a.pending.id)).status == "open"  # a previewer's GET did nothing
        other = path.replace(a.pending.id, b.pending.id, 1)
        assert (await c.get(other)).status_code == 403
        assert (await c.post(path, data={"csrf": "forged"})).status_code == 403
        done = await c.post(path, data={"csrf": csrf_of(shown.text)})
        assert done.status_code == 200 and "Approved as erin" in done.text
        twice = await c.post(path, data={"csrf": csrf_of(shown.text)})
        assert twice.status_code == 410 and "already used" in twice.text
        assert (await c.get(path)).status_code == 410
        late = links.url(b.pending.id, "reject", "erin", ttl=1, now=0).removeprefix("http://127.0.0.1")
        assert (await c.get(late)).status_code == 410 and "expired" in (await c.get(late)).text
        tampered = path[:-3] + ("AAA" if not path.endswith("AAA") else "BBB")
        assert (await c.get(tampered)).status_code == 403
    row = await store.find_request(a.pending.id)
    assert row.status == "queued" and row.answer["by"] == "erin" and row.answer["via"] == "link"
    assert (await store.find_request(b.pending.id)).status == "open"
    await apply_all(store)  # the run goes on, and `toolnexus show` says who answered it through the link
    from toolnexus.cli import main

    capsys.readouterr()
    assert await asyncio.to_thread(main, ["show", "run-link-a", "--store", store.url]) == 0
    [line] = [x for x in capsys.readouterr().out.splitlines() if x.startswith(f"  {a.pending.id}  ")]
    assert re.search(r"applied .*→ ok \(by erin via link at \d{4}-\d\d-\d\dT", line), line
    limited = inbox(store, links=links, link_limit=RateLimit(per_minute=1, burst=2))
    async with client(limited, ip="10.9.9.9") as c:
        codes = [(await c.get(path)).status_code for _ in range(3)]
        assert codes[-1] == 429


async def test_the_event_stream_says_when_a_request_arrives(store):
    app = inbox(store, poll=0.05)
    handle = await serve_inbox(app, "127.0.0.1:0")
    try:
        async with httpx.AsyncClient(base_url=handle.url) as c:
            await login(c, "alice")
            async with c.stream("GET", "/events") as stream:
                assert stream.headers["content-type"].startswith("text/event-stream")
                lines = stream.aiter_lines()
                assert await anext(lines) == "retry: 2000"

                async def first_event() -> Optional[str]:
                    async for line in lines:
                        if line.startswith("event:"):
                            return line
                    return None

                waiting = asyncio.ensure_future(first_event())
                await asyncio.sleep(0)
                await park(store, {"order": "S-1", "amount": 1}, "run-sse")
                assert await asyncio.wait_for(waiting, 10) == "event: changed"
    finally:
        await handle.stop()


async def test_the_command_refuses_what_it_cannot_serve_safely(tmp_path, monkeypatch, capsys):
    from toolnexus.cli import main

    url = f"sqlite:///{tmp_path / 'runs.db'}"
    async with open_store(url) as s:
        await s.runs()
    monkeypatch.setenv("INBOX_TOKEN", "short")
    cases = [
        ([], "exactly one login"),
        (["--token-env", "INBOX_TOKEN", "--auth-header", "X-User"], "exactly one login"),
        (["--token-env", "NOT_SET_ANYWHERE"], "is not set"),
        (["--token-env", "INBOX_TOKEN"], "at least 8 characters"),
    ]
    for flags, said in cases:
        code = await asyncio.to_thread(main, ["inbox", "--store", url, *flags])
        err = capsys.readouterr().err
        assert code == 2 and said in err, (flags, err)
    monkeypatch.setenv("INBOX_TOKEN", TOKEN)
    code = await asyncio.to_thread(main, ["inbox", "--store", f"file:{tmp_path}", "--token-env", "INBOX_TOKEN"])
    assert code == 2 and "work queue" in capsys.readouterr().err
    assert TOKEN not in capsys.readouterr().err
