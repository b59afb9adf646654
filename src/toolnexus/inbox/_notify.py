"""Notifications: tell people a run waits on them — a hook, a webhook, retried from the store.

`Notifications(store, [Webhook(url, secret=...)], links=LinkSigner(...))` is the notifier:

- `on_pending` is the agent runtime's hook (`AgentRuntime(on_pending=...)`, `Worker(...,
  on_pending=...)`): each request a run waits on is added to the store's outbox (`store.outbox()`,
  one item per webhook and request) as soon as its commit lands;
- `run()` (or `step()`, one pass) delivers what the outbox holds: a JSON POST per item, signed,
  retried with exponential backoff (`retry_base` · 2^(attempt-1), at most `retry_max` seconds
  apart, `max_attempts` tries), every outcome recorded in the store — so a process that stops
  mid-retry loses nothing: the next one (any process with the same webhooks) goes on from the
  store. Delivery is at least once: a receiver tells repeats apart by `X-Toolnexus-Delivery`;
- it also looks at the store's inbox itself (`scan`, every `rescan` seconds, and new requests each
  pass), so a request parked by a process with no hook — `toolnexus run --once --store`, a host's
  own runtime — is notified too. Requests that were waiting before a webhook was first used are
  not (a new webhook does not announce the whole backlog): the store records when each started.

Signature: `X-Toolnexus-Signature: t=<unix seconds>,v1=<hex HMAC-SHA256 of "<t>.<body>">` under the
webhook's secret; `verify_signature(secret, body, header)` checks it (and refuses one older than
five minutes: a replayed delivery). Formats: `generic` (the event as JSON: request, run, links),
`slack` (Slack's incoming-webhook `text` + `blocks`, with link buttons), `chat` (a plain
`{"text": markdown}` that Mattermost, Rocket.Chat and most chat webhooks take). Text a model or a
tool wrote is escaped for the format (`<`, `>`, `&` in Slack's mrkdwn), so a prompt cannot ping a
channel or forge a link. Links: with `links=` and a webhook `identity`, the message carries
approve / reject links bound to that identity (see `_links.py`); always a link to the request's
page in the inbox when `inbox_url` is known.

Not here: email, SMS, Slack's interactive callbacks (the links do that job without a Slack app).
"""

from __future__ import annotations

import asyncio
import hashlib
import hmac
import json
import os
import random
import time
from dataclasses import asdict, dataclass, field
from typing import Any, Mapping, Optional
from urllib.parse import quote

from .._diag import warn
from ..approvals import approval_of, group_of
from ..durable import OutboxItem, Outgoing, PendingRun, RunStore
from ..errors import ToolnexusValueError
from ._links import LinkSigner

FORMATS = ("generic", "slack", "chat")
SIGNATURE_HEADER = "X-Toolnexus-Signature"
DELIVERY_HEADER = "X-Toolnexus-Delivery"
STATE_NAMESPACE = "toolnexus.inbox.notify"  # not a module path: a store namespace (per webhook: since when it notifies)
_SHOWN = 600  # characters of a prompt in a chat message


def sign_body(secret: "bytes | str", body: bytes, timestamp: Optional[int] = None) -> str:
    """The signature header's value for `body`."""
    key = secret.encode() if isinstance(secret, str) else secret
    t = int(time.time()) if timestamp is None else int(timestamp)
    mac = hmac.new(key, f"{t}.".encode() + body, hashlib.sha256).hexdigest()
    return f"t={t},v1={mac}"


def verify_signature(secret: "bytes | str", body: bytes, header: Optional[str], *, tolerance: float = 300.0,
                     now: Optional[float] = None) -> bool:
    """Whether `header` (the `X-Toolnexus-Signature` value) signs `body` under `secret`, made
    within `tolerance` seconds of `now`."""
    if not header:
        return False
    parts = dict(p.strip().split("=", 1) for p in header.split(",") if "=" in p)
    try:
        t = int(parts.get("t", ""))
    except ValueError:
        return False
    if abs((time.time() if now is None else now) - t) > tolerance:
        return False
    expected = sign_body(secret, body, t).split("v1=", 1)[1]
    return hmac.compare_digest(expected.encode(), parts.get("v1", "").encode())


@dataclass(frozen=True)
class Webhook:
    """One webhook (see the module docstring). `name` identifies it in the store's outbox (default:
    derived from the URL, which itself is never stored); `identity`: who its signed links answer as."""

    url: str
    secret: Optional[str] = field(default=None, repr=False)
    format: str = "generic"
    name: Optional[str] = None
    identity: Optional[str] = None
    timeout: float = 10.0
    headers: Mapping[str, str] = field(default_factory=dict, repr=False)

    def __post_init__(self) -> None:
        if not isinstance(self.url, str) or not self.url.startswith(("http://", "https://")):
            raise ToolnexusValueError("toolnexus.inbox: a webhook needs an http(s) URL")
        if self.format not in FORMATS:
            raise ToolnexusValueError(f"toolnexus.inbox: a webhook format is one of {', '.join(FORMATS)}, got "
                                      f"{self.format!r}")
        if self.name is None:
            object.__setattr__(self, "name", "webhook-" + hashlib.sha256(self.url.encode()).hexdigest()[:12])

    @property
    def channel(self) -> str:
        return str(self.name)

    def __repr__(self) -> str:  # the URL of a chat webhook is a credential: only its host is shown
        host = self.url.split("/")[2] if self.url.count("/") >= 2 else "?"
        return f"Webhook(name={self.name!r}, host={host!r}, format={self.format!r})"


def _slack_escape(text: str) -> str:
    return text.replace("&", "&amp;").replace("<", "&lt;").replace(">", "&gt;")


def _cut(text: str, limit: int = _SHOWN) -> str:
    text = str(text or "")
    return text if len(text) <= limit else text[: limit - 1] + "…"


def event_of(item_payload: Mapping[str, Any], links: Optional[dict[str, str]], page: Optional[str]) -> dict[str, Any]:
    """The generic event: what waits, where, and the links."""
    request = dict(item_payload.get("request") or {})
    a = approval_of(_request(request))
    return {
        "event": "request.pending",
        "run_id": item_payload.get("run_id"),
        "request": request,
        "approval": a,
        "group": group_of(_request(request)),
        "created_at": item_payload.get("created_at"),
        "links": {**({"page": page} if page else {}), **(links or {})},
    }


def _request(data: Mapping[str, Any]) -> Any:
    from ..types import Request

    try:
        return Request.from_dict(data)
    except (TypeError, ValueError):
        return None


def render(fmt: str, event: dict[str, Any]) -> dict[str, Any]:
    """The body a webhook of format `fmt` receives for `event`."""
    if fmt == "generic":
        return event
    request = event.get("request") or {}
    links = event.get("links") or {}
    prompt = _cut(str(request.get("prompt") or ""))
    group = event.get("group")
    head = f"A run is waiting for you{f' (for {group})' if group else ''}"
    if fmt == "chat":
        lines = [f"**{head}**", "", prompt.replace("[", "\\[").replace("]", "\\]")]
        shown = [f"[{label}]({links[key]})" for key, label in (("page", "Open in the inbox"), ("approve", "Approve"),
                                                               ("reject", "Reject")) if links.get(key)]
        if shown:
            lines += ["", " · ".join(shown)]
        return {"text": "\n".join(lines)}
    text = f"*{_slack_escape(head)}*\n{_slack_escape(prompt)}"
    blocks: list[dict[str, Any]] = [{"type": "section", "text": {"type": "mrkdwn", "text": text}},
                                    {"type": "context", "elements": [{"type": "mrkdwn", "text": _slack_escape(
                                        f"run {event.get('run_id')} · request {request.get('id')}")}]}]
    buttons = []
    for key, label, style in (("approve", "Approve", "primary"), ("reject", "Reject", "danger"),
                              ("page", "Open in the inbox", None)):
        if links.get(key):
            button: dict[str, Any] = {"type": "button", "text": {"type": "plain_text", "text": label},
                                      "url": links[key], "action_id": f"toolnexus_{key}"}
            if style:
                button["style"] = style
            buttons.append(button)
    if buttons:
        blocks.append({"type": "actions", "elements": buttons})
    return {"text": f"{head}: {_slack_escape(prompt)}", "blocks": blocks}


class Notifications:
    """The notifier over one store (see the module docstring)."""

    def __init__(self, store: RunStore, webhooks: list[Webhook], *, links: Optional[LinkSigner] = None,
                 inbox_url: Optional[str] = None, poll: float = 1.0, rescan: float = 60.0, retry_base: float = 2.0,
                 retry_max: float = 600.0, max_attempts: int = 10, lease: float = 60.0, scan: bool = True,
                 transport: Any = None, name: Optional[str] = None) -> None:
        if not webhooks:
            raise ToolnexusValueError("toolnexus.inbox: Notifications needs at least one Webhook")
        names = [w.channel for w in webhooks]
        if len(set(names)) != len(names):
            raise ToolnexusValueError("toolnexus.inbox: two webhooks share a name; give each its own name=")
        for label, value in (("poll", poll), ("rescan", rescan), ("retry_base", retry_base), ("retry_max", retry_max),
                             ("lease", lease)):
            if isinstance(value, bool) or not isinstance(value, (int, float)) or value <= 0:
                raise ToolnexusValueError(f"toolnexus.inbox: Notifications {label} must be seconds > 0, got {value!r}")
        self.store = store
        self.webhooks = {w.channel: w for w in webhooks}
        self.links = links
        self.inbox_url = (inbox_url or (links.base_url if links is not None else None) or "").rstrip("/") or None
        if links is not None and links.base_url is None:
            raise ToolnexusValueError("toolnexus.inbox: the notifier's LinkSigner needs the inbox's base_url")
        self.poll, self.rescan, self.lease = float(poll), float(rescan), float(lease)
        self.retry_base, self.retry_max, self.max_attempts = float(retry_base), float(retry_max), int(max_attempts)
        self.scan_inbox = scan
        self.taker = name or f"notifier-{os.getpid()}-{os.urandom(4).hex()}"
        self._transport = transport
        self._client: Any = None
        self._since: dict[str, float] = {}
        self._cursor: Optional[str] = None
        self._next_rescan = 0.0
        self._wake: Optional[asyncio.Event] = None
        self._stopping = False
        self._tasks: set[asyncio.Future[Any]] = set()
        self.delivered = 0  # deliveries this process made (for a host's metrics)

    # -- adding ------------------------------------------------------------------------------------

    def on_pending(self, pending: PendingRun) -> None:
        """The runtime's hook: add `pending` to the outbox (in the background; a failure is warned
        about and the next scan adds it)."""
        task = asyncio.ensure_future(self._add([pending]))
        self._tasks.add(task)
        task.add_done_callback(self._tasks.discard)

    async def _start(self) -> None:
        """Since when each webhook notifies: recorded in the store the first time it is used."""
        if self._since:
            return
        for channel in self.webhooks:
            found = await self.store.get_record(STATE_NAMESPACE, channel)
            if not isinstance(found, dict) or not isinstance(found.get("since"), (int, float)):
                found = {"since": time.time() - 5.0}  # a request committed just before the first start counts
                if not await self.store.swap_record(STATE_NAMESPACE, channel, None, found):
                    found = await self.store.get_record(STATE_NAMESPACE, channel) or found
            self._since[channel] = float(found["since"])

    async def _add(self, found: list[PendingRun]) -> int:
        try:
            await self._start()
            outgoing = []
            for p in found:
                for channel in self.webhooks:
                    if p.created_at.timestamp() < self._since[channel]:
                        continue
                    payload = {"run_id": p.run_id, "request": asdict(p.request), "path": p.path,
                               "created_at": p.created_at.isoformat()}
                    outgoing.append(Outgoing(channel, f"{channel}:{p.request.id}", payload, p.run_id, p.request.id))
            if not outgoing:
                return 0
            outbox = self.store.outbox()
            known = await outbox.known([o.dedup for o in outgoing])
            added = await outbox.add([o for o in outgoing if o.dedup not in known])
        except Exception as exc:  # the scan adds it later
            warn(f"[toolnexus] inbox: adding a notification to {self.store.url} failed: {type(exc).__name__}: {exc}")
            return 0
        if added and self._wake is not None:
            self._wake.set()
        return added

    async def scan(self, *, full: bool = False) -> int:
        """Add the store's waiting requests that have no notification yet: those after the newest
        one seen (`full`: every one — which also catches a request committed late with an earlier
        time). How many were added."""
        from ..durable._paging import encode_cursor

        added = 0
        after = None if full else self._cursor
        last = None
        while True:
            page = await self.store.pending(limit=200, after=after)
            added += await self._add([p for p in page if p.status == "open"])
            if page:
                last = page[-1]
            if page.next is None:
                break
            after = page.next
        if last is not None:
            self._cursor = encode_cursor("pending", [last.created_at.timestamp(), last.request.id])
        return added

    # -- delivering --------------------------------------------------------------------------------

    def _links_for(self, hook: Webhook, payload: Mapping[str, Any]) -> dict[str, str]:
        request = payload.get("request") or {}
        rid = str(request.get("id") or "")
        links: dict[str, str] = {}
        if self.inbox_url and rid:
            links["page"] = f"{self.inbox_url}/r/{quote(rid, safe='')}"
        if self.links is not None and hook.identity and rid and request.get("kind") == "approval":
            links["approve"] = self.links.url(rid, "approve", hook.identity)
            links["reject"] = self.links.url(rid, "reject", hook.identity)
        return links

    def body_for(self, item: OutboxItem) -> bytes:
        hook = self.webhooks[item.channel]
        page_links = self._links_for(hook, item.payload)
        event = event_of(item.payload, {k: v for k, v in page_links.items() if k != "page"}, page_links.get("page"))
        return json.dumps(render(hook.format, event), ensure_ascii=False, separators=(",", ":")).encode()

    async def _post(self, hook: Webhook, item: OutboxItem) -> Optional[str]:
        """Deliver one item; None on success, else why it failed."""
        import httpx

        if self._client is None:
            self._client = httpx.AsyncClient(transport=self._transport, follow_redirects=False)
        body = self.body_for(item)
        headers = {"content-type": "application/json", "user-agent": "toolnexus-inbox",
                   DELIVERY_HEADER: f"{item.dedup}", "X-Toolnexus-Event": "request.pending",
                   "X-Toolnexus-Attempt": str(item.attempts), **dict(hook.headers)}
        if hook.secret:
            headers[SIGNATURE_HEADER] = sign_body(hook.secret, body)
        try:
            reply = await self._client.post(hook.url, content=body, headers=headers, timeout=hook.timeout)
        except httpx.HTTPError as exc:
            return f"{type(exc).__name__}: the webhook could not be reached"  # never the URL: it may be a credential
        if 200 <= reply.status_code < 300:
            return None
        return f"the webhook answered HTTP {reply.status_code}"

    def backoff(self, attempts: int) -> float:
        """Seconds before try `attempts + 1`: exponential, capped, with a little jitter."""
        delay = min(self.retry_max, self.retry_base * 2 ** max(0, attempts - 1))
        return delay * (0.9 + 0.2 * random.random())

    async def deliver(self, limit: int = 20) -> int:
        """Take what is due and deliver it; how many items were taken."""
        outbox = self.store.outbox()
        items = await outbox.take(self.taker, limit=limit, lease=self.lease, channels=list(self.webhooks))
        if not items:
            return 0
        await asyncio.gather(*(self._one(item) for item in items))
        return len(items)

    async def _one(self, item: OutboxItem) -> None:
        outbox = self.store.outbox()
        hook = self.webhooks[item.channel]
        try:
            error = await self._post(hook, item)
        except Exception as exc:
            error = f"{type(exc).__name__}: {exc}"
        if error is None:
            if await outbox.delivered(item, self.taker):
                self.delivered += 1
            return
        if item.attempts >= self.max_attempts:
            await outbox.fail(item, self.taker, error=error)
            warn(f"[toolnexus] inbox: notification {item.dedup} failed {item.attempts} times and is kept as "
                 f"failed: {error}")
            return
        await outbox.retry(item, self.taker, delay=self.backoff(item.attempts), error=error)

    async def step(self) -> int:
        """One pass: scan for new requests (all of them every `rescan` seconds), deliver what is due."""
        await self._start()
        if self.scan_inbox:
            now = time.monotonic()
            full = now >= self._next_rescan
            if full:
                self._next_rescan = now + self.rescan
            try:
                await self.scan(full=full)
            except Exception as exc:
                warn(f"[toolnexus] inbox: scanning {self.store.url} for new requests failed: {exc}")
        return await self.deliver()

    async def run(self) -> None:
        """Deliver until `stop()`, a pass every `poll` seconds (at once when `on_pending` adds one).
        A `stop()` that came before this task got to run ends it at once (a host that stops a
        notifier it has just started does not wait on it forever); once it returned, it may run again."""
        self._wake = asyncio.Event()
        try:
            while not self._stopping:
                try:
                    taken = await self.step()
                except Exception as exc:  # the store is down: said, and tried again next pass
                    warn(f"[toolnexus] inbox: delivering notifications failed: {type(exc).__name__}: {exc}")
                    taken = 0
                if taken:
                    continue
                try:
                    await asyncio.wait_for(self._wake.wait(), self.poll)
                except TimeoutError:
                    pass
                self._wake.clear()
        finally:
            self._stopping = False
            await self.aclose()

    def stop(self) -> None:
        self._stopping = True
        if self._wake is not None:
            self._wake.set()

    async def aclose(self) -> None:
        if self._tasks:
            await asyncio.gather(*list(self._tasks), return_exceptions=True)
        client, self._client = self._client, None
        if client is not None:
            await client.aclose()
