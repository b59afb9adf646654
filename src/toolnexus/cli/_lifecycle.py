"""What the run-lifecycle commands share (`runs`, `show`, `resume`, `cancel`, `prune`, `workers`,
and `worker --store`): the run argument, the agents and model flags, durations, time stamps.

A command that runs agents (`resume`, `worker --store`) takes the definitions from `--agents
MODULE:ATTR` (repeatable: an `Agent`, `AgentDef`s, a list or a registry dict — code is never
stored, only state) and the model from `--base-url/--style/--model/--api-key`, or an
`HttpTransport` object (or a zero-argument factory of one) from `--transport MODULE:ATTR`, for a
scripted or in-house model. The commands that only read or change the store need no model.

Durations (`--older-than`): a number with a unit — `90s`, `15m`, `12h`, `30d`, `2w` — or plain
seconds.
"""

from __future__ import annotations

from datetime import UTC, datetime
from typing import Any, Optional

from ._common import MODEL_FLAGS, CliExit, Console, apply_model_settings, load_object, resolve_key
from ._flags import Flag

RUN_FLAG = Flag("run", "RUN", "the run id (see toolnexus runs)", positional=True)
AGENTS_FLAG = Flag("agents", "MODULE:ATTR", "the agent definitions: an Agent, AgentDefs, a list or a dict (repeatable)",
                   repeat=True)
TRANSPORT_FLAG = Flag("transport", "MODULE:ATTR", "an HttpTransport (or a factory of one) to call the model through")
RUN_MODEL_FLAGS = [
    *(f for f in MODEL_FLAGS if f.name in ("base-url", "style")),
    Flag("model", "ID", "the model for agents that do not name their own"),
    *(f for f in MODEL_FLAGS if f.name == "api-key"),
    TRANSPORT_FLAG,
]


def duration(text: Any, flag: str) -> Optional[float]:
    """`--older-than 30d` → seconds; a bad value is a usage error (exit 2)."""
    from ..durable._paging import parse_duration

    if text is None:
        return None
    seconds = parse_duration(str(text))
    if seconds is None:
        raise CliExit(2, f"error: --{flag} takes a duration such as 90s, 15m, 12h, 30d or 2w (got {text!r})")
    return seconds


def load_agents(opts: dict[str, Any], command: str) -> list[Any]:
    """The definitions `--agents` names, flattened; a usage error (exit 2) when missing or wrong."""
    specs = opts.get("agents") or []
    if isinstance(specs, str):
        specs = [specs]
    if not specs:
        raise CliExit(2, f"error: toolnexus {command} needs --agents MODULE:ATTR (the agent definitions the runs "
                         "were started with)")
    agents: list[Any] = []
    for spec in specs:
        try:
            found = load_object(spec)
        except ValueError as exc:
            raise CliExit(2, "error: " + str(exc).replace("--tools-from", "--agents")) from None
        agents.extend(found if isinstance(found, (list, tuple)) else [found])
    return agents


def transport_of(opts: dict[str, Any]) -> Any:
    spec = opts.get("transport")
    if not spec:
        return None
    try:
        obj = load_object(spec)
    except ValueError as exc:
        raise CliExit(2, "error: " + str(exc).replace("--tools-from", "--transport")) from None
    if not hasattr(obj, "post") and callable(obj):
        obj = obj()
    if not callable(getattr(obj, "post", None)):
        raise CliExit(2, f"error: --transport {spec!r} is not an HttpTransport (it has no post method)")
    return obj


def llm_of(opts: dict[str, Any], console: Console, command: str) -> dict[str, Any]:
    """The agents' `llm` from the model flags (else the environment's `OPENAI_BASE_URL` /
    `TOOLNEXUS_MODEL`, as every command reads them); a base URL is needed unless `--transport` is given."""
    apply_model_settings(opts)
    if not opts.get("base_url") and not opts.get("transport"):
        raise CliExit(2, f"error: toolnexus {command} needs --base-url (where the agents' LLM is) or --transport")
    llm: dict[str, Any] = {k: opts[k] for k in ("base_url", "model") if opts.get(k)}
    llm["style"] = opts.get("style") or "openai"
    key = resolve_key(opts)
    if key is not None:
        console.add_secret(key)
        llm["api_key"] = key
    return llm


def iso(value: Optional[datetime]) -> Optional[str]:
    return value.isoformat() if value is not None else None


def age(value: Optional[datetime], now: Optional[datetime] = None) -> str:
    """`12s`, `5m`, `3h`, `2d` since `value`."""
    if value is None:
        return "-"
    seconds = max(0.0, ((now or datetime.now(UTC)) - value).total_seconds())
    for unit, size in (("d", 86400), ("h", 3600), ("m", 60)):
        if seconds >= size:
            return f"{int(seconds // size)}{unit}"
    return f"{int(seconds)}s"
