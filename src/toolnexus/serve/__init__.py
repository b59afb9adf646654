"""Serving a toolkit over HTTP — A2A and MCP on one app — with `Toolkit.serve(addr, ...)`.

`Toolkit.serve(addr, client=, a2a=, on_task=, mcp=, on_call=, limits=)` → `ServeHandle`
(`url`, `stop()`); `start_a2a_server(...)` is the same server over a plain `run_task` coroutine.
Routes: `/mcp` (when an MCP profile is present, else 404) → the A2A card and JSON-RPC (when an
A2A profile is present) → 404 `not found`.

Modules: `server` (starting, profile resolution, wiring), `app` (routing), `a2a_app` (card and
JSON-RPC), `a2a_render` (1.0 / 0.3 / existing-toolnexus wire forms), `a2a_profile` (the
`A2AConfig` keys), `card`, `fulfil` (task life cycle, suspension → input-required, resume,
cancel), `tasks` (task stores), `safety` (token rules, redaction), `guard` (Host/Origin, bearer,
body cap), `limits` (header/body time and connection bounds), `listener` (uvicorn on the
caller's loop), `mcp_app` (the `/mcp` endpoint). `HostGuard`, `read_body` and `start_listener` are
exported for other ASGI apps of ours (`toolnexus.inbox`) to guard and serve the same way. Not here: TLS, rate limiting,
streaming (`message/stream`), push notifications.
"""

from __future__ import annotations

from ._a2a_profile import A2AConfig
from ._card import CARD_PATH, DEFAULT_VERSION, PROTOCOL_VERSION, build_agent_card
from ._fulfil import OnTask, ResumeTask, RunTask
from ._limits import ServeLimits
from ._listener import ServeHandle, parse_addr, start_listener
from ._safety import UNSAFE_BUILTINS
from ._server import serve_toolkit, start_a2a_server
from ._tasks import DurableTaskStore, FileTaskStore, InMemoryTaskStore, TaskStore, register_store_scheme, resolve_store
from .guard import BodyTooLarge, ClientGone, HostGuard, read_body

__all__ = [
    "A2AConfig",
    "BodyTooLarge",
    "ClientGone",
    "HostGuard",
    "CARD_PATH",
    "DEFAULT_VERSION",
    "FileTaskStore",
    "InMemoryTaskStore",
    "OnTask",
    "PROTOCOL_VERSION",
    "ResumeTask",
    "RunTask",
    "ServeHandle",
    "ServeLimits",
    "TaskStore",
    "UNSAFE_BUILTINS",
    "build_agent_card",
    "parse_addr",
    "read_body",
    "register_store_scheme",
    "resolve_store",
    "DurableTaskStore",
    "serve_toolkit",
    "start_a2a_server",
    "start_listener",
]
