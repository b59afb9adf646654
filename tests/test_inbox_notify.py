"""Notifications: the `on_pending` hook, the webhook's formats and signature, and delivery from the
store's outbox against a real loopback receiver that fails the first two attempts — in process,
and with real `toolnexus inbox` processes, one stopped mid-retry and another started: the
notification is delivered exactly once more, and never again.
"""

from __future__ import annotations

import asyncio
import json
import os
import signal
import sys
from pathlib import Path
from typing import Any

from support.inbox_kit import LLM, MODEL, REFUNDER, park
from toolnexus.inbox import LinkSigner, Notifications, Webhook, sign_body, verify_signature
from toolnexus.inbox._notify import render
from toolnexus.serve import start_listener
from toolnexus.stores import open_store

HOOK_SECRET = "whsec-0123456789abcdef"
TESTS = Path(__file__).resolve().parent


class Receiver:
    """A loopback webhook receiver: answers 500 to the first `fail` POSTs, then 200."""

    def __init__(self, fail: int = 2) -> None:
        self.fail = fail
        self.seen: list[tuple[dict[str, str], bytes, int]] = []
        self.arrived = asyncio.Condition()

    async def __call__(self, scope: dict[str, Any], receive: Any, send: Any) -> None:
        if scope["type"] != "http":
            return
        body = b""
        while True:
            m = await receive()
            body += m.get("body", b"")
            if not m.get("more_body"):
                break
        status = 500 if len(self.seen) < self.fail else 200
        self.seen.append(({k.decode(): v.decode() for k, v in scope["headers"]}, body, status))
        await send({"type": "http.response.start", "status": status, "headers": [(b"content-type", b"text/plain")]})
        await send({"type": "http.response.body", "body": b"ok" if status == 200 else b"down"})
        async with self.arrived:
            self.arrived.notify_all()

    async def wait_for(self, n: int, timeout: float = 20.0) -> None:
        async with self.arrived:
            await asyncio.wait_for(self.arrived.wait_for(lambda: len(self.seen) >= n), timeout)


def test_the_signature_verifies_and_a_changed_or_old_body_does_not():
    body = b'{"event":"request.pending"}'
    header = sign_body(HOOK_SECRET, body, timestamp=1_000_000)
    assert verify_signature(HOOK_SECRET, body, header, now=1_000_010)
    assert not verify_signature(HOOK_SECRET, body + b" ", header, now=1_000_010)
    assert not verify_signature("another-secret-0000", body, header, now=1_000_010)
    assert not verify_signature(HOOK_SECRET, body, header, now=1_000_000 + 301)  # a replay, minutes later
    assert not verify_signature(HOOK_SECRET, body, None) and not verify_signature(HOOK_SECRET, body, "t=x,v1=y")


def test_chat_formats_escape_what_the_model_wrote():
    event = {
        "run_id": "r1",
        "group": None,
        "request": {"id": "q1", "prompt": "Approve <!channel> <http://x|click> & go"},
        "links": {"approve": "https://inbox/link/q1/t", "page": "https://inbox/r/q1"},
    }
    slack = render("slack", event)
    text = json.dumps(slack)
    assert "<!channel>" not in text and "&lt;!channel&gt;" in text and "&lt;http://x|click&gt; &amp; go" in text
    buttons = slack["blocks"][-1]["elements"]
    assert [b["url"] for b in buttons] == ["https://inbox/link/q1/t", "https://inbox/r/q1"]
    chat = render("chat", event)
    assert "[Approve](https://inbox/link/q1/t)" in chat["text"]
    assert render("generic", event) is event


async def test_on_pending_tells_the_host_once_the_store_holds_the_request(tmp_path):
    told: list[Any] = []
    async with open_store(f"sqlite:///{tmp_path / 'runs.db'}") as store:
        async def hook(p: Any) -> None:
            told.append((p, await store.find_request(p.request.id)))  # it is in the store by now

        r = await park(store, {"order": "H-1", "amount": 1}, "run-hook", on_pending=hook)
        await asyncio.sleep(0)
    assert len(told) == 1
    p, row = told[0]
    assert p.request.id == r.pending.id and p.run_id == "run-hook" and row is not None and row.status == "open"


async def test_a_webhook_that_fails_twice_is_delivered_on_the_third_try_signed_with_its_links(tmp_path):
    receiver = Receiver(fail=2)
    handle = await start_listener(receiver, "127.0.0.1:0")
    links = LinkSigner("link-secret-0123456789", "http://inbox.test")
    try:
        async with open_store(f"sqlite:///{tmp_path / 'runs.db'}") as store:
            hook = Webhook(handle.url + "/hook", secret=HOOK_SECRET, format="generic", identity="oncall")
            notes = Notifications(store, [hook], links=links, retry_base=0.05, poll=0.05)
            r = await REFUNDER.run(json.dumps({"order": "W-1", "amount": 3}), store=store, run_id="run-hook",
                                   llm=LLM, transport=MODEL, on_pending=notes.on_pending)
            await r.runtime.aclose()
            running = asyncio.ensure_future(notes.run())
            await receiver.wait_for(3)
            notes.stop()
            await running
            items = await store.outbox().items()
            assert [(i.status, i.attempts) for i in items] == [("delivered", 3)]
            assert await notes.scan(full=True) == 0  # scanning again adds nothing: it was notified
    finally:
        await handle.stop()
    assert [s for _, _, s in receiver.seen] == [500, 500, 200]
    ids = {h["x-toolnexus-delivery"] for h, _, _ in receiver.seen}
    assert ids == {f"{hook.name}:{r.pending.id}"}
    for headers, body, _ in receiver.seen:
        assert verify_signature(HOOK_SECRET, body, headers["x-toolnexus-signature"])
    event = json.loads(receiver.seen[-1][1])
    assert event["request"]["id"] == r.pending.id and event["approval"]["tool"] == "refund"
    approve = event["links"]["approve"]
    token = approve.rsplit("/", 1)[1]
    claim = links.verify(token, r.pending.id)
    assert claim is not None and (claim.decision, claim.identity) == ("approve", "oncall")
    assert event["links"]["page"] == f"http://inbox.test/r/{r.pending.id}"


async def _inbox_process(url: str, hook_url: str, token_file: Path) -> Any:
    env = {**os.environ, "PYTHONPATH": str(TESTS) + os.pathsep + os.environ.get("PYTHONPATH", ""),
           "INBOX_TOKEN": "inbox-token-123", "HOOK_SECRET": HOOK_SECRET}
    proc = await asyncio.create_subprocess_exec(
        sys.executable, "-m", "toolnexus", "inbox", "--store", url, "--addr", "127.0.0.1:0", "--token-env",
        "INBOX_TOKEN", "--webhook", hook_url, "--webhook-secret-env", "HOOK_SECRET", "--webhook-retry", "0.5",
        "--poll", "0.1", env=env, stderr=asyncio.subprocess.PIPE, stdout=asyncio.subprocess.DEVNULL)
    assert proc.stderr is not None
    while True:
        line = (await asyncio.wait_for(proc.stderr.readline(), 30)).decode()
        assert line, "the inbox process ended before serving"
        if "notifying a webhook" in line:
            return proc


async def _stop(proc: Any) -> str:
    proc.send_signal(signal.SIGTERM)
    _, err = await asyncio.wait_for(proc.communicate(), 30)
    assert proc.returncode == 0, err.decode()
    return err.decode()


async def test_a_restart_mid_retry_delivers_exactly_once_more(tmp_path):
    receiver = Receiver(fail=2)
    handle = await start_listener(receiver, "127.0.0.1:0")
    url = f"sqlite:///{tmp_path / 'runs.db'}"
    try:
        async with open_store(url) as store:
            await store.runs()  # the store exists before the inbox opens it
        first = await _inbox_process(url, handle.url + "/hook", tmp_path)
        try:
            async with open_store(url) as store:
                r = await park(store, {"order": "P-1", "amount": 2}, "run-restart")
            await receiver.wait_for(2)  # both failed
        finally:
            await _stop(first)  # mid-retry: the third try is due later
        async with open_store(url) as store:
            items = await store.outbox().items()
        assert [(i.status, i.attempts) for i in items] == [("queued", 2)]
        second = await _inbox_process(url, handle.url + "/hook", tmp_path)
        try:
            await receiver.wait_for(3)
            async with open_store(url) as store:
                while (await store.outbox().items())[0].status != "delivered":
                    await asyncio.sleep(0.05)  # the delivery is recorded right after the receiver's 200
        finally:
            await _stop(second)
        third = await _inbox_process(url, handle.url + "/hook", tmp_path)
        await _stop(third)  # it scans the inbox and the outbox: nothing is sent again
    finally:
        await handle.stop()
    assert [s for _, _, s in receiver.seen] == [500, 500, 200]
    assert all(verify_signature(HOOK_SECRET, body, h["x-toolnexus-signature"]) for h, body, _ in receiver.seen)
    assert {json.loads(b)["request"]["id"] for _, b, _ in receiver.seen} == {r.pending.id}
