"""One exception root, and `Answer` type checks (issue #11: the `Answer(ok="yes")` row).

Every error class we define derives from `toolnexus.errors.ToolnexusError` and keeps its builtin
base; every `raise` of a builtin exception type in the areas checked here goes through one of
our classes instead. `Answer` refuses wrong field types at construction and through `from_dict`
(the resume path), so a truthy string can never approve a suspended call.
"""

from __future__ import annotations

import ast
import dataclasses
import json
import pathlib
import re

import pytest

import toolnexus
from toolnexus import Answer, answer_declined, answer_output, errors as errors_module
from toolnexus.client import create_in_process_client
from toolnexus.errors import ToolnexusError, ToolnexusTypeError, ToolnexusValueError
from toolnexus.toolkit import create_toolkit
from toolnexus.types import ToolResult, pending

SRC = pathlib.Path(toolnexus.__file__).parent
# Every package is checked (the temporal integration runs inside workflow code, checked by its own tests).
NOT_CHECKED: tuple[str, ...] = ()
# Builtin exceptions that are protocol, not errors of ours: module __getattr__ must raise
# AttributeError; OSError subclasses inside the file built-ins become error results.
ALLOWED = {"AttributeError", "AssertionError", "FileNotFoundError", "NotADirectoryError",
           "IsADirectoryError", "OSError", "SystemExit"}
BUILTIN_EXCEPTIONS = {n for n in dir(__import__("builtins")) if isinstance(getattr(__import__("builtins"), n), type)
                      and issubclass(getattr(__import__("builtins"), n), BaseException)}


# A script run as its own isolated process (it may not import toolnexus); nothing it raises
# reaches a caller.
STANDALONE = ("builtin/_reaper.py", "mcp_source/_reaper.py")


def _checked_files() -> list[pathlib.Path]:
    return [p for p in SRC.rglob("*.py")
            if not any(part in NOT_CHECKED for part in p.relative_to(SRC).parts[:-1])
            and p.relative_to(SRC).as_posix() not in STANDALONE]


def test_every_raise_in_the_checked_packages_uses_one_of_our_classes():
    offenders = []
    for path in _checked_files():
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            if isinstance(node, ast.Raise) and isinstance(node.exc, ast.Call) and isinstance(node.exc.func, ast.Name):
                name = node.exc.func.id
                if name in BUILTIN_EXCEPTIONS and name not in ALLOWED:
                    offenders.append(f"{path.relative_to(SRC)}:{node.lineno} raise {name}")
    assert offenders == []


def test_every_exception_class_we_define_derives_from_the_root():
    offenders = []
    for path in _checked_files():
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            if not isinstance(node, ast.ClassDef):
                continue
            bases = {b.id for b in node.bases if isinstance(b, ast.Name)}
            if bases & BUILTIN_EXCEPTIONS and not bases - BUILTIN_EXCEPTIONS and node.name != "ToolnexusError":
                offenders.append(f"{path.relative_to(SRC)}:{node.lineno} class {node.name}")
    assert offenders == []


def test_the_tree_in_the_errors_docstring_names_every_class_it_defines():
    doc = errors_module.__doc__ or ""
    for name in errors_module.__all__:
        assert re.search(rf"\b{name}\b", doc), name
    from toolnexus.client import _errors as client_errors
    for name in ("ProviderError", "ProviderResponseError", "ResponseTooLarge", "RunTimeout", "RunCancelled",
                 "ContentPartError", "ResumeError"):
        cls = getattr(client_errors, name)
        assert issubclass(cls, ToolnexusError) and re.search(rf"\b{name}\b", doc), name


def test_the_root_is_exported_lazily_from_the_package():
    assert toolnexus.ToolnexusError is ToolnexusError
    assert "ToolnexusError" in toolnexus.__all__


def test_config_errors_keep_their_builtin_base_and_are_ours():
    with pytest.raises(ValueError) as info:
        toolnexus.http_tool(name="x", description="", method="GET", url="http://127.0.0.1/", body="xml")
    assert isinstance(info.value, ToolnexusError)
    with pytest.raises(TypeError) as info:
        toolnexus.select_builtins(["bash"])  # type: ignore[arg-type]
    assert isinstance(info.value, ToolnexusError)
    with pytest.raises(RuntimeError) as info:
        from toolnexus.builtin._shell import find_shell
        find_shell([("/nonexistent/shell", "-c")])
    assert isinstance(info.value, ToolnexusError)


# ------------------------------------------------------------------------------ Answer (row 14)

@pytest.mark.parametrize("fields, problem", [
    ({"id": "a", "ok": "yes"}, "ok must be True or False, got str 'yes'"),
    ({"id": "a", "ok": 1}, "ok must be True or False, got int 1"),
    ({"id": "a", "ok": None}, "ok must be True or False"),
    ({"id": 7, "ok": True}, "id must be a str"),
    ({"id": "a", "ok": True, "data": "approved"}, "data must be a dict or None, got str"),
    ({"id": "a", "ok": True, "data": ["x"]}, "data must be a dict or None, got list"),
])
def test_answer_fields_of_the_wrong_type_are_refused_at_construction_and_from_json(fields, problem):
    """Row `Answer(ok="yes")`: accepted as ok before; now a TypeError naming the field."""
    with pytest.raises(ToolnexusTypeError, match=re.escape(problem)):
        Answer(**fields)
    with pytest.raises(TypeError, match=re.escape(problem)):
        Answer.from_dict(json.loads(json.dumps(fields)))


def test_answer_reason_outside_the_three_words_is_the_pinned_value_error():
    pinned = 'toolnexus: Answer reason must be "declined", "cancelled" or "expired", got \'later\''
    with pytest.raises(ValueError) as info:
        Answer(id="a", ok=False, reason="later")  # type: ignore[arg-type]
    assert str(info.value) == pinned and isinstance(info.value, ToolnexusValueError)
    with pytest.raises(ValueError, match=re.escape(pinned)):
        Answer.from_dict({"id": "a", "ok": False, "reason": "later"})
    with pytest.raises(ValueError, match=re.escape(pinned)):
        answer_declined("a", "later")


def test_good_answers_still_round_trip_through_json():
    for answer in (Answer("a", True), Answer("a", True, {"x": 1}), answer_declined("a", "expired"),
                   answer_output("a", "text")):
        assert Answer.from_dict(json.loads(json.dumps(dataclasses.asdict(answer)))) == answer
        assert Answer(**dataclasses.asdict(answer)) == answer
    with pytest.raises(TypeError):
        Answer.from_dict(["a", True])  # type: ignore[arg-type]


async def test_a_wait_for_answering_ok_yes_as_a_mapping_never_runs_the_tool():
    """At resolution: a mapping answer with `ok: "yes"` fails the run with our TypeError; the
    tool's approved branch never runs."""
    ran = []

    async def approve(args, ctx=None):
        if ctx is None or ctx.answer is None:
            return pending(kind="approval", prompt="approve?", id="req-1")
        ran.append(ctx.answer)
        return ToolResult("done", False)

    kit = await create_toolkit(extra_tools=[toolnexus.Tool("gate", "", {"type": "object"}, "custom", approve)],
                               builtins=False)
    calls = iter([{"tool_calls": [{"id": "c1", "name": "gate", "arguments": "{}"}]}, {"content": "end"}])
    client = create_in_process_client(model="m", generate=lambda req: next(calls),
                                      wait_for=lambda request: {"id": request.id, "ok": "yes"})
    async with kit:  # closed however the asserts end
        with pytest.raises(ToolnexusTypeError, match="ok must be True or False"):
            await client.run("go", kit)
        assert ran == []


async def test_a_resume_with_ok_yes_from_json_is_refused_before_anything_runs():
    """Row `Answer(ok="yes")`, at resume: the answer arrives as JSON and is refused; the tool
    never runs its approved branch and nothing is sent."""
    ran = []
    sent = []

    async def approve(args, ctx=None):
        if ctx is None or ctx.answer is None:
            return pending(kind="approval", prompt="approve?", id="req-9")
        ran.append(ctx.answer)
        return ToolResult("done", False)

    kit = await create_toolkit(extra_tools=[toolnexus.Tool("gate", "", {"type": "object"}, "custom", approve)],
                               builtins=False)
    replies = iter([{"tool_calls": [{"id": "c1", "name": "gate", "arguments": "{}"}]}, {"content": "end"}])

    def generate(req):
        sent.append(req)
        return next(replies)

    client = create_in_process_client(model="m", generate=generate)
    async with kit:  # closed however the asserts end
        halted = await client.run("go", kit)
        assert halted.status == "pending"
        with pytest.raises(ToolnexusTypeError, match="ok must be True or False"):
            await client.run_with_answer(kit, halted.messages, dataclasses.asdict(halted.pending),
                                         {"id": "req-9", "ok": "yes"})
        assert ran == [] and len(sent) == 1
