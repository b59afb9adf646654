"""What the subcommands share: the toolkit and model flags, building a toolkit and a client, output.

Checks happen in the order a user can act on them: missing `--base-url`/`--model` (exit 2,
before anything is built), then a missing API key (exit 2, the client's own message), then the
toolkit build (exit 1: an unreadable or invalid config file, a bad `--tools-from`). A failed MCP
server or A2A agent is not a build error: it shows up as a status line or a stderr log line.

The API key — from `--api-key` or the environment — is never printed: every line the CLI writes
goes through `Console`, which replaces it (and the serve token) with `«redacted»` should an
error message or a model's answer ever quote it.
"""

from __future__ import annotations

import asyncio
import importlib
import json
import os
import sys
from collections.abc import Callable
from typing import Any, Optional, TextIO

from .._text import printable
from .flags import Flag
from ..errors import ToolnexusError, ToolnexusValueError

__all__ = [
    "API_KEY_ENV",
    "CliExit",
    "Console",
    "MODEL_FLAGS",
    "NO_KEY_MESSAGE",
    "STORE_FLAG",
    "TOOLKIT_FLAGS",
    "build_toolkit",
    "load_config",
    "load_object",
    "make_client",
    "open_store",
    "require_key",
    "require_model",
]

API_KEY_ENV = ("OPENROUTER_API_KEY", "OPENAI_API_KEY", "ANTHROPIC_API_KEY")
NO_KEY_MESSAGE = "No API key: set api_key or OPENROUTER_API_KEY / OPENAI_API_KEY / ANTHROPIC_API_KEY"
MISSING_MODEL = "--base-url and --model are required"
_REDACTED = "«redacted»"

TOOLKIT_FLAGS = [
    Flag("config", "PATH", "JSON config file; its mcpServers, agents, builtins, a2a and mcpServer blocks apply"),
    Flag("skills", "DIR", "a skills folder (SKILL.md files)", repeat=True),
    Flag("no-builtins", None, "leave out the ten built-in tools (bash, read, write, edit, ...)"),
    Flag("disable-tool", "NAME", "leave out the tool with this name", repeat=True),
    Flag("tools-from", "MODULE:ATTR", "add Python tools: a list of Tool, or a function returning one", repeat=True),
]
MODEL_FLAGS = [
    Flag("base-url", "URL", "the LLM endpoint's base URL (e.g. https://api.openai.com/v1)"),
    Flag("style", "openai|anthropic", "the endpoint's API style (default openai)", choices=("openai", "anthropic"),
         default="openai"),
    Flag("model", "ID", "the model id"),
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
    key = resolve_key(opts)
    if key is None:
        raise CliExit(2, f"error: {NO_KEY_MESSAGE}")
    console.add_secret(key)
    return key


def load_object(spec: str) -> Any:
    """`package.module:attr` (attr may be dotted) → the object; errors name the spec."""
    module_name, sep, attr = spec.partition(":")
    if not sep or not module_name or not attr:
        raise ToolnexusValueError(f'--tools-from needs MODULE:ATTR (e.g. "mytools:TOOLS"), got "{spec}"')
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


async def _extra_tools(specs: list[str]) -> list[Any]:
    from ..types import Tool

    tools: list[Any] = []
    for spec in specs:
        found = load_object(spec)
        if callable(found) and not isinstance(found, Tool):
            found = found()
            if asyncio.iscoroutine(found):
                found = await found
        items = [found] if isinstance(found, Tool) else list(found or [])
        bad = [type(t).__name__ for t in items if not isinstance(t, Tool)]
        if bad:
            raise ToolnexusValueError(f'--tools-from "{spec}" gave a {bad[0]}, not a Tool')
        tools += items
    return tools


def _read_config(path: str) -> dict[str, Any]:
    try:
        with open(path, encoding="utf-8") as fh:
            text = fh.read()
    except OSError as exc:
        raise ToolnexusValueError(f"cannot read config file {path}: {exc.strerror or exc}") from None
    try:
        config = json.loads(text)
    except ValueError as exc:
        raise ToolnexusValueError(f"config file {path} is not valid JSON: {exc}") from None
    if not isinstance(config, dict):
        raise ToolnexusValueError(f"config file {path} must hold a JSON object, got {type(config).__name__}")
    return config


async def load_config(opts: dict[str, Any]) -> Optional[dict[str, Any]]:
    """The `--config` file as a dict (None without the flag); failure is `CliExit(1, ...)`."""
    if not opts.get("config"):
        return None
    try:
        return await asyncio.to_thread(_read_config, opts["config"])
    except ValueError as exc:
        raise CliExit(1, f"error: {exc}") from None


async def build_toolkit(opts: dict[str, Any], *, config: Optional[dict[str, Any]] = None,
                        wait_for: Optional[Callable[..., Any]] = None) -> Any:
    """The toolkit the flags describe; any failure is `CliExit(1, "error: <message>")`.

    `config` is the already-read `--config` file; without it the file is read here.
    """
    from ..toolkit import create_toolkit

    if config is None:
        config = await load_config(opts)
    try:
        extra = await _extra_tools(opts.get("tools_from") or [])
        return await create_toolkit(
            config,
            skills_dir=list(opts.get("skills") or []) or None,
            builtins=False if opts.get("no_builtins") else None,
            disable_tools=list(opts.get("disable_tool") or []) or None,
            extra_tools=extra,
            wait_for=wait_for,
        )
    except Exception as exc:  # noqa: BLE001 - any build failure is exit 1 with its message
        raise CliExit(1, f"error: {exc}") from None


def make_client(opts: dict[str, Any], **extra: Any) -> Any:
    from ..client import create_client

    return create_client(base_url=opts["base_url"], style=opts.get("style") or "openai", model=opts["model"],
                         api_key=opts.get("api_key") or None, system_prompt=opts.get("system") or None, **extra)
