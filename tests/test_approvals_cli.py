"""Approvals from a shell, with the INSTALLED `toolnexus` against a scripted model on loopback.

Safe by default: a model's `bash` call does not run under `toolnexus run --once` without a
human. On a terminal the question is asked right there (`approve? [y/N/e(dit)/a(lways)]`);
without one the run stops `pending` (exit 3), and with `--store` it is parked where `toolnexus
pending` lists it (tool, arguments, agent) and `toolnexus answer ID --approve | --reject
--message TEXT | --edit JSON [--always]` resumes it in another process (an `--always` holds for
the answers later processes give that run). `--approve TOOL` asks about more tools. A two-person
rule takes two different people, each in a process of their own. The reject session docs/cli.md
shows is performed here, command by command.
"""

from __future__ import annotations

import asyncio
import json
import re
import shlex
import shutil
from pathlib import Path
from typing import Any, Iterator

import pytest

from support.cli_agents import GROUP_RELEASER, RELEASER
from support.cli_run import SUPPORT, TOOLNEXUS, cli_env, run_cli
from support.doc_blocks import blocks_of, expected_matches
from support.llm_server import Json, LlmServer, openai_calls, openai_text
from test_cli_run import Terminal
from toolnexus.cli import main
from toolnexus.stores import open_store

KEY = "sk-test-APPROVE-KEY-0123456789"

pytestmark = pytest.mark.skipif(shutil.which("bash") is None, reason="the built-in bash needs a shell")


@pytest.fixture
def llm() -> Iterator[LlmServer]:
    with LlmServer() as server:
        yield server


def _model(llm: LlmServer) -> list[str]:
    return ["--base-url", llm.base_url + "/v1", "--model", "m-cli"]


def _pwn(llm: LlmServer, target: Path, then: bool = True) -> None:
    """The model runs `echo pwned > target` in bash, then (once it hears back) says "all done"."""
    llm.add(Json(openai_calls(("c1", "bash", {"command": f"echo pwned > {target}"}))))
    if then:
        llm.add(Json(openai_text("all done")))


def _sent_back(llm: LlmServer) -> str:
    """What the model was sent as the bash call's result."""
    return llm.requests[-1].json["messages"][-1]["content"]


def _in_process(capsys: pytest.CaptureFixture[str], *argv: str) -> tuple[int, str, str]:
    """A command in this process (listing, refusals): `main(argv)`, its exit code, stdout, stderr."""
    capsys.readouterr()
    code = main(list(argv))
    out, err = capsys.readouterr()
    return code, out, err


def test_once_without_a_terminal_runs_nothing_and_exits_3(llm: LlmServer, tmp_path: Path,
                                                          capsys: pytest.CaptureFixture[str],
                                                          monkeypatch: pytest.MonkeyPatch) -> None:
    target = tmp_path / "pwned.txt"
    _pwn(llm, target, then=False)
    done = run_cli("run", *_model(llm), "--once", "go", env=cli_env(OPENAI_API_KEY=KEY))
    assert done.returncode == 3 and done.stderr == "status: pending\n"
    assert done.stdout.startswith("Approve bash {\"command\": \"echo pwned > ") and not target.exists()
    # told otherwise, it runs
    _pwn(llm, target)
    monkeypatch.setenv("OPENAI_API_KEY", KEY)
    monkeypatch.delenv("TOOLNEXUS_STORE", raising=False)
    code, out, _ = _in_process(capsys, "run", *_model(llm), "--no-approve", "bash", "--once", "go")
    assert (code, out) == (0, "all done\n") and target.read_text() == "pwned\n"


def test_a_parked_run_is_listed_and_answered_from_another_process(llm: LlmServer, tmp_path: Path,
                                                                  capsys: pytest.CaptureFixture[str],
                                                                  monkeypatch: pytest.MonkeyPatch) -> None:
    target, url = tmp_path / "pwned.txt", f"sqlite:///{tmp_path / 'runs.db'}"
    env = cli_env(OPENAI_API_KEY=KEY, TOOLNEXUS_STORE=url)
    monkeypatch.setenv("TOOLNEXUS_STORE", url)
    monkeypatch.setenv("OPENAI_API_KEY", KEY)
    _pwn(llm, target, then=False)
    parked = run_cli("run", *_model(llm), "--once", "go", env=env)
    assert parked.returncode == 3 and not target.exists()
    assert parked.stderr.startswith("status: pending\nwaiting in the store: toolnexus answer ")
    _, listed, _ = _in_process(capsys, "pending", "--json")
    [item] = json.loads(listed)
    assert (item["tool"], item["arguments"], item["agent_path"]) == ("bash", {"command": f"echo pwned > {target}"},
                                                                     None)
    _, line, _ = _in_process(capsys, "pending")
    assert line.split("\t")[0] == item["id"] and line.rstrip("\n").split("\t")[4] == item["prompt"]

    # an edit the tool's schema refuses: exit 2, nothing applied, still waiting
    code, _, err = _in_process(capsys, "answer", item["id"], "--edit", '{"command": 5}')
    assert code == 2 and "the edited arguments do not match the tool's input schema" in err
    # approved in another process, with the flags the run was started with (kept in the store, not the key)
    llm.add(Json(openai_text("all done")))
    answered = run_cli("answer", item["id"], "--approve", env=env)
    assert (answered.returncode, answered.stdout, answered.stderr) == (0, "all done\n", "")
    assert target.read_text() == "pwned\n" and llm.requests[-1].json["messages"][-1]["content"] == ""
    code, _, err = _in_process(capsys, "answer", item["id"], "--approve")
    assert code == 4 and "already answered" in err
    assert _in_process(capsys, "pending")[1] == ""

    # rejected with a message: the tool does not run, the model is told why
    target.unlink()
    _pwn(llm, target, then=False)
    assert _in_process(capsys, "run", *_model(llm), "--once", "go")[0] == 3
    [item] = json.loads(_in_process(capsys, "pending", "--json")[1])
    llm.add(Json(openai_text("all done")))
    code, out, err = _in_process(capsys, "answer", item["id"], "--reject", "--message", "no pwning", "--by", "sam")
    assert (code, out) == (0, "all done\n") and not target.exists()
    assert _sent_back(llm) == f"declined/expired: {item['prompt']}\nmessage from sam: no pwning"
    for text in (parked.stdout, parked.stderr, answered.stdout, answered.stderr, out, err):
        assert KEY not in text


@pytest.mark.parametrize("reply", ["e", "n too risky"])
def test_the_interactive_prompt(reply: str, llm: LlmServer, tmp_path: Path) -> None:
    target = tmp_path / "pwned.txt"
    _pwn(llm, target)
    term = Terminal([TOOLNEXUS, "run", *_model(llm), "--api-key", KEY, "--once", "go"])
    try:
        term.expect("tool: bash   source: builtin   agent: -")
        term.expect("approve? [y/N/e(dit)/a(lways)] ")
        assert not target.exists()
        if reply == "e":
            term.send("e")
            term.expect("> ")
            term.send('{"command": 5}')
            term.expect("refused: ")  # an invalid edit is asked again
            term.expect("approve? [y/N/e(dit)/a(lways)] ")
            term.send("e")
            term.expect("> ")
            term.send(json.dumps({"command": f"echo edited > {target}"}))
        else:
            term.send(reply)
        term.expect("all done")
    finally:
        code = term.close()
    assert code == 0
    if reply == "e":
        assert target.read_text() == "edited\n" and _sent_back(llm).startswith("note: a human changed")
    else:
        sent = _sent_back(llm)  # the pinned text, then who rejected (the login name) and why
        assert not target.exists() and sent.startswith("declined/expired: Approve bash ")
        assert sent.split("\n")[1].startswith("message from ") and sent.endswith(": too risky")
    assert KEY not in term.seen



@pytest.mark.parametrize("reply", ["y", "a"])
def test_the_interactive_prompt_approves_once_or_always(reply: str, llm: LlmServer, tmp_path: Path) -> None:
    """Two bash calls in one session: `y` approves the one asked about (the next is asked again),
    `a` approves it and every later bash call of the session without asking."""
    one, two = tmp_path / "one.txt", tmp_path / "two.txt"
    llm.add(Json(openai_calls(("c1", "bash", {"command": f"echo one > {one}"}))),
            Json(openai_calls(("c2", "bash", {"command": f"echo two > {two}"}))), Json(openai_text("all done")))
    question = "approve? [y/N/e(dit)/a(lways)] "
    term = Terminal([TOOLNEXUS, "run", *_model(llm), "--api-key", KEY, "--once", "go"])
    try:
        term.expect(question)
        assert not one.exists()
        term.send(reply)
        if reply == "y":
            term.expect(f'arguments: {{"command": "echo two > {two}"}}')
            term.expect(question)
            assert one.read_text() == "one\n" and not two.exists()
            term.send("y")
        term.expect("all done")
    finally:
        code = term.close()
    assert code == 0 and (one.read_text(), two.read_text()) == ("one\n", "two\n")
    assert term.seen.count(question) == (2 if reply == "y" else 1)
    assert [m["content"] for m in llm.requests[-1].json["messages"] if m["role"] == "tool"] == ["", ""]
    assert KEY not in term.seen

def test_two_approvals_take_two_people_each_in_their_own_process(llm: LlmServer, tmp_path: Path,
                                                                capsys: pytest.CaptureFixture[str],
                                                                monkeypatch: pytest.MonkeyPatch) -> None:
    url, effects = f"sqlite:///{tmp_path / 'runs.db'}", tmp_path / "effects.jsonl"
    llm.add(Json(openai_calls(("c1", "release", {"service": "api"}))), Json(openai_text("released")))

    async def park() -> str:
        async with open_store(url) as store:
            r = await RELEASER.run("release api", llm={"base_url": llm.base_url + "/v1", "style": "openai",
                                                       "model": "m-cli", "api_key": KEY}, store=store, run_id="rel-1")
            await r.runtime.aclose()
            return r.pending.id

    first_id = asyncio.run(park())
    env = cli_env(OPENAI_API_KEY=KEY, TOOLNEXUS_STORE=url, CLI_EFFECTS=str(effects))
    monkeypatch.setenv("TOOLNEXUS_STORE", url)
    monkeypatch.syspath_prepend(SUPPORT)  # `--agents cli_agents:RELEASER` in this process too
    base = ("--agents", "cli_agents:RELEASER", *_model(llm), "--api-key", KEY)
    first = run_cli("answer", first_id, "--approve", "--by", "alice", *base, env=env)
    assert first.returncode == 3 and "[1 of 2 approvals: alice]" in first.stdout and not effects.exists()
    second_id = _in_process(capsys, "pending")[1].split("\t")[0]
    assert second_id == first_id + ".a1"
    code, _, err = _in_process(capsys, "answer", second_id, "--approve", "--by", "alice", *base)
    assert code == 2 and "alice already approved this call" in err
    done = run_cli("answer", second_id, "--approve", "--by", "bob", *base, env=env)
    assert (done.returncode, done.stdout) == (0, "released\n")
    assert [json.loads(x) for x in effects.read_text().splitlines()] == [{"released": "api"}]
    # `toolnexus show` says who answered each request, and through what
    code, shown, _ = _in_process(capsys, "show", "rel-1")
    answered = {line.split()[0]: line for line in shown.splitlines() if line.startswith("  ") and " → " in line}
    assert code == 0 and "(by alice via cli at " in answered[first_id] and "(by bob via cli at " in answered[second_id]
    [alice, bob] = [r["answer"] for r in json.loads(_in_process(capsys, "show", "rel-1", "--json")[1])["requests"]]
    assert (alice["by"], alice["via"], bob["by"], bob["via"]) == ("alice", "cli", "bob", "cli")


def test_a_groups_request_is_answered_only_by_a_member(llm: LlmServer, tmp_path: Path,
                                                       capsys: pytest.CaptureFixture[str],
                                                       monkeypatch: pytest.MonkeyPatch) -> None:
    url, effects, groups = f"sqlite:///{tmp_path / 'runs.db'}", tmp_path / "effects.jsonl", tmp_path / "groups.json"
    groups.write_text(json.dumps({"releasers": ["fay"]}))
    llm.add(Json(openai_calls(("c1", "release", {"service": "api"}))), Json(openai_text("released")))

    async def park() -> str:
        async with open_store(url) as store:
            r = await GROUP_RELEASER.run("release api", llm={"base_url": llm.base_url + "/v1", "style": "openai",
                                                             "model": "m-cli", "api_key": KEY}, store=store,
                                         run_id="grp-1")
            await r.runtime.aclose()
            return r.pending.id

    rid = asyncio.run(park())
    monkeypatch.setenv("TOOLNEXUS_STORE", url)
    monkeypatch.syspath_prepend(SUPPORT)
    base = ("--agents", "cli_agents:GROUP_RELEASER", *_model(llm), "--api-key", KEY)
    # nobody said who is in the group: nobody is, and the error says where to say it
    code, _, err = _in_process(capsys, "answer", rid, "--approve", "--by", "fay", *base)
    assert code == 2 and "is for the group 'releasers', and fay is not in it" in err
    assert "(--groups-file FILE says who is in the group 'releasers')" in err
    for decision in ("--approve", "--reject"):
        code, _, err = _in_process(capsys, "answer", rid, decision, "--by", "mallory", "--groups-file", str(groups),
                                   *base)
        assert code == 2 and "is refused: this request is for the group 'releasers', and mallory is not in it" in err
    assert _in_process(capsys, "pending")[1].split("\t")[0] == rid and not effects.exists()  # nothing applied
    env = cli_env(OPENAI_API_KEY=KEY, TOOLNEXUS_STORE=url, CLI_EFFECTS=str(effects))
    done = run_cli("answer", rid, "--approve", "--by", "fay", "--groups-file", str(groups), *base, env=env)
    assert (done.returncode, done.stdout) == (0, "released\n"), done.stderr
    assert [json.loads(x) for x in effects.read_text().splitlines()] == [{"released": "api"}]
    code, shown, _ = _in_process(capsys, "show", "grp-1")
    assert code == 0 and f"  {rid}  approval  applied" in shown and "→ ok (by fay via cli at " in shown


def test_the_answer_flags_make_the_answer() -> None:
    from toolnexus.cli._answer import FLAGS, _answer
    from toolnexus.cli._flags import parse

    def answer(*argv: str) -> object:
        return _answer(parse(FLAGS, list(argv), command="answer"))

    edited = answer("pnd-1", "--edit", '{"command": "ls"}', "--always", "--by", "ann")
    assert (edited.id, edited.ok, edited.arguments, edited.always, edited.by, edited.via) == (
        "pnd-1", True, {"command": "ls"}, True, "ann", "cli")
    rejected = answer("--id", "pnd-2", "--reject", "--message", "too much")
    assert (rejected.ok, rejected.reason, rejected.message) == (False, "declined", "too much") and rejected.by
    legacy = answer("--id", "pnd-3", "--ok", "--data", '{"amount": 40}')
    assert (legacy.ok, legacy.data, legacy.arguments) == (True, {"amount": 40}, None)


# -- --approve TOOL: more tools asked about -------------------------------------------------------------------

RECORDERS = ("--no-builtins", "--tools-from", "cli_tools:RECORDERS")  # `note` and `stamp`: not asked by default


def _effects(path: Path) -> list[Any]:
    return [json.loads(line) for line in path.read_text().splitlines()] if path.exists() else []


def test_approve_asks_about_a_tool_that_is_not_asked_about_by_default(llm: LlmServer, tmp_path: Path) -> None:
    effects = tmp_path / "effects.jsonl"
    env = cli_env(OPENAI_API_KEY=KEY, CLI_EFFECTS=str(effects))

    def once(tool: str, text: str, *flags: str, runs: bool) -> Any:
        llm.add(Json(openai_calls(("c1", tool, {"text": text}))))
        if runs:
            llm.add(Json(openai_text("all done")))
        return run_cli("run", *_model(llm), *RECORDERS, *flags, "--once", "go", env=env)

    ran = once("note", "one", runs=True)  # not asked by default: it runs
    assert (ran.returncode, ran.stdout) == (0, "all done\n") and _effects(effects) == [{"note": "one"}]

    asked = once("note", "two", "--approve", "note", runs=False)
    assert (asked.returncode, asked.stderr) == (3, "status: pending\n")
    assert asked.stdout.startswith('Approve note {"text": "two"}? (native) Write a note down')
    other = once("stamp", "three", "--approve", "note", runs=True)  # only the tool named is asked about
    assert other.returncode == 0 and _effects(effects) == [{"note": "one"}, {"stamp": "three"}]

    for tool in ("note", "stamp"):  # repeated, each flag counts
        parked = once(tool, "four", "--approve", "note", "--approve", "stamp", runs=False)
        assert parked.returncode == 3 and parked.stdout.startswith(f'Approve {tool} {{"text": "four"}}? (native)')
    assert _effects(effects) == [{"note": "one"}, {"stamp": "three"}]


# -- toolnexus answer --always, --edit: end to end --------------------------------------------------------------


def _park(llm: LlmServer, env: dict[str, str], command: str) -> dict[str, Any]:
    """`run --once` in a process of its own, the model's bash call parked in the store: what
    `toolnexus pending --json` lists for it."""
    llm.add(Json(openai_calls(("c1", "bash", {"command": command}))))
    parked = run_cli("run", *_model(llm), "--once", "go", env=env)
    assert parked.returncode == 3, parked.stderr
    [item] = json.loads(run_cli("pending", "--json", env=env).stdout)
    assert item["arguments"] == {"command": command}
    return dict(item)


def _stored(env: dict[str, str], run_id: str) -> dict[str, Any]:
    """The run's requests and their stored answers, by request id (`toolnexus show --json`)."""
    shown = run_cli("show", run_id, "--json", env=env)
    assert shown.returncode == 0, shown.stderr
    return {r["id"]: r for r in json.loads(shown.stdout)["requests"]}


def test_answer_always_from_another_process_covers_the_rest_of_the_run(llm: LlmServer, tmp_path: Path) -> None:
    one, two, three, file = (tmp_path / name for name in ("one.txt", "two.txt", "three.txt", "w.txt"))
    env = cli_env(OPENAI_API_KEY=KEY, TOOLNEXUS_STORE=f"sqlite:///{tmp_path / 'runs.db'}")
    item = _park(llm, env, f"echo one > {one}")
    assert not one.exists()

    # answered `always` in a second process: the next bash call of this run is not asked about
    llm.add(Json(openai_calls(("c2", "bash", {"command": f"echo two > {two}"}))),
            Json(openai_calls(("c3", "write", {"path": str(file), "content": "w"}))))
    first = run_cli("answer", item["id"], "--approve", "--always", "--by", "ann", env=env)
    assert first.returncode == 3 and first.stdout.startswith("Approve write ")  # another tool is still asked
    assert (one.read_text(), two.read_text(), file.exists()) == ("one\n", "two\n", False)
    [waiting] = json.loads(run_cli("pending", "--json", env=env).stdout)
    stored = _stored(env, item["run_id"])[item["id"]]
    assert (stored["status"], stored["answer"]["ok"], stored["answer"]["always"], stored["answer"]["by"]) == (
        "applied", True, True, "ann")

    # a third process answers the write; the run's bash calls are still decided
    llm.add(Json(openai_calls(("c4", "bash", {"command": f"echo three > {three}"}))), Json(openai_text("all done")))
    done = run_cli("answer", waiting["id"], "--approve", env=env)
    assert (done.returncode, done.stdout, done.stderr) == (0, "all done\n", "")
    assert (file.read_text(), three.read_text()) == ("w", "three\n")
    assert json.loads(run_cli("pending", "--json", env=env).stdout) == []
    assert sorted(_stored(env, item["run_id"])) == sorted([item["id"], waiting["id"]])  # asked twice, no more


def test_answer_edit_from_another_process_runs_the_edited_call(llm: LlmServer, tmp_path: Path) -> None:
    target, edited = tmp_path / "pwned.txt", tmp_path / "edited.txt"
    env = cli_env(OPENAI_API_KEY=KEY, TOOLNEXUS_STORE=f"sqlite:///{tmp_path / 'runs.db'}")
    item = _park(llm, env, f"echo pwned > {target}")
    llm.add(Json(openai_text("all done")))
    new = {"command": f"echo edited > {edited}"}
    done = run_cli("answer", item["id"], "--edit", json.dumps(new), "--by", "ann", env=env)
    assert (done.returncode, done.stdout, done.stderr) == (0, "all done\n", "")
    assert not target.exists() and edited.read_text() == "edited\n"
    assert _sent_back(llm).startswith("note: a human changed this call's arguments before approving it; it ran with ")
    assert json.dumps(new) in _sent_back(llm)
    stored = _stored(env, item["run_id"])[item["id"]]
    assert (stored["status"], stored["answer"]["ok"], stored["answer"]["arguments"], stored["answer"]["by"]) == (
        "applied", True, new, "ann")


# -- the reject transcript of docs/cli.md, performed ------------------------------------------------------------

CLI_DOC = Path(__file__).resolve().parent.parent / "docs" / "cli.md"
DOC_ID = "pnd-18f3a2b4c1d-7"  # the request id the page shows


def _session(code: str) -> list[tuple[str, str]]:
    """(command, what it prints: stdout then stderr) per `$ ` line of a shown terminal session."""
    out: list[tuple[str, list[str]]] = []
    for line in code.splitlines():
        if line.startswith("$ "):
            out.append((line[2:], []))
        else:
            out[-1][1].append(line)
    return [(command, "\n".join(shown)) for command, shown in out]


def test_the_reject_transcript_in_the_cli_docs_is_what_happens(llm: LlmServer, tmp_path: Path) -> None:
    """The page's `run --once --store` then `answer --reject --message` session, command by
    command, in its folder (a `build/` with a `tmp/` in it), against a model that does what the
    page shows: it wants `rm -rf build`, and told why not, asks to delete `build/tmp` instead."""
    [block] = [b for b in blocks_of(CLI_DOC) if b.lang == "text" and "--reject --message" in b.code]
    [(run, run_shown), (answer, answer_shown)] = _session(block.code)
    (tmp_path / "build" / "tmp").mkdir(parents=True)
    env = cli_env(OPENAI_API_KEY=KEY)

    def perform(command: str) -> tuple[int, str]:
        argv = shlex.split(command.replace("--base-url ... --model ...", " ".join(_model(llm))))
        assert argv[0] == "toolnexus", command
        done = run_cli(*argv[1:], env=env, cwd=tmp_path)
        return done.returncode, done.stdout + done.stderr

    llm.add(Json(openai_calls(("c1", "bash", {"command": "rm -rf build"}))))
    code, printed = perform(run)
    assert code == 3 and llm.requests[-1].json["messages"][-1] == {"role": "user", "content": "clean up the build"}
    found = re.search(r"toolnexus answer (\S+) --approve", printed)
    assert found is not None, printed
    assert expected_matches(run_shown.replace(DOC_ID, found.group(1)), printed), printed
    assert (tmp_path / "build" / "tmp").is_dir()

    llm.add(Json(openai_calls(("c2", "bash", {"command": "rm -rf build/tmp"}))))
    code, printed = perform(answer.replace(DOC_ID, found.group(1)))
    assert code == 3 and expected_matches(answer_shown, printed), printed
    sent = llm.requests[-1].json["messages"][-1]["content"]  # what the model was told: the prompt, then why
    assert sent.startswith("declined/expired: Approve bash {\"command\": \"rm -rf build\"}? (builtin) ")
    assert sent.split("\n")[1].startswith("message from ") and sent.endswith(": keep build/, delete build/tmp only")
    assert (tmp_path / "build" / "tmp").is_dir()  # asked again, nothing deleted
