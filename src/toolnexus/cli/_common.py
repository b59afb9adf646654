"""What the subcommands share: the toolkit and model flags, building a toolkit and a client, output.

Checks happen in the order a user can act on them: the `--config` file is read first (exit 1
when it is unreadable, not JSON — `//` and `/* */` comments are fine, it is the library's own
reader — or has a top-level key that is a typo of one of ours, see below), then a missing model
(exit 2, before anything is built), then a missing API key (exit 2, the client's own message),
then the toolkit build (exit 1: a bad `--tools-from`, a config the toolkit refuses). A failed MCP
server or A2A agent is not a build error: it shows up as a status line or a stderr log line.

Model settings are read once, each from the first of: its flag, the config file's `llm` block
(`{"base_url", "style", "model"}`; a key there is refused — keys belong in the environment),
the environment (`OPENAI_BASE_URL`, or `ANTHROPIC_BASE_URL` with `--style anthropic`;
`TOOLNEXUS_MODEL`). A loopback base URL (`127.0.0.1`, `::1`, `localhost`) needs no API key — a
local server takes none — exactly as `create_client` treats it; any other still does.

Config typos: the library (`create_toolkit`) only warns about a top-level key it does not read,
as 0.21 did; the command refuses one that is a near miss of ours (`"agnets"`, or `"mcpServer"`
— the MCP *serve* profile — holding server entries meant for `"mcpServers"`), because a command
that exits 0 having silently ignored half of the file misleads more than it helps. A key that
resembles none of ours (another MCP host's, in a shared file) stays a warning.

`MODULE:ATTR` flags (`--tools-from`, `--agents`, `--transport`) import from the current folder
first, as `python -m toolnexus` would (the console script's own `sys.path` starts at its `bin`
folder); `PYTHONSAFEPATH` turns that off, as it does for `python -m`.

The API key — from `--api-key` or the environment — is never printed: every line the CLI writes
goes through `Console`, which replaces it (and the serve token) with `«redacted»` should an
error message or a model's answer ever quote it.
"""

from __future__ import annotations

import asyncio
import importlib
import os
import sys
from collections.abc import Callable
from typing import Any, Optional, TextIO

from .._loopback import LOOPBACK_PLACEHOLDER_KEY, is_loopback_url
from .._text import printable
from ..errors import ToolnexusError, ToolnexusValueError
from ._flags import Flag

API_KEY_ENV = ("OPENROUTER_API_KEY", "OPENAI_API_KEY", "ANTHROPIC_API_KEY")
NO_KEY_MESSAGE = "No API key: set api_key or OPENROUTER_API_KEY / OPENAI_API_KEY / ANTHROPIC_API_KEY"
MISSING_MODEL = "--base-url and --model are required"
MODEL_ENV = "TOOLNEXUS_MODEL"
BASE_URL_ENV = {"openai": "OPENAI_BASE_URL", "anthropic": "ANTHROPIC_BASE_URL", "responses": "OPENAI_BASE_URL"}
LLM_BLOCK_KEYS = ("base_url", "style", "model")
_REDACTED = "«redacted»"

TOOLKIT_FLAGS = [
    Flag("config", "PATH", "JSON config file; its mcpServers, agents, builtins, a2a and mcpServer blocks apply"),
    Flag("skills", "DIR", "a skills folder (SKILL.md files)", repeat=True),
    Flag("no-builtins", None, "leave out the ten built-in tools (bash, read, write, edit, ...)"),
    Flag("disable-tool", "NAME", "leave out the tool with this name", repeat=True),
    Flag("tools-from", "MODULE:ATTR", "add Python tools: a list of Tool (serve: also @resource/@prompt items), "
         "or a function returning one", repeat=True),
]
MODEL_FLAGS = [
    Flag("base-url", "URL", "the LLM endpoint's base URL (else the config's llm block, then OPENAI_BASE_URL or "
         "ANTHROPIC_BASE_URL by style)"),
    Flag("style", "openai|anthropic|responses", "the endpoint's API style (default openai; responses: the OpenAI "
         "Responses API)", choices=("openai", "anthropic", "responses")),
    Flag("model", "ID", f"the model id (else the config's llm block, then {MODEL_ENV})"),
    Flag("system", "TEXT", "system prompt (the skills catalogue is appended by the client)"),
    Flag("api-key", "KEY", "API key; else OPENROUTER_API_KEY, then OPENAI_API_KEY or ANTHROPIC_API_KEY by style"),
]


STORE_FLAG = Flag("store", "memory|file:DIR|sqlite:PATH|postgresql://…",
                  "where A2A tasks (and, with a database, conversations) are kept (default memory)")


def open_store(selector: str) -> Any:
    """The task store a `--store` value names; an unknown selector is a usage error (exit 2)."""
    from ..serve import resolve_store

    try:
        return resolve_store(selector)
    except ValueError as exc:
        raise CliExit(2, f"error: {exc}") from None


class CliExit(ToolnexusError):
    """Leave with `code`, after writing `message` (if any) to stderr."""

    def __init__(self, code: int, message: Optional[str] = None) -> None:
        super().__init__(message or "")
        self.code, self.message = code, message


def number(opts: dict[str, Any], name: str, default: Any, *, whole: bool = False, zero: bool = False) -> Any:
    """`--name` as a number of seconds > 0 (`whole`: a whole number >= 1; `zero`: 0 allowed too),
    `default` when not given; exit 2 saying what it takes otherwise."""
    raw = opts.get(name.replace("-", "_"))
    if raw is None:
        return default
    try:
        value = int(raw) if whole else float(raw)
    except ValueError:
        value = -1
    if value < 0 or (value == 0 and not zero):
        kind = "a whole number >= 1" if whole else "a number of seconds > 0"
        raise CliExit(2, f"error: --{name} takes {kind} (got {raw!r})")
    return value


class Console:
    """stdout/stderr writes with secrets scrubbed, flushed at once (scripts read line by line)."""

    def __init__(self, stdout: Optional[TextIO] = None, stderr: Optional[TextIO] = None) -> None:
        self.stdout = stdout or sys.stdout
        self.stderr = stderr or sys.stderr
        self._secrets: list[str] = []

    def add_secret(self, value: Optional[str]) -> None:
        if value and len(value) >= 4 and value not in self._secrets:
            self._secrets.append(value)
            self._secrets.sort(key=len, reverse=True)

    def scrub(self, text: str) -> str:
        for secret in self._secrets:
            text = text.replace(secret, _REDACTED)
        return text

    def out(self, text: str = "", end: str = "\n") -> None:
        self.stdout.write(printable(self.scrub(text)) + end)  # a model's lone surrogate must not crash the print
        self.stdout.flush()

    def err(self, text: str = "", end: str = "\n") -> None:
        self.stderr.write(printable(self.scrub(text)) + end)
        self.stderr.flush()


def apply_model_settings(opts: dict[str, Any], config: Optional[dict[str, Any]] = None) -> None:
    """Fill `base_url`, `style` and `model` in `opts` where no flag gave them: from the config's
    `llm` block, then the environment (see the module docstring). A bad block is exit 1."""
    block = (config or {}).get("llm")
    if isinstance(block, dict) and ("command" in block or "url" in block):
        block = None  # an MCP server named "llm" in a bare server map (as 0.21 read it), not model settings
    if block is not None:
        if not isinstance(block, dict):
            raise CliExit(1, f'error: config "llm" must be an object with {", ".join(LLM_BLOCK_KEYS)}, '
                             f"got {type(block).__name__}")
        if "api_key" in block:
            raise CliExit(1, 'error: config "llm" holds an api_key: keep keys out of config files — set '
                             "OPENAI_API_KEY / ANTHROPIC_API_KEY (or OPENROUTER_API_KEY), or pass --api-key")
        for key, value in block.items():
            if key not in LLM_BLOCK_KEYS:
                raise CliExit(1, f'error: config "llm" has an unknown key "{key}" (known: {", ".join(LLM_BLOCK_KEYS)})')
            if not isinstance(value, str) or not value:
                raise CliExit(1, f'error: config "llm" key "{key}" must be a non-empty string')
            if not opts.get(key):
                opts[key] = value
    style = opts.get("style") or "openai"
    if style not in BASE_URL_ENV:
        raise CliExit(1, f'error: config "llm" style must be openai, anthropic or responses, got "{style}"')
    opts["style"] = style
    if not opts.get("base_url"):
        opts["base_url"] = os.environ.get(BASE_URL_ENV[style]) or None
    if not opts.get("model"):
        opts["model"] = os.environ.get(MODEL_ENV) or None


def require_model(opts: dict[str, Any]) -> None:
    if not opts.get("base_url") or not opts.get("model"):
        raise CliExit(2, f"error: {MISSING_MODEL}")


def resolve_key(opts: dict[str, Any]) -> Optional[str]:
    """`--api-key`, else the client's environment order for the chosen style."""
    if opts.get("api_key"):
        return str(opts["api_key"])
    style_env = "ANTHROPIC_API_KEY" if opts.get("style") == "anthropic" else "OPENAI_API_KEY"
    for name in ("OPENROUTER_API_KEY", style_env, "OPENAI_API_KEY", "ANTHROPIC_API_KEY"):
        if os.environ.get(name):
            return os.environ[name]
    return None


def require_key(opts: dict[str, Any], console: Console) -> str:
    """The API key; for a loopback base URL without one, the client's placeholder (no error)."""
    key = resolve_key(opts)
    if key is None:
        if is_loopback_url(opts.get("base_url")):
            return LOOPBACK_PLACEHOLDER_KEY
        raise CliExit(2, f"error: {NO_KEY_MESSAGE}")
    console.add_secret(key)
    return key


def _importable_from_here() -> None:
    """Put the current folder first on `sys.path`, as `python -m` does (see the module docstring)."""
    if sys.flags.safe_path:
        return
    here = os.getcwd()
    if here not in sys.path and "" not in sys.path:
        sys.path.insert(0, here)


def load_object(spec: str) -> Any:
    """`package.module:attr` (attr may be dotted) → the object; errors name the spec."""
    module_name, sep, attr = spec.partition(":")
    if not sep or not module_name or not attr:
        raise ToolnexusValueError(f'--tools-from needs MODULE:ATTR (e.g. "mytools:TOOLS"), got "{spec}"')
    _importable_from_here()
    try:
        obj: Any = importlib.import_module(module_name)
    except ImportError as exc:
        raise ToolnexusValueError(f'--tools-from "{spec}": cannot import {module_name}: {exc}') from None
    for part in attr.split("."):
        try:
            obj = getattr(obj, part)
        except AttributeError:
            raise ToolnexusValueError(f'--tools-from "{spec}": {module_name} has no attribute {attr}') from None
    return obj


async def _extra_tools(specs: list[str], served: Optional[list[Any]] = None) -> list[Any]:
    """The tools the specs give; `@resource` / `@prompt` items go to `served` (when serving MCP)."""
    from ..resources import Prompt, Resource
    from ..types import Tool

    tools: list[Any] = []
    for spec in specs:
        found = load_object(spec)
        if callable(found) and not isinstance(found, (Tool, Resource, Prompt)):
            found = found()
            if asyncio.iscoroutine(found):
                found = await found
        items = [found] if isinstance(found, (Tool, Resource, Prompt)) else list(found or [])
        for item in items:
            if isinstance(item, Tool):
                tools.append(item)
            elif isinstance(item, (Resource, Prompt)) and served is not None:
                served.append(item)
            elif isinstance(item, (Resource, Prompt)):
                raise ToolnexusValueError(f'--tools-from "{spec}" gave a {type(item).__name__}: resources and '
                                          "prompts are served by `toolnexus serve --mcp` (or --mcp-stdio)")
            else:
                raise ToolnexusValueError(f'--tools-from "{spec}" gave a {type(item).__name__}, not a Tool')
    return tools


def _read_config(path: str) -> dict[str, Any]:
    """The library's own reader (JSON with comments), with the command's error wording."""
    from ..mcp_source._config import read_config_file

    try:
        return read_config_file(path)
    except OSError as exc:
        raise ToolnexusValueError(f"cannot read config file {path}: {exc.strerror or exc}") from None
    except ValueError as exc:
        raise ToolnexusValueError(str(exc).removeprefix("toolnexus: ")) from None


async def load_config(opts: dict[str, Any]) -> Optional[dict[str, Any]]:
    """The `--config` file as a dict (None without the flag); failure — including a top-level key
    that is a typo of ours — is `CliExit(1, ...)`."""
    from ..mcp_source._config import config_key_problems

    if not opts.get("config"):
        return None
    path = opts["config"]
    try:
        config = await asyncio.to_thread(_read_config, path)
    except ValueError as exc:
        raise CliExit(1, f"error: {exc}") from None
    typos = [p.message for p in config_key_problems(config) if p.typo]
    if typos:
        raise CliExit(1, "\n".join(f"error: config file {path}: {message}" for message in typos))
    return config


async def build_toolkit(opts: dict[str, Any], *, config: Optional[dict[str, Any]] = None,
                        wait_for: Optional[Callable[..., Any]] = None, served: Optional[list[Any]] = None,
                        approvals: Any = None) -> Any:
    """The toolkit the flags describe; any failure is `CliExit(1, "error: <message>")`.

    `config` is the already-read `--config` file; without it the file is read here. `served`
    (for `toolnexus serve`) collects the `@resource` / `@prompt` items of `--tools-from`.
    `approvals`: the approval policy (`cli.approvals.cli_policy`), for the commands that run tools.
    """
    from ..toolkit import create_toolkit

    if config is None:
        config = await load_config(opts)
    try:
        extra = await _extra_tools(opts.get("tools_from") or [], served)
        return await create_toolkit(
            config,
            skills_dir=list(opts.get("skills") or []) or None,
            builtins=False if opts.get("no_builtins") else None,
            disable_tools=list(opts.get("disable_tool") or []) or None,
            extra_tools=extra,
            wait_for=wait_for,
            approvals=approvals,
        )
    except Exception as exc:
        raise CliExit(1, f"error: {exc}") from None


def make_client(opts: dict[str, Any], **extra: Any) -> Any:
    from ..client import create_client

    return create_client(base_url=opts["base_url"], style=opts.get("style") or "openai", model=opts["model"],
                         api_key=opts.get("api_key") or None, system_prompt=opts.get("system") or None, **extra)
