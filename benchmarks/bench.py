"""`make bench`: what toolnexus adds to one agent run, measured against a floor, side by side.

The scenario: one run asks "What's the weather in Paris and what is 2+2?"; the model server
(`model_server.py`, its own process, keep-alive HTTP/1.1) answers with two parallel tool calls,
the framework runs them over one persistent stdio MCP session (`tools_server.py`), and the second
model call returns the final text. 2 LLM round trips + 2 MCP calls per run.

Rows (each a fresh process per round; `rows/`):
- `floor` — no framework: one keep-alive socket, raw JSON-RPC;
- `ours` (OpenAI wire) and `ours anthropic` — this checkout, `client.run(question, toolkit)`;
- `base` — with `BENCH_BASE_SRC=<another checkout's src/>`, that code on this venv (before/after;
  compare p50 and p95 only: an A/A run showed that row's import and start-up higher through
  `PYTHONPATH` alone, its p50 within 3%);
- `toolnexus 0.21.0` — the published release, when its venv exists (`$BENCH_VENVS/toolnexus-0.21.0`,
  built by the reference harness's `setup_venvs.sh`), running the same row script;
- with `PEERS=1`: openai-agents, pydantic-ai and langgraph, through the reference harness in
  `../shared/bench` (their runners there do the same work in their own venvs), merged in.

Each row runs `BENCH_RUNS` (30) measured runs after `BENCH_WARMUP` (3) warm-ups per round, over
`BENCH_ROUNDS` (10) rounds in rotated order; the table shows medians over rounds of p50, p95,
p50 − floor (the framework's own cost per run), `import toolnexus`, start-up (import + toolkit with
the MCP server + client) and peak RSS. JSON goes to `benchmarks/results/bench-<date>.json` and
`benchmarks/results/latest.json`.
"""

from __future__ import annotations

import json
import os
import platform
import statistics
import subprocess
import sys
import time
from pathlib import Path
from typing import Any, Optional

HERE = Path(__file__).resolve().parent
ROOT = HERE.parent
VENVS = Path(os.environ.get("BENCH_VENVS", "/tmp/bench-venvs"))
SHARED = ROOT.parent / "shared" / "bench"


def _rows() -> list[tuple[str, list[str], dict[str, str]]]:
    ours = str(ROOT / ".venv" / "bin" / "python")
    rows = [("floor", [ours, str(HERE / "rows" / "floor.py")], {}),
            ("ours", [ours, str(HERE / "rows" / "toolnexus_row.py")], {"BENCH_LABEL": "ours"}),
            ("ours anthropic", [ours, str(HERE / "rows" / "toolnexus_row.py")],
             {"BENCH_LABEL": "ours anthropic", "BENCH_STYLE": "anthropic"})]
    base = os.environ.get("BENCH_BASE_SRC")  # another checkout's src/: a before/after in one run
    if base:
        rows.append(("base", [ours, str(HERE / "rows" / "toolnexus_row.py")],
                     {"BENCH_LABEL": "base", "PYTHONPATH": base}))
    old = VENVS / "toolnexus-0.21.0" / "bin" / "python"
    if old.exists():
        rows.append(("toolnexus 0.21.0", [str(old), str(HERE / "rows" / "toolnexus_row.py")],
                     {"BENCH_LABEL": "toolnexus 0.21.0"}))
    return rows


def _start_model() -> tuple[subprocess.Popen[str], str]:
    proc = subprocess.Popen([sys.executable, str(HERE / "model_server.py")], stdout=subprocess.PIPE, text=True)
    assert proc.stdout is not None
    return proc, f"http://127.0.0.1:{int(proc.stdout.readline())}"


def _run_row(cmd: list[str], env: dict[str, str], url: str) -> Optional[dict[str, Any]]:
    full = {**os.environ, **env, "MODEL_URL": url}
    done = subprocess.run(cmd, capture_output=True, text=True, env=full, timeout=300, cwd=HERE / "rows")
    try:
        return json.loads(done.stdout.strip().splitlines()[-1])
    except (IndexError, ValueError):
        sys.stderr.write(f"row {cmd[-1]} failed ({done.returncode}): {done.stderr[-1500:]}\n")
        return None


def _median(values: list[float]) -> float:
    return round(statistics.median(values), 3) if values else float("nan")


def run(rounds: int) -> dict[str, Any]:
    rows = _rows()
    samples: dict[str, list[dict[str, Any]]] = {name: [] for name, _, _ in rows}
    model, url = _start_model()
    try:
        for n in range(rounds):
            order = rows[n % len(rows):] + rows[: n % len(rows)]
            for name, cmd, env in order:
                result = _run_row(cmd, env, url)
                if result is not None:
                    samples[name].append(result)
            print(f"round {n + 1}/{rounds} done", file=sys.stderr, flush=True)
    finally:
        model.terminate()
        model.wait()
    table: dict[str, Any] = {}
    for name, results in samples.items():
        if not results:
            table[name] = {"error": "no successful round"}
            continue
        table[name] = {key: _median([r[key] for r in results]) for key in
                       ("p50_ms", "p95_ms", "mean_ms", "import_ms", "init_ms", "peak_rss_mb")}
        table[name].update(version=results[0]["version"], rounds=len(results), ok=all(r["ok"] for r in results),
                           p50_range_ms=[min(r["p50_ms"] for r in results), max(r["p50_ms"] for r in results)])
    floor = table.get("floor", {}).get("p50_ms")
    for row in table.values():
        if "p50_ms" in row and floor is not None:
            row["over_floor_ms"] = round(row["p50_ms"] - floor, 3)
    base = table.get("toolnexus 0.21.0")
    if base and "p50_ms" in base:
        for name, row in table.items():
            if "p50_ms" in row and name != "floor":
                row["over_floor_x_021"] = round(row["over_floor_ms"] / base["over_floor_ms"], 3)
                row["import_x_021"] = round(row["import_ms"] / base["import_ms"], 3) if base["import_ms"] else None
                row["init_x_021"] = round(row["init_ms"] / base["init_ms"], 3)
                row["rss_x_021"] = round(row["peak_rss_mb"] / base["peak_rss_mb"], 3)
    return table


def peers(rounds: int) -> Optional[dict[str, Any]]:
    """The peer rows through the reference harness (`../shared/bench`), when it is there."""
    if not (SHARED / "run.py").exists():
        print("PEERS=1: the reference harness ../shared/bench is not here; peer rows skipped", file=sys.stderr)
        return None
    out = HERE / "results" / "peers-raw.json"
    env = {**os.environ, "OURS_PY": str(ROOT / ".venv"), "OURS_LABEL": "ours", "BENCH_ROUNDS": str(rounds)}
    subprocess.run([sys.executable, str(SHARED / "run.py"), "--json", str(out)], env=env, cwd=SHARED, check=False)
    return json.loads(out.read_text()) if out.exists() else None


PEER_NAMES = ("openai-agents", "pydantic-ai", "langgraph")


def peer_table(peers: dict[str, Any]) -> dict[str, Any]:
    """The reference harness's rows (its own floor and runners), with each row's cost over that
    floor and as a fraction of the fastest peer's."""
    rows = {r["framework"]: r for r in peers.get("summary") or [] if not r.get("errors")}
    floor = next((r["p50"] for name, r in rows.items() if name.startswith("floor")), None)
    table: dict[str, Any] = {}
    for name, r in rows.items():
        table[name] = {
            "p50_ms": round(r["p50"], 3),
            "p95_ms": round(r["p95"], 3),
            "import_ms": round(r["import_ms"], 1),
            "init_ms": round(r["init_ms"], 1),
            "peak_rss_mb": round(r["peak_rss_mb"], 1),
            "version": r.get("version"),
            "over_floor_ms": round(r["p50"] - floor, 3) if floor is not None else None,
        }
    fastest = min((table[n]["over_floor_ms"] for n in PEER_NAMES if n in table), default=None)
    for row in table.values():
        if fastest and row["over_floor_ms"] is not None:
            row["x_fastest_peer"] = round(row["over_floor_ms"] / fastest, 3)
    return table


def print_peer_table(table: dict[str, Any]) -> None:
    print("\nreference harness (../shared/bench), same machine, same scenario:\n")
    print(f"{'framework':<22}{'p50 ms':>9}{'p95 ms':>9}{'- floor':>9}{'x fastest peer':>16}{'import ms':>11}"
          f"{'start ms':>10}{'RSS MB':>8}")
    for name, row in table.items():
        print(f"{name:<22}{row['p50_ms']:>9}{row['p95_ms']:>9}{row['over_floor_ms']:>9}"
              f"{row.get('x_fastest_peer', '-'):>16}{row['import_ms']:>11}{row['init_ms']:>10}{row['peak_rss_mb']:>8}")


def main() -> None:
    rounds = int(os.environ.get("BENCH_ROUNDS", 10))
    table = run(rounds)
    result: dict[str, Any] = {
        "date": time.strftime("%Y-%m-%d %H:%M UTC", time.gmtime()),
        "machine": f"{platform.machine()}, {os.cpu_count()} cores, {platform.system()} {platform.release()}",
        "python": platform.python_version(),
        "scenario": "2 LLM round trips (loopback keep-alive model server) + 2 parallel MCP tool calls (stdio) per run",
        "settings": {"runs": int(os.environ.get("BENCH_RUNS", 30)), "warmup": int(os.environ.get("BENCH_WARMUP", 3)),
                     "rounds": rounds},
        "rows": table,
    }
    if os.environ.get("PEERS") == "1":
        result["peers"] = peers(rounds)
    print(f"\n{result['scenario']}\n{result['machine']}, Python {result['python']}, {rounds} rounds\n")
    head = (f"{'row':<18}{'p50 ms':>9}{'p95 ms':>9}{'- floor':>9}{'x 0.21':>8}"
            f"{'import ms':>11}{'start ms':>10}{'RSS MB':>8}")
    print(head)
    for name, row in table.items():
        if "error" in row:
            print(f"{name:<18}  {row['error']}")
            continue
        print(f"{name:<18}{row['p50_ms']:>9}{row['p95_ms']:>9}{row.get('over_floor_ms', 0):>9}"
              f"{row.get('over_floor_x_021', '-'):>8}{row['import_ms']:>11}{row['init_ms']:>10}{row['peak_rss_mb']:>8}")
    if result.get("peers"):
        result["peer_table"] = peer_table(result["peers"])
        print_peer_table(result["peer_table"])
    folder = HERE / "results"
    folder.mkdir(exist_ok=True)
    stamp = time.strftime("%Y-%m-%d-%H%M", time.gmtime())
    for path in (folder / f"bench-{stamp}.json", folder / "latest.json"):
        path.write_text(json.dumps(result, indent=2) + "\n")
    print(f"\nwritten to benchmarks/results/bench-{stamp}.json and latest.json")
    if not all(row.get("ok", False) for row in table.values() if "error" not in row):
        sys.exit(1)


if __name__ == "__main__":
    main()
