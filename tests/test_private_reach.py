"""No module reaches into another object's private state, in `src/`.

Two rules, checked over the syntax tree of every module of the package:

- `._core` (a runtime's core) is read only on `self`: hosts use `AgentRuntime.run_state`, the
  supported accessor, so the facade stays the one door to the core;
- a `_`-prefixed attribute is written (`x._y = ...`, `x._y += ...`, `del x._y`,
  `setattr(x, "_y", ...)`) only on `self` / `cls`, or in a module that itself defines that
  attribute on `self` (the class's own module): one object never writes another's private fields
  (a `Handle`'s live turn, waiters and `on_spawn` task change through its methods).

`ALLOWED` lists deliberate exceptions as `(module path under src/toolnexus, attribute)`; it is empty.
"""

from __future__ import annotations

import ast
import pathlib
from typing import Iterator

SRC = pathlib.Path(__file__).resolve().parent.parent / "src" / "toolnexus"

ALLOWED: set[tuple[str, str]] = set()


def _own(node: ast.expr) -> bool:
    return isinstance(node, ast.Name) and node.id in ("self", "cls")


def _private(name: str) -> bool:
    return name.startswith("_") and not name.startswith("__")


def _targets(node: ast.expr) -> Iterator[ast.expr]:
    if isinstance(node, (ast.Tuple, ast.List)):
        for element in node.elts:
            yield from _targets(element)
    elif isinstance(node, ast.Starred):
        yield from _targets(node.value)
    else:
        yield node


def _defined_on_self(tree: ast.AST) -> set[str]:
    """Attributes this module sets on `self` / `cls` (the ones its classes own)."""
    return {n.attr for n in ast.walk(tree)
            if isinstance(n, ast.Attribute) and isinstance(n.ctx, ast.Store) and _own(n.value)}


def violations(source: str, where: str = "<snippet>") -> list[str]:
    """Every breach of the two rules in one module's source, as `where:line: text`."""
    tree = ast.parse(source)
    owned = _defined_on_self(tree)
    found: list[str] = []
    for node in ast.walk(tree):
        written: list[ast.expr] = []
        if isinstance(node, ast.Assign):
            written = [t for target in node.targets for t in _targets(target)]
        elif isinstance(node, (ast.AugAssign, ast.AnnAssign)):
            written = list(_targets(node.target))
        elif isinstance(node, ast.Delete):
            written = [t for target in node.targets for t in _targets(target)]
        elif (isinstance(node, ast.Call) and isinstance(node.func, ast.Name) and node.func.id in ("setattr", "delattr")
              and len(node.args) >= 2 and isinstance(node.args[1], ast.Constant) and isinstance(node.args[1].value, str)
              and _private(node.args[1].value) and not _own(node.args[0])
              and node.args[1].value not in owned and (where, node.args[1].value) not in ALLOWED):
            found.append(f"{where}:{node.lineno}: {ast.unparse(node)} writes another object's private field")
        for target in written:
            if (isinstance(target, ast.Attribute) and _private(target.attr) and not _own(target.value)
                    and target.attr not in owned and (where, target.attr) not in ALLOWED):
                found.append(f"{where}:{node.lineno}: {ast.unparse(target)} writes another object's private field")
        if isinstance(node, ast.Attribute) and node.attr == "_core" and not _own(node.value):
            found.append(f"{where}:{node.lineno}: {ast.unparse(node)} reaches into a runtime's core "
                         "(use AgentRuntime.run_state)")
    return found


def test_no_module_reaches_into_another_objects_private_state() -> None:
    found: list[str] = []
    for path in sorted(SRC.rglob("*.py")):
        found += violations(path.read_text(encoding="utf-8"), str(path.relative_to(SRC)))
    assert not found, "private reach-ins in src/:\n" + "\n".join(found)


def test_the_rules_catch_a_reach_in() -> None:
    """The checker itself: each kind of breach is reported; the owner's own writes are not."""
    snippet = '''
class Runtime:
    def __init__(self):
        self._core = None
        self._mine = 1

def host(rt, h, turn):
    rt._core.durable            # a read through another object's core
    h._turn = turn              # a write of another object's private field
    h._waiters += [1]
    a, h._on_spawn_task = 1, 2
    del h._seen
    setattr(h, "_flag", True)
    rt._mine = 2                # this module's own class defines `_mine`: allowed
    h.public = 3                # public: allowed
'''
    found = sorted(violations(snippet), key=lambda line: int(line.split(":")[1]))
    assert [line.split(": ", 1)[1].split(" ", 1)[0] for line in found] == [
        "rt._core", "h._turn", "h._waiters", "h._on_spawn_task", "h._seen", "setattr(h,",
    ], found
