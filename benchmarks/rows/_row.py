"""What every benchmark row shares (stdlib only, so it runs in any venv): timing, the run loop, the
JSON line a row prints. Import it first: its import time is the row's start, so `init_ms` covers
importing the framework, building the agent and starting the MCP server.

Environment: MODEL_URL (the model server, required), BENCH_RUNS (30), BENCH_WARMUP (3),
BENCH_STYLE (openai | anthropic).
"""

from __future__ import annotations

import time

T0 = time.perf_counter()

import json  # noqa: E402
import os  # noqa: E402
import resource  # noqa: E402
import statistics  # noqa: E402
import sys  # noqa: E402
from typing import Any, Awaitable, Callable  # noqa: E402

HERE = os.path.dirname(os.path.abspath(__file__))
TOOLS_SERVER = os.path.join(os.path.dirname(HERE), "tools_server.py")
QUESTION = "What's the weather in Paris and what is 2+2?"
FINAL = "The weather in Paris is Sunny, 22C. And 2 + 2 = 4."
MODEL = "mock-model"
API_KEY = "sk-bench"


def model_url() -> str:
    return os.environ["MODEL_URL"].rstrip("/")


def since(t: float) -> float:
    return (time.perf_counter() - t) * 1000


async def bench(row: str, version: str, run_once: Callable[[], Awaitable[str]], import_ms: float,
                extra: dict[str, Any] | None = None) -> dict[str, Any]:
    runs, warmup = int(os.environ.get("BENCH_RUNS", 30)), int(os.environ.get("BENCH_WARMUP", 3))
    init_ms = since(T0)
    ok = True
    for _ in range(warmup):
        ok = ok and (await run_once()) == FINAL
    times = []
    for _ in range(runs):
        started = time.perf_counter()
        text = await run_once()
        times.append(since(started))
        ok = ok and text == FINAL
    times.sort()
    return {"row": row, "version": version, "import_ms": round(import_ms, 1), "init_ms": round(init_ms, 1),
            "p50_ms": round(statistics.median(times), 3), "p95_ms": round(times[max(0, int(len(times) * 0.95) - 1)], 3),
            "mean_ms": round(statistics.fmean(times), 3), "runs": runs, "ok": ok,
            "peak_rss_mb": round(resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024, 1), **(extra or {})}


def finish(result: dict[str, Any]) -> None:
    print(json.dumps(result), flush=True)
    sys.exit(0 if result.get("ok") else 1)
