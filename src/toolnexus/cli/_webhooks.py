"""The webhook flags `toolnexus inbox` and `toolnexus worker --store` share, and the notifier they build.

Either process, given `--webhook URL`, runs a `toolnexus.inbox.Notifications` over its store: it
adds each new waiting request to the store's outbox (a worker through its runs' `on_pending` the
moment they park; both by scanning the store) and delivers from the outbox, retried with backoff.
The outbox is the store's, so any number of these processes share it: a row is taken by one of
them at a time (a write transaction on SQLite, `FOR UPDATE SKIP LOCKED` on PostgreSQL), and what
one stopped mid-retry left queued is sent by the next. One builder keeps both commands' flags,
checks and messages the same.

`--webhook-identity NAME` puts approve / reject links in each message; they are signed with the
inbox's secret (`--secret-env VAR`, the same variable the inbox reads) and point at the inbox's
address (the inbox's `--base-url`, a worker's `--inbox-url`).
"""

from __future__ import annotations

import os
from typing import Any, Optional

from ._common import CliExit, Console, number
from ._flags import Flag
from ._lifecycle import duration

WEBHOOK_FLAGS = [
    Flag("webhook", "URL", "POST each new waiting request to this URL (retried from the store)"),
    Flag("webhook-format", "FORMAT", "generic (JSON event), slack, or chat ({\"text\": ...})",
         choices=("generic", "slack", "chat"), default="generic"),
    Flag("webhook-secret-env", "VAR", "sign each POST with the secret in this environment variable"),
    Flag("webhook-identity", "NAME", "put approve / reject links in each message, answering as NAME"),
    Flag("webhook-retry", "SECONDS", "the first retry's delay; each next one doubles (default 2)"),
    Flag("link-ttl", "DURATION", "how long an answer link works (default 24h)"),
]


def env_secret(opts: dict[str, Any], flag: str, console: Console) -> Optional[str]:
    """The value of the environment variable `--flag VAR` names (never the command line, which
    `ps` shows), registered with `console` so it is scrubbed from every line printed."""
    var = opts.get(flag.replace("-", "_"))
    if not var:
        return None
    value = os.environ.get(var)
    if not value:
        raise CliExit(2, f"error: --{flag} {var}: the environment variable {var} is not set")
    console.add_secret(value)
    return value


def seconds(opts: dict[str, Any], name: str, default: float) -> float:
    """`--name SECONDS` as a number > 0 (a usage error otherwise), `default` when not given."""
    return float(number(opts, name, default))


def link_signer(opts: dict[str, Any], secret: Optional[str], base_url: Optional[str]) -> Any:
    """The `LinkSigner` for answer links (`--link-ttl`), or None without a secret."""
    from ..inbox import LinkSigner

    if not secret:
        return None
    return LinkSigner(secret, base_url, ttl=duration(opts.get("link_ttl"), "link-ttl") or 86400.0)


def notifications(opts: dict[str, Any], console: Console, store: Any, *, links: Any, inbox_url: Optional[str],
                  poll: float, secret_flag: str = "--secret-env VAR") -> Any:
    """The notifier `--webhook` asks for, or None without it. A `ToolnexusError` from a bad value
    propagates (the caller turns it into exit 2)."""
    from ..inbox import Notifications, Webhook

    webhook_secret = env_secret(opts, "webhook-secret-env", console)
    if not opts.get("webhook"):
        return None
    console.add_secret(str(opts["webhook"]))  # a chat webhook's URL is a credential
    if opts.get("webhook_identity") and links is None:
        raise CliExit(2, f"error: --webhook-identity puts signed links in messages: give {secret_flag} too")
    hook = Webhook(str(opts["webhook"]), secret=webhook_secret, format=str(opts.get("webhook_format") or "generic"),
                   identity=opts.get("webhook_identity"))
    return Notifications(store, [hook], links=links, inbox_url=inbox_url,
                         retry_base=seconds(opts, "webhook-retry", 2.0), poll=poll)
