"""The API reference (docs/api/) lists every public name: its pages are compared with `__all__`.

Each page documents whole modules with mkdocstrings directives that name their members
explicitly (`::: toolnexus.agents` + `members: [...]`); the test holds, for every public module of
the package, that exactly one directive documents it and that its members are exactly the
module's `__all__` — so a name added to `__all__` without a line in the reference fails here, not
in a user's search. The overview's table of top-level names is held to `toolnexus.__all__` the
same way, and every name it lists really imports from `toolnexus` and is the object its module
holds. (`test_docs_examples` builds the site and checks each name renders, when the docs extra is
installed.)
"""

from __future__ import annotations

import importlib
import pkgutil
import re
from pathlib import Path

import pytest

import toolnexus
from support.doc_blocks import api_directives

ROOT = Path(__file__).resolve().parent.parent
API = ROOT / "docs" / "api"
NOT_A_LIBRARY_MODULE = {"demo": "the `make demo` program"}
DOCUMENTED = api_directives(API)
PUBLIC_MODULES = sorted(f"toolnexus.{m.name}" for m in pkgutil.iter_modules(toolnexus.__path__)
                        if not m.name.startswith("_") and m.name not in NOT_A_LIBRARY_MODULE)


def test_every_public_module_is_documented_once_and_nothing_else_is():
    assert sorted(DOCUMENTED) == PUBLIC_MODULES
    twice = {m: [p for p, _ in where] for m, where in DOCUMENTED.items() if len(where) > 1}
    assert not twice, f"documented on more than one page: {twice}"


@pytest.mark.parametrize("module", PUBLIC_MODULES)
def test_a_reference_page_lists_exactly_the_modules_all(module: str):
    [(page, members)] = DOCUMENTED[module]
    exported = list(importlib.import_module(module).__all__)
    missing = [n for n in exported if n not in members]
    unknown = [n for n in members if n not in exported]
    assert not missing, f"docs/api/{page}: add {missing} to the members of ::: {module} (they are in its __all__)"
    assert not unknown, f"docs/api/{page}: ::: {module} lists {unknown}, which its __all__ does not export"
    assert len(members) == len(set(members)), f"docs/api/{page}: ::: {module} lists a name twice"


def test_the_names_a_new_user_looks_for_first_are_in_the_reference():
    [(_, agents)] = DOCUMENTED["toolnexus.agents"]
    assert {"agent", "Agent", "AgentRuntime", "resume", "Budget", "TaskResult"} <= set(agents)
    [(_, stores)] = DOCUMENTED["toolnexus.stores"]
    assert {"open_store", "AnswerAlreadyApplied", "RequestWithdrawn"} <= set(stores)


def top_level_table() -> dict[str, list[str]]:
    """The overview's "top-level package" table: home module → names, as written."""
    text = (API / "index.md").read_text(encoding="utf-8")
    section = text[text.index("## The top-level package"):]
    rows: dict[str, list[str]] = {}
    for line in section.splitlines():
        m = re.match(r"^\| \[`(?P<module>[\w.]+)`\]\([\w.]+\) \| (?P<names>.+) \|$", line)
        if m:
            rows[m.group("module")] = [re.match(r"`(\w+)`", item.strip()).group(1)  # type: ignore[union-attr]
                                       for item in m.group("names").split(", ")]
    return rows


def test_the_overview_lists_exactly_the_top_level_names_each_under_its_home():
    table = top_level_table()
    listed = [n for names in table.values() for n in names]
    assert sorted(listed) == sorted(toolnexus.__all__), "docs/api/index.md: the top-level table != toolnexus.__all__"
    for module, names in table.items():
        home = importlib.import_module(module)
        [(_, members)] = DOCUMENTED[module]
        for name in names:
            obj = getattr(toolnexus, name)  # the promise: it imports from `toolnexus`
            attr = next((a for a in members if getattr(home, a) is obj), None)
            assert attr is not None, f"toolnexus.{name} is not a name of {module} documented on its page"
