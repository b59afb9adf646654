"""Latency goals of the client's abort paths (client.md §16), measured, not unit-tested.

- cancel → the provider socket is closed:      goal < 50 ms
- cancel → `RunCancelled` raised to the caller: goal < 100 ms
- `timeout_ms` deadline → `RunTimeout`:        goal < 100 ms past the deadline

A loopback server accepts the request and never answers; each case runs N times and the median
and worst are printed. Run: `.venv/bin/python benchmarks/cancel_latency.py [N]`.
"""

from __future__ import annotations

import asyncio
import statistics
import sys
import time

from toolnexus import RunCancelled, RunTimeout, create_client


class HangServer:
    """Reads one request and waits for the client to close the connection; records when it did."""

    def __init__(self) -> None:
        self.arrived = asyncio.Event()
        self.closed_at: list[float] = []

    async def handle(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        await reader.readuntil(b"\r\n\r\n")
        self.arrived.set()
        await reader.read()  # EOF: the client closed the socket
        self.closed_at.append(time.monotonic())
        writer.close()


async def cancel_once(base_url: str, server: HangServer) -> tuple[float, float]:
    server.arrived.clear()
    cancel = asyncio.Event()
    async with create_client(base_url=base_url, style="openai", model="m", api_key="k", retries=0) as client:
        run = asyncio.create_task(client.run("x", cancel=cancel))
        await server.arrived.wait()
        before = len(server.closed_at)
        set_at = time.monotonic()
        cancel.set()
        try:
            await run
        except RunCancelled:
            raised_at = time.monotonic()
        while len(server.closed_at) == before:
            await asyncio.sleep(0.001)
        return raised_at - set_at, server.closed_at[-1] - set_at


async def deadline_once(base_url: str) -> float:
    async with create_client(base_url=base_url, style="openai", model="m", api_key="k", retries=0,
                             timeout_ms=200) as client:
        started = time.monotonic()
        try:
            await client.run("x")
        except RunTimeout:
            return time.monotonic() - started - 0.2
    raise AssertionError("the hanging server answered")


def report(name: str, samples: list[float], goal_ms: float) -> None:
    median, worst = statistics.median(samples) * 1000, max(samples) * 1000
    verdict = "ok" if median < goal_ms else "MISSED"
    print(f"{name:<34} median {median:7.2f} ms   worst {worst:7.2f} ms   goal < {goal_ms:g} ms   {verdict}")


async def main(n: int) -> None:
    hang = HangServer()
    server = await asyncio.start_server(hang.handle, "127.0.0.1", 0)
    base_url = f"http://127.0.0.1:{server.sockets[0].getsockname()[1]}"
    raised, closed = zip(*[await cancel_once(base_url, hang) for _ in range(n)], strict=True)
    overshoot = [await deadline_once(base_url) for _ in range(n)]
    server.close()
    report("cancel → RunCancelled", list(raised), 100)
    report("cancel → socket closed", list(closed), 50)
    report("deadline → RunTimeout (overshoot)", overshoot, 100)


if __name__ == "__main__":
    asyncio.run(main(int(sys.argv[1]) if len(sys.argv) > 1 else 20))
