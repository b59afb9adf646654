"""The A2A serve profile (`A2AConfig`): its keys, their defaults, and the up-front check.

Keys (all optional; `a2a={}` serves A2A with every default):

- card: `name`, `description`, `version`, `provider` (`{"organization", "url"}`), `skills`
  (the card's skill filter), `public_url` (the endpoint URL the card advertises).
- tasks: `store` (`TaskStore`, `"memory"`, `"file:<dir>"`, or a registered scheme),
  `blocking_timeout` (seconds a blocking `SendMessage` waits for the outcome; default 60),
  `list_tasks` (whether `ListTasks` answers; default true — every caller allowed on the server
  sees every task, so turn it off when callers must not see each other's tasks).
- safety: `auth_token` (bearer token required on every A2A route, the card included),
  `allow_unauthenticated_builtins`, `allowed_hosts` / `allowed_origins` (the DNS-rebinding
  guard, as for `/mcp`), `max_body_bytes` (default 1 MiB ⇒ 413), `redact` (a `str -> str` hook
  for failed-task text).
- who answers: `auth_identity` (who holds `auth_token`: the `by` of every answer given through
  this profile, default `"token-holder"`), `answerers` (who is in which group: an `Answerers` or
  `{group: [identity, ...]}`) — see `toolnexus.mcp_serve._config`.

A malformed value fails `serve()` before anything binds, naming the key; an unknown key is
warned about once and ignored.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any, Optional

from .._diag import warn_once
from ..mcp_serve._config import check_answerers
from ..mcp_serve.errors import ServeConfigError, ServeTypeError

A2AConfig = dict[str, Any]
DEFAULT_A2A_MAX_BODY_BYTES = 1024 * 1024
DEFAULT_BLOCKING_TIMEOUT = 60.0  # seconds

_STR_KEYS = ("name", "description", "version")
_STR_LIST_KEYS = ("skills", "allowed_hosts", "allowed_origins")
_KNOWN = {*_STR_KEYS, *_STR_LIST_KEYS, "provider", "store", "auth_token", "public_url", "max_body_bytes",
          "redact", "allow_unauthenticated_builtins", "blocking_timeout", "list_tasks", "auth_identity", "answerers"}


def _positive_number(value: Any) -> bool:
    return not isinstance(value, bool) and isinstance(value, (int, float)) and value > 0


def check_a2a_config(cfg: Any, *, where: str) -> None:
    """Reject a malformed profile with a message naming the key; warn once about unknown keys."""
    if cfg is None:
        return
    if not isinstance(cfg, Mapping):
        raise ServeTypeError(f"toolnexus: {where} must be a dict (A2AConfig), got {type(cfg).__name__}")
    for key in _STR_KEYS:
        if cfg.get(key) is not None and not isinstance(cfg[key], str):
            raise ServeTypeError(f'toolnexus: {where} "{key}" must be a string, got {type(cfg[key]).__name__}')
    for key in _STR_LIST_KEYS:
        value = cfg.get(key)
        if value is not None and (not isinstance(value, (list, tuple)) or not all(isinstance(v, str) for v in value)):
            raise ServeTypeError(f'toolnexus: {where} "{key}" must be a list of strings, got {value!r}')
    provider = cfg.get("provider")
    if provider is not None and not isinstance(provider, Mapping):
        raise ServeTypeError(f'toolnexus: {where} "provider" must be a dict like {{"organization": ..., "url": ...}}')
    token = cfg.get("auth_token")
    if token is not None and (not isinstance(token, str) or not token):
        raise ServeConfigError(f'toolnexus: {where} "auth_token" must be a non-empty string')
    check_answerers(cfg, where=where)
    url = cfg.get("public_url")
    if url is not None and (not isinstance(url, str) or not url.startswith(("http://", "https://"))):
        raise ServeConfigError(f'toolnexus: {where} "public_url" must be an http(s) URL, got {url!r}')
    limit = cfg.get("max_body_bytes")
    if limit is not None and (isinstance(limit, bool) or not isinstance(limit, int) or limit <= 0):
        raise ServeConfigError(f'toolnexus: {where} "max_body_bytes" must be a positive integer, got {limit!r}')
    wait = cfg.get("blocking_timeout")
    if wait is not None and not _positive_number(wait):
        raise ServeConfigError(
            f'toolnexus: {where} "blocking_timeout" must be a positive number of seconds, got {wait!r}'
        )
    if cfg.get("redact") is not None and not callable(cfg["redact"]):
        raise ServeTypeError(f'toolnexus: {where} "redact" must be a function str -> str')
    for key in ("allow_unauthenticated_builtins", "list_tasks"):
        flag = cfg.get(key)
        if flag is not None and not isinstance(flag, bool):
            raise ServeTypeError(f'toolnexus: {where} "{key}" must be true or false, got {flag!r}')
    for key in sorted(set(cfg) - _KNOWN):
        warn_once(f"a2a-serve-key:{key}", f'[toolnexus] A2A serve profile key "{key}" is not recognised — ignored')


def max_body(cfg: Optional[Mapping[str, Any]]) -> int:
    return int((cfg or {}).get("max_body_bytes") or DEFAULT_A2A_MAX_BODY_BYTES)


def lists_tasks(cfg: Optional[Mapping[str, Any]]) -> bool:
    return (cfg or {}).get("list_tasks") is not False


def blocking_timeout(cfg: Optional[Mapping[str, Any]]) -> float:
    return float((cfg or {}).get("blocking_timeout") or DEFAULT_BLOCKING_TIMEOUT)
