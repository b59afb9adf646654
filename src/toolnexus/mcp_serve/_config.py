"""The MCP serve profile (`MCPServeConfig`), its check, and the exposed-tool filter.

Kept apart from the server builder because two readers share these rules: `build_mcp_server`
and the `/mcp` endpoint of `toolnexus.serve` (body cap, Host/Origin lists, bearer token, sessions).

Keys beyond `name`, `version` and `tools`: `resources` / `prompts` (lists of `toolnexus.Resource` /
`toolnexus.Prompt`, made with `@resource` / `@prompt`), `skill_files` (serve the skills' files as
resources, default true), `sessions` (open HTTP sessions for clients that declare capabilities,
default true), `max_sessions` (default 1000), `session_idle_timeout` (seconds, default 1800).

Who answers (both profiles, MCP and A2A): an answer a caller gives through a served endpoint
records as its `by` the one identity the endpoint authenticated — the holder of `auth_token`,
named by `auth_identity` (default `"token-holder"`: a bearer token says only that its holder was
let in, and the token itself is never recorded); with no `auth_token` nobody is
authenticated and `by` stays empty (so is it on stdio). `answerers` (a
`toolnexus.approvals.Answerers`, or `{group: [identity, ...]}`) says who is in which group; a
request made for a group is answered only by a member or an admin (none given: every group is
empty, so such a request is refused over this profile).
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any, Awaitable, Callable, Optional, Union

from .._diag import warn_once
from ..approvals import Answerers
from ..errors import ToolnexusError
from ..resources import Prompt, Resource
from ..types import Tool
from .errors import ServeConfigError, ServeTypeError

MCPServeConfig = dict[str, Any]
OnCall = Callable[[dict[str, Any]], Union[None, Awaitable[None]]]
DEFAULT_NAME = "toolnexus"
DEFAULT_VERSION = "0.1.0"
DEFAULT_MAX_BODY_BYTES = 4 * 1024 * 1024
DEFAULT_MAX_SESSIONS = 1000
DEFAULT_SESSION_IDLE_TIMEOUT = 30 * 60.0
TOKEN_HOLDER = "token-holder"  # who answered, when all a profile knows is that its token was right

_STR_KEYS = ("name", "version")
_STR_LIST_KEYS = ("tools", "allowed_hosts", "allowed_origins")
_BOOL_KEYS = ("allow_unauthenticated_builtins", "skill_files", "sessions")
_ITEM_KEYS: dict[str, tuple[type, str]] = {"resources": (Resource, "@resource"), "prompts": (Prompt, "@prompt")}
_KNOWN = {*_STR_KEYS, *_STR_LIST_KEYS, *_BOOL_KEYS, *_ITEM_KEYS, "max_body_bytes", "auth_token", "max_sessions",
          "session_idle_timeout", "auth_identity", "answerers"}


def check_config(cfg: Any, *, where: str) -> None:
    """Reject a malformed profile with a message naming the key; warn once about unknown keys."""
    if cfg is None:
        return
    if not isinstance(cfg, Mapping):
        raise ServeTypeError(f"toolnexus: {where} must be a dict (MCPServeConfig), got {type(cfg).__name__}")
    for key in _STR_KEYS:
        if cfg.get(key) is not None and not isinstance(cfg[key], str):
            raise ServeTypeError(f'toolnexus: {where} "{key}" must be a string, got {type(cfg[key]).__name__}')
    for key in _STR_LIST_KEYS:
        value = cfg.get(key)
        if value is not None and (
            not isinstance(value, (list, tuple)) or not all(isinstance(v, str) for v in value)
        ):
            raise ServeTypeError(f'toolnexus: {where} "{key}" must be a list of strings, got {value!r}')
    for key in ("max_body_bytes", "max_sessions"):
        limit = cfg.get(key)
        if limit is not None and (isinstance(limit, bool) or not isinstance(limit, int) or limit <= 0):
            raise ServeConfigError(f'toolnexus: {where} "{key}" must be a positive integer, got {limit!r}')
    idle = cfg.get("session_idle_timeout")
    if idle is not None and (isinstance(idle, bool) or not isinstance(idle, (int, float)) or not 0 < idle < 1e9):
        raise ServeConfigError(f'toolnexus: {where} "session_idle_timeout" must be a positive number of seconds, '
                               f"got {idle!r}")
    token = cfg.get("auth_token")
    if token is not None and (not isinstance(token, str) or not token):
        raise ServeConfigError(f'toolnexus: {where} "auth_token" must be a non-empty string')
    check_answerers(cfg, where=where)
    for key in _BOOL_KEYS:
        flag = cfg.get(key)
        if flag is not None and not isinstance(flag, bool):
            raise ServeTypeError(f'toolnexus: {where} "{key}" must be true or false, got {flag!r}')
    for key, (kind, made_by) in _ITEM_KEYS.items():
        items = cfg.get(key)
        if items is not None and (not isinstance(items, (list, tuple)) or not all(isinstance(i, kind) for i in items)):
            raise ServeTypeError(f'toolnexus: {where} "{key}" must be a list of {kind.__name__} (made with '
                                 f"{made_by}), got {items!r}")
    for key in sorted(set(cfg) - _KNOWN):
        warn_once(f"mcp-serve-key:{key}", f'[toolnexus] MCP serve profile key "{key}" is not recognised — ignored')


def exposed_mcp_tools(tools: list[Tool], cfg: Optional[MCPServeConfig] = None) -> list[Tool]:
    """All tools without a `tools` list; else those named, in toolkit order (`[]` ⇒ none)."""
    if cfg is None or cfg.get("tools") is None:
        return list(tools)
    wanted = set(cfg["tools"])
    return [t for t in tools if t.name in wanted]


def check_answerers(cfg: Mapping[str, Any], *, where: str) -> None:
    """The profile's `auth_identity` and `answerers` (see the module docstring), shared by the A2A profile."""
    identity = cfg.get("auth_identity")
    if identity is not None:
        if not isinstance(identity, str) or not identity.strip():
            raise ServeConfigError(f'toolnexus: {where} "auth_identity" must be a non-empty string (who holds '
                                   '"auth_token", recorded as who answered)')
        if not cfg.get("auth_token"):
            raise ServeConfigError(f'toolnexus: {where} "auth_identity" names who holds "auth_token", and there is '
                                   'no "auth_token": without one nobody is authenticated')
    answerers = cfg.get("answerers")
    if answerers is None or isinstance(answerers, Answerers):
        return
    if not isinstance(answerers, Mapping):
        raise ServeTypeError(f'toolnexus: {where} "answerers" must be an Answerers or a dict {{group: [identity, '
                             f"...]}}, got {type(answerers).__name__}")
    try:
        Answerers(answerers)
    except ToolnexusError as exc:
        raise ServeTypeError(f'toolnexus: {where} "answerers": {str(exc).removeprefix("toolnexus: ")}') from None


def answered_by(cfg: Optional[Mapping[str, Any]]) -> Optional[str]:
    """Who a caller let in by this profile is: `auth_identity`, else `TOKEN_HOLDER`; None without `auth_token`."""
    if not cfg or not cfg.get("auth_token"):
        return None
    return str(cfg.get("auth_identity") or TOKEN_HOLDER)


def answerers_of(cfg: Optional[Mapping[str, Any]]) -> Answerers:
    """The profile's `answerers` (none: every group is empty)."""
    value = (cfg or {}).get("answerers")
    if isinstance(value, Answerers):
        return value
    return Answerers(value) if isinstance(value, Mapping) else Answerers()

