"""The global turn gate and the per-turn usage meter, both living at the transport seam.

`GatedTransport` wraps the runtime's transport for one turn. Its `post` holds one of
`max_concurrent_turns` slots for exactly one HTTP attempt — never a whole Run, because a parent
that holds a slot while waiting for its children would deadlock them.

The gate is asyncio-native: a slot is taken on the event loop by awaiting a future (no thread
parks on a semaphore), handed to waiters in arrival order, and given back on the event loop. A
synchronous transport's `post` runs on the transport pool (its adapter, `TransportAdapter`); the
slot is freed when that call has really returned — also when the turn awaiting it was cancelled
meanwhile (the worker thread cannot be stopped), so `concurrent_turns` and `quiesce` count a
request until it is over. Nothing here needs a thread of its own, which is what lets the whole runtime run on a
deterministic event loop (a Temporal workflow's). Streaming `open()` is passed through ungated.

The same wrapper meters every successful response (`TurnMeter`): the runtime rolls usage up from
the meter rather than from the `RunResult`, so spend of attempts that a completion gate retried,
or of a request whose Run was interrupted or failed, is still counted — a response that arrives
after its turn was settled is reported through `on_late` on the event loop.

This module never decides anything about handles; it counts and gates.
"""

from __future__ import annotations

import asyncio
import collections
import threading
from typing import Any, Callable, Optional

from ..client._transport import AsyncTransport, TransportAdapter, as_async_transport
from ..client._wire.base import usage_of
from ..errors import ToolnexusValueError


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
    """`max_concurrent_turns` slots shared by every handle of one runtime, plus live counters.

    Slots are taken and given back on the runtime's event loop; waiters are served in arrival
    order. `wait_idle` (blocking, for a thread) and `idle` (a coroutine) wait until no slot is held.
    """

    def __init__(self, limit: int) -> None:
        if not isinstance(limit, int) or limit < 1:
            raise ToolnexusValueError(f"toolnexus.agents: max_concurrent_turns must be an integer >= 1, got {limit!r}")
        self.limit = limit
        self.active = 0
        self.max_observed = 0
        self._waiters: collections.deque[asyncio.Future[None]] = collections.deque()
        self._idle: list[asyncio.Future[None]] = []
        self._cond = threading.Condition()  # never held across an await: only guards the counters

    def _entered(self) -> None:
        with self._cond:
            self.active += 1
            self.max_observed = max(self.max_observed, self.active)

    def wait_idle(self, timeout: Optional[float] = None) -> bool:
        """Block until no request holds a slot (call it from a thread, not the loop); False on timeout."""
        with self._cond:
            return self._cond.wait_for(lambda: self.active == 0, timeout)

    async def idle(self, timeout: Optional[float] = None) -> bool:
        """Wait on the loop until no request holds a slot; False on timeout (seconds)."""
        if self.active == 0:
            return True
        fut: asyncio.Future[None] = asyncio.get_running_loop().create_future()
        self._idle.append(fut)
        try:
            await asyncio.wait_for(asyncio.shield(fut), timeout)
            return True
        except TimeoutError:
            return False
        finally:
            if fut in self._idle:
                self._idle.remove(fut)

    async def acquire_async(self) -> None:
        """Take a slot without blocking the loop; a cancelled waiter never keeps (or leaks) one."""
        if self.active < self.limit and not self._waiters:
            self._entered()
            return
        fut: asyncio.Future[None] = asyncio.get_running_loop().create_future()
        self._waiters.append(fut)
        try:
            await fut
        except asyncio.CancelledError:
            if fut.done() and not fut.cancelled():  # the slot was handed over as we were cancelled
                self.release()
            elif fut in self._waiters:
                self._waiters.remove(fut)
            raise

    def release(self) -> None:
        """Give a slot back (on the loop) and hand it to the oldest waiter."""
        with self._cond:
            self.active -= 1
            self._cond.notify_all()
        while self._waiters and self.active < self.limit:
            fut = self._waiters.popleft()
            if fut.done():  # its waiter was cancelled
                continue
            self._entered()
            fut.set_result(None)
        if self.active == 0:
            idle, self._idle = self._idle, []
            for fut in idle:
                if not fut.done():
                    fut.set_result(None)


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
            self._loop.call_soon(self._on_late, tokens)
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


class GatedTransport(AsyncTransport):
    """One turn's view of the runtime's transport: gate + meter around `post`, `open` ungated.

    `inner` is the runtime's transport behind the async seam (`as_async_transport`). A plain
    (synchronous) `post` occupies a pool thread that cancelling the turn cannot stop, so its slot
    is held until that thread has returned (`TransportAdapter.submit_post`); an async `post` is
    cancelled with its turn and frees the slot at once.
    """

    def __init__(self, inner: AsyncTransport, gate: TurnGate, meter: TurnMeter) -> None:
        self._inner = inner
        self._gate = gate
        self._meter = meter

    async def post(self, url: str, headers: dict[str, str], payload: dict[str, Any], timeout: float) -> Any:
        await self._gate.acquire_async()
        inner = self._inner
        if isinstance(inner, TransportAdapter) and inner.plain_post:
            try:
                job = inner.submit_post(url, headers, payload, timeout)
            except BaseException:
                self._gate.release()
                raise
            job.add_done_callback(self._settle)  # on the loop, once the call is really over
            return await asyncio.shield(job)
        try:
            response = await inner.post(url, headers, payload, timeout)
            self._meter.record(response)
        finally:
            self._gate.release()
        return response

    def _settle(self, job: "asyncio.Future[Any]") -> None:
        if not job.cancelled() and job.exception() is None:
            self._meter.record(job.result())  # before the slot is freed: see AgentRuntime.quiesce
        self._gate.release()

    async def open(self, url: str, headers: dict[str, str], payload: dict[str, Any], timeout: float) -> Any:
        return await self._inner.open(url, headers, payload, timeout)

    async def aclose(self) -> None:
        return None  # the runtime owns (and closes) the transport, not a turn


def gated_transport(inner: Any, gate: TurnGate, meter: TurnMeter) -> GatedTransport:
    """`inner` (any transport) behind the gate and the meter for one turn."""
    return GatedTransport(as_async_transport(inner), gate, meter)
