"""Import-linter contract types for `pyproject.toml` that count type-only imports: `acyclic_siblings`
and `forbidden`.

The project's import-linter session leaves out imports made under `if TYPE_CHECKING:` — right for
the layers (a lower layer may name a higher layer's type in an annotation) but blind to cycles:
`client/` was a four-module cycle for a year, closed only by annotation imports of `Client`, and
the built-in `acyclic_siblings` contract passed it. This contract checks the same thing over a
graph that keeps those imports (built here, once per run, in well under a second).

Registered in `pyproject.toml` (`contract_types`); `lint-imports` puts the working directory on
`sys.path`, so run it from the repository root (as `make test` does).
"""

from __future__ import annotations

import grimp
from importlinter.contracts.acyclic_siblings import AcyclicSiblingsContract
from importlinter.contracts.forbidden import ForbiddenContract
from importlinter.domain.contract import ContractCheck


def _typed(graph: grimp.ImportGraph) -> grimp.ImportGraph:
    """The same modules' graph, with the imports under `if TYPE_CHECKING:` kept."""
    roots = sorted({module.split(".")[0] for module in graph.modules})
    return grimp.build_graph(*roots, exclude_type_checking_imports=False, cache_dir=None)


class TypedAcyclicSiblingsContract(AcyclicSiblingsContract):
    """`acyclic_siblings`, with imports under `if TYPE_CHECKING:` counted."""

    type_name = "acyclic_siblings_typed"

    def check(self, graph: grimp.ImportGraph, verbose: bool) -> ContractCheck:
        return super().check(_typed(graph), verbose)


class TypedForbiddenContract(ForbiddenContract):
    """`forbidden`, with imports under `if TYPE_CHECKING:` counted: a leaf that names a runtime
    type in an annotation is not a leaf (`agents/`'s plain-data modules)."""

    type_name = "forbidden_typed"

    def check(self, graph: grimp.ImportGraph, verbose: bool) -> ContractCheck:
        return super().check(_typed(graph), verbose)
