"""Run the official MCP conformance suite's server scenarios against a toolkit served by toolnexus.

What it does, the way a user would: starts `toolnexus serve --mcp --no-builtins --tools-from
mcp_app:ITEMS --addr 127.0.0.1:0` as a real subprocess (the fixtures are in `mcp_app.py`, next to
this file), runs every server scenario of the pinned suite (`conformance server --suite all`,
from `conformance/node_modules`, installed by `make conformance` with its own Node 22), and writes

- `conformance/results/mcp_server.json`: every scenario with its verdict and checks;
- `conformance/results/mcp_server.md`: the same as a table.

A scenario *passes* when none of its checks is a FAILURE or a WARNING. The exit status is 1 when
fewer scenarios pass than `RECORDED_PASSES` (the figure docs/conformance.md records), or when a
scenario in `EXPECTED_TO_PASS` does not; 2 when the suite or the server cannot be run at all.
"""

from __future__ import annotations

import datetime
import json
import os
import re
import selectors
import shutil
import signal
import subprocess
import sys
import tempfile
from pathlib import Path
from typing import Any

HERE = Path(__file__).resolve().parent
BIN = HERE / "node_modules" / ".bin"
RESULTS = HERE / "results"
# Every server scenario of @modelcontextprotocol/conformance 0.1.16 passes (no failure, no warning).
EXPECTED_TO_PASS: frozenset[str] = frozenset("""
    server-initialize logging-set-level ping completion-complete tools-list tools-call-simple-text
    tools-call-image tools-call-audio tools-call-embedded-resource tools-call-mixed-content
    tools-call-with-logging tools-call-error tools-call-with-progress tools-call-sampling
    tools-call-elicitation json-schema-2020-12 elicitation-sep1034-defaults server-sse-polling
    server-sse-multiple-streams elicitation-sep1330-enums resources-list resources-read-text
    resources-read-binary resources-templates-read resources-subscribe resources-unsubscribe prompts-list
    prompts-get-simple prompts-get-with-args prompts-get-embedded-resource prompts-get-with-image
    dns-rebinding-protection
""".split())
RECORDED_PASSES = len(EXPECTED_TO_PASS)  # 32 of 32
SERVER_START_TIMEOUT = 60.0
SUITE_TIMEOUT = 900.0
_DIR = re.compile(r"^server-(.+)-\d{4}-\d{2}-\d{2}T[\d-]+Z$")


def _suite_version() -> str:
    package = HERE / "node_modules" / "@modelcontextprotocol" / "conformance" / "package.json"
    try:
        return str(json.loads(package.read_text())["version"])
    except (OSError, ValueError, KeyError):
        return "unknown"


def _start_server(errlog: Any) -> tuple[subprocess.Popen[str], str]:
    """`toolnexus serve` on an ephemeral port; its stderr goes to `errlog`; returns it and its /mcp URL."""
    env = {**os.environ, "PYTHONPATH": os.pathsep.join(filter(None, [str(HERE), os.environ.get("PYTHONPATH")]))}
    cmd = [sys.executable, "-m", "toolnexus", "serve", "--mcp", "--no-builtins", "--tools-from", "mcp_app:ITEMS",
           "--addr", "127.0.0.1:0"]
    proc = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=errlog, text=True, env=env, cwd=HERE)
    assert proc.stdout is not None
    with selectors.DefaultSelector() as sel:
        sel.register(proc.stdout, selectors.EVENT_READ)
        ready = sel.select(SERVER_START_TIMEOUT)
    line = proc.stdout.readline().strip() if ready else ""
    if not line.startswith("http"):
        _stop(proc)
        errlog.seek(0)
        raise SystemExit(f"mcp_server: the served toolkit did not start ({line!r}):\n{errlog.read()}")
    return proc, line + "/mcp"


def _stop(proc: subprocess.Popen[str]) -> None:
    if proc.poll() is None:
        proc.send_signal(signal.SIGTERM)
        try:
            proc.wait(timeout=10)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()


def _run_suite(url: str, out: Path) -> str:
    tool = BIN / "conformance"
    if not tool.exists():
        raise SystemExit(f"mcp_server: {tool} is missing — run `make conformance` (it runs npm ci in conformance/)")
    env = {**os.environ, "PATH": os.pathsep.join([str(BIN), os.environ.get("PATH", "")])}
    done = subprocess.run([str(tool), "server", "--suite", "all", "--url", url, "-o", str(out)], env=env,
                          capture_output=True, text=True, timeout=SUITE_TIMEOUT)
    return done.stdout + done.stderr


def _verdicts(out: Path) -> dict[str, dict[str, Any]]:
    verdicts: dict[str, dict[str, Any]] = {}
    for folder in sorted(out.iterdir()):
        m = _DIR.match(folder.name)
        if not m or not (folder / "checks.json").exists():
            continue
        checks = json.loads((folder / "checks.json").read_text())
        counts = {status: sum(1 for c in checks if c.get("status") == status)
                  for status in ("SUCCESS", "FAILURE", "WARNING", "INFO")}
        problems = [{"id": c.get("id"), "status": c.get("status"), "message": c.get("errorMessage")}
                    for c in checks if c.get("status") in ("FAILURE", "WARNING")]
        verdict = "fail" if counts["FAILURE"] else "warning" if counts["WARNING"] else "pass"
        verdicts[m.group(1)] = {"verdict": verdict, "checks": counts, "problems": problems}
    return verdicts


def _markdown(report: dict[str, Any]) -> str:
    lines = [
        "# MCP conformance: server scenarios against a served toolkit",
        "",
        f"Suite `@modelcontextprotocol/conformance` {report['suite_version']}, run {report['date']} "
        f"(`make conformance`). Passed: **{report['passed']} of {report['scenarios']}** "
        f"({report['warnings']} with warnings, {report['failed']} failed).",
        "",
        "| scenario | verdict | checks passed | failures | warnings |",
        "|---|---|---|---|---|",
    ]
    for name, v in report["results"].items():
        c = v["checks"]
        lines.append(f"| {name} | {v['verdict']} | {c['SUCCESS']} | {c['FAILURE']} | {c['WARNING']} |")
    return "\n".join(lines) + "\n"


def main() -> int:
    out = Path(tempfile.mkdtemp(prefix="mcp-conformance-"))
    with tempfile.TemporaryFile("w+") as errlog:
        proc, url = _start_server(errlog)
        try:
            log = _run_suite(url, out)
        finally:
            _stop(proc)
    try:
        results = _verdicts(out)
    finally:
        shutil.rmtree(out, ignore_errors=True)
    if not results:
        print(log, file=sys.stderr)
        print("mcp_server: the suite produced no results", file=sys.stderr)
        return 2
    passed = [n for n, v in results.items() if v["verdict"] == "pass"]
    report = {
        "suite": "@modelcontextprotocol/conformance",
        "suite_version": _suite_version(),
        "date": datetime.date.today().isoformat(),
        "server": "toolnexus serve --mcp --no-builtins --tools-from mcp_app:ITEMS",
        "scenarios": len(results),
        "passed": len(passed),
        "warnings": sum(1 for v in results.values() if v["verdict"] == "warning"),
        "failed": sum(1 for v in results.values() if v["verdict"] == "fail"),
        "recorded_passes": RECORDED_PASSES,
        "results": results,
    }
    RESULTS.mkdir(exist_ok=True)
    (RESULTS / "mcp_server.json").write_text(json.dumps(report, indent=2) + "\n")
    (RESULTS / "mcp_server.md").write_text(_markdown(report))
    print(f"MCP server conformance: {len(passed)} of {len(results)} scenarios pass "
          f"({report['warnings']} with warnings, {report['failed']} failed) — {RESULTS / 'mcp_server.json'}")
    for name, v in results.items():
        if v["verdict"] != "pass":
            print(f"  {v['verdict']}: {name}: " + "; ".join(f"{p['id']}: {p['message']}" for p in v["problems"]))
    regressed = sorted(EXPECTED_TO_PASS - set(passed))
    if len(passed) < RECORDED_PASSES or regressed:
        print(f"mcp_server: REGRESSION — {len(passed)} pass, {RECORDED_PASSES} recorded"
              + (f"; no longer passing: {', '.join(regressed)}" if regressed else ""), file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
