"""The founding page's three `AgentRuntime.resume` examples, copied verbatim into `examples/`,
run as real subprocesses and must exit 0 printing their `ok:` line."""

from __future__ import annotations

import asyncio
import sys
from pathlib import Path

import pytest

EXAMPLES = Path(__file__).resolve().parent.parent / "examples"
SEEDS = sorted(EXAMPLES.glob("seed_*.py"))


def test_all_three_seed_examples_are_present():
    assert [p.name for p in SEEDS] == [
        "seed_1_suspend_resume.py",
        "seed_2_json_roundtrip.py",
        "seed_3_counters_grow.py",
    ]


@pytest.mark.parametrize("example", SEEDS, ids=lambda p: p.stem)
async def test_seed_example_runs_and_prints_ok(example: Path):
    proc = await asyncio.create_subprocess_exec(
        sys.executable, str(example), stdout=asyncio.subprocess.PIPE, stderr=asyncio.subprocess.PIPE
    )
    out, err = await asyncio.wait_for(proc.communicate(), timeout=60)
    assert proc.returncode == 0, err.decode()
    lines = out.decode().splitlines()
    assert lines and lines[-1].startswith("ok:"), out.decode()


def test_seed_examples_match_the_founding_page_verbatim():
    from support.shared import SEED_PAGE

    text = SEED_PAGE.read_text(encoding="utf-8")
    for example in SEEDS:
        assert example.read_text(encoding="utf-8") in text, example.name
