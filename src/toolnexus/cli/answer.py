"""`toolnexus answer --store URL --id ID (--ok|--decline) --agents MODULE:ATTR ...`: answer one
waiting request and let its run continue.

The run is restored from the store in this process with the agent definitions `--agents` names
(an `Agent`, a list of them, `AgentDef`s or a registry dict: the code; the store holds only
state), the answer is applied exactly once, and the run goes on until it finishes or waits again.
`--data JSON` is the answer's data (an object; e.g. `{"amount": 40}`); `--reason` the reason of
a decline. The model flags say where the agents' LLM is (`--model` is what agents without a
model of their own use).

stdout: the entry agent's final text (`--json`: `{"status", "text", "run_id", "turns",
"total_tokens", "pending"}`). Exit 0 when the run finished; 3 when it now waits on another
request (its prompt is printed, `status: pending` on stderr) or ended incomplete; 4 when the
request was already answered or withdrawn (nothing applied); 2 for a malformed flag or an answer
the request refuses (its schema); 1 for anything else (an unknown request id, a store that is
down, a run another live process holds).
"""

from __future__ import annotations

import asyncio
import dataclasses
import json
from typing import Any

from .common import Console, CliExit, load_object, require_key
from .flags import Flag
from .inbox import EXIT_ALREADY_ANSWERED, EXIT_WAITING, RUN_STORE_FLAG, open_run_store

NAME = "answer"
SUMMARY = "answer one waiting request of a durable run and let the run continue"
FLAGS = [
    RUN_STORE_FLAG,
    Flag("id", "REQUEST_ID", "the request to answer (see toolnexus pending)"),
    Flag("ok", None, "approve / answer yes"),
    Flag("decline", None, "decline the request"),
    Flag("data", "JSON", "the answer's data, a JSON object"),
    Flag("reason", "TEXT", "with --decline: declined (default), cancelled or expired",
         choices=("declined", "cancelled", "expired")),
    Flag("agents", "MODULE:ATTR", "the agent definitions the run was started with"),
    Flag("base-url", "URL", "the LLM endpoint's base URL"),
    Flag("style", "openai|anthropic", "the endpoint's API style (default openai)", choices=("openai", "anthropic"),
         default="openai"),
    Flag("model", "ID", "the model for agents that do not name their own"),
    Flag("api-key", "KEY", "API key; else OPENROUTER_API_KEY, then OPENAI_API_KEY or ANTHROPIC_API_KEY by style"),
    Flag("json", None, "print the result as one JSON object"),
]


def _answer(opts: dict[str, Any]) -> Any:
    from ..types import Answer

    if not opts.get("id"):
        raise CliExit(2, "error: --id REQUEST_ID is required (toolnexus pending lists them)")
    if bool(opts.get("ok")) == bool(opts.get("decline")):
        raise CliExit(2, "error: pass exactly one of --ok and --decline")
    data = None
    if opts.get("data") is not None:
        try:
            data = json.loads(opts["data"])
        except ValueError as exc:
            raise CliExit(2, f"error: --data is not valid JSON: {exc}") from None
        if not isinstance(data, dict):
            raise CliExit(2, f"error: --data must be a JSON object, got {type(data).__name__}")
    if opts.get("ok"):
        return Answer(id=opts["id"], ok=True, data=data)
    return Answer(id=opts["id"], ok=False, data=data, reason=opts.get("reason") or "declined")


def _agents(opts: dict[str, Any]) -> Any:
    spec = opts.get("agents")
    if not spec:
        raise CliExit(2, "error: --agents MODULE:ATTR is required (the agent definitions the run was started with)")
    try:
        return load_object(spec)
    except ValueError as exc:
        raise CliExit(2, "error: " + str(exc).replace("--tools-from", "--agents")) from None


def _llm(opts: dict[str, Any], console: Console) -> dict[str, Any]:
    if not opts.get("base_url"):
        raise CliExit(2, "error: --base-url is required (where the agents' LLM is)")
    llm = {"base_url": opts["base_url"], "style": opts.get("style") or "openai", "api_key": require_key(opts, console)}
    if opts.get("model"):
        llm["model"] = opts["model"]
    return llm


async def execute(opts: dict[str, Any], console: Console) -> int:
    from ..agents import resume
    from ..client import ResumeError
    from ..durable import AnswerAlreadyApplied, RequestWithdrawn

    answer = _answer(opts)
    agents = _agents(opts)
    llm = _llm(opts, console)
    store = open_run_store(opts)
    try:
        async with store:
            final = await resume(store, answer, agents=agents, llm=llm)
    except asyncio.CancelledError:  # Ctrl-C: the run was handed back as it was, not recorded as interrupted
        console.err("interrupted: the run was handed back as it was (status running); continue it with toolnexus "
                    "resume RUN (toolnexus runs lists it), or let a worker do it")
        raise
    except (AnswerAlreadyApplied, RequestWithdrawn) as exc:
        console.err(f"error: {exc}")
        return EXIT_ALREADY_ANSWERED
    except ResumeError as exc:
        code = 2 if "schema" in str(exc) else 1
        console.err(f"error: {exc}")
        return code
    if opts.get("json"):
        console.out(json.dumps({"status": final.status, "text": final.text, "run_id": final.run_id,
                                "turns": final.turns, "total_tokens": final.total_tokens,
                                "pending": dataclasses.asdict(final.pending) if final.pending else None}))
    else:
        console.out(final.text)
        if final.status != "done":
            console.err(f"status: {final.status}")
    return 0 if final.status == "done" else EXIT_WAITING
