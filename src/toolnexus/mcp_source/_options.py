"""`McpOptions`: the host's settings for the MCP client — what a config file cannot hold.

A config file says which servers exist and how to reach them; these are the host's objects and
policies: where OAuth tokens are kept and with which key (`auth`), which model answers a server's
sampling requests and when (`sampling`), who hears a server's log and progress notifications
(`hooks`), the limits on what a server may declare (`limits`) and how a local server's processes
are held (`containment`). Every field defaults to the safe choice: tokens in this process's
memory only, sampling refused, notifications dropped, the default limits, the best containment
this machine offers. Pass them as `create_toolkit(..., mcp_options=McpOptions(...))` or
`load_mcp_with_context(..., options=...)`.
"""

from __future__ import annotations

import asyncio
import inspect
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any, Awaitable, Callable, Literal, Optional, Protocol, Union

from .._diag import warn
from .._hooks import hook_of
from ..errors import ConfigError
from ..mcp_auth import OAuthOptions
from ._contain import CONTAINMENTS
from ._limits import PeerLimits


class SamplerReply(Protocol):
    text: Optional[str]


class Sampler(Protocol):
    """What answers a sampling request: a toolnexus `Client` (its `model` and `translate`) fits."""

    model: str

    async def translate(self, messages: list, *, system: Optional[str] = None,
                        max_tokens: int = 0) -> SamplerReply: ...


@dataclass
class SamplingPolicy:
    """Whether and how servers may ask our model (`sampling/createMessage`). Off unless a server is
    listed in `servers` (or `servers="*"`): a sampling request spends your tokens on a prompt the
    server wrote.

    `client` answers (pass the agent's own model: the `Client` of its `llm`); a request's
    `maxTokens` is capped at `max_tokens`; a connection may ask at most `max_requests` times;
    `approve(event)` (sync or async; `event` = `{"server", "messages", "system", "max_tokens"}`)
    may refuse one request by returning False.
    """

    client: Sampler
    servers: Union[Sequence[str], Literal["*"]] = ()
    max_tokens: int = 1024
    max_requests: int = 50
    approve: Optional[Callable[[dict[str, Any]], Union[bool, Awaitable[bool]]]] = None

    def allows(self, server: str) -> bool:
        return self.servers == "*" or server in self.servers


@dataclass
class McpOptions:
    """The host's MCP client settings (see the module docstring)."""

    auth: Optional[OAuthOptions] = None
    sampling: Optional[SamplingPolicy] = None
    hooks: Any = None  # a mapping or object with `mcp_log(event)` / `mcp_progress(event)`, sync or async
    limits: PeerLimits = field(default_factory=PeerLimits)
    containment: Literal["auto", "cgroup", "subreaper", "group"] = "auto"

    def __post_init__(self) -> None:
        if self.containment not in CONTAINMENTS:
            raise ConfigError(f"toolnexus: McpOptions containment must be one of {', '.join(CONTAINMENTS)}, "
                              f"got {self.containment!r}")
        if self.auth is not None and not isinstance(self.auth, OAuthOptions):
            raise ConfigError(f"toolnexus: McpOptions auth must be an OAuthOptions, got {type(self.auth).__name__}")


_RUNNING: set["asyncio.Future[Any]"] = set()  # async hooks in flight (held, so none is collected mid-way)


def fire_hook(hooks: Any, name: str, event: dict[str, Any]) -> None:
    """Call hook `name` of `hooks` (a mapping or object, like the client's hooks) with `event`, now.
    A sync hook runs before this returns; an async one is scheduled. A hook that fails is warned
    about, never raised into the connection that received the notification."""
    fn = hook_of(hooks, name)
    if fn is None:
        return
    try:
        result = fn(event)
    except Exception as exc:
        warn(f"[toolnexus] MCP hook {name} failed: {type(exc).__name__}: {exc}")
        return
    if inspect.isawaitable(result):
        task = asyncio.ensure_future(result)
        _RUNNING.add(task)
        task.add_done_callback(lambda t: _done(name, t))


def _done(name: str, task: "asyncio.Future[Any]") -> None:
    _RUNNING.discard(task)
    if not task.cancelled() and task.exception() is not None:
        exc = task.exception()
        warn(f"[toolnexus] MCP hook {name} failed: {type(exc).__name__}: {exc}")
