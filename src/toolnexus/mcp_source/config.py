"""MCP config: the server map, the enable/remote rules, and one server's normalised settings.

`parse_mcp_config` & co. are the pinned public helpers (mcp-skills-builtins.md §1.2). `ServerSpec`
is our internal, validated view of one server entry: every shape problem becomes a `ValueError`
that names the key, so a bad entry fails alone with a readable reason.
"""

from __future__ import annotations

import json
import os
import re
from dataclasses import dataclass, field
from typing import Any, Optional, Union

from .._diag import warn
from .._env import expand_headers
from .._redact import REDACTED, is_credential_header, mask_headers, redact_url
from ..errors import ConfigError

__all__ = [
    "DEFAULT_TIMEOUT",
    "McpConfig",
    "ServerConfig",
    "ServerSpec",
    "apply_tools_filter",
    "expand_env_headers",
    "is_enabled",
    "is_remote",
    "parse_mcp_config",
    "read_config_file",
    "server_spec",
]

DEFAULT_TIMEOUT = 30.0
ServerConfig = dict[str, Any]
McpConfig = dict[str, ServerConfig]
_RESERVED = ("builtins", "agents", "a2a", "mcpServer")
_COMMENTS = re.compile(r'("(?:\\.|[^"\\])*")|//[^\n]*|/\*.*?\*/', re.S)
# What a stdio child always gets when `inheritEnv` narrows its environment (the SDK's own
# "safe to inherit" set on POSIX): enough to find executables and a home directory.
_BASE_ENV = ("HOME", "LOGNAME", "PATH", "SHELL", "TERM", "USER")


def read_config_file(path: str) -> dict[str, Any]:
    """Read a JSON (or JSONC) config file; errors name the file."""
    with open(path, encoding="utf-8") as fh:
        text = fh.read()
    try:
        data = json.loads(_COMMENTS.sub(lambda m: m.group(1) or "", text))
    except json.JSONDecodeError as exc:
        raise ConfigError(f"toolnexus: config file {path} is not valid JSON: {exc}") from None
    except RecursionError:
        raise ConfigError(f"toolnexus: config file {path} is not usable JSON: nested too deeply") from None
    if not isinstance(data, dict):
        raise ConfigError(f"toolnexus: config file {path} must hold a JSON object, got {type(data).__name__}")
    return data


def parse_mcp_config(input: Union[str, dict[str, Any]]) -> McpConfig:  # noqa: A002 - pinned name
    """The server map of a config: the first of `mcpServers`/`servers`/`mcp`, else the bare map."""
    data = read_config_file(input) if isinstance(input, str) else dict(input)
    for key in ("mcpServers", "servers", "mcp"):
        if key in data:
            return data[key]
    return {k: v for k, v in data.items() if k not in _RESERVED}


def is_enabled(cfg: ServerConfig) -> bool:
    if cfg.get("disabled") is True:
        return False
    return cfg.get("enabled") is not False


def is_remote(cfg: ServerConfig) -> bool:
    kind = cfg.get("type")
    if kind == "remote":
        return True
    if kind == "local":
        return False
    return isinstance(cfg.get("url"), str)


def expand_env_headers(headers: Optional[dict[str, str]]) -> Optional[dict[str, str]]:
    """`${NAME}` in header values → the environment value (or `""`); values are never logged."""
    return None if headers is None else expand_headers(headers)


def apply_tools_filter(server: str, defs: list[Any], filter: Optional[dict[str, bool]]) -> list[Any]:  # noqa: A002
    """Per-server allowlist by original tool name: any `True` ⇒ only those; else drop `False` ones.

    `defs` may be SDK `Tool` models or their dumped dicts.
    """
    if not filter:
        return list(defs)

    def name_of(d: Any) -> Any:
        return d.get("name") if isinstance(d, dict) else getattr(d, "name", None)

    names = {name_of(d) for d in defs}
    for key in filter:
        if key not in names:
            warn(f'[toolnexus] server "{server}" tools filter name "{key}" matched no tool')
    if any(v is True for v in filter.values()):
        return [d for d in defs if filter.get(name_of(d)) is True]
    return [d for d in defs if filter.get(name_of(d)) is not False]


def _shown_args(args: list[str]) -> list[str]:
    """`args` with the value of a credential-looking flag masked (`--api-key X`, `--token=X`)."""
    shown: list[str] = []
    for i, arg in enumerate(args):
        flag, eq, _ = arg.partition("=")
        if eq and flag.startswith("-") and is_credential_header(flag):
            shown.append(f"{flag}={REDACTED}")
        elif i > 0 and args[i - 1].startswith("-") and "=" not in args[i - 1] and is_credential_header(args[i - 1]):
            shown.append(REDACTED)
        else:
            shown.append(arg)
    return shown


@dataclass
class ServerSpec:
    """One enabled server, validated. Durations in seconds.

    Its repr never shows a secret: header values (expanded from `${ENV}` by now) are masked, the
    child's environment is summarised as a count, the URL loses any password or credential query
    value, and the value of a credential-looking command-line flag is masked.
    """

    name: str
    remote: bool
    timeout: float
    call_timeout: float
    url: str = ""
    headers: Optional[dict[str, str]] = None
    command: str = ""
    args: list[str] = field(default_factory=list)
    env: dict[str, str] = field(default_factory=dict)
    cwd: Optional[str] = None
    tools_filter: Optional[dict[str, bool]] = None

    def __repr__(self) -> str:
        fields = [f"name={self.name!r}", f"remote={self.remote}", f"timeout={self.timeout}",
                  f"call_timeout={self.call_timeout}"]
        if self.remote:
            fields += [f"url={redact_url(self.url)!r}", f"headers={mask_headers(self.headers)!r}"]
        else:
            fields += [f"command={self.command!r}", f"args={_shown_args(self.args)!r}",
                       f"env=<{len(self.env)} variables>", f"cwd={self.cwd!r}"]
        if self.tools_filter is not None:
            fields.append(f"tools_filter={self.tools_filter!r}")
        return f"ServerSpec({', '.join(fields)})"


def _seconds(value: Any, default: float) -> float:
    if isinstance(value, bool) or not isinstance(value, (int, float)) or value <= 0:
        return default
    return float(value) / 1000.0


def _str_list(value: Any, key: str) -> list[str]:
    if not isinstance(value, list) or not all(isinstance(v, (str, int, float)) for v in value):
        raise ConfigError(f'"{key}" must be a list of strings')
    return [str(v) for v in value]


def _child_env(cfg: ServerConfig) -> dict[str, str]:
    extra = cfg.get("environment") or cfg.get("env") or {}
    if not isinstance(extra, dict):
        raise ConfigError('"environment"/"env" must be an object of strings')
    inherit = cfg.get("inheritEnv", True)
    if inherit is True:
        base = dict(os.environ)
    else:
        names = [] if inherit is False else _str_list(inherit, "inheritEnv")
        base = {k: os.environ[k] for k in (*_BASE_ENV, *names) if k in os.environ}
    return {**base, **{str(k): str(v) for k, v in extra.items()}}


def server_spec(name: str, cfg: Any) -> ServerSpec:
    """Validate one enabled server entry (raises `ValueError` naming what is wrong)."""
    if not isinstance(cfg, dict):
        raise ConfigError(f"server config must be an object, got {type(cfg).__name__}")
    timeout = _seconds(cfg.get("timeout"), DEFAULT_TIMEOUT)
    call_timeout = _seconds(cfg.get("callTimeout"), timeout)
    tools_filter = cfg.get("tools")
    if tools_filter is not None and not isinstance(tools_filter, dict):
        raise ConfigError('"tools" must be an object of tool name -> true/false')
    spec = ServerSpec(name, is_remote(cfg), timeout, call_timeout, tools_filter=tools_filter or None)
    if spec.remote:
        url = cfg.get("url")
        if not isinstance(url, str) or not url:
            raise ConfigError('a remote server needs a "url" string')
        headers = cfg.get("headers")
        if headers is not None and not (
            isinstance(headers, dict) and all(isinstance(v, str) for v in headers.values())
        ):
            raise ConfigError('"headers" must be an object of strings')
        spec.url, spec.headers = url, expand_env_headers(headers)
        return spec
    command = cfg.get("command")
    if isinstance(command, list):
        argv = _str_list(command, "command")
    elif isinstance(command, str) and command:
        argv = [command]  # Claude-desktop form: the executable alone, arguments in "args"
    elif command is None:
        raise ConfigError('a local server needs a "command" (or a "url" for a remote one)')
    else:
        raise ConfigError('"command" must be a list [exe, *args] or an executable name')
    if not argv or not argv[0]:
        raise ConfigError('"command" is empty')
    if cfg.get("args") is not None:
        argv += _str_list(cfg["args"], "args")
    cwd = cfg.get("cwd")
    if cwd is not None and not isinstance(cwd, str):
        raise ConfigError('"cwd" must be a string')
    spec.command, spec.args, spec.env, spec.cwd = argv[0], argv[1:], _child_env(cfg), cwd
    return spec
