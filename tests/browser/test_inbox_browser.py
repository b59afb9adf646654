"""The web inbox in a real browser: Debian's chromium driven by Playwright (never a downloaded
browser), against `toolnexus.inbox` on loopback over a real SQLite store. Requests are parked by
another process; answers are applied by a real fleet `Worker`; each outcome is checked in the
store. The screenshots in docs/img/ are written by this test.

`make test-browser` (run by `.ci/run`), not `make test`: set `TOOLNEXUS_BROWSER=1` to run it here.
"""

from __future__ import annotations

import asyncio
import json
import os
import sys
from pathlib import Path
from typing import Any

import pytest

from support.inbox_kit import AGENTS, LLM, MODEL, effects
from toolnexus.fleet import Worker
from toolnexus.inbox import Inbox, LinkSigner, TokenAuth, serve_inbox
from toolnexus.stores import open_store

pytestmark = pytest.mark.skipif(os.environ.get("TOOLNEXUS_BROWSER") != "1",
                                reason="the browser tests run in `make test-browser` (TOOLNEXUS_BROWSER=1)")

CHROMIUM = os.environ.get("TOOLNEXUS_CHROMIUM", "/usr/bin/chromium")
ARGS = ["--headless", "--no-sandbox", "--disable-gpu", "--disable-background-networking",
        "--disable-component-update", "--disable-sync", "--no-first-run"]
TESTS = Path(__file__).resolve().parents[1]
SHOTS = TESTS.parent / "docs" / "img"
TOKEN = "browser-token-123"
SECRET = "browser-secret-0123456789"


async def park_elsewhere(url: str, run_id: str, args: dict[str, Any]) -> str:
    """Park one run from another process; its request id."""
    env = {**os.environ, "PYTHONPATH": str(TESTS) + os.pathsep + os.environ.get("PYTHONPATH", "")}
    proc = await asyncio.create_subprocess_exec(sys.executable, "-m", "support.inbox_kit", "park", url, run_id,
                                                json.dumps(args), env=env, stdout=asyncio.subprocess.PIPE,
                                                stderr=asyncio.subprocess.PIPE)
    out, err = await asyncio.wait_for(proc.communicate(), 60)
    assert proc.returncode == 0, err.decode()
    return out.decode().split("PARKED ", 1)[1].strip()


async def apply_answers(store: Any) -> None:
    w = Worker(store, agents=AGENTS, llm=LLM, transport=MODEL)
    await w.start()
    await w.step()
    await w.wait_idle()
    await w.drain()


async def test_people_answer_in_a_browser(tmp_path, monkeypatch):
    from playwright.async_api import async_playwright, expect

    monkeypatch.setenv("INBOX_EFFECTS", str(tmp_path / "fx.jsonl"))
    url = f"sqlite:///{tmp_path / 'runs.db'}"
    SHOTS.mkdir(parents=True, exist_ok=True)
    dialogs: list[str] = []
    async with open_store(url) as store:
        await store.runs()  # the store exists before anyone parks
        handle = await serve_inbox(Inbox(store, auth=TokenAuth(TOKEN), secret=SECRET, poll=0.2), "127.0.0.1:0")
        links = LinkSigner(SECRET, handle.url)
        try:
            async with async_playwright() as pw:
                browser = await pw.chromium.launch(executable_path=CHROMIUM, args=ARGS)
                try:
                    page = await browser.new_page(viewport={"width": 1100, "height": 760})
                    page.on("dialog", lambda d: dialogs.append(d.message))
                    # log in
                    await page.goto(handle.url + "/")
                    await expect(page).to_have_url(f"{handle.url}/login?next=%2F")
                    await page.get_by_label("Your name").fill("alice")
                    await page.get_by_label("Access token").fill(TOKEN)
                    await page.get_by_role("button", name="Log in").click()
                    await expect(page.locator("h1")).to_have_text("Waiting for a person")
                    await expect(page.locator("#rows")).to_contain_text("Nothing is waiting")
                    await expect(page.locator("body")).to_have_attribute("data-live", "on")
                    await page.evaluate("window.__notReloaded = true")
                    # requests parked by another process appear without a reload
                    edit_id = await park_elsewhere(url, "run-edit", {"order": "A-100", "amount": 250})
                    await expect(page.locator(f'tr[data-id="{edit_id}"]')).to_be_visible(timeout=15000)
                    xss_id = await park_elsewhere(url, "run-xss", {"order": "<script>alert('x')</script>",
                                                                   "amount": 900})
                    link_id = await park_elsewhere(url, "run-link", {"order": "C-7", "amount": 40})
                    other_id = await park_elsewhere(url, "run-other", {"order": "D-8", "amount": 60})
                    await expect(page.locator("tr[data-id]")).to_have_count(4, timeout=15000)
                    assert await page.evaluate("window.__notReloaded") is True
                    await expect(page.locator("#live")).not_to_be_empty()
                    await page.screenshot(path=str(SHOTS / "inbox-list.png"), full_page=True)
                    # approve one with edited arguments
                    await page.locator(f'tr[data-id="{edit_id}"] a').click()
                    await expect(page.locator("h1")).to_contain_text("Approve refund")
                    await expect(page.locator(".transcript")).to_contain_text("refund")
                    await page.get_by_label("amount").fill("200")
                    await page.screenshot(path=str(SHOTS / "inbox-request.png"), full_page=True)
                    await page.get_by_role("button", name="Approve").click()
                    await expect(page.locator(".notice")).to_contain_text("Approved.")
                    await expect(page.locator(".answered")).to_contain_text("approved by alice via inbox")
                    # a prompt holding <script> is shown as text; reject it with a message
                    await page.goto(f"{handle.url}/r/{xss_id}")
                    await expect(page.locator("h1")).to_contain_text("<script>alert('x')</script>")
                    await page.get_by_label("Message to the agent").fill("not this order")
                    await page.get_by_role("button", name="Reject").click()
                    await expect(page.locator(".notice")).to_contain_text("Rejected.")
                    assert dialogs == []
                    # on a phone
                    phone = await browser.new_page(viewport={"width": 390, "height": 800}, device_scale_factor=2)
                    await phone.context.add_cookies(await page.context.cookies())
                    await phone.goto(handle.url + "/")
                    await expect(phone.locator("tr[data-id]")).to_have_count(4)
                    width = await phone.evaluate("document.documentElement.scrollWidth")
                    assert width <= 390, f"the list scrolls sideways on a phone ({width}px)"
                    await phone.screenshot(path=str(SHOTS / "inbox-phone.png"), full_page=True)
                    await phone.close()
                    # a signed link: a confirmation page first, then it answers once
                    link_page = await browser.new_page(viewport={"width": 900, "height": 700})
                    approve = links.url(link_id, "approve", "erin")
                    await link_page.goto(approve)
                    await expect(link_page.locator("h1")).to_have_text("Approve this request?")
                    assert (await store.find_request(link_id)).status == "open"  # the GET did nothing
                    await link_page.screenshot(path=str(SHOTS / "inbox-link.png"), full_page=True)
                    await link_page.get_by_role("button", name="Approve").click()
                    await expect(link_page.locator(".outcome")).to_contain_text("Approved as erin")
                    again = await link_page.goto(approve)
                    assert again is not None and again.status == 410
                    await expect(link_page.locator(".outcome")).to_contain_text("used already")
                    expired = await link_page.goto(links.url(other_id, "approve", "erin", ttl=1, now=0))
                    assert expired is not None and expired.status == 410
                    await expect(link_page.locator(".outcome")).to_contain_text("expired")
                    token = approve.rsplit("/", 1)[1]
                    elsewhere = await link_page.goto(f"{handle.url}/link/{other_id}/{token}")
                    assert elsewhere is not None and elsewhere.status == 403
                    await expect(link_page.locator(".outcome")).to_contain_text("not valid for this request")
                finally:
                    await browser.close()
        finally:
            await handle.stop()
        await apply_answers(store)
        statuses = {s.run_id: s.status for s in await store.runs()}
        assert statuses == {"run-edit": "done", "run-xss": "done", "run-link": "done", "run-other": "pending"}
        assert effects(tmp_path / "fx.jsonl") == [{"order": "A-100", "amount": 200, "note": ""},
                                                  {"order": "C-7", "amount": 40, "note": ""}] or \
            sorted(effects(tmp_path / "fx.jsonl"), key=lambda e: e["order"]) == [
                {"order": "A-100", "amount": 200, "note": ""}, {"order": "C-7", "amount": 40, "note": ""}]
        rejected = json.dumps((await store.load("run-xss")).conversations)
        assert "not this order" in rejected and "declined/expired" in rejected
        edit_row = await store.find_request(edit_id)
        assert (edit_row.answer["by"], edit_row.answer["via"], edit_row.answer["arguments"]["amount"]) == \
            ("alice", "inbox", 200)
        link_row = await store.find_request(link_id)
        assert (link_row.answer["by"], link_row.answer["via"]) == ("erin", "link")
