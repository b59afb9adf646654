"""The global turn gate and the per-turn usage meter, both living at the §8 transport seam.

`GatedTransport` wraps the runtime's `HttpTransport` for one turn. Its `post` holds one slot of a
process-wide `threading.Semaphore(max_concurrent_turns)` for exactly one HTTP attempt — never a
whole Run, because a parent that holds a slot while waiting for its children would deadlock them.
The slot is released in `finally`, on the worker thread that took it, so a cancelled run cannot
leak it. Streaming `open()` is passed through ungated.

The same wrapper meters every successful response (`TurnMeter`): the runtime rolls usage up from
the meter rather than from the `RunResult`, so spend of attempts that a completion gate retried,
or of a request whose Run was interrupted or failed, is still counted — a response that arrives
after its turn was settled is reported through `on_late` on the event loop.

This module never decides anything about handles; it counts and gates.
"""

from __future__ import annotations

import asyncio
import inspect
import threading
from typing import Any, Callable, Optional

from ..client.wire.base import usage_of
from ..errors import ToolnexusValueError

__all__ = ["TurnGate", "TurnMeter", "GatedTransport", "gated_transport", "usage_tokens"]


def usage_tokens(response: Any) -> int:
    """Total tokens of one decoded response, dialect-neutral, counted as the client counts them.

    OpenAI bodies carry `prompt_tokens` / `completion_tokens` / `total_tokens`, Anthropic bodies
    `input_tokens` / `output_tokens`; the key sets are disjoint, so one reader serves both.
    """
    usage = response.get("usage") if isinstance(response, dict) else None
    if not isinstance(usage, dict):
        return 0
    prompt = usage.get("prompt_tokens", usage.get("input_tokens"))
    completion = usage.get("completion_tokens", usage.get("output_tokens"))
    return usage_of(prompt, completion, usage.get("total_tokens"))["total_tokens"]


class TurnGate:
    """`max_concurrent_turns` slots shared by every handle of one runtime, plus live counters."""

    def __init__(self, limit: int) -> None:
        if not isinstance(limit, int) or limit < 1:
            raise ToolnexusValueError(f"toolnexus.agents: max_concurrent_turns must be an integer >= 1, got {limit!r}")
        self._sem = threading.Semaphore(limit)
        self._lock = threading.Condition()
        self.active = 0
        self.max_observed = 0

    def _entered(self) -> None:
        with self._lock:
            self.active += 1
            self.max_observed = max(self.max_observed, self.active)

    def wait_idle(self, timeout: Optional[float] = None) -> bool:
        """Block until no request holds a slot (a worker-thread call); False on timeout."""
        with self._lock:
            return self._lock.wait_for(lambda: self.active == 0, timeout)

    def acquire(self) -> None:
        """Block the calling (worker) thread until a slot is free."""
        self._sem.acquire()
        self._entered()

    def release(self) -> None:
        with self._lock:
            self.active -= 1
            self._lock.notify_all()
        self._sem.release()

    async def acquire_async(self) -> None:
        """Take a slot from a coroutine without blocking the loop and without leaking on cancel."""
        if self._sem.acquire(blocking=False):
            self._entered()
            return
        lock = threading.Lock()
        state = {"phase": "waiting"}

        def blocking_acquire() -> None:
            self._sem.acquire()
            with lock:
                if state["phase"] == "abandoned":
                    self._sem.release()
                    return
                state["phase"] = "acquired"

        try:
            await asyncio.to_thread(blocking_acquire)
        except BaseException:
            with lock:
                if state["phase"] == "acquired":
                    self._sem.release()
                state["phase"] = "abandoned"
            raise
        self._entered()


class TurnMeter:
    """Counts the LLM responses of one turn; thread-safe. After `close()`, arrivals go to `on_late`."""

    def __init__(self, on_late: Optional[Callable[[int], None]] = None) -> None:
        self._lock = threading.Lock()
        self._closed = False
        self._on_late = on_late
        self._loop: Optional[asyncio.AbstractEventLoop] = None
        try:
            self._loop = asyncio.get_running_loop()
        except RuntimeError:
            self._loop = None
        self.calls = 0
        self.tokens = 0
        self._taken = (0, 0)

    def take(self) -> tuple[int, int]:
        """`(calls, tokens)` counted since the last `take` (a checkpoint rolls spend up as it goes)."""
        with self._lock:
            if self._closed:
                return 0, 0
            delta = (self.calls - self._taken[0], self.tokens - self._taken[1])
            self._taken = (self.calls, self.tokens)
            return delta

    def record(self, response: Any) -> None:
        tokens = usage_tokens(response)
        with self._lock:
            if not self._closed:
                self.calls += 1
                self.tokens += tokens
                return
        if self._on_late is None or self._loop is None:
            return
        try:
            self._loop.call_soon_threadsafe(self._on_late, tokens)
        except RuntimeError:  # the loop is gone: nobody is left to account to
            pass

    def close(self) -> tuple[int, int, int, int]:
        """Freeze the turn: `(calls, tokens)` in all, then what no `take` handed out yet; once,
        then zeros. Later responses go to `on_late`, so every response is counted exactly once."""
        with self._lock:
            if self._closed:
                return 0, 0, 0, 0
            self._closed = True
            return self.calls, self.tokens, self.calls - self._taken[0], self.tokens - self._taken[1]


class GatedTransport:
    """Wraps a synchronous `HttpTransport`: gate + meter around `post`, `open` untouched."""

    def __init__(self, inner: Any, gate: TurnGate, meter: TurnMeter) -> None:
        self._inner = inner
        self._gate = gate
        self._meter = meter

    def post(self, url: str, headers: dict[str, str], payload: dict[str, Any], timeout: float) -> Any:
        self._gate.acquire()
        try:
            response = self._inner.post(url, headers, payload, timeout)
            self._meter.record(response)  # before the slot is freed: see AgentRuntime.quiesce
        finally:
            self._gate.release()
        return response

    def __getattr__(self, name: str) -> Any:
        # `open` (streaming) and anything else pass straight through, keeping sync/async nature.
        return getattr(self._inner, name)


class _AsyncGatedTransport(GatedTransport):
    """The same gate for a transport whose `post` is a coroutine function."""

    async def post(self, url: str, headers: dict[str, str], payload: dict[str, Any], timeout: float) -> Any:  # type: ignore[override]
        await self._gate.acquire_async()
        try:
            response = await self._inner.post(url, headers, payload, timeout)
            self._meter.record(response)
        finally:
            self._gate.release()
        return response


def gated_transport(inner: Any, gate: TurnGate, meter: TurnMeter) -> GatedTransport:
    """Pick the sync or async wrapper to match `inner.post`."""
    if inspect.iscoroutinefunction(getattr(inner, "post", None)):
        return _AsyncGatedTransport(inner, gate, meter)
    return GatedTransport(inner, gate, meter)
