"""`toolnexus answer ID (--approve | --reject [--message TEXT] | --edit JSON) [--always] ...`:
answer one waiting request and let its run continue.

The decision: `--approve` (the call runs), `--edit '{...}'` (it runs with these arguments instead,
checked against the tool's input schema first), `--reject` (it does not run; `--message` tells
the model why), `--always` (the same for this tool for the rest of the run). `--by NAME` says who
answers (default: the login name; a two-person rule needs two different ones). A request made
for a group (`ApprovalRule(group=...)`) is answered only by a member: `--groups-file PATH` (a JSON
object `{group: [identity, ...]}`, as for `toolnexus inbox`) and `--admin NAME` say who is in
which group, and without them nobody is, so such a request is refused (exit 2, saying which
group it is for) before anything is loaded. The older
`--ok` / `--decline [--reason]` with `--data JSON` answer any request (`--data` is the answer's
data, e.g. `{"amount": 40}`; `NaN` and `Infinity` are not JSON numbers and are refused). The
request id may come first or as `--id`.

Where the run is: an agent run is restored from the store with the agent definitions `--agents`
names (an `Agent`, a list of them, `AgentDef`s or a registry dict: the code; the store holds only
state) and the model flags (`--model` is what agents without a model of their own use); a run
that `toolnexus run --once --store URL` parked is resumed with the toolkit and model flags it ran
with (kept in the store, never the key), which flags given here override. Either way the answer
is applied exactly once and the run goes on until it finishes or waits again.

The model flags fall back, like `run`'s, on the `--config` file's `llm` block and then the
environment (`OPENAI_BASE_URL` / `ANTHROPIC_BASE_URL`, `TOOLNEXUS_MODEL`), so a shell that
exported them once answers an agent run with the id, a decision, `--store` and `--agents` alone.

stdout: the entry agent's final text (`--json`: `{"status", "text", "run_id", "turns",
"total_tokens", "pending"}`). Exit 0 when the run finished; 3 when it now waits on another
request (its prompt is printed, `status: pending` on stderr) or ended incomplete; 4 when the
request was already answered or withdrawn (nothing applied); 2 for a malformed flag or an answer
the request refuses (its schema, an invalid edit, an approver who already approved, someone not
in the request's group); 1 for
anything else (an unknown request id, a store that is down, a run another live process holds, a
run whose stored rows cannot be read — see `toolnexus doctor`); 130 on Ctrl-C, the agent run
handed back as it was (status `running`: `toolnexus resume RUN` or any worker continues it, the
answer not lost once applied).
"""

from __future__ import annotations

import asyncio
import dataclasses
import json
from typing import Any, Optional

from ._approvals import (
    ANSWERER_FLAGS,
    RUN_RECORD,
    RUN_RECORD_KEYS,
    STICKY_KEY,
    answerer,
    answerers_of,
    cli_policy,
    sticky_decisions,
)
from ._common import (
    CliExit,
    Console,
    apply_model_settings,
    build_toolkit,
    load_config,
    load_object,
    make_client,
    require_key,
    require_model,
)
from ._flags import Flag
from ._inbox import EXIT_ALREADY_ANSWERED, EXIT_WAITING, RUN_STORE_FLAG, open_run_store

NAME = "answer"
SUMMARY = "answer one waiting request of a durable run (approve, reject, edit) and let the run continue"
FLAGS = [
    RUN_STORE_FLAG,
    Flag("id", "REQUEST_ID", "the request to answer (see toolnexus pending); may also come first", positional=True),
    Flag("approve", None, "approve: the call runs"),
    Flag("reject", None, "reject: the call does not run (say why with --message)"),
    Flag("edit", "JSON", "approve with these arguments instead (a JSON object, checked against the tool's schema)"),
    Flag("always", None, "with --approve, --edit or --reject: the same for this tool for the rest of the run"),
    Flag("message", "TEXT", "free text the model receives with the answer (e.g. why you rejected)"),
    Flag("by", "NAME", "who answers (default: your login name)"),
    *ANSWERER_FLAGS,
    Flag("ok", None, "answer yes (any request; with --data)"),
    Flag("decline", None, "decline the request"),
    Flag("data", "JSON", "the answer's data, a JSON object"),
    Flag("reason", "TEXT", "with --decline: declined (default), cancelled or expired",
         choices=("declined", "cancelled", "expired")),
    Flag("agents", "MODULE:ATTR", "the agent definitions the run was started with"),
    Flag("base-url", "URL", "the LLM endpoint's base URL (else the config's llm block, then OPENAI_BASE_URL or "
         "ANTHROPIC_BASE_URL by style)"),
    Flag("style", "openai|anthropic|responses", "the endpoint's API style (default openai)",
         choices=("openai", "anthropic", "responses")),
    Flag("model", "ID", "the model for agents that do not name their own (else the config's llm block, then "
         "TOOLNEXUS_MODEL)"),
    Flag("config", "PATH", "a JSON config file whose llm block gives the model settings"),
    Flag("api-key", "KEY", "API key; else OPENROUTER_API_KEY, then OPENAI_API_KEY or ANTHROPIC_API_KEY by style"),
    Flag("json", None, "print the result as one JSON object"),
]
_DECISIONS = ("approve", "reject", "edit", "ok", "decline")


def _json_object(opts: dict[str, Any], key: str) -> Any:
    if opts.get(key) is None:
        return None
    from .._shapes import strict_loads

    try:
        value = strict_loads(opts[key])  # NaN and Infinity are not JSON numbers
    except (ValueError, RecursionError) as exc:
        raise CliExit(2, f"error: --{key} is not valid JSON: {exc}") from None
    if not isinstance(value, dict):
        raise CliExit(2, f"error: --{key} must be a JSON object, got {type(value).__name__}")
    return value


def _answer(opts: dict[str, Any]) -> Any:
    from ..types import Answer

    if not opts.get("id"):
        raise CliExit(2, "error: --id REQUEST_ID is required (or first: toolnexus answer ID ...; "
                         "toolnexus pending lists them)")
    chosen = [d for d in _DECISIONS if opts.get(d) not in (None, False)]
    if len(chosen) != 1:
        raise CliExit(2, "error: pass exactly one of --approve, --reject, --edit JSON (or --ok, --decline)")
    decision = chosen[0]
    data = _json_object(opts, "data")
    arguments = _json_object(opts, "edit")
    ok = decision in ("approve", "edit", "ok")
    message: Optional[str] = opts.get("message") or None
    always, by = bool(opts.get("always")), str(opts.get("by") or answerer())
    if ok:
        return Answer(id=opts["id"], ok=True, data=data, arguments=arguments, message=message, always=always, by=by,
                      via="cli")
    return Answer(id=opts["id"], ok=False, data=data, reason=opts.get("reason") or "declined", message=message,
                  always=always, by=by, via="cli")


def _check_answerer(row: Any, answer: Any, answerers: Any, opts: dict[str, Any]) -> None:
    """Refuse (exit 2) an answer from someone who may not answer the stored request (its group)."""
    from ..approvals import answerer_problem, group_of
    from ..types import Request

    if row is None or not isinstance(row.request, dict):
        return  # an unknown id: the resume says what is waiting
    request = Request.from_dict(row.request)
    problem = answerer_problem(request, answer, answerers)
    if problem is not None:
        told = opts.get("groups_file") or opts.get("admin")
        hint = "" if told else f" (--groups-file FILE says who is in the group {group_of(request)!r})"
        raise CliExit(2, f"error: the answer to {answer.id!r} is refused: {problem}{hint}")


def _agents(opts: dict[str, Any]) -> Any:
    spec = opts.get("agents")
    if not spec:
        raise CliExit(2, "error: --agents MODULE:ATTR is required (the agent definitions the run was started with)")
    try:
        return load_object(spec)
    except ValueError as exc:
        raise CliExit(2, "error: " + str(exc).replace("--tools-from", "--agents")) from None


async def _llm(opts: dict[str, Any], console: Console) -> dict[str, Any]:
    apply_model_settings(opts, await load_config(opts))
    if not opts.get("base_url"):
        raise CliExit(2, "error: --base-url is required (where the agents' LLM is; or set OPENAI_BASE_URL, or "
                         "give --config an llm block)")
    llm = {"base_url": opts["base_url"], "style": opts.get("style") or "openai", "api_key": require_key(opts, console)}
    if opts.get("model"):
        llm["model"] = opts["model"]
    return llm


def _run_flags(record: dict[str, Any], opts: dict[str, Any]) -> dict[str, Any]:
    """The flags a parked `run --once` ran with, overridden by the toolkit/model flags given here."""
    merged = {k: record.get(k) for k in RUN_RECORD_KEYS}
    for key in ("base_url", "model", "api_key"):
        if opts.get(key):
            merged[key] = opts[key]
    if opts.get("style") and opts["style"] != "openai":
        merged["style"] = opts["style"]
    return merged


async def _conversation(opts: dict[str, Any], console: Console, store: Any, row: Any, answer: Any) -> Any:
    """Resume a run `toolnexus run --once` parked: its toolkit and client, rebuilt from its flags."""
    from ..approvals import ApprovalScope
    from ..durable._model import CONVERSATION_PREFIX
    from ..types import Request

    conversation = str(row.run_id)[len(CONVERSATION_PREFIX):]
    record = await store.get_record(RUN_RECORD, conversation) or {}
    flags = _run_flags(record, opts)
    require_model(flags)
    require_key(flags, console)
    toolkit = await build_toolkit(flags, approvals=cli_policy(flags))
    memory, changed = sticky_decisions(record)
    client = make_client(flags, store=store, approvals=ApprovalScope(memory))
    try:
        result = await client.ask_with_answer(toolkit, conversation, Request.from_dict(row.request), answer)
    finally:
        await client.aclose()
        await toolkit.close()
    if changed:  # an `always` answered here holds for the answers other processes give this run later
        await store.put_record(RUN_RECORD, conversation, {**record, STICKY_KEY: memory.to_record()})
    return dataclasses.replace(result, messages=[]), row.run_id


async def execute(opts: dict[str, Any], console: Console) -> int:
    from ..agents import resume
    from ..client import ResumeError
    from ..durable import AnswerAlreadyApplied, RequestWithdrawn, RunDamaged
    from ..durable._model import CONVERSATION_PREFIX

    answer = _answer(opts)
    answerers = answerers_of(opts)
    conversation = False
    store = open_run_store(opts)  # first: a store that does not exist is the likeliest slip, and is never created
    try:
        async with store:
            row = await store.find_request(answer.id)
            _check_answerer(row, answer, answerers, opts)
            conversation = (row is not None and bool(row.request)
                            and str(row.run_id or "").startswith(CONVERSATION_PREFIX))
            if conversation:
                final, run_id = await _conversation(opts, console, store, row, answer)
                turns, tokens = final.turns, final.usage.get("total_tokens", 0)
            else:
                agents, llm = _agents(opts), await _llm(opts, console)
                final = await resume(store, answer, agents=agents, llm=llm)
                run_id, turns, tokens = final.run_id, final.turns, final.total_tokens
    except asyncio.CancelledError:  # Ctrl-C: an agent run is handed back as it was, not recorded as interrupted
        if conversation:
            console.err("interrupted: the answer was not applied (its claim was given back); answer again")
        else:
            console.err("interrupted: the run was handed back as it was (status running); continue it with "
                        "toolnexus resume RUN (toolnexus runs lists it), or let a worker do it")
        raise
    except (AnswerAlreadyApplied, RequestWithdrawn) as exc:
        console.err(f"error: {exc}")
        return EXIT_ALREADY_ANSWERED
    except ResumeError as exc:
        code = 2 if "schema" in str(exc) or "is refused" in str(exc) else 1
        console.err(f"error: {exc}")
        return code
    except RunDamaged as exc:
        console.err(f"error: {exc}")
        return 1
    if opts.get("json"):
        console.out(json.dumps({"status": final.status, "text": final.text, "run_id": run_id,
                                "turns": turns, "total_tokens": tokens,
                                "pending": dataclasses.asdict(final.pending) if final.pending else None}))
    else:
        console.out(final.text)
        if final.status != "done":
            console.err(f"status: {final.status}")
    return 0 if final.status == "done" else EXIT_WAITING
