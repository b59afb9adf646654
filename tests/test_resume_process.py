"""Resume in a fresh process (suspension.md §10 beyond #1, #4, #11; issue #4 acceptance).

Each step of `examples/client_resume.py` is a real child process (the venv's python) with a
fresh `Client`; only JSON files connect them. The model is the loopback LLM server running in
this test process, so what the provider received is observed on the wire.
"""

from __future__ import annotations

import asyncio
import json
import re
import sys
from pathlib import Path

import pytest

from support.llm_server import Json, LlmServer, openai_calls, openai_text, unbalanced_turns

EXAMPLE = Path(__file__).resolve().parent.parent / "examples" / "client_resume.py"


async def python(*args: str) -> str:
    proc = await asyncio.create_subprocess_exec(sys.executable, *args, stdout=asyncio.subprocess.PIPE,
                                                stderr=asyncio.subprocess.PIPE)
    out, err = await asyncio.wait_for(proc.communicate(), timeout=60)
    assert proc.returncode == 0, err.decode()
    return out.decode().strip()


@pytest.mark.parametrize("mode", ["run", "ask"])
async def test_a_pending_run_resumes_to_done_in_fresh_processes_and_the_provider_sees_balanced_turns(tmp_path, mode):
    with LlmServer() as server:
        server.add(Json(openai_calls(("c1", "lookup_order", {"order": "42"}), ("c2", "refund", {"order": "42"}))),
                   Json(openai_text("Refunded $40 on order 42.")))
        base = ["--base-url", server.base_url, "--mode", mode]
        step1 = await python(str(EXAMPLE), "start", str(tmp_path), *base)
        request1 = json.loads((tmp_path / "pending.json").read_text())
        step2 = await python(str(EXAMPLE), "answer", str(tmp_path), *base)
        request2 = json.loads((tmp_path / "pending.json").read_text())
        requests_after_step2 = len(server.requests)
        step3 = await python(str(EXAMPLE), "answer", str(tmp_path), *base)
        bodies = [r.json for r in server.requests]

    assert step1 == "halted: tool_call: relay tool call lookup_order to the caller for execution"
    assert list(request1) == ["id", "kind", "prompt", "url", "data", "expiresAt"]
    assert request1["data"]["calls"] == [{"id": "c1", "name": "lookup_order", "input": {"order": "42"},
                                          "arguments": '{"order": "42"}'}]
    # the second process answered the relay call; `refund` then halted on its own request
    assert step2 == "halted: input: How much should be refunded on order 42?"
    assert request2["id"] != request1["id"] and request2["data"]["schema"]["required"] == ["amount"]
    assert requests_after_step2 == 1  # a repeat halt makes no LLM call
    assert step3 == "done: Refunded $40 on order 42."
    assert not (tmp_path / "pending.json").exists()

    assert len(bodies) == 2
    first, last = bodies[0]["messages"], bodies[1]["messages"]
    assert first == [{"role": "user", "content": "Refund order 42, please."}]
    assert unbalanced_turns(last) == []
    assert [m["role"] for m in last] == ["user", "assistant", "tool", "tool"]  # no new user turn
    assert [m["content"] for m in last[2:]] == ["order 42: paid $40 by card", "refunded $40 on order 42"]
    stored = json.loads((tmp_path / ("conversations.json" if mode == "ask" else "transcript.json")).read_text())
    transcript = stored["order-42"] if mode == "ask" else stored
    assert transcript == last + [{"role": "assistant", "content": "Refunded $40 on order 42."}]


async def test_the_resume_example_runs_standalone_and_prints_ok():
    out = await python(str(EXAMPLE))
    lines = out.splitlines()
    assert lines[-1] == "ok: 3 processes, 2 answers -> Refunded $40 on order 42.", out


async def test_request_ids_minted_in_two_fresh_processes_do_not_share_a_counter():
    code = "from toolnexus import pending; print(pending(kind='input', prompt='p').metadata['pending'].id)"
    ids = await asyncio.gather(python("-c", code), python("-c", code))
    assert all(re.fullmatch(r"pnd-[0-9a-f]+-\d+", i) for i in ids), ids
    counters = [int(i.rsplit("-", 1)[1]) for i in ids]
    assert counters[0] != counters[1] and counters != [1, 1]
