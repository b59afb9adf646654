"""MCP config: the server map, the enable/remote rules, and one server's normalised settings.

`parse_mcp_config` & co. are the pinned public helpers. `ServerSpec` is our internal, validated
view of one server entry: every shape problem becomes a `ConfigError` (a `ValueError`) that names
the key, what it must be and what it got, so a bad entry fails alone with a readable reason (the
log line and `Toolkit.mcp_reasons()` add the server's name).

What is checked, and why it only warns where it does: a value of the wrong JSON type fails the
server (`"timeout": "30s"` cannot be guessed at). A key we do not know (a typo such as `timout`,
or another host's key such as `envFile`) is warned about once per server and key and ignored:
config files are shared between MCP hosts, and failing on a key another host understands would
break them. A key that applies only to the other kind of server (`headers` on a local one) is
warned about the same way. Durations are milliseconds; a non-positive one falls back to the
default with a warning, and one under `SUSPICIOUS_MS` (100) warns that it looks like seconds.

Top-level keys (`config_key_problems`): beside the server map (`mcpServers`, `servers`, `mcp`) a
config holds `builtins`, `agents`, `a2a`, `mcpServer` (the MCP *serve* profile) and `llm` (the
`toolnexus` command's model settings). A key that is none of these, next to a server map, is
ignored with a warning that names the nearest known key; so is `mcpServer` holding server entries
(`{"mcpServer": {"github": {"command": …}}}` — a typo of `mcpServers` that would otherwise serve
nothing and connect nothing). Without a server map every other key is a server, as in 0.21, and
only a key that is a near miss of a reserved one (`agnets`) and does not look like a server entry
is reported. `create_toolkit` warns (0.21 read such files without a word, and must keep reading
them); the `toolnexus` command refuses the near misses (`ConfigKeyProblem.typo`).

`requireApproval` (ours, any server): `"always"` (every tool of the server waits for a human's
approval), `"never"` (the default), or an object of the server's own tool names to `"always"` /
`"never"` (or `true` / `false`); a tool it does not name needs none. A name that matches none of
the server's tools is warned about once when the tools are listed.
"""

from __future__ import annotations

import asyncio
import difflib
import json
import math
import os
import re
from dataclasses import dataclass, field
from typing import Any, Optional, Union

from .._diag import warn, warn_once
from .._env import expand_headers
from .._redact import REDACTED, is_credential_header, mask_headers, redact_url
from ..errors import ConfigError
from ..mcp_auth import ServerAuth, server_auth

DEFAULT_TIMEOUT = 30.0
SUSPICIOUS_MS = 100
# Every key of a server entry, and which kind of server it applies to.
SERVER_KEYS: dict[str, str] = {
    "type": "any", "enabled": "any", "disabled": "any", "timeout": "any", "callTimeout": "any", "tools": "any",
    "requireApproval": "any",
    "command": "local", "args": "local", "env": "local", "environment": "local", "inheritEnv": "local",
    "cwd": "local", "strictStdout": "local",
    "url": "remote", "headers": "remote", "oauth": "remote",
    "resourceTools": "any", "promptTools": "any",
}
_TYPES = ("local", "remote", "stdio", "http", "sse", "streamable-http", "streamableHttp")
ServerConfig = dict[str, Any]
McpConfig = dict[str, ServerConfig]
_RESERVED = ("builtins", "agents", "a2a", "mcpServer", "llm")
_SERVER_MAPS = ("mcpServers", "servers", "mcp")
TOP_LEVEL_KEYS = (*_SERVER_MAPS, *_RESERVED)
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


@dataclass(frozen=True)
class ConfigKeyProblem:
    """A top-level config key we do not read: `typo` when it is a near miss of one we do."""

    key: str
    message: str
    typo: bool


def _looks_like_server(value: Any) -> bool:
    return isinstance(value, dict) and any(k in value for k in ("command", "url"))


def _nearest(key: str, known: tuple[str, ...]) -> Optional[str]:
    by_fold = {k.lower(): k for k in known}
    close = difflib.get_close_matches(key.lower(), list(by_fold), n=1, cutoff=0.75)
    return by_fold[close[0]] if close else None


def config_key_problems(config: Any) -> list[ConfigKeyProblem]:
    """The top-level keys of `config` that will be ignored or misread (see the module docstring)."""
    if not isinstance(config, dict):
        return []
    problems: list[ConfigKeyProblem] = []
    serve_profile = config.get("mcpServer")
    if isinstance(serve_profile, dict):
        entries = [k for k, v in serve_profile.items() if _looks_like_server(v)]
        if entries:
            message = (f'"mcpServer" is the MCP serve profile, but "{entries[0]}" in it is an MCP server entry: '
                       'did you mean "mcpServers"?')
            problems.append(ConfigKeyProblem("mcpServer", message, True))
    has_map = any(k in config for k in _SERVER_MAPS)
    for key, value in config.items():
        name = str(key)
        if name in TOP_LEVEL_KEYS:
            continue
        near = _nearest(name, TOP_LEVEL_KEYS)
        if not has_map:  # a bare server map: every other key is a server, unless it is plainly a typo of ours
            if near is not None and near in _RESERVED and not _looks_like_server(value):
                problems.append(ConfigKeyProblem(name, f'unknown top-level key "{name}" (did you mean "{near}"?) — it '
                                                       "would be read as an MCP server", True))
            continue
        if near is not None:
            problems.append(ConfigKeyProblem(name, f'unknown top-level key "{name}" ignored (did you mean "{near}"?)',
                                             True))
        else:
            problems.append(ConfigKeyProblem(name, f'unknown top-level key "{name}" ignored (known: '
                                                   f'{", ".join(TOP_LEVEL_KEYS)})', False))
    return problems


def warn_config_keys(config: Any) -> None:
    """Warn once per key about `config_key_problems` (the library never refuses a 0.21 config)."""
    for problem in config_key_problems(config):
        warn_once(f"config-key:{problem.key}", f"[toolnexus] config: {problem.message}")


async def read_toolkit_config(mcp_config: Union[str, dict[str, Any], None]) -> Optional[dict[str, Any]]:
    """`create_toolkit`'s `mcp_config` as a dict: a path is read (in a thread: it is file I/O),
    a dict is copied, `None` stays `None`. The reserved keys ride along for the other sources;
    top-level keys nobody reads are warned about."""
    if isinstance(mcp_config, str):
        config: Optional[dict[str, Any]] = await asyncio.to_thread(read_config_file, mcp_config)
    else:
        config = dict(mcp_config) if isinstance(mcp_config, dict) else None
    warn_config_keys(config)
    return config


def parse_mcp_config(input: Union[str, dict[str, Any]]) -> McpConfig:
    """The server map of a config: the first of `mcpServers`/`servers`/`mcp`, else the bare map."""
    data = read_config_file(input) if isinstance(input, str) else dict(input)
    for key in _SERVER_MAPS:
        if key in data:
            return data[key]
    # `llm` joined the reserved keys after 0.21: a server of that name (it has a command or url) still counts
    return {k: v for k, v in data.items() if k not in _RESERVED or (k == "llm" and _looks_like_server(v))}


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


def apply_tools_filter(server: str, defs: list[Any], filter: Optional[dict[str, bool]]) -> list[Any]:
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
    strict_stdout: bool = True
    oauth: Optional[ServerAuth] = None  # remote only; None: a 401 fails the server (`"oauth": false`)
    resource_tools: bool = False  # offer `<server>_list_resources` / `<server>_read_resource` to models
    prompt_tools: bool = False  # offer `<server>_list_prompts` / `<server>_get_prompt`
    require_approval: Union[bool, dict[str, bool]] = False  # `requireApproval`: all, none, or by tool name

    def needs_approval(self, tool: str) -> bool:
        """Whether this server's tool `tool` (its own name) waits for an approval (`requireApproval`)."""
        if isinstance(self.require_approval, dict):
            return self.require_approval.get(tool, False)
        return self.require_approval

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
        if self.require_approval:
            fields.append(f"require_approval={self.require_approval!r}")
        if self.remote and self.oauth is not None:
            fields.append(f"oauth={self.oauth!r}")
        return f"ServerSpec({', '.join(fields)})"


def _kind(value: Any) -> str:
    """The JSON name of a value's type, for error messages."""
    if value is None:
        return "null"
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, (int, float)):
        return "a number"
    if isinstance(value, str):
        return "a string"
    if isinstance(value, (list, tuple)):
        return "a list"
    if isinstance(value, dict):
        return "an object"
    return type(value).__name__


def _bad(key: str, expected: str, value: Any) -> ConfigError:
    return ConfigError(f'"{key}" must be {expected}, got {_kind(value)}')


def _milliseconds(server: str, cfg: ServerConfig, key: str, default: float) -> float:
    """`cfg[key]` (milliseconds) in seconds; absent ⇒ `default` (seconds)."""
    if key not in cfg or cfg[key] is None:
        return default
    value = cfg[key]
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        raise _bad(key, "a number of milliseconds", value)
    if not math.isfinite(value) or value <= 0:
        warn_once(f"mcp-ms:{server}:{key}:{value}", f'[toolnexus] MCP server "{server}": "{key}" must be more than 0 '
                                            f"milliseconds, got {value!r} — using {default * 1000:g} ms")
        return default
    if value < SUSPICIOUS_MS:
        warn_once(f"mcp-ms:{server}:{key}:{value}", f'[toolnexus] MCP server "{server}": "{key}" is in milliseconds: '
                                            f"{value:g} is {value / 1000:g} s — did you mean {value * 1000:g}?")
    return float(value) / 1000.0


def _bool(cfg: ServerConfig, key: str, default: bool) -> bool:
    value = cfg.get(key, default)
    if not isinstance(value, bool):
        raise _bad(key, "true or false", value)
    return value


def _str_list(value: Any, key: str) -> list[str]:
    if not isinstance(value, list) or not all(isinstance(v, (str, int, float)) and not isinstance(v, bool)
                                              for v in value):
        got = _kind(value) if not isinstance(value, list) else "a list holding " + next(
            _kind(v) for v in value if not isinstance(v, (str, int, float)) or isinstance(v, bool))
        raise ConfigError(f'"{key}" must be a list of strings, got {got}')
    return [str(v) for v in value]


def _env_value(value: Any) -> str:
    if isinstance(value, bool):
        return "true" if value else "false"
    return str(value)


def _child_env(cfg: ServerConfig) -> dict[str, str]:
    extra = cfg.get("environment") or cfg.get("env") or {}
    if not isinstance(extra, dict):
        raise ConfigError(f'"environment"/"env" must be an object of strings, got {_kind(extra)}')
    for name, value in extra.items():
        if not isinstance(value, (str, int, float)):
            raise ConfigError(f'"environment"/"env" must be an object of strings, got {_kind(value)} for "{name}"')
    inherit = cfg.get("inheritEnv", True)
    if inherit is True:
        base = dict(os.environ)
    elif inherit is False or isinstance(inherit, list):
        names = [] if inherit is False else _str_list(inherit, "inheritEnv")
        base = {k: os.environ[k] for k in (*_BASE_ENV, *names) if k in os.environ}
    else:
        raise _bad("inheritEnv", "true, false or a list of variable names", inherit)
    return {**base, **{str(k): _env_value(v) for k, v in extra.items()}}


_APPROVAL_WORDS = {"always": True, "never": False, True: True, False: False}


def _require_approval(cfg: ServerConfig) -> Union[bool, dict[str, bool]]:
    """`requireApproval`: "always" | "never" | {tool: "always" | "never" | true | false}."""
    value = cfg.get("requireApproval")
    if value is None:
        return False
    if isinstance(value, str) and value in ("always", "never"):
        return value == "always"
    if isinstance(value, dict):
        out: dict[str, bool] = {}
        for tool, word in value.items():
            if not isinstance(word, (str, bool)) or word not in _APPROVAL_WORDS:
                raise ConfigError(f'"requireApproval" maps tool names to "always" or "never", got {_kind(word)} '
                                  f'for "{tool}"')
            out[str(tool)] = _APPROVAL_WORDS[word]
        return out
    raise _bad("requireApproval", '"always", "never" or an object of tool name -> "always"/"never"', value)


def _warn_unknown_keys(name: str, cfg: ServerConfig, remote: bool) -> None:
    """Warn once per server and key about keys we do not read (see the module docstring)."""
    kind = "remote" if remote else "local"
    for key in cfg:
        applies = SERVER_KEYS.get(key)
        if applies is None:
            close = difflib.get_close_matches(str(key), list(SERVER_KEYS), n=1, cutoff=0.75)
            hint = f' (did you mean "{close[0]}"?)' if close else ""
            warn_once(f"mcp-key:{name}:{key}", f'[toolnexus] MCP server "{name}": unknown key "{key}" ignored{hint}')
        elif applies not in ("any", kind):
            why = 'it has a "url"' if remote else 'it has no "url"'
            if isinstance(cfg.get("type"), str):
                why = f'"type" is "{cfg["type"]}"'
            warn_once(f"mcp-key:{name}:{key}", f'[toolnexus] MCP server "{name}": "{key}" applies to {applies} '
                                               f"servers only — ignored (this one is {kind}: {why})")


def server_spec(name: str, cfg: Any) -> ServerSpec:
    """Validate one enabled server entry (raises `ConfigError`, a `ValueError`, naming what is wrong)."""
    if not isinstance(cfg, dict):
        raise ConfigError(f"server config must be an object, got {type(cfg).__name__}")
    looks_like_the_map = bool(cfg) and all(isinstance(v, dict) for v in cfg.values())
    if looks_like_the_map and re.sub(r"[-_]", "", name).lower() in ("mcpservers", "servers", "mcp"):
        raise ConfigError(f'"{name}" was read as one server: write the server map under "mcpServers" '
                          '(or "servers", "mcp"; the case matters)')
    kind = cfg.get("type")
    if kind is not None and not isinstance(kind, str):
        raise _bad("type", '"local" or "remote"', kind)
    if kind is not None and kind not in _TYPES:
        warn_once(f"mcp-type:{name}", f'[toolnexus] MCP server "{name}": unknown "type" "{kind}" — read as '
                                      f'{"remote (it has a url)" if is_remote(cfg) else "local (it has no url)"}')
    if cfg.get("url") is not None and not isinstance(cfg["url"], str):
        raise _bad("url", "a string (an http:// or https:// URL)", cfg["url"])
    remote = is_remote(cfg)
    _warn_unknown_keys(name, cfg, remote)
    for key in ("enabled", "disabled"):
        if key in cfg:
            _bool(cfg, key, True)
    timeout = _milliseconds(name, cfg, "timeout", DEFAULT_TIMEOUT)
    call_timeout = _milliseconds(name, cfg, "callTimeout", timeout)
    tools_filter = cfg.get("tools")
    if tools_filter is not None and not (
        isinstance(tools_filter, dict) and all(isinstance(v, bool) for v in tools_filter.values())
    ):
        got = _kind(tools_filter) if not isinstance(tools_filter, dict) else "an object holding " + next(
            _kind(v) for v in tools_filter.values() if not isinstance(v, bool))
        raise ConfigError(f'"tools" must be an object of tool name -> true/false, got {got}')
    spec = ServerSpec(name, remote, timeout, call_timeout, tools_filter=tools_filter or None,
                      require_approval=_require_approval(cfg),
                      resource_tools=_bool(cfg, "resourceTools", False), prompt_tools=_bool(cfg, "promptTools", False))
    if spec.remote:
        url = cfg.get("url")
        if not isinstance(url, str) or not url:
            raise ConfigError('a remote server needs a "url" string')
        if not url.lower().startswith(("http://", "https://")):
            raise ConfigError(f'"url" must be an http:// or https:// URL, got "{redact_url(url)}"')
        headers = cfg.get("headers")
        if headers is not None and not (
            isinstance(headers, dict) and all(isinstance(v, str) for v in headers.values())
        ):
            got = _kind(headers) if not isinstance(headers, dict) else "an object holding " + next(
                _kind(v) for v in headers.values() if not isinstance(v, str))
            raise ConfigError(f'"headers" must be an object of strings, got {got}')
        spec.url, spec.headers = url, expand_env_headers(headers)
        # OAuth is on unless turned off, or the entry sends its own Authorization header (and says nothing).
        own = any(str(k).lower() == "authorization" for k in (headers or {}))
        spec.oauth = server_auth(cfg.get("oauth")) if "oauth" in cfg or not own else None
        return spec
    command = cfg.get("command")
    if isinstance(command, list):
        argv = _str_list(command, "command")
    elif isinstance(command, str) and command:
        argv = [command]  # Claude-desktop form: the executable alone, arguments in "args"
    elif command is None:
        raise ConfigError('a local server needs a "command" (or a "url" for a remote one)')
    else:
        raise _bad("command", "a list [exe, *args] or an executable name", command)
    if not argv or not argv[0]:
        raise ConfigError('"command" is empty')
    if cfg.get("args") is not None:
        argv += _str_list(cfg["args"], "args")
    cwd = cfg.get("cwd")
    if cwd is not None and not isinstance(cwd, str):
        raise _bad("cwd", "a string", cwd)
    spec.strict_stdout = _bool(cfg, "strictStdout", True)
    spec.command, spec.args, spec.env, spec.cwd = argv[0], argv[1:], _child_env(cfg), cwd
    return spec
