"""`TemporalOptions`: the timeouts and retry policies of the activities a run schedules.

Every LLM call and every tool call of a workflow-run agent is one activity:

- an **LLM call** may be sent again (nothing happens twice at the provider that matters), so it
  retries by policy: `llm_attempts` attempts with exponential backoff; a provider error that is
  not retryable (a 4xx other than 429) fails at once;
- an **idempotent tool** (`define_tool(..., idempotent=True)`) retries the same way,
  `tool_attempts` attempts;
- any **other tool** runs at most once: if its worker dies or it times out, its outcome is
  unknown, and the run asks the host (`in_doubt`) instead of guessing.

Every activity heartbeats while it runs, so a worker that dies is noticed after
`heartbeat_timeout` seconds, not after the whole `*_timeout`. `max_payload_bytes` is checked
before a value enters workflow history (Temporal refuses payloads over 2 MB); set it to None when
a by-reference payload codec keeps large values out of history.

All workers of one task queue should use the same options; they only shape activity scheduling,
so a difference never breaks a replay, but runs would behave differently by worker.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import timedelta
from typing import Any, Optional

from ..errors import ToolnexusValueError

#: A little under Temporal's 2 MB payload limit, leaving room for the envelope.
DEFAULT_MAX_PAYLOAD_BYTES = 2 * 1024 * 1024 - 64 * 1024


@dataclass(frozen=True)
class TemporalOptions:
    """Activity timeouts (seconds) and retry policies; see the module docstring."""

    llm_timeout: float = 600.0
    llm_attempts: int = 3
    tool_timeout: float = 600.0
    tool_attempts: int = 3
    heartbeat_timeout: float = 30.0
    retry_initial: float = 1.0
    retry_max: float = 30.0
    max_payload_bytes: Optional[int] = DEFAULT_MAX_PAYLOAD_BYTES

    def __post_init__(self) -> None:
        for name in ("llm_timeout", "tool_timeout", "heartbeat_timeout", "retry_initial", "retry_max"):
            value = getattr(self, name)
            if not isinstance(value, (int, float)) or isinstance(value, bool) or value <= 0:
                raise ToolnexusValueError(
                    f"toolnexus.temporal: TemporalOptions.{name} must be a number of seconds > 0, got {value!r}"
                )
        for name in ("llm_attempts", "tool_attempts"):
            value = getattr(self, name)
            if not isinstance(value, int) or isinstance(value, bool) or value < 1:
                raise ToolnexusValueError(
                    f"toolnexus.temporal: TemporalOptions.{name} must be an integer >= 1, got {value!r}"
                )
        limit = self.max_payload_bytes
        if limit is not None and (not isinstance(limit, int) or isinstance(limit, bool) or limit < 1024):
            raise ToolnexusValueError(
                "toolnexus.temporal: TemporalOptions.max_payload_bytes must be None or an integer "
                f">= 1024, got {limit!r}"
            )

    def retry_policy(self, attempts: int, non_retryable: tuple[str, ...] = ()) -> Any:
        from temporalio.common import RetryPolicy

        return RetryPolicy(initial_interval=timedelta(seconds=self.retry_initial), backoff_coefficient=2.0,
                           maximum_interval=timedelta(seconds=self.retry_max), maximum_attempts=attempts,
                           non_retryable_error_types=list(non_retryable))
