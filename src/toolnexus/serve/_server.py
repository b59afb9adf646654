"""Starting a server: `serve_toolkit` (behind `Toolkit.serve`) and `start_a2a_server`.

`serve_toolkit(toolkit, addr, client=, a2a=, on_task=, mcp=, on_call=, limits=)`:
- profiles: A2A = `a2a` if not None, else the toolkit's dict-config `a2a` block; MCP = `mcp` if
  not None, else its `mcpServer` block. A profile is present iff it is not None (`{}` = all
  defaults). Both are checked before anything binds.
- A2A tasks run as `client.ask(text, toolkit, id=<contextId>)` — every served task has a context
  (the caller's `contextId`, or a fresh one we return), so a caller can continue the
  conversation and an interrupted task can be resumed with `client.ask_with_answer`. With no
  `client`, A2A tasks fail (a failed task, not a crash) and `serve()` warns once.
- `/mcp` reads `toolkit.tools()` per request (tools registered later are served too), filtered
  by the profile's `tools` list.
- Safety (`toolnexus.serve._safety`): unsafe built-ins without a token are refused per profile;
  a later-registered one is left out of `/mcp` rather than served; a non-loopback bind without a
  token warns.

`start_a2a_server(addr, a2a, skills, run_task, ...)` is the same server over a plain
`run_task(text, context_id)` coroutine (and optionally `resume_task(context_id, request,
answer)`) instead of a toolkit and client; `mcp_tools` is then a fixed list.

The task store is resolved once per call; a store built here from a selector is closed by
`stop()`, one passed in as an object is the caller's to close. `stop()` stops accepting, tells
running MCP calls to wrap up, lets A2A fulfilments finish for `limits.drain_timeout` seconds and
cancels the rest (stored `canceled`), then frees the socket.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable
from typing import Any, Optional

from .._diag import warn_once
from ..durable import is_run_store
from ..errors import ToolnexusRuntimeError
from ..mcp_serve._config import MCPServeConfig, OnCall, answered_by, answerers_of, check_config, exposed_mcp_tools
from ..mcp_serve._skill_files import toolkit_catalog
from ..mcp_serve.errors import ServeConfigError
from ..types import Tool
from ._a2a_app import A2AEndpoint
from ._a2a_profile import A2AConfig, check_a2a_config
from ._app import ServeApp
from ._fulfil import Fulfiller, OnTask, ResumeTask, RunTask
from ._limits import ServeLimits
from ._listener import ServeHandle, parse_addr, start_listener
from ._mcp_app import McpEndpoint
from ._safety import check_exposure, make_redactor, unsafe_tools, warn_open_network
from ._tasks import DurableTaskStore, TaskStore, resolve_store

_WILDCARDS = ("0.0.0.0", "::")


def _guarded_provider(tools: Callable[[], list[Tool]], profile: MCPServeConfig) -> Callable[[], list[Tool]]:
    """`tools` minus unsafe built-ins when the profile has no token and did not opt in."""
    if profile.get("auth_token") or profile.get("allow_unauthenticated_builtins") is True:
        return tools

    def provide() -> list[Tool]:
        listed = list(tools())
        dropped = set(unsafe_tools(listed))
        for name in sorted(dropped):
            warn_once(f"mcp-serve-unsafe:{name}",
                      f'[toolnexus] serve: built-in tool "{name}" was added after serve() — not served over /mcp '
                      "without an auth_token")
        return [t for t in listed if not (t.source == "builtin" and t.name in dropped)]

    return provide


async def _start(
    addr: str,
    *,
    a2a: Optional[A2AConfig],
    skills: list[Any],
    run_task: Optional[RunTask],
    resume_task: Optional[ResumeTask],
    on_task: Optional[OnTask],
    mcp: Optional[MCPServeConfig],
    mcp_tools: Optional[Callable[[], list[Tool]]],
    on_call: Optional[OnCall],
    mcp_catalog: tuple[Any, Any] = (None, None),
    limits: Optional[ServeLimits],
    secrets: list[Optional[str]],
) -> ServeHandle:
    host, port = parse_addr(addr)
    limits = limits if limits is not None else ServeLimits()
    warn_open_network(host, port, {"a2a": a2a, "mcp": mcp})

    mcp_endpoint = None
    if mcp is not None:
        provider = _guarded_provider(mcp_tools or (lambda: []), mcp)
        mcp_endpoint = McpEndpoint(provider, dict(mcp), on_call, resources=mcp_catalog[0], prompts=mcp_catalog[1])

    a2a_endpoint = None
    store: Optional[TaskStore] = None
    owns_store = False
    handle_box: dict[str, ServeHandle] = {}
    if a2a is not None:
        selector = a2a.get("store")
        store = resolve_store(selector)
        owns_store = selector is None or isinstance(selector, str)
        tokens = [a2a.get("auth_token"), (mcp or {}).get("auth_token")]
        redact = make_redactor(a2a.get("redact"), secrets + tokens)
        fulfiller = Fulfiller(store, run_task or _no_runner, resume_task=resume_task, on_task=on_task, redact=redact,
                              answered_by=answered_by(a2a), answerers=answerers_of(a2a))
        a2a_endpoint = A2AEndpoint(dict(a2a), skills, fulfiller, wildcard_bind=host in _WILDCARDS,
                                   local_url=lambda: handle_box["handle"].url if handle_box else f"http://{host}:{port}")

    async def drain() -> None:
        if a2a_endpoint is not None:
            await a2a_endpoint.fulfiller.stop(limits.drain_timeout)
        if owns_store and store is not None:
            await store.close()

    hooks: list[Callable[[], Any]] = []
    if mcp_endpoint is not None:
        hooks.append(mcp_endpoint.aclose)
    hooks.append(drain)
    try:
        handle = await start_listener(ServeApp(mcp_endpoint, a2a_endpoint), addr, on_stop=hooks, limits=limits)
    except BaseException:
        if owns_store and store is not None:
            await store.close()
        raise
    handle_box["handle"] = handle
    handle.store = store
    handle.profiles = {"a2a": a2a is not None, "mcp": mcp is not None}
    return handle


async def _no_runner(text: str, context_id: Optional[str] = None) -> Any:
    raise ToolnexusRuntimeError("toolnexus: this server has no run_task to fulfil A2A tasks with")


async def serve_toolkit(
    toolkit: Any,
    addr: str,
    *,
    client: Any = None,
    a2a: Optional[A2AConfig] = None,
    on_task: Optional[OnTask] = None,
    mcp: Optional[MCPServeConfig] = None,
    on_call: Optional[OnCall] = None,
    limits: Optional[ServeLimits] = None,
) -> ServeHandle:
    """Bind `addr` (`host:port`, port 0 ⇒ ephemeral) and serve `toolkit` until `stop()`."""
    mcp_profile = mcp if mcp is not None else getattr(toolkit, "mcp_server_config", None)
    a2a_profile = a2a if a2a is not None else getattr(toolkit, "a2a_config", None)
    check_config(mcp_profile, where="mcp" if mcp is not None else 'config "mcpServer"')
    check_a2a_config(a2a_profile, where="a2a" if a2a is not None else 'config "a2a"')
    parse_addr(addr)  # a malformed addr fails before anything is built
    tools_of = toolkit.tools
    if mcp_profile is not None:
        check_exposure(exposed_mcp_tools(list(tools_of()), mcp_profile), mcp_profile, where="mcp", how="call them")
    if a2a_profile is not None:
        check_exposure(list(tools_of()), a2a_profile, where="a2a", how="ask the agent to run them")
        if client is None:
            warn_once("serve-a2a-no-client",
                      "[toolnexus] serve: A2A is on but no client= was given — every A2A task will fail")
        elif _durable_tasks(a2a_profile) and not is_run_store(getattr(client, "store", None)):
            warn_once("serve-a2a-volatile-conversations",
                      "[toolnexus] serve: A2A tasks are kept in a durable store, but the client keeps its "
                      "conversations in memory — after a restart an input-required task cannot be resumed; "
                      "give the client the same store (create_client(store=...))")

    async def run_task(text: str, context_id: Optional[str] = None) -> Any:
        if client is None:
            raise ToolnexusRuntimeError("toolnexus: serve() was given no client= to run A2A tasks with")
        if context_id:
            return await client.ask(text, toolkit, id=context_id)
        return await client.run(text, toolkit)

    async def resume_task(context_id: str, request: Any, answer: Any) -> Any:
        if client is None:
            raise ToolnexusRuntimeError("toolnexus: serve() was given no client= to run A2A tasks with")
        return await client.ask_with_answer(toolkit, context_id, request, answer)

    skills_of = getattr(toolkit, "skill_infos", None)
    skills = list(skills_of()) if callable(skills_of) else []
    return await _start(
        addr, a2a=a2a_profile, skills=skills, run_task=run_task, resume_task=resume_task, on_task=on_task,
        mcp=mcp_profile, mcp_tools=tools_of, on_call=on_call, limits=limits,
        secrets=[getattr(client, "api_key", None)],
        mcp_catalog=(toolkit_catalog(tools_of, skills_of if callable(skills_of) else None,
                                     getattr(toolkit, "sources", ()), mcp_profile)
                     if mcp_profile is not None else (None, None)),
    )


def _durable_tasks(a2a: Any) -> bool:
    store = (a2a or {}).get("store")
    if isinstance(store, str):
        return store.split(":", 1)[0] in ("sqlite", "postgresql", "postgres")
    return isinstance(store, DurableTaskStore)


async def start_a2a_server(
    addr: str,
    a2a: Optional[A2AConfig],
    skills: list[Any],
    run_task: RunTask,
    on_task: Optional[OnTask] = None,
    loop: Optional[asyncio.AbstractEventLoop] = None,
    mcp: Optional[MCPServeConfig] = None,
    mcp_tools: Optional[list[Tool]] = None,
    on_call: Optional[OnCall] = None,
    *,
    resume_task: Optional[ResumeTask] = None,
    limits: Optional[ServeLimits] = None,
) -> ServeHandle:
    """Serve A2A (and `/mcp` over `mcp_tools` when `mcp` is given) with a plain `run_task`.

    `loop`, when given, must be the running loop: fulfilments run on the loop that serves.
    """
    if loop is not None and loop is not asyncio.get_running_loop():
        raise ServeConfigError("toolnexus: start_a2a_server must be awaited on the loop it serves (loop= differs)")
    check_config(mcp, where="mcp")
    check_a2a_config(a2a, where="a2a")
    parse_addr(addr)
    fixed = list(mcp_tools or [])
    if mcp is not None:
        check_exposure(exposed_mcp_tools(fixed, mcp), mcp, where="mcp", how="call them")
    return await _start(
        addr, a2a=a2a, skills=list(skills or []), run_task=run_task, resume_task=resume_task, on_task=on_task,
        mcp=mcp, mcp_tools=lambda: fixed, on_call=on_call, limits=limits, secrets=[],
    )

