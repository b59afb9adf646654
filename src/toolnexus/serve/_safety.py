"""Safe-by-default serving: which tools need a token, the open-network warning, redaction.

A served toolkit is remote code execution unless guarded: over MCP a caller runs the tools
directly, and over A2A a caller steers a model that runs them (a prompt is enough). So serving
refuses, at `serve()` time, to hand these built-ins to a profile without an `auth_token`:

    bash, write, edit, apply_patch      run commands or change files
    read, grep, glob                    disclose files (keys, `.env`, source)
    webfetch                            reach the server's own network (cloud metadata, intranet)

Only tools with `source == "builtin"` count: a tool of your own that happens to be called `read`
is yours to judge. `question` and `todowrite` touch nothing outside the run. The refusal names the
tools and the three ways out: set the profile's `auth_token`, drop the tools (the MCP `tools`
allow-list, `create_toolkit(builtins=False)` or `disable_tools=[...]`), or opt in with the
profile key `allow_unauthenticated_builtins: True`, which is logged at WARNING every time.

Listening on a non-loopback address with a profile that has no token warns loudly (it may be
intended, behind a proxy that authenticates). Failed-task text goes through a redaction hook:
the default one replaces the server's own secrets (the client's API key and the provider keys in
the environment, the profiles' tokens), bearer credentials, `sk-…`-shaped keys and identifier fields with
`«redacted»`, and caps the text at `MAX_FAILURE_TEXT` characters.
"""

from __future__ import annotations

import ipaddress
import os
import re
from collections.abc import Callable, Iterable
from typing import Any, Optional

from .._diag import warn
from ..mcp_serve.errors import UnsafeServeError

UNSAFE_BUILTINS: tuple[str, ...] = ("bash", "write", "edit", "apply_patch", "read", "grep", "glob", "webfetch")
MAX_FAILURE_TEXT = 1000
_PROVIDER_KEY_ENV = ("OPENROUTER_API_KEY", "OPENAI_API_KEY", "ANTHROPIC_API_KEY")
_BEARER = re.compile(r"(?i)\b(bearer\s+)[A-Za-z0-9._~+/=-]+")
_KEY_SHAPED = re.compile(r"\bsk-[A-Za-z0-9_-]{8,}")  # OpenAI / Anthropic / OpenRouter style keys
_MIN_SECRET = 4  # shorter "secrets" would redact ordinary words


def unsafe_tools(tools: Iterable[Any]) -> list[str]:
    """Names of the built-ins among `tools` that must not be served without a token."""
    return [t.name for t in tools if getattr(t, "source", None) == "builtin" and t.name in UNSAFE_BUILTINS]


def check_exposure(tools: Iterable[Any], profile: dict[str, Any], *, where: str, how: str) -> None:
    """Refuse (or, when the profile opts in, warn about) unsafe built-ins served without a token.

    `where` names the profile in messages (`a2a` / `mcp`); `how` says what a caller can do
    with them (`call them` / `ask the agent to run them`).
    """
    if profile.get("auth_token"):
        return
    names = unsafe_tools(tools)
    if not names:
        return
    listed = ", ".join(names)
    allow_list = ', or the mcp "tools" allow-list' if where == "mcp" else ""
    if profile.get("allow_unauthenticated_builtins") is True:
        warn(f"[toolnexus] serve: {where} exposes built-in tools {listed} without an auth_token "
             f"({where}[\"allow_unauthenticated_builtins\"] is set) — anyone who can reach the server can {how}")
        return
    raise UnsafeServeError(
        f"toolnexus: refusing to serve built-in tools {listed} over {where} without an auth_token: anyone who "
        f"can reach the server could {how} as this user. Set {where}[\"auth_token\"] (callers then send "
        f"\"Authorization: Bearer <token>\"), leave these tools out (create_toolkit(builtins=False), "
        f"disable_tools=[...]{allow_list}), or opt in "
        f"with {where}[\"allow_unauthenticated_builtins\"] = True."
    )


def is_loopback_host(host: str) -> bool:
    """`localhost` or a loopback IP literal; wildcards (`0.0.0.0`, `::`) and names are not."""
    if host.strip().lower() == "localhost":
        return True
    try:
        return ipaddress.ip_address(host.strip("[]")).is_loopback
    except ValueError:
        return False


def warn_open_network(host: str, port: int, profiles: dict[str, Optional[dict[str, Any]]]) -> None:
    """Warn for each profile without a token when listening beyond loopback."""
    if is_loopback_host(host):
        return
    for where, profile in profiles.items():
        if profile is not None and not profile.get("auth_token"):
            warn(f"[toolnexus] serve: WARNING: {where} is listening on {host}:{port} without an auth_token — "
                 f"anyone on the network can use it. Set {where}[\"auth_token\"] or bind 127.0.0.1.")


def _known_secrets(extra: Iterable[Optional[str]]) -> list[str]:
    values = [os.environ.get(name) for name in _PROVIDER_KEY_ENV] + list(extra)
    return sorted({v for v in values if isinstance(v, str) and len(v) >= _MIN_SECRET}, key=len, reverse=True)


def make_redactor(user_hook: Optional[Callable[[str], str]], secrets: Iterable[Optional[str]]) -> Callable[[str], str]:
    """The failed-task text hook: the user's hook (or the default scrub), then always our secrets out."""
    from ..client._errors import REDACTED, redact_identifiers

    known = list(secrets)

    def scrub_secrets(text: str) -> str:
        for secret in _known_secrets(known):
            text = text.replace(secret, REDACTED)
        return text

    def default(text: str) -> str:
        text = _BEARER.sub(lambda m: m.group(1) + REDACTED, text)
        text = _KEY_SHAPED.sub(REDACTED, text)
        text = redact_identifiers(text)
        return text if len(text) <= MAX_FAILURE_TEXT else text[:MAX_FAILURE_TEXT] + "…"

    def redact(text: str) -> str:
        text = scrub_secrets(text)  # first, so a cap or a hook never leaves half a secret behind
        shaped = user_hook(text) if user_hook is not None else default(text)
        return scrub_secrets(str(shaped))

    return redact
