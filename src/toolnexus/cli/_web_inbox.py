"""`toolnexus inbox --store URL --token-env VAR`: the web inbox over a durable store, until stopped.

People open it in a browser, see every request waiting across the store's runs (live), and
answer them; answers go to the store's work queue and a `toolnexus worker --store URL` (any
number of them, beside the inbox or elsewhere) applies them. So the store must be SQLite or
PostgreSQL (the queue). With `--webhook URL` the same process notifies: each new request is
POSTed (signed with `--webhook-secret-env`), retried from the store until delivered — the flags
`toolnexus worker --store` takes too (`_webhooks.py`); any of these processes may deliver.

Login (exactly one): `--token-env VAR` (a shared token read from the environment — never from
the command line, where `ps` shows it; the login asks for a name too), `--tokens-file PATH` (a
JSON object `{identity: token}`: one token per person), or `--auth-header NAME` (an OIDC / OAuth
proxy in front names the person in this header; trusted only from `--trusted-proxy` addresses,
default this machine). `--groups-file PATH` (a JSON object `{group: [identity, ...]}`) says who
may answer requests made for a group; `--admin NAME` may answer everything.

`--secret-env VAR`: the inbox's secret (sessions, CSRF, answer links) — the same in every
process that mints links for this inbox; without it a random one (sessions end with the process,
and links need it). `--base-url URL`: the inbox's address as people reach it (links and
notifications point there; default `http://ADDR`). `--webhook-identity NAME`: the webhook's
messages carry approve / reject links answering as NAME (`--link-ttl`, default 24h).

stderr: `inbox: serving URL (store ...)`. SIGINT / SIGTERM stop it (exit 0); 2 for a bad flag or a
store without a work queue; 1 when the address cannot be bound or the store cannot be reached.
"""

from __future__ import annotations

import asyncio
import signal
from typing import Any, Optional

from ._approvals import ANSWERER_FLAGS, answerers_of, json_file
from ._common import CliExit, Console
from ._flags import Flag
from ._inbox import RUN_STORE_FLAG, open_run_store
from ._webhooks import WEBHOOK_FLAGS, env_secret, link_signer, notifications, seconds

NAME = "inbox"
SUMMARY = "serve the web inbox: people see and answer what the store's runs wait on (plus webhooks)"
FLAGS = [
    RUN_STORE_FLAG,
    Flag("addr", "HOST:PORT", "where to listen (default 127.0.0.1:8765)", default="127.0.0.1:8765"),
    Flag("token-env", "VAR", "log in with the shared token in this environment variable"),
    Flag("tokens-file", "PATH", "log in with per-person tokens: a JSON object {identity: token}"),
    Flag("auth-header", "NAME", "trust the identity an authenticating proxy puts in this header"),
    Flag("trusted-proxy", "ADDR", "with --auth-header: the proxy's address or network (default loopback)",
         repeat=True),
    *ANSWERER_FLAGS,
    Flag("secret-env", "VAR", "the inbox's secret (sessions, CSRF, links) from this environment variable"),
    Flag("base-url", "URL", "the inbox's address as people reach it (for links; default http://ADDR)"),
    Flag("allowed-host", "NAME", "a host name the inbox is reached by (repeatable; IPs and localhost always pass)",
         repeat=True),
    *WEBHOOK_FLAGS,
    Flag("poll", "SECONDS", "how often to look for changes (default 1)"),
]


def _auth(opts: dict[str, Any], console: Console) -> Any:
    from ..errors import ToolnexusError
    from ..inbox import HeaderAuth, TokenAuth

    chosen = [f for f in ("token-env", "tokens-file", "auth-header") if opts.get(f.replace("-", "_"))]
    if len(chosen) != 1:
        raise CliExit(2, "error: toolnexus inbox needs exactly one login: --token-env VAR, --tokens-file PATH or "
                         "--auth-header NAME")
    try:
        if chosen[0] == "token-env":
            return TokenAuth(str(env_secret(opts, "token-env", console)))
        if chosen[0] == "tokens-file":
            tokens = json_file(opts, "tokens-file")
            for token in tokens.values():
                console.add_secret(token if isinstance(token, str) else None)
            return TokenAuth(tokens)
        proxies = opts.get("trusted_proxy") or ["127.0.0.1/32", "::1/128"]
        return HeaderAuth(str(opts["auth_header"]), trusted_proxies=proxies)
    except ToolnexusError as exc:
        raise CliExit(2, f"error: {exc}") from None


async def execute(opts: dict[str, Any], console: Console) -> int:
    from ..errors import ToolnexusError
    from ..inbox import Inbox, serve_inbox
    from ..stores import FileStore

    auth = _auth(opts, console)
    secret = env_secret(opts, "secret-env", console)
    answerers = answerers_of(opts)
    store = open_run_store(opts)
    if isinstance(store, FileStore):
        raise CliExit(2, f"error: --store {store.url}: the inbox submits answers to the store's work queue, which "
                         "only SQLite and PostgreSQL stores have (and toolnexus worker --store applies them)")
    addr = str(opts.get("addr") or "127.0.0.1:8765")
    base_url = (opts.get("base_url") or f"http://{addr}").rstrip("/")
    try:
        links = link_signer(opts, secret, base_url)
        notes = notifications(opts, console, store, links=links, inbox_url=base_url, poll=seconds(opts, "poll", 1.0))
        inbox = Inbox(store, auth=auth, secret=secret, answerers=answerers,
                      links=links, allowed_hosts=opts.get("allowed_host") or None, poll=seconds(opts, "poll", 1.0))
    except ToolnexusError as exc:
        raise CliExit(2, f"error: {exc}") from None
    stop = asyncio.Event()
    loop = asyncio.get_running_loop()
    for sig in (signal.SIGINT, signal.SIGTERM):
        loop.add_signal_handler(sig, stop.set)
    delivering: Optional[asyncio.Task[None]] = None
    try:
        async with store:
            try:
                handle = await serve_inbox(inbox, addr)
            except OSError as exc:
                raise CliExit(1, f"error: cannot listen on {addr}: {exc}") from None
            console.err(f"inbox: serving {handle.url} (store {store.url}; answers go to its work queue — run "
                        "toolnexus worker --store beside it)")
            if notes is not None:
                delivering = asyncio.ensure_future(notes.run())
                console.err("inbox: notifying a webhook of each new waiting request")
            try:
                await stop.wait()
            finally:
                if notes is not None:
                    notes.stop()
                if delivering is not None:
                    await asyncio.gather(delivering, return_exceptions=True)
                await handle.stop()
    finally:
        for sig in (signal.SIGINT, signal.SIGTERM):
            loop.remove_signal_handler(sig)
    console.err("inbox: stopped")
    return 0
