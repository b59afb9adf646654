"""`toolnexus.inbox`: the human side of a parked run — a web inbox, notifications, signed answer
links, and who answered.

- `Inbox(store, auth=...)`: the ASGI app (mount it in your service, or `serve_inbox(store, addr)`
  / `toolnexus inbox --store URL`): the waiting requests, live; a page per request with its
  answer form; answers submitted to the store's work queue for `toolnexus worker` to apply.
- `TokenAuth`, `HeaderAuth`, `CallbackAuth`: the login it requires (`_auth.py`).
- `Notifications(store, [Webhook(...)])`: the `on_pending` hook and the webhook deliverer,
  retried from the store's outbox (`_notify.py`); `verify_signature` for receivers.
- `LinkSigner(secret, base_url)`: signed, single-use, expiring approve / reject links (`_links.py`).
- `Answerers` (from `toolnexus.approvals`): who may answer which group's requests.

Layering: above the stores, the approvals and `toolnexus.serve` (whose guards and listener it
reuses); only the command line imports it. See docs/inbox.md.
"""

from __future__ import annotations

from typing import Any, Optional

from ..approvals import Answerers
from ._app import Apply, Inbox
from ._auth import CallbackAuth, HeaderAuth, InboxAuth, TokenAuth
from ._links import LinkClaim, LinkSigner
from ._notify import DELIVERY_HEADER, SIGNATURE_HEADER, Notifications, Webhook, sign_body, verify_signature
from ._security import RateLimit

__all__ = [
    "Inbox",
    "Apply",
    "serve_inbox",
    "InboxAuth",
    "TokenAuth",
    "HeaderAuth",
    "CallbackAuth",
    "Answerers",
    "LinkSigner",
    "LinkClaim",
    "Notifications",
    "Webhook",
    "verify_signature",
    "sign_body",
    "SIGNATURE_HEADER",
    "DELIVERY_HEADER",
    "RateLimit",
]


async def serve_inbox(inbox: Inbox, addr: str = "127.0.0.1:8765", *, limits: Optional[Any] = None) -> Any:
    """Serve `inbox` on `addr` (uvicorn on this loop, the guarded listener of `toolnexus.serve`);
    returns the `ServeHandle` (`url`, `stop()`), whose `stop()` ends the event streams first."""
    from ..serve import start_listener

    return await start_listener(inbox, addr, on_stop=[inbox.aclose], limits=limits)
