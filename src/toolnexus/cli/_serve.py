"""`toolnexus serve`: expose the toolkit (and the agent) over A2A and/or MCP, or MCP over stdio.

HTTP (`--a2a` and/or `--mcp`, also switched on by the config's `a2a` / `mcpServer` blocks):
the profiles are the config blocks with the flags laid over them field by field (`--name`,
`--description`, `--agent-version`, `--a2a-skill`, `--store`, `--public-url`; `--mcp-tool`,
`--mcp-name`; `--auth-token` — or `TOOLNEXUS_AUTH_TOKEN` — for both). A2A needs a model
(`--base-url`, `--model`, a key). On success stdout gets one line, the server URL (scripts bind
`--addr 127.0.0.1:0` and read it), and stderr `a2a: <url>/.well-known/agent-card.json` and/or
`mcp: <url>/mcp`. SIGINT/SIGTERM stop the server, close the toolkit and exit 0.

Served tools ask before they run as `toolnexus run`'s do (`--approve` / `--no-approve`; `bash`,
`write`, `edit` and `apply_patch` by default): an MCP caller that can answer elicitation is asked
there, an A2A task waits `input-required` for a reply (`approve`, `reject: why`, ...).

Serving refuses shell and file built-ins without a token (see `toolnexus.serve._safety`): pass
`--auth-token`, `--no-builtins` / `--disable-tool NAME`, or `--allow-unauthenticated-builtins`.
That refusal is a usage error (exit 2); a bind failure is exit 1.

`--mcp-stdio` serves the toolkit's tools as an MCP server on stdin/stdout for desktop hosts that
launch servers as a command (same tool filter and suspension bridge as `/mcp`); it takes no
`--a2a`/`--mcp`, prints nothing on stdout but the protocol, and exits 0 when stdin closes.
Over MCP (either way) the `@resource` / `@prompt` items a `--tools-from` list holds are served
too, with the skills' files (see `toolnexus.mcp_serve._skill_files`).
"""

from __future__ import annotations

import asyncio
import os
import signal
from typing import Any, Optional

from ._approvals import APPROVAL_FLAGS, cli_policy
from ._common import (
    MODEL_FLAGS,
    STORE_FLAG,
    TOOLKIT_FLAGS,
    CliExit,
    Console,
    apply_model_settings,
    build_toolkit,
    load_config,
    make_client,
    open_store,
    require_key,
    require_model,
)
from ._flags import Flag

NAME = "serve"
SUMMARY = "serve the agent over A2A and/or its tools over MCP (HTTP, or --mcp-stdio)"
TOKEN_ENV = "TOOLNEXUS_AUTH_TOKEN"
DEFAULT_ADDR = "127.0.0.1:8080"
FLAGS = [
    *TOOLKIT_FLAGS,
    *MODEL_FLAGS,
    Flag("addr", "HOST:PORT", f"where to listen (default {DEFAULT_ADDR}; port 0 picks a free one)",
         default=DEFAULT_ADDR),
    Flag("a2a", None, "serve the agent over A2A (agent card + JSON-RPC)"),
    Flag("mcp", None, "serve the tools over MCP at /mcp"),
    Flag("mcp-stdio", None, "serve the tools over MCP on stdin/stdout instead of HTTP"),
    Flag("name", "NAME", "agent card name"),
    Flag("description", "TEXT", "agent card description"),
    Flag("agent-version", "VERSION", "agent card version"),
    Flag("a2a-skill", "NAME", "list only this skill on the agent card", repeat=True),
    STORE_FLAG,
    Flag("public-url", "URL", "the endpoint URL the agent card advertises (behind a proxy)"),
    Flag("mcp-tool", "NAME", "serve only this tool over MCP", repeat=True),
    Flag("mcp-name", "NAME", "MCP server name"),
    Flag("auth-token", "TOKEN", f"require 'Authorization: Bearer TOKEN' on every route (else ${TOKEN_ENV})"),
    Flag("allow-unauthenticated-builtins", None, "serve shell/file built-ins without a token (logged as a warning)"),
    *APPROVAL_FLAGS,
]

NOTHING = "error: nothing to serve: pass --a2a and/or --mcp"
UNSAFE_HINT = ("hint: pass --auth-token TOKEN (or set TOOLNEXUS_AUTH_TOKEN), leave the tools out with --no-builtins "
               "or --disable-tool NAME, or pass --allow-unauthenticated-builtins")
_CONVERSATIONS = 10_000
_CONVERSATION_TTL = 24 * 3600.0


def _layer(base: Any, overrides: dict[str, Any]) -> dict[str, Any]:
    profile = dict(base) if isinstance(base, dict) else {}
    profile.update({k: v for k, v in overrides.items() if v is not None})
    return profile


def _profiles(opts: dict[str, Any], config: Optional[dict[str, Any]], token: Optional[str]) -> tuple[
        Optional[dict[str, Any]], Optional[dict[str, Any]]]:
    config = config or {}
    allow = True if opts.get("allow_unauthenticated_builtins") else None
    a2a = mcp = None
    if opts.get("a2a") or config.get("a2a") is not None:
        a2a = _layer(config.get("a2a"), {
            "name": opts.get("name"), "description": opts.get("description"), "version": opts.get("agent_version"),
            "skills": list(opts["a2a_skill"]) if opts.get("a2a_skill") else None, "public_url": opts.get("public_url"),
            "auth_token": token, "allow_unauthenticated_builtins": allow,
        })
    if opts.get("mcp") or config.get("mcpServer") is not None:
        mcp = _layer(config.get("mcpServer"), {
            "tools": list(opts["mcp_tool"]) if opts.get("mcp_tool") else None, "name": opts.get("mcp_name"),
            "auth_token": token, "allow_unauthenticated_builtins": allow,
        })
    return a2a, mcp


def _add_served(profile: dict[str, Any], served: list[Any]) -> None:
    """The `@resource` / `@prompt` items `--tools-from` gave, after the profile's own."""
    from ..resources import Prompt, Resource

    for key, kind in (("resources", Resource), ("prompts", Prompt)):
        items = [item for item in served if isinstance(item, kind)]
        if items:
            profile[key] = [*(profile.get(key) or []), *items]


def _stop_event() -> asyncio.Event:
    """Set on SIGINT or SIGTERM (the handlers are removed again by `_restore_signals`)."""
    stop = asyncio.Event()
    loop = asyncio.get_running_loop()
    for sig in (signal.SIGINT, signal.SIGTERM):
        loop.add_signal_handler(sig, stop.set)
    return stop


def _restore_signals() -> None:
    loop = asyncio.get_running_loop()
    for sig in (signal.SIGINT, signal.SIGTERM):
        loop.remove_signal_handler(sig)


async def execute(opts: dict[str, Any], console: Console) -> int:
    if opts.get("mcp_stdio"):
        return await _stdio(opts, console)
    config = await load_config(opts)
    token = opts.get("auth_token") or os.environ.get(TOKEN_ENV) or None
    console.add_secret(token)
    a2a, mcp = _profiles(opts, config, token)
    if a2a is None and mcp is None:
        raise CliExit(2, NOTHING)
    if a2a is not None:
        apply_model_settings(opts, config)
        require_model(opts)
        require_key(opts, console)
        if opts.get("store"):
            a2a["store"] = open_store(opts["store"])
    served: list[Any] = []
    toolkit = await build_toolkit(opts, config=config, served=served, approvals=cli_policy(opts))
    if mcp is not None:
        _add_served(mcp, served)
    elif served:
        console.err("warning: resources and prompts from --tools-from are served over MCP only (pass --mcp)")
    client = None
    store = a2a.get("store") if a2a is not None else None
    try:
        if a2a is not None:
            from ..client import InMemoryConversationStore
            from ..serve import DurableTaskStore

            # A durable task store keeps the conversations too, so an input-required task can be
            # answered after a restart; otherwise conversations live (bounded) in memory.
            conversations = store.run_store if isinstance(store, DurableTaskStore) else InMemoryConversationStore(
                max_conversations=_CONVERSATIONS, ttl_seconds=_CONVERSATION_TTL)
            client = make_client(opts, store=conversations)
        return await _serve_http(opts, console, toolkit, client, a2a, mcp)
    finally:
        if client is not None:
            await client.aclose()
        if store is not None and not isinstance(store, str) and hasattr(store, "close"):
            await store.close()
        await toolkit.close()


async def _serve_http(opts: dict[str, Any], console: Console, toolkit: Any, client: Any,
                      a2a: Optional[dict[str, Any]], mcp: Optional[dict[str, Any]]) -> int:
    from ..mcp_serve.errors import ServeConfigError, ServeTypeError, UnsafeServeError

    stop = _stop_event()
    try:
        try:
            handle = await toolkit.serve(opts.get("addr") or DEFAULT_ADDR, client=client, a2a=a2a, mcp=mcp)
        except UnsafeServeError as exc:
            raise CliExit(2, f"error: {exc}\n{UNSAFE_HINT}") from None
        except (ServeConfigError, ServeTypeError) as exc:
            raise CliExit(2, f"error: {exc}") from None
        except OSError as exc:
            raise CliExit(1, f"error: {exc}") from None
        try:
            console.out(handle.url)
            if a2a is not None:
                console.err(f"a2a: {handle.url}/.well-known/agent-card.json")
            if mcp is not None:
                console.err(f"mcp: {handle.url}/mcp")
            await stop.wait()
        finally:
            await handle.stop()
        return 0
    finally:
        _restore_signals()


async def _stdio(opts: dict[str, Any], console: Console) -> int:
    if opts.get("a2a") or opts.get("mcp"):
        raise CliExit(2, "error: --mcp-stdio serves MCP on stdin/stdout; it cannot be combined with --a2a or --mcp")
    from ..mcp_serve import serve_mcp_stdio
    from ..mcp_serve._config import check_config
    from ..mcp_serve._skill_files import toolkit_catalog

    config = await load_config(opts)
    profile = _layer((config or {}).get("mcpServer"), {
        "tools": list(opts["mcp_tool"]) if opts.get("mcp_tool") else None, "name": opts.get("mcp_name"),
    })
    try:
        check_config(profile, where='config "mcpServer"')
    except (TypeError, ValueError) as exc:
        raise CliExit(2, f"error: {exc}") from None
    served: list[Any] = []
    toolkit = await build_toolkit(opts, config=config, served=served, approvals=cli_policy(opts))
    try:
        _add_served(profile, served)
        resources, prompts = toolkit_catalog(toolkit.tools, toolkit.skill_infos, toolkit.sources, profile)
        serving = asyncio.ensure_future(serve_mcp_stdio(toolkit.tools, profile, resources=resources,
                                                        prompts=prompts))
        stop = _stop_event()
        stopper = asyncio.ensure_future(stop.wait())
        try:
            await asyncio.wait({serving, stopper}, return_when=asyncio.FIRST_COMPLETED)
        finally:
            _restore_signals()
            stopper.cancel()
            if not serving.done():
                serving.cancel()
            await asyncio.wait({serving})
        if not serving.cancelled() and serving.exception() is not None:
            raise CliExit(1, f"error: {serving.exception()}")
        return 0
    finally:
        await toolkit.close()
