"""The global turn gate and the per-turn usage meter, both living at the §8 transport seam.

`GatedTransport` wraps the runtime's `HttpTransport` for one turn. Its `post` holds one of
`max_concurrent_turns` slots for exactly one HTTP attempt — never a whole Run, because a parent
that holds a slot while waiting for its children would deadlock them.

The gate is asyncio-native: a slot is taken on the event loop by awaiting a future (no thread
parks on a semaphore), handed to waiters in arrival order, and given back on the event loop. A
synchronous transport's `post` then runs on the client's transport pool; the slot is freed when
that call has really returned — also when the turn awaiting it was cancelled meanwhile (the
worker thread cannot be stopped), so `concurrent_turns` and `quiesce` count a request until it is
over. Nothing here needs a thread of its own, which is what lets the whole runtime run on a
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
import inspect
import threading
from typing import Any, Callable, Optional

from ..client.transport import _POOL
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


class GatedTransport:
    """Wraps a synchronous `HttpTransport`: gate + meter around `post` (now a coroutine, the
    inner call on the transport pool), `open` untouched."""

    def __init__(self, inner: Any, gate: TurnGate, meter: TurnMeter) -> None:
        self._inner = inner
        self._gate = gate
        self._meter = meter

    async def post(self, url: str, headers: dict[str, str], payload: dict[str, Any], timeout: float) -> Any:
        await self._gate.acquire_async()
        loop = asyncio.get_running_loop()
        outcome: asyncio.Future[Any] = loop.create_future()

        def settle(response: Any, error: Optional[BaseException]) -> None:  # on the loop, once the call is over
            if error is None:
                self._meter.record(response)  # before the slot is freed: see AgentRuntime.quiesce
            self._gate.release()
            if not outcome.done():
                if error is not None:
                    outcome.set_exception(error)
                else:
                    outcome.set_result(response)

        async def finish_awaitable(pending: Any) -> None:  # a sync post that handed back an awaitable
            try:
                response = await pending
            except BaseException as exc:  # noqa: BLE001 - handed to the awaiting turn
                settle(None, exc)
                return
            settle(response, None)

        def returned(job: Any) -> None:  # on the pool thread
            def on_loop() -> None:
                try:
                    response = job.result()
                except BaseException as exc:  # noqa: BLE001 - handed to the awaiting turn
                    settle(None, exc)
                    return
                if inspect.isawaitable(response):
                    asyncio.ensure_future(finish_awaitable(response))
                    return
                settle(response, None)

            try:
                loop.call_soon_threadsafe(on_loop)
            except RuntimeError:  # the loop is gone: nobody is left to hand the slot to
                pass

        try:
            job = _POOL.submit(self._inner.post, url, headers, payload, timeout)
        except BaseException:
            self._gate.release()
            raise
        job.add_done_callback(returned)
        return await outcome

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
