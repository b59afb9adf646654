"""No import cycle anywhere in `src/`, counting the imports made only for type checking.

import-linter's contracts in `pyproject.toml` hold the layers and forbid cycles between siblings of
one package; neither sees a cycle that runs through a package's `__init__` or across packages
(`mcp_source.session` importing the package root for its version closed a 17-module loop). This
test takes the whole graph, type-only imports included, and fails on any strongly connected set of
more than one module, naming the modules and the edges that close it.
"""

from __future__ import annotations

import grimp

# Cycles being removed, by their modules; empty: `agents/` was the last one.
KNOWN: list[frozenset[str]] = []


def _cycles(graph: grimp.ImportGraph) -> list[list[str]]:
    """Tarjan's strongly connected components of more than one module, iteratively (no recursion limit)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    found: list[list[str]] = []
    for root in sorted(graph.modules):
        if root in index:
            continue
        work = [(root, iter(sorted(graph.find_modules_directly_imported_by(root))))]
        index[root] = low[root] = len(index)
        stack.append(root)
        on_stack.add(root)
        while work:
            node, edges = work[-1]
            step = next(edges, None)
            if step is not None:
                if step not in index:
                    index[step] = low[step] = len(index)
                    stack.append(step)
                    on_stack.add(step)
                    work.append((step, iter(sorted(graph.find_modules_directly_imported_by(step)))))
                elif step in on_stack:
                    low[node] = min(low[node], index[step])
                continue
            work.pop()
            if work:
                low[work[-1][0]] = min(low[work[-1][0]], low[node])
            if low[node] == index[node]:
                component = []
                while True:
                    member = stack.pop()
                    on_stack.discard(member)
                    component.append(member)
                    if member == node:
                        break
                if len(component) > 1:
                    found.append(sorted(component))
    return found


def _edges(graph: grimp.ImportGraph, component: list[str]) -> list[str]:
    members = set(component)
    return [
        f"{a} -> {b} (line {graph.get_import_details(importer=a, imported=b)[0]['line_number']})"
        for a in component
        for b in sorted(graph.find_modules_directly_imported_by(a))
        if b in members and graph.get_import_details(importer=a, imported=b)
    ]


def test_the_package_has_no_import_cycle() -> None:
    graph = grimp.build_graph("toolnexus", exclude_type_checking_imports=False, cache_dir=None)
    cycles = [c for c in _cycles(graph) if frozenset(c) not in KNOWN]
    assert not cycles, "import cycles in src/:\n" + "\n\n".join("\n".join(_edges(graph, c)) for c in cycles)


def test_the_cycle_finder_sees_a_cycle() -> None:
    """The finder itself: a three-module loop and a self-contained pair are both reported."""
    graph = grimp.ImportGraph()
    for a, b in [("p.a", "p.b"), ("p.b", "p.c"), ("p.c", "p.a"), ("p.d", "p.a"), ("p.e", "p.f"), ("p.f", "p.e")]:
        graph.add_import(importer=a, imported=b)
    assert sorted(_cycles(graph)) == [["p.a", "p.b", "p.c"], ["p.e", "p.f"]]
