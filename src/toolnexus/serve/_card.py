"""The Agent Card a served toolkit publishes at `/.well-known/agent-card.json`.

One card serves both protocol generations. Its first keys are the existing toolnexus card in
their pinned order (`name` … `skills`, `url`, a 0.3 `protocolVersion`), which 0.3 readers and
earlier toolnexus peers use; then `supportedInterfaces` lists the same JSON-RPC endpoint twice,
as A2A 1.0 and as 0.3, which is what 1.0 readers use (a 1.0 reader ignores the top-level `url`).
`provider` comes last, only when truthy. Defaults apply only when a value is None, so `""`
stays `""`.

`skills` are the toolkit's SKILL.md skills, never its raw tools, filtered to `a2a["skills"]`
when that key is not None (unknown names are ignored, `[]` lists none). Each skill carries the
`tags` A2A requires (a skill has none of its own, so it is tagged with its name). For 0.3 readers
the card also says `preferredTransport: "JSONRPC"` (the transport of its top-level `url`). A2A
also requires a non-empty `description` and at least one skill; the card shows what the profile
and the toolkit give (a `""` description stays `""`), so give both to be read by strict peers. The endpoint URL is
`a2a["public_url"]` when set, else the server's own URL; for a wildcard bind (`0.0.0.0`, `::`)
it is built from the `Host` the caller used, so the card never points a remote caller at its
own loopback.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any, Optional

PROTOCOL_VERSION = "0.3.0"
DEFAULT_VERSION = "0.1.0"
DEFAULT_NAME = "toolnexus-agent"
CARD_PATH = "/.well-known/agent-card.json"
_INTERFACE_VERSIONS = ("1.0", "0.3")


def _pick(cfg: dict[str, Any], key: str, default: Any) -> Any:
    value = cfg.get(key)
    return default if value is None else value


def _skill_entries(skills: Iterable[Any], wanted: Optional[Iterable[str]]) -> list[dict[str, Any]]:
    allow = None if wanted is None else set(wanted)
    out = []
    for info in skills:
        name = getattr(info, "name", None)
        if not isinstance(name, str) or (allow is not None and name not in allow):
            continue
        description = getattr(info, "description", None)
        out.append({"id": name, "name": name, "description": description if isinstance(description, str) else "",
                    "tags": [name]})
    return out


def build_agent_card(cfg: Optional[dict[str, Any]], skills: list[Any], url: str) -> dict[str, Any]:
    """The card for profile `cfg` and `skills` (`SkillInfo`s), served at endpoint `url` (ends in `/`)."""
    cfg = dict(cfg or {})
    card: dict[str, Any] = {
        "name": _pick(cfg, "name", DEFAULT_NAME),
        "description": _pick(cfg, "description", ""),
        "version": _pick(cfg, "version", DEFAULT_VERSION),
        "protocolVersion": PROTOCOL_VERSION,
        "capabilities": {"streaming": False, "pushNotifications": False},
        "defaultInputModes": ["text"],
        "defaultOutputModes": ["text"],
        "skills": _skill_entries(skills, cfg.get("skills")),
        "url": url,
        "preferredTransport": "JSONRPC",
        "supportedInterfaces": [
            {"url": url, "protocolBinding": "JSONRPC", "protocolVersion": v} for v in _INTERFACE_VERSIONS
        ],
    }
    if cfg.get("provider"):
        card["provider"] = cfg["provider"]
    return card
