"""The MCP conformance suite's client scenarios against our client (`make conformance` runs this).

Runs every client scenario of the pinned suite (`conformance/package.json`:
`@modelcontextprotocol/conformance`, with its own Node 22) — the 4 core ones and every `auth/*`
one — one at a time, each against `conformance/mcp_client_program.py` (toolnexus's MCP client as a
host uses it). Writes `conformance/results/mcp_client.json` (per scenario: passed or not, the
suite's check counts) and `conformance/results/mcp_client.md` (the summary the docs link), and
exits 1 when fewer scenarios pass than `RECORDED` says (a regression), 0 otherwise.

`--reference FILE` runs the same scenarios against another client program too — the Python SDK's
own conformance client (`.github/actions/conformance/client.py` of modelcontextprotocol/python-sdk,
from a fetched copy: never copied here) — and records its figures beside ours. `--scenario NAME`
(repeatable) runs only those.
"""

from __future__ import annotations

import argparse
import json
import os
import re
import shlex
import subprocess
import sys
import tempfile
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent
SUITE = "@modelcontextprotocol/conformance@0.1.16"
CORE = ["initialize", "tools_call", "elicitation-sep1034-client-defaults", "sse-retry"]
RECORDED = {"core": 4, "auth": 21}  # what our client passes today; fewer fails the run
PROGRAM = HERE / "mcp_client_program.py"
RESULTS = HERE / "results"
_COUNTS = re.compile(r"Passed: (\d+)/(\d+), (\d+) failed, (\d+) warnings")


def _env() -> dict[str, str]:
    env = dict(os.environ)
    env["PATH"] = f"{HERE / 'node_modules' / '.bin'}{os.pathsep}{env.get('PATH', '')}"
    env.setdefault("NO_COLOR", "1")
    return env


def _suite(*args: str, timeout: float = 120) -> subprocess.CompletedProcess[str]:
    return subprocess.run(["conformance", *args], cwd=HERE, env=_env(), capture_output=True, text=True, timeout=timeout)


def auth_scenarios() -> list[str]:
    listed = _suite("list", "--client").stdout
    return sorted(set(re.findall(r"auth/[a-z0-9-]+", listed)), key=listed.index)


def run_scenario(command: str, scenario: str, out: Path) -> dict[str, object]:
    started = time.monotonic()
    done = _suite("client", "--command", command, "--scenario", scenario, "--timeout", "60000", "-o", str(out),
                  timeout=180)
    text = done.stdout + done.stderr
    found = _COUNTS.search(text)
    passed, total, failed, warnings = (int(g) for g in found.groups()) if found else (0, 0, 0, 0)
    return {"passed": done.returncode == 0, "checks_passed": passed, "checks": total, "failed": failed,
            "warnings": warnings, "seconds": round(time.monotonic() - started, 1)}


def run_all(command: str, scenarios: list[str], label: str) -> dict[str, dict[str, object]]:
    results: dict[str, dict[str, object]] = {}
    with tempfile.TemporaryDirectory(prefix="mcp-client-conformance-") as out:
        for scenario in scenarios:
            results[scenario] = run_scenario(command, scenario, Path(out))
            mark = "pass" if results[scenario]["passed"] else "FAIL"
            print(f"{label:9} {mark} {scenario} ({results[scenario]['checks_passed']}/{results[scenario]['checks']})",
                  flush=True)
    return results


def figures(results: dict[str, dict[str, object]]) -> dict[str, int]:
    core = sum(1 for s in CORE if results.get(s, {}).get("passed"))
    auth = sum(1 for s, r in results.items() if s.startswith("auth/") and r["passed"])
    return {"core": core, "core_total": sum(1 for s in CORE if s in results), "auth": auth,
            "auth_total": sum(1 for s in results if s.startswith("auth/"))}


def markdown(ours: dict[str, dict[str, object]], reference: dict[str, dict[str, object]] | None) -> str:
    mine = figures(ours)
    lines = [f"# MCP client conformance ({SUITE})", "",
             f"toolnexus: core {mine['core']}/{mine['core_total']}, auth {mine['auth']}/{mine['auth_total']}"]
    if reference:
        theirs = figures(reference)
        lines.append(f"Python SDK reference client: core {theirs['core']}/{theirs['core_total']}, "
                     f"auth {theirs['auth']}/{theirs['auth_total']}")
    lines += ["", "| scenario | toolnexus | checks |" + (" reference |" if reference else ""),
              "|---|---|---|" + ("---|" if reference else "")]
    for scenario, result in ours.items():
        row = (f"| {scenario} | {'pass' if result['passed'] else 'fail'} | "
               f"{result['checks_passed']}/{result['checks']} |")
        if reference:
            other = reference.get(scenario)
            row += f" {'pass' if other and other['passed'] else 'fail'} |"
        lines.append(row)
    return "\n".join(lines) + "\n"


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--reference", help="also run this client program (the Python SDK's conformance client)")
    parser.add_argument("--scenario", action="append", help="run only this scenario (repeatable)")
    args = parser.parse_args()
    scenarios = args.scenario or [*CORE, *auth_scenarios()]
    ours = run_all(f"{shlex.quote(sys.executable)} {shlex.quote(str(PROGRAM))}", scenarios, "toolnexus")
    reference = None
    if args.reference:
        reference = run_all(f"{shlex.quote(sys.executable)} {shlex.quote(args.reference)}", scenarios, "reference")
    RESULTS.mkdir(exist_ok=True)
    record = {"suite": SUITE, "client": "toolnexus", "figures": figures(ours), "recorded": RECORDED,
              "scenarios": ours}
    if reference is not None:
        record["reference"] = {"client": "python-sdk conformance client", "figures": figures(reference),
                               "scenarios": reference}
    (RESULTS / "mcp_client.json").write_text(json.dumps(record, indent=2) + "\n")
    (RESULTS / "mcp_client.md").write_text(markdown(ours, reference))
    got = figures(ours)
    print(f"toolnexus: core {got['core']}/{got['core_total']}, auth {got['auth']}/{got['auth_total']}")
    if args.scenario:
        return 0 if all(r["passed"] for r in ours.values()) else 1
    if got["core"] < RECORDED["core"] or got["auth"] < RECORDED["auth"]:
        print(f"below the recorded figures (core {RECORDED['core']}, auth {RECORDED['auth']})", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
