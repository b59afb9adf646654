"""How the cost of a run grows: per turn with transcript length and toolkit size, 1,000 concurrent
agent runs in one process, and the memory a parked run holds.

1. **Per-turn cost vs. transcript length** — one `client.run` whose model asks for a tool call on
   each of T turns (T = 10, 100, 1000), then answers. The model is an in-process async transport
   that encodes each request body as the real transports do and answers at once, so what is
   measured is our loop: building, encoding and parsing each turn, and running the tool. Reported:
   ms per turn over the whole run and over its first and last tenth (flat = not quadratic).
2. **Per-turn cost vs. toolkit size** — the same 10-turn run with 10, 100 and 1,000 tools.
3. **1,000 concurrent agent runs** — `agent.run` × 1,000 at once in one process against the
   loopback model server (`model_server.py`, its own process, keep-alive): two LLM round trips
   and two native tool calls each; wall time, runs/s, peak RSS growth.
4. **Memory per parked run** — N agent runs that each park on an approval (`pending`), kept by
   the host to answer later; traced Python heap per parked run, with no store (the runtime
   holds the run) and with the `memory:` store.

Run: `.venv/bin/python benchmarks/scaling.py [--json PATH]` (about a minute); prints tables and
writes JSON (default `benchmarks/results/scaling.json`).
"""

from __future__ import annotations

import argparse
import asyncio
import gc
import itertools
import json
import os
import platform
import resource
import statistics
import subprocess
import sys
import time
import tracemalloc
from pathlib import Path
from typing import Any

from toolnexus import create_client, create_toolkit, define_tool, pending
from toolnexus.agents import Budget, agent
from toolnexus.client._body import encode_payload

HERE = Path(__file__).resolve().parent
USAGE = {"prompt_tokens": 10, "completion_tokens": 5, "total_tokens": 15}


class ScriptedModel:
    """Asks for `lookup` on each of `turns` turns, then answers; encodes every body it is sent."""

    def __init__(self, turns: int) -> None:
        self.turns = turns
        self.calls = 0
        self.stamps: list[float] = []
        self.bytes_sent = 0

    async def post(self, url: str, headers: dict[str, str], payload: dict[str, Any], timeout: float) -> Any:
        self.bytes_sent += len(encode_payload(payload))
        self.stamps.append(time.perf_counter())
        n, self.calls = self.calls, self.calls + 1
        if n < self.turns:
            call = {
                "id": f"c{n}",
                "type": "function",
                "function": {"name": "lookup", "arguments": json.dumps({"q": n})},
            }
            return {"choices": [{"message": {"role": "assistant", "content": None, "tool_calls": [call]},
                                 "finish_reason": "tool_calls"}], "usage": USAGE}
        return {"choices": [{"message": {"role": "assistant", "content": f"looked up {n} things"},
                             "finish_reason": "stop"}], "usage": USAGE}

    async def open(self, *args: Any) -> Any:  # pragma: no cover - the benchmark does not stream
        raise NotImplementedError


def lookup(q: int) -> str:
    """Look something up."""
    return f"result {q}: " + "x" * 120


def filler_tools(n: int) -> list[Any]:
    tools = []
    for i in range(n):
        def fn(city: str, days: int = 1) -> str:
            return city
        tools.append(define_tool(fn, name=f"tool_{i}", description=f"Tool number {i}: looks up a forecast."))
    return tools


async def one_run(turns: int, tools: int) -> dict[str, Any]:
    model = ScriptedModel(turns)
    toolkit = await create_toolkit(builtins=False, extra_tools=[define_tool(lookup), *filler_tools(tools - 1)])
    client = create_client(base_url="http://model.invalid/v1", style="openai", model="m", api_key="k",
                           http_transport=model, max_turns=turns + 2)
    started = time.perf_counter()
    result = await client.run("look things up", toolkit)
    total = time.perf_counter() - started
    assert result.text == f"looked up {turns} things", result.text
    gaps = [b - a for a, b in itertools.pairwise(model.stamps)]  # one turn: tool run + next request
    tenth = max(1, len(gaps) // 10)
    await toolkit.close()
    return {
        "ms_per_turn": total * 1000 / (turns + 1),
        "first_tenth_ms": statistics.fmean(gaps[:tenth]) * 1000,
        "last_tenth_ms": statistics.fmean(gaps[-tenth:]) * 1000,
        "request_kb_mean": model.bytes_sent / 1024 / (turns + 1),
    }


async def per_turn(repeats: int) -> list[dict[str, Any]]:
    await one_run(10, 10)  # warm-up: first-use imports and caches
    rows = []
    for turns, tools in ((10, 10), (100, 10), (1000, 10), (10, 100), (10, 1000)):
        samples = [await one_run(turns, tools) for _ in range(repeats)]
        row = {"turns": turns, "tools": tools}
        for key in samples[0]:
            row[key] = round(statistics.median(s[key] for s in samples), 4)
        rows.append(row)
    return rows


def rss_mb() -> float:
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024


class ModelServer:
    def __enter__(self) -> "ModelServer":
        self.proc = subprocess.Popen([sys.executable, str(HERE / "model_server.py")], stdout=subprocess.PIPE, text=True)
        assert self.proc.stdout is not None
        self.url = f"http://127.0.0.1:{int(self.proc.stdout.readline())}/v1"
        return self

    def __exit__(self, *exc: Any) -> None:
        self.proc.terminate()
        self.proc.wait()


def get_weather(city: str) -> str:
    """Current weather for a city."""
    return "Sunny, 22C" if city.lower() == "paris" else "Cloudy, 15C"


def add(a: float, b: float) -> str:
    """Add two numbers."""
    total = a + b
    return str(int(total)) if total == int(total) else str(total)


async def concurrent_runs(n: int) -> dict[str, Any]:
    from toolnexus.client._http11 import Http11Transport

    worker = agent("worker", does="answers with tools", uses={"tools": [define_tool(get_weather), define_tool(add)]},
                   budget=Budget(max_turns=4))
    with ModelServer() as server:
        llm = {"base_url": server.url, "style": "openai", "model": "m", "api_key": "k"}
        transport = Http11Transport(max_idle_per_host=n)
        await worker.run("warm up", llm=llm, transport=transport)
        gc.collect()
        before = rss_mb()
        started = time.perf_counter()
        results = await asyncio.gather(*(worker.run(f"question {i}", llm=llm, transport=transport) for i in range(n)))
        wall = time.perf_counter() - started
        ok = sum(1 for r in results if r.text == "The weather in Paris is Sunny, 22C. And 2 + 2 = 4.")
        await transport.aclose()
    return {"runs": n, "ok": ok, "wall_s": round(wall, 3), "runs_per_s": round(n / wall, 1),
            "peak_rss_growth_mb": round(rss_mb() - before, 1)}


async def parked_runs(n: int, store: Any) -> dict[str, Any]:
    async def deploy(service: str) -> Any:
        return pending(kind="approval", prompt=f"deploy {service}?")

    gate = agent(
        "gate", does="asks before deploying", uses={"tools": [define_tool(deploy)]}, budget=Budget(max_turns=4)
    )

    class Deployer(ScriptedModel):
        async def post(self, url: str, headers: dict[str, str], payload: dict[str, Any], timeout: float) -> Any:
            encode_payload(payload)
            call = {"id": "c1", "type": "function", "function": {"name": "deploy", "arguments": '{"service": "api"}'}}
            return {"choices": [{"message": {"role": "assistant", "content": None, "tool_calls": [call]},
                                 "finish_reason": "tool_calls"}], "usage": USAGE}

    from toolnexus.stores import open_store

    llm = {"base_url": "http://model.invalid/v1", "style": "openai", "model": "m", "api_key": "k"}
    opts: dict[str, Any] = {"llm": llm, "transport": Deployer(0)}
    if store is not None:
        opts["store"] = open_store(store)
        await opts["store"].open()
    await gate.run("warm up", **opts)
    gc.collect()
    tracemalloc.start()
    base = tracemalloc.get_traced_memory()[0]
    kept = [await gate.run(f"deploy {i}", **opts) for i in range(n)]
    gc.collect()
    held = tracemalloc.get_traced_memory()[0] - base
    tracemalloc.stop()
    assert all(r.status == "pending" for r in kept), {r.status for r in kept}
    for r in kept:
        await r.runtime.aclose()
    return {"store": store or "none", "parked": n, "kb_per_parked_run": round(held / n / 1024, 1)}


async def main(args: argparse.Namespace) -> dict[str, Any]:
    out: dict[str, Any] = {
        "date": time.strftime("%Y-%m-%d %H:%M"),
        "python": platform.python_version(),
        "machine": f"{platform.machine()}, {os.cpu_count()} cores, {platform.system()} {platform.release()}",
    }
    out["per_turn"] = await per_turn(args.repeats)
    print("turns  tools   ms/turn   first 1/10   last 1/10   request KB (mean)")
    for r in out["per_turn"]:
        print(f"{r['turns']:>5}  {r['tools']:>5}  {r['ms_per_turn']:>8.3f}  {r['first_tenth_ms']:>10.3f}  "
              f"{r['last_tenth_ms']:>10.3f}  {r['request_kb_mean']:>10.1f}")
    out["concurrent"] = await concurrent_runs(args.concurrent)
    c = out["concurrent"]
    print(f"\n{c['runs']} concurrent agent runs: {c['ok']} ok in {c['wall_s']} s ({c['runs_per_s']} runs/s), "
          f"peak RSS +{c['peak_rss_growth_mb']} MB")
    out["parked"] = [await parked_runs(args.parked, None), await parked_runs(args.parked, "memory:")]
    for p in out["parked"]:
        print(f"parked runs ({p['store']} store): {p['kb_per_parked_run']} KB each over {p['parked']}")
    return out


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--concurrent", type=int, default=1000)
    parser.add_argument("--parked", type=int, default=500)
    parser.add_argument("--json", default=str(HERE / "results" / "scaling.json"))
    args = parser.parse_args()
    result = asyncio.run(main(args))
    Path(args.json).write_text(json.dumps(result, indent=2) + "\n")
    print(f"\nwritten to {args.json}")
