"""Module, class and function docstrings explain in our own terms: none cites a section of the
contract toolnexus is built against (users do not have it) — no `§`, no "beyond #N", no chapter
file name. Pinned strings (tool descriptions, prompts) are data, not docstrings, and are not read."""

import ast
import re
from pathlib import Path

SRC = Path(__file__).resolve().parent.parent / "src" / "toolnexus"
CITATION = re.compile(r"§|\b[Bb]eyond #\d|\b(core|client|agents|suspension|a2a-serve-cli|mcp-skills-builtins|"
                      r"judge-classifier-content)\.md\b|\bSPEC\b|\bthe spec (pins|is silent|leaves)")


def _docstrings(tree: ast.AST):
    for node in ast.walk(tree):
        if isinstance(node, (ast.Module, ast.ClassDef, ast.FunctionDef, ast.AsyncFunctionDef)):
            doc = ast.get_docstring(node, clean=False)
            if doc:
                yield getattr(node, "lineno", 1), doc


def test_no_docstring_or_comment_cites_a_contract_section():
    found = []
    for path in sorted(SRC.rglob("*.py")):
        text = path.read_text(encoding="utf-8")
        for line, doc in _docstrings(ast.parse(text)):
            if CITATION.search(doc):
                found.append(f"{path.relative_to(SRC)}:{line}")
        for n, source_line in enumerate(text.splitlines(), 1):
            comment = source_line.split("#", 1)[1] if "#" in source_line and '"' not in source_line else ""
            if comment and CITATION.search(comment):
                found.append(f"{path.relative_to(SRC)}:{n} (comment)")
    assert len(list(SRC.rglob("*.py"))) > 150  # the walk saw the package
    assert found == []
