"""The Answer path in docs/architecture.md matches the code: every `toolnexus.…` name it gives
resolves, and every function it names runs when a parked three-level team is answered with
`toolnexus.agents.resume` from a fresh store handle (a SQLite file, as another process would)."""

from __future__ import annotations

import contextlib
import importlib
import inspect
import re
import sys
from pathlib import Path
from typing import Any, Protocol

from support.durable_app import LLM, TOP, team_model
from toolnexus import Answer
from toolnexus.agents import resume
from toolnexus.stores import open_store

DOC = Path(__file__).resolve().parent.parent / "docs" / "architecture.md"


def _section() -> str:
    text = DOC.read_text(encoding="utf-8")
    start = text.index("## The path of an Answer")
    end = text.index("\n## ", start + 1)
    return text[start:end]


def _names() -> list[str]:
    return sorted(set(re.findall(r"`(toolnexus(?:\.\w+)+)", _section())))


def _resolve(dotted: str) -> tuple[Any, Any]:
    """(owner, object): the longest importable module prefix, then attributes."""
    parts = dotted.split(".")
    for cut in range(len(parts), 0, -1):
        try:
            obj: Any = importlib.import_module(".".join(parts[:cut]))
        except ModuleNotFoundError:
            continue
        owner = None
        for attr in parts[cut:]:
            owner, obj = obj, getattr(obj, attr)
        return owner, obj
    raise AssertionError(f"{dotted} names no module")


def test_every_name_in_the_answer_path_resolves():
    names = _names()
    assert len(names) >= 25  # the section names its hops; an empty match would prove nothing
    for dotted in names:
        _resolve(dotted)


async def test_every_function_the_answer_path_names_runs_on_a_real_resume(tmp_path):
    url = f"sqlite:///{tmp_path / 'runs.db'}"
    async with open_store(url) as store, contextlib.AsyncExitStack() as stack:
        r = await TOP.run("go", transport=team_model(), llm=LLM, store=store, run_id="three")
        stack.push_async_callback(r.runtime.aclose)  # parked: the fresh handle below resumes it
        assert r.status == "pending"

    expected: dict[str, Any] = {}  # dotted name -> code object, or a method name on a protocol
    for dotted in _names():
        owner, obj = _resolve(dotted)
        if inspect.isclass(obj) or inspect.ismodule(obj):
            continue
        function = inspect.unwrap(obj)
        if inspect.isclass(owner) and Protocol in getattr(owner, "__mro__", ()):
            expected[dotted] = function.__name__  # any dialect's implementation counts
        else:
            expected[dotted] = function.__code__

    seen_code: set[Any] = set()
    seen_names: set[str] = set()

    def profile(frame: Any, event: str, arg: Any) -> None:
        if event == "call":
            seen_code.add(frame.f_code)
            if frame.f_globals.get("__name__", "").startswith("toolnexus."):
                seen_names.add(frame.f_code.co_name)

    async with open_store(url) as store:  # a fresh handle on the file: nothing shared in memory
        [waiting] = await store.pending()
        sys.setprofile(profile)
        try:
            final = await resume(store, Answer(id=waiting.request.id, ok=True), agents=[TOP],
                                 transport=team_model(), llm=LLM)
        finally:
            sys.setprofile(None)
    assert (final.status, final.text) == ("done", "top: mid: leaf: secret-token")

    missing = [dotted for dotted, code in expected.items()
               if (code not in seen_names if isinstance(code, str) else code not in seen_code)]
    assert missing == []
