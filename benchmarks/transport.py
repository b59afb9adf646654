"""One keep-alive loopback POST through each LLM transport: what the transport itself costs per call.

`python benchmarks/transport.py [--base SRC] [--rounds N] [--posts N]` starts the model server
(`model_server.py`, its own process), then in each round runs every row in a fresh process, in
rotated order, each making `--posts` sequential POSTs of a chat request on one kept-alive
connection (after 200 warm-ups) and reporting the p50 and mean per POST. Rows:

- `Http11Transport` — the default transport of this checkout;
- `HttpxTransport` — `httpx.AsyncClient` behind the same seam;
- with `--base SRC` (another checkout's `src/`, e.g. `git archive <commit> src | tar -x -C /tmp/base`):
  that checkout's `Http11Transport`, run by this venv's Python with `PYTHONPATH=SRC`, so two
  implementations are compared in one run on one machine.

The table shows medians over rounds; JSON goes to `benchmarks/results/transport.json`.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import statistics
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

HERE = Path(__file__).resolve().parent
BODY = {"model": "m", "messages": [{"role": "user", "content": "What's the weather in Paris and what is 2+2?"}],
        "tools": [{"type": "function", "function": {"name": n, "description": "", "parameters": {"type": "object"}}}
                  for n in ("get_weather", "add")], "tool_choice": "auto"}
HEADERS = {"Authorization": "Bearer sk-bench", "Content-Type": "application/json"}


async def _measure(kind: str, url: str, posts: int) -> dict[str, Any]:
    if kind == "httpx":
        from toolnexus.client import HttpxTransport

        transport: Any = HttpxTransport()
    else:
        from toolnexus.client._http11 import Http11Transport

        transport = Http11Transport()
    times: list[float] = []
    try:
        for i in range(200 + posts):
            started = time.perf_counter()
            reply = await transport.post(url, HEADERS, dict(BODY), 30.0)
            if i >= 200:
                times.append((time.perf_counter() - started) * 1e6)
            assert reply["choices"][0]["finish_reason"] == "tool_calls"
    finally:
        await transport.aclose()
    return {"p50_us": statistics.median(times), "mean_us": statistics.fmean(times)}


def _row(args: argparse.Namespace) -> None:
    print(json.dumps(asyncio.run(_measure(args.row, args.url, args.posts))))


def _start_model() -> tuple[subprocess.Popen[str], str]:
    proc = subprocess.Popen([sys.executable, str(HERE / "model_server.py")], stdout=subprocess.PIPE, text=True)
    assert proc.stdout is not None
    return proc, f"http://127.0.0.1:{int(proc.stdout.readline())}/v1/chat/completions"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--base", help="another checkout's src/ directory: adds its Http11Transport as a row")
    parser.add_argument("--rounds", type=int, default=10)
    parser.add_argument("--posts", type=int, default=2000)
    parser.add_argument("--row", help=argparse.SUPPRESS)
    parser.add_argument("--url", help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.row:
        _row(args)
        return
    clean = {k: v for k, v in os.environ.items() if k != "PYTHONPATH"}
    rows: list[tuple[str, str, dict[str, str]]] = [("Http11Transport (this checkout)", "http11", clean),
                                                   ("HttpxTransport", "httpx", clean)]
    if args.base:
        rows.append((f"Http11Transport ({args.base})", "http11", {**clean, "PYTHONPATH": args.base}))
    server, url = _start_model()
    results: dict[str, list[dict[str, Any]]] = {label: [] for label, _, _ in rows}
    try:
        for n in range(args.rounds):
            order = rows[n % len(rows):] + rows[: n % len(rows)]
            for label, kind, env in order:
                out = subprocess.run([sys.executable, __file__, "--row", kind, "--url", url, "--posts",
                                     str(args.posts)],
                                     env=env, capture_output=True, text=True, check=True)
                results[label].append(json.loads(out.stdout))
    finally:
        server.kill()
        server.wait()
    table = {label: {key: statistics.median(r[key] for r in runs) for key in ("p50_us", "mean_us")}
             for label, runs in results.items()}
    first = table[rows[0][0]]["p50_us"]
    print(f"{args.rounds} rounds x {args.posts} POSTs, medians over rounds")
    print(f"{'row':<60} {'p50':>9} {'mean':>9} {'x first':>8}")
    for label, row in table.items():
        print(f"{label:<60} {row['p50_us']:7.1f}us {row['mean_us']:7.1f}us {row['p50_us'] / first:7.2f}x")
    out_dir = HERE / "results"
    out_dir.mkdir(exist_ok=True)
    (out_dir / "transport.json").write_text(json.dumps({"rounds": args.rounds, "posts": args.posts, "table": table,
                                                        "raw": results}, indent=1) + "\n")


if __name__ == "__main__":
    main()
