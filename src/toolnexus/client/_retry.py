"""One logical LLM call: attempts, backoff, `Retry-After`, `on_error`, deadline and cancel.

Every attempt is raced against the run's `cancel` event and the time left before the run's
deadline, so a hung server is abandoned the moment either fires (the attempt is cancelled, which
closes its socket; a synchronous worker thread is abandoned). With a deadline alone on real time
(the default per-call deadline, or `timeout_ms` without a `timer`) the shared race runs the
attempt in the calling task under `asyncio.timeout`; only a cancel event or an injected clock
needs a racing task. Backoff sleeps wait on the same event and are clipped to the deadline. Aborts
(`RunTimeout`, `RunCancelled`) are never retried and never reach `on_error`.

`max_retry_after_ms` (opt-in): a `Retry-After` longer than it is not slept through; the error is
raised at once, since retrying before the server's stated time would only fail again.

Classification looks at the provider's error type as well as the status (`provider_error_info`):
an exhausted quota or billing limit (`ProviderError.quota`, e.g. OpenAI `insufficient_quota`) is
not retryable whatever its status, and fails at once with a hint saying what to do. `on_error`
sees `error_type` beside the status. An error the provider sent inside a 2xx stream is classified
exactly like the same status on a plain reply (_streaming.py).

`timer` (opt-in, `Client(timer=...)`): an object with `now()` (monotonic seconds) and
`async sleep(seconds)` — the library's one clock shape (`toolnexus._clock.Timer`, also exported here
as `Timer`), so any `toolnexus.agents` clock fits — that then owns the deadline and every backoff
sleep, so a virtual clock drives retries and timeouts without real waiting. The client's *default*
per-call deadline (used when no `timeout_ms` is set) is a safety net against real hangs, so it
always runs on real time (`Abort.real_time`); backoff sleeps still go through the timer. Without
one, `time.monotonic` / `asyncio.sleep` are used exactly as before. The short grace an abandoned
attempt gets to unwind stays real time: it is cleanup, not a policy delay.

How a race is run (who wins, how the loser is cancelled and reaped) is `toolnexus._abort.race`,
shared with the tools' signal races; this module only says what the run's cancel event and
deadline are and which error each means.

Not here: what an attempt does (the client passes a coroutine factory) or what the reply means.
"""

from __future__ import annotations

import asyncio
import random
import time
from dataclasses import dataclass
from typing import Any, Awaitable, Callable, Iterable, Optional, TypeVar

from .._abort import STOPPED, discard, race as stop_race
from .._clock import Timer as Timer, has_timer_shape
from ..errors import ToolnexusTypeError
from ._errors import ProviderError, RunCancelled, RunTimeout
from ._result import ErrorClassifier, ErrorInfo

T = TypeVar("T")
RETRYABLE_STATUSES = frozenset({429, 500, 502, 503, 504, 529})
DEFAULT_TRANSPORT_TIMEOUT = 120.0
_MAX_RETRY_AFTER = 2147483647
_ABANDON_GRACE = 0.1


def _is_retryable_status(status: int, extra: Optional[Iterable[int]] = None) -> bool:
    """True for 429/500/502/503/504/529 and any status in `extra` (additive only)."""
    return status in RETRYABLE_STATUSES or (extra is not None and status in extra)


def _parse_retry_after(value: Any) -> Optional[int]:
    """Delay-seconds form only: ASCII digits (after stripping), at most 2^31-1; else None."""
    if not isinstance(value, str):
        return None
    text = value.strip()
    if not text or not text.isascii() or not text.isdigit():
        return None
    seconds = int(text)
    return seconds if seconds <= _MAX_RETRY_AFTER else None


def provider_error_info(e: ProviderError, attempt: int, extra: Optional[Iterable[int]]) -> ErrorInfo:
    """What `on_error` sees for a provider error: its status, and whether the policy would retry it
    (the status says so and it is not an exhausted quota), and the provider's error type if named."""
    info: ErrorInfo = {"status": e.status, "attempt": attempt,
                       "retryable": _is_retryable_status(e.status, extra) and not e.quota}
    if e.error_type:
        info["error_type"] = e.error_type
    return info


def backoff_seconds(attempt: int, retry_base_ms: int) -> float:
    """Exponential backoff with up to 100 ms of jitter: `base * 2**attempt + U(0, 0.1)` seconds."""
    return retry_base_ms / 1000 * 2.0**attempt + random.random() * 0.1


def check_timer(timer: Any) -> Any:
    """`timer` itself when it has `now()` and `sleep()`; a clear `TypeError` otherwise."""
    if timer is not None and not has_timer_shape(timer):
        raise ToolnexusTypeError("toolnexus: `timer` needs now() -> monotonic seconds and async sleep(seconds) "
                        f"(e.g. a toolnexus.agents Clock), got {type(timer).__name__}")
    return timer


def monotonic_now(timer: Optional[Timer]) -> float:
    return time.monotonic() if timer is None else timer.now()


@dataclass
class Abort:
    """The run's abort conditions: an optional cancel event and an optional monotonic deadline.

    `timer` (optional) is the clock the deadline is read on and backoff sleeps run on.
    """

    cancel: Optional[asyncio.Event] = None
    deadline: Optional[float] = None
    timeout_ms: Optional[float] = None
    timer: Optional[Timer] = None
    attempt_cap: Optional[float] = None  # upper bound on one attempt's transport timeout (seconds)
    real_time: bool = False  # the deadline is on the real monotonic clock even when `timer` is set

    def now(self) -> float:
        return time.monotonic() if self.real_time else monotonic_now(self.timer)

    def remaining(self) -> Optional[float]:
        return None if self.deadline is None else self.deadline - self.now()

    def check(self) -> None:
        """Raise `RunCancelled` / `RunTimeout` if either already fired."""
        if self.cancel is not None and self.cancel.is_set():
            raise RunCancelled()
        left = self.remaining()
        if left is not None and left <= 0:
            raise RunTimeout(self.timeout_ms)

    def transport_timeout(self) -> float:
        left = self.remaining()
        if left is None:
            return DEFAULT_TRANSPORT_TIMEOUT
        if self.attempt_cap is not None:
            left = min(left, self.attempt_cap)
        return max(left, 0.001)

    def timed_out(self) -> bool:
        left = self.remaining()
        return left is not None and left <= 0


async def race(awaitable: Awaitable[T], abort: Abort, *, on_abort: Optional[Callable[[], Awaitable[None]]] = None) -> T:
    """Await `awaitable` unless cancel or deadline fires first (then abandon it and raise)."""
    try:
        abort.check()
    except BaseException:
        discard(awaitable)
        raise
    stoppers: list[Awaitable[Any]] = [abort.cancel.wait()] if abort.cancel is not None else []
    timeout = abort.remaining()
    if abort.timer is not None and timeout is not None and not abort.real_time:  # on the injected clock
        stoppers.append(abort.timer.sleep(max(timeout, 0)))
        timeout = None
    outcome = await stop_race(awaitable, *stoppers, timeout=timeout, on_abandon=on_abort, grace=_ABANDON_GRACE)
    if outcome is not STOPPED:
        return outcome
    if abort.cancel is not None and abort.cancel.is_set():
        raise RunCancelled()
    raise RunTimeout(abort.timeout_ms)


async def pause(seconds: float, abort: Abort) -> None:
    """Sleep `seconds`, waking at once on cancel; reaching the deadline raises `RunTimeout`."""
    left = abort.remaining()
    clipped = seconds if left is None else min(seconds, max(left, 0))
    sleep = asyncio.sleep(clipped) if abort.timer is None else abort.timer.sleep(clipped)
    if abort.cancel is None:
        await sleep
    else:
        await stop_race(sleep, abort.cancel.wait())  # either way on: the check below tells which
    abort.check()


@dataclass(frozen=True)
class RetryPolicy:
    """The retry knobs of a `Client` (a part of its `ClientSettings`, _settings.py)."""

    retries: int = 2
    retry_base_ms: int = 500
    retryable_statuses: Optional[frozenset[int]] = None
    on_error: Optional[ErrorClassifier] = None
    max_retry_after_ms: Optional[int] = None


async def call_with_retries(
    attempt: Callable[[float], Awaitable[T]], policy: RetryPolicy, abort: Abort
) -> tuple[T, int]:
    """Run `attempt(transport_timeout)` up to `retries + 1` times; return `(result, attempts)`."""
    n = 0
    while True:
        wait: Optional[int] = None
        try:
            return await race(attempt(abort.transport_timeout()), abort), n + 1
        except (RunTimeout, RunCancelled):
            raise
        except ProviderError as e:
            error: BaseException = e
            info: ErrorInfo = provider_error_info(e, n, policy.retryable_statuses)
            retryable = info["retryable"]
            wait = _parse_retry_after(e.retry_after)
        except OSError as e:
            if abort.timed_out():
                raise RunTimeout(abort.timeout_ms) from e
            error, retryable = e, True
            info = {"error": e, "attempt": n, "retryable": True}
        tier = policy.on_error(info) if policy.on_error is not None else ("retry" if retryable else "fail")
        if tier == "fail" or n >= policy.retries:
            raise error
        if wait is not None and policy.max_retry_after_ms is not None and wait * 1000 > policy.max_retry_after_ms:
            raise error
        await pause(wait if wait is not None else backoff_seconds(n, policy.retry_base_ms), abort)
        n += 1
