"""The settings of a `Client`: small frozen values, built once, replaced (never edited) on a change.

Grouped the way httpx groups `Timeout` / `Limits` and the OpenAI Agents SDK `ModelSettings` /
`RunConfig`, so each part of the client takes the group it needs:

- `Endpoint`: where a request goes and what it carries — base URL, wire style, model, key,
  headers, system prompt, `request_params` / `body_transform`, the content-part policy, chained
  Responses calls;
- `RetryPolicy` (_retry.py): how a failed attempt is retried;
- `Limits`: how long and how much — `max_turns`, the run budget (`timeout_ms`), the per-call
  default deadline (`call_timeout_ms`), the largest reply (`max_response_bytes`);
- `LoopSettings`: how the loop treats suspensions and tools — `wait_for`, `race_tools`,
  `resolve_concurrently`, the wall `clock` expiries are judged by, the `agent_name` spans carry;
- `ClientSettings`: the four, plus the callables a run reports to (`hooks`, `on_metric`) and the
  monotonic `timer` retries and deadlines follow.

A `Client` keeps one `ClientSettings` (its `Provider` holds it, and the loop, resume and
`translate` read it there). Setting one of the client's attributes — `client.max_turns = 3`, as
0.21 code does — replaces it with a copy (`ClientSettings.changed`); whoever reads a setting next,
even later in a running run, reads the copy, exactly as 0.21 read the attribute. Mutable values
handed in (a `headers` or `request_params` dict, a hooks mapping) are held as given, so editing
them in place still reaches the next call, as before.

Not here: checking values (the contract says construction does not validate; a bad value fails
where it is used, with a clear error) or the seams a client holds (transport, store, approvals).
"""

from __future__ import annotations

import dataclasses
import math
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import Any, Callable, Optional

from ..errors import ToolnexusTypeError
from ._result import Hooks, OnMetric, WaitFor
from ._retry import RetryPolicy as RetryPolicy, Timer
from ._transport import MAX_RESPONSE_BYTES

NO_DEADLINE = math.inf
"""`timeout_ms=NO_DEADLINE`: no run deadline and no per-call default deadline."""
DEFAULT_CALL_TIMEOUT_MS = 300_000
"""Without `timeout_ms`, the overall bound on one logical LLM call (all attempts, the whole read)."""


def utc_now() -> datetime:
    """The default `Client.clock`: now, timezone-aware UTC."""
    return datetime.now(UTC)


@dataclass(frozen=True)
class Endpoint:
    """Where requests go and what they carry (see the module docstring)."""

    base_url: str
    style: str
    model: str
    api_key: Optional[str] = None
    headers: dict[str, str] = field(default_factory=dict)
    system_prompt: Optional[str] = None
    request_params: Optional[dict[str, Any]] = None
    body_transform: Optional[Callable[[dict[str, Any]], Optional[dict[str, Any]]]] = None
    on_unsupported_part: Optional[str] = None
    max_part_bytes: Optional[int] = None
    chain_responses: bool = False


@dataclass(frozen=True)
class Limits:
    """How long and how much: turns, the run budget, the per-call default deadline, reply size."""

    max_turns: int = 10
    timeout_ms: Optional[float] = None
    call_timeout_ms: Optional[float] = DEFAULT_CALL_TIMEOUT_MS
    max_response_bytes: Optional[int] = MAX_RESPONSE_BYTES


@dataclass(frozen=True)
class LoopSettings:
    """How the loop treats suspensions and tools (see the module docstring)."""

    wait_for: Optional[WaitFor] = None
    race_tools: bool = False
    resolve_concurrently: bool = False
    clock: Callable[[], datetime] = utc_now
    agent_name: Optional[str] = None


_GROUP_OF: dict[str, str] = {
    **{f.name: "endpoint" for f in dataclasses.fields(Endpoint)},
    **{f.name: "retry" for f in dataclasses.fields(RetryPolicy)},
    **{f.name: "limits" for f in dataclasses.fields(Limits)},
    **{f.name: "loop" for f in dataclasses.fields(LoopSettings)},
    "hooks": "", "on_metric": "", "timer": "",
}
SETTING_NAMES: tuple[str, ...] = tuple(_GROUP_OF)
"""Every setting by its flat name (a `Client` attribute and a `create_client` keyword of that name)."""


@dataclass(frozen=True)
class ClientSettings:
    """All of a client's settings (see the module docstring)."""

    endpoint: Endpoint
    retry: RetryPolicy = field(default_factory=RetryPolicy)
    limits: Limits = field(default_factory=Limits)
    loop: LoopSettings = field(default_factory=LoopSettings)
    hooks: Hooks = None
    on_metric: Optional[OnMetric] = None
    timer: Optional[Timer] = None

    @classmethod
    def of(cls, **values: Any) -> "ClientSettings":
        """Settings from flat names (`model=`, `retries=`, `max_turns=`...), each into its group."""
        grouped = _grouped(values)
        return cls(Endpoint(**grouped.get("endpoint", {})), RetryPolicy(**grouped.get("retry", {})),
                   Limits(**grouped.get("limits", {})), LoopSettings(**grouped.get("loop", {})), **grouped.get("", {}))

    def changed(self, **changes: Any) -> "ClientSettings":
        """A copy with the settings named (by their flat names) replaced."""
        grouped = _grouped(changes)
        own = grouped.pop("", {})
        parts = {g: dataclasses.replace(getattr(self, g), **v) for g, v in grouped.items()}
        return dataclasses.replace(self, **parts, **own)

    def value(self, name: str) -> Any:
        """One setting by its flat name."""
        group = _GROUP_OF[name]
        return getattr(getattr(self, group) if group else self, name)


def _grouped(values: dict[str, Any]) -> dict[str, dict[str, Any]]:
    grouped: dict[str, dict[str, Any]] = {}
    for name, value in values.items():
        try:
            group = _GROUP_OF[name]
        except KeyError:
            raise ToolnexusTypeError(f"toolnexus: {name!r} is not a client setting") from None
        grouped.setdefault(group, {})[name] = value
    return grouped
