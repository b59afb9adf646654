"""Notifications: the `on_pending` hook, the webhook's formats and signature, and delivery from the
store's outbox against a real loopback receiver that fails the first two attempts — in process,
and with real `toolnexus inbox` processes, one stopped mid-retry and another started: the
notification is delivered exactly once more, and never again. The same with `toolnexus worker
--store --webhook` processes (the run parked by the first worker, which is SIGKILLed or SIGTERMed
after the first failed POST; two more workers share the rest), notifiers on two connections of
one SQLite or PostgreSQL store taking turns on the outbox, the host setup the docs show
(`Worker(on_pending=notes.on_pending)` beside `notes.run()`), and the worker's flag errors.
"""

from __future__ import annotations

import asyncio
import json
import os
import signal
import sys
from pathlib import Path
from typing import Any, Iterator

import pytest

from support.inbox_kit import LLM, MODEL, REFUNDER, park
from support.stores import _url
from toolnexus.durable import Outgoing
from toolnexus.fleet import Worker
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


# -- the fleet's workers notify: `toolnexus worker --store --webhook` and the host's Worker + Notifications --------


async def _worker_process(url: str, hook_url: str, name: str) -> Any:
    """`toolnexus worker --store URL --webhook ...` serving the inbox kit's agents, once it delivers."""
    env = {**os.environ, "PYTHONPATH": str(TESTS) + os.pathsep + os.environ.get("PYTHONPATH", ""),
           "HOOK_SECRET": HOOK_SECRET}
    proc = await asyncio.create_subprocess_exec(
        sys.executable, "-m", "toolnexus", "worker", "--store", url, "--agents", "support.inbox_kit:AGENTS",
        "--transport", "support.inbox_kit:MODEL", "--name", name, "--poll", "0.1", "--webhook", hook_url,
        "--webhook-secret-env", "HOOK_SECRET", "--webhook-retry", "1", env=env, stderr=asyncio.subprocess.PIPE,
        stdout=asyncio.subprocess.DEVNULL)
    assert proc.stderr is not None
    seen = []
    while True:
        line = (await asyncio.wait_for(proc.stderr.readline(), 30)).decode()
        assert line, f"the worker process ended before notifying: {seen}"
        seen.append(line)
        if "worker: notifying a webhook" in line:
            return proc


def _ended(proc: Any) -> Any:
    async def end() -> None:
        if proc.returncode is None:
            proc.kill()
        await proc.communicate()
    return end


async def _outbox(url: str) -> list[tuple[str, int]]:
    async with open_store(url) as store:
        return [(i.status, i.attempts) for i in await store.outbox().items()]


async def _until_outbox(url: str, want: list[tuple[str, int]], timeout: float = 20.0) -> None:
    """Poll the store (another process writes it) until its outbox is `want`."""
    deadline = asyncio.get_running_loop().time() + timeout
    while (found := await _outbox(url)) != want:
        assert asyncio.get_running_loop().time() < deadline, f"the outbox stayed {found}, not {want}"
        await asyncio.sleep(0.05)


@pytest.mark.skipif(os.environ.get("TOOLNEXUS_FLEET") != "1",
                    reason="worker processes restarted mid-retry run in `make test-fleet` (TOOLNEXUS_FLEET=1)")
@pytest.mark.parametrize("stop", [signal.SIGKILL, signal.SIGTERM], ids=["sigkill", "sigterm"])
async def test_a_worker_stopped_mid_retry_leaves_the_webhook_to_the_next_workers_once(tmp_path, exits, stop):
    receiver = Receiver(fail=2)
    handle = await start_listener(receiver, "127.0.0.1:0")
    exits.push_async_callback(handle.stop)
    url = f"sqlite:///{tmp_path / 'runs.db'}"
    hook_url = handle.url + "/hook"
    first = await _worker_process(url, hook_url, "first")
    exits.push_async_callback(_ended(first))
    async with open_store(url) as store:
        await store.submit_run("refunder", json.dumps({"order": "F-1", "amount": 4}), run_id="run-fleet")
    await receiver.wait_for(1)  # the first worker ran it, it parked, and the first POST failed
    if stop == signal.SIGKILL:
        await _until_outbox(url, [("queued", 1)])  # the failure is recorded: the kill comes mid-retry
        first.kill()
        await first.communicate()
    else:  # a graceful stop finishes the delivery it is making and records it
        first.send_signal(signal.SIGTERM)
        _, err = await asyncio.wait_for(first.communicate(), 30)
        assert first.returncode == 0 and "worker: stopped" in err.decode(), err.decode()
    assert await _outbox(url) == [("queued", 1)] and len(receiver.seen) == 1
    # two workers take over the store's outbox: between them the notification is sent once more, not twice
    others = await asyncio.gather(_worker_process(url, hook_url, "second"), _worker_process(url, hook_url, "third"))
    for proc in others:
        exits.push_async_callback(_ended(proc))
    await receiver.wait_for(3)
    await _until_outbox(url, [("delivered", 3)])  # recorded right after the receiver's 200
    for proc in others:
        proc.send_signal(signal.SIGTERM)
        _, err = await asyncio.wait_for(proc.communicate(), 30)
        assert proc.returncode == 0, err.decode()
    async with open_store(url) as store:
        run = await store.load("run-fleet")
        [request] = [p.request for p in await store.pending(limit=10)]
    assert run.status == "pending"
    assert [s for _, _, s in receiver.seen] == [500, 500, 200]  # and nothing after the 200
    assert [h["x-toolnexus-attempt"] for h, _, _ in receiver.seen] == ["1", "2", "3"]
    assert len({h["x-toolnexus-delivery"] for h, _, _ in receiver.seen}) == 1
    assert all(verify_signature(HOOK_SECRET, body, h["x-toolnexus-signature"]) for h, body, _ in receiver.seen)
    assert {json.loads(b)["request"]["id"] for _, b, _ in receiver.seen} == {request.id}


@pytest.fixture(params=["sqlite", "postgres"])
def sql_url(request: Any, tmp_path: Path) -> Iterator[str]:
    yield from _url(request.param, tmp_path)


async def test_notifiers_on_two_connections_deliver_each_notification_once(sql_url, exits):
    """Two processes' notifiers on one store take turns on its outbox: no row is taken by both."""
    url = sql_url
    receiver = Receiver(fail=0)
    handle = await start_listener(receiver, "127.0.0.1:0")
    exits.push_async_callback(handle.stop)
    hook = Webhook(handle.url + "/hook", secret=HOOK_SECRET, name="hook")
    stores = [await exits.enter_async_context(open_store(url)) for _ in range(2)]
    await stores[0].runs()
    count = 24
    added = await stores[0].outbox().add([Outgoing("hook", f"hook:q{i}", {"run_id": f"r{i}", "request": {
        "id": f"q{i}", "kind": "approval", "prompt": f"approve {i}?"}}, f"r{i}", f"q{i}") for i in range(count)])
    assert added == count
    notifiers = [Notifications(s, [hook], scan=False) for s in stores]
    for n in notifiers:
        exits.push_async_callback(n.aclose)

    async def drain(n: Notifications) -> None:
        while await n.deliver(limit=3):
            pass

    await asyncio.gather(*(drain(n) for n in notifiers))
    assert sorted(h["x-toolnexus-delivery"] for h, _, _ in receiver.seen) == sorted(f"hook:q{i}" for i in range(count))
    assert notifiers[0].delivered + notifiers[1].delivered == count
    assert {(i.status, i.attempts) for i in await stores[1].outbox().items()} == {("delivered", 1)}


async def test_a_notifier_stopped_before_it_ran_returns_at_once(tmp_path):
    async with open_store(f"sqlite:///{tmp_path / 'runs.db'}") as store:
        notes = Notifications(store, [Webhook("http://127.0.0.1:9/hook")], poll=60.0)
        running = asyncio.ensure_future(notes.run())
        notes.stop()  # before the task got to run: a host stopping at once must not wait a poll, or forever
        await asyncio.wait_for(running, 10)


async def test_the_documented_worker_and_notifier_deliver_what_the_worker_parks(tmp_path, exits):
    """The host setup docs/inbox.md shows: `Worker(..., on_pending=notes.on_pending)` beside
    `notes.run()`, a Slack webhook with links answering as `oncall` and a signed generic one. The
    notifier does not scan the store here, so what arrives came through the worker's hook."""
    slack, generic = Receiver(fail=0), Receiver(fail=0)
    slack_at, generic_at = [await start_listener(r, "127.0.0.1:0") for r in (slack, generic)]
    for listener in (slack_at, generic_at):
        exits.push_async_callback(listener.stop)
    store = await exits.enter_async_context(open_store(f"sqlite:///{tmp_path / 'runs.db'}"))
    links = LinkSigner("inbox-secret-0123456789", "https://inbox.example")
    notes = Notifications(store, [
        Webhook(slack_at.url + "/slack", format="slack", identity="oncall"),  # buttons answer as oncall
        Webhook(generic_at.url + "/hooks/toolnexus", secret=HOOK_SECRET),
    ], links=links, scan=False)
    worker = Worker(store, agents=[REFUNDER], llm=LLM, transport=MODEL, poll_interval=0.05,
                    on_pending=notes.on_pending)
    serving = asyncio.ensure_future(asyncio.gather(worker.run(), notes.run()))

    async def stop() -> None:
        worker.stop()
        notes.stop()
        await asyncio.wait_for(serving, 30)

    exits.push_async_callback(stop)
    await store.submit_run("refunder", json.dumps({"order": "D-1", "amount": 5}), run_id="run-doc")
    await asyncio.wait_for(asyncio.gather(slack.wait_for(1), generic.wait_for(1)), 30)
    [parked] = await store.pending(limit=10)
    headers, body, _ = generic.seen[0]
    assert verify_signature(HOOK_SECRET, body, headers["x-toolnexus-signature"])
    assert json.loads(body)["request"]["id"] == parked.request.id and parked.run_id == "run-doc"
    buttons = {b["action_id"]: b["url"] for b in json.loads(slack.seen[0][1])["blocks"][-1]["elements"]}
    approve = links.verify(buttons["toolnexus_approve"].rsplit("/", 1)[1], parked.request.id)
    assert approve is not None and (approve.decision, approve.identity) == ("approve", "oncall")
    assert buttons["toolnexus_page"] == f"https://inbox.example/r/{parked.request.id}"


async def test_the_worker_refuses_webhook_flags_it_cannot_serve(tmp_path, monkeypatch, capsys):
    from toolnexus.cli import main

    monkeypatch.syspath_prepend(str(TESTS))
    url = f"sqlite:///{tmp_path / 'runs.db'}"
    hook = "https://hooks.example/services/T0/B0/hook-credential-77"
    base = ["worker", "--store", url, "--agents", "support.inbox_kit:AGENTS", "--transport", "support.inbox_kit:MODEL"]
    cases = [
        (["--webhook", "ftp://hooks.example/x"], "a webhook needs an http(s) URL"),
        (["--webhook", hook, "--webhook-secret-env", "NOT_SET_ANYWHERE"], "NOT_SET_ANYWHERE is not set"),
        (["--webhook", hook, "--webhook-retry", "0"], "--webhook-retry takes a number of seconds > 0"),
        (["--webhook", hook, "--webhook-format", "email"], "--webhook-format"),
        (["--webhook", hook, "--webhook-identity", "oncall"], "give --inbox-url URL"),
        (["--webhook", hook, "--webhook-identity", "oncall", "--inbox-url", "https://inbox.example"],
         "give --secret-env VAR too"),
    ]
    for flags, said in cases:
        code = await asyncio.to_thread(main, [*base, *flags])
        err = capsys.readouterr().err
        assert code == 2 and said in err and hook not in err and "Traceback" not in err, (flags, err)
    code = await asyncio.to_thread(main, ["worker", "--temporal", "127.0.0.1:1", "--agents", "support.inbox_kit:AGENTS",
                                          "--webhook", hook])
    err = capsys.readouterr().err
    assert code == 2 and "--webhook is for toolnexus worker --store" in err and hook not in err, err
