"""`grep` and `glob`, with the walker and glob matcher they share (spec §3.5)."""

from __future__ import annotations

import os
import re
import sys
import threading

import pytest

from toolnexus.builtin import create_builtin_tools
from toolnexus.builtin._search import glob_matcher, glob_to_regex, walk_files


@pytest.fixture
def tools():
    return {t.name: t for t in create_builtin_tools()}


@pytest.fixture
def tree(tmp_path):
    files = {
        "b.txt": "beta needle\n",
        "a.py": "import os\nneedle = 1\n",
        "Z.txt": "upper\n",
        ".hidden": "needle in dotfile\n",
        "src/main.py": "def main():\n    return 'needle'\n",
        "src/deep/x.py": "x = 'needle'\r\ny = 2\r\n",
        "src/deep/notes.txt": "nothing here\n",
        "node_modules/pkg/index.js": "needle\n",
        ".git/config": "needle\n",
    }
    for rel, text in files.items():
        path = tmp_path / rel
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_bytes(text.encode())
    return tmp_path


# --------------------------------------------------------------------------------------- walker


def test_walker_sorts_by_code_point_skips_ignored_dirs_and_keeps_dotfiles(tree):
    rels = [rel for rel, _ in walk_files(str(tree))]
    assert rels == [".hidden", "Z.txt", "a.py", "b.txt", "src/deep/notes.txt", "src/deep/x.py", "src/main.py"]


def test_walker_neither_follows_nor_lists_symlinks(tree, tmp_path_factory):
    outside = tmp_path_factory.mktemp("outside")
    (outside / "far.txt").write_text("far")
    os.symlink(outside, tree / "linkdir")
    os.symlink(tree / "a.py", tree / "link.py")
    rels = [rel for rel, _ in walk_files(str(tree))]
    assert "link.py" not in rels and not any(r.startswith("linkdir") for r in rels)


def test_walker_on_a_file_yields_nothing_and_on_a_missing_dir_raises(tree):
    assert walk_files(str(tree / "a.py")) == []
    with pytest.raises(FileNotFoundError):
        walk_files(str(tree / "missing"))


# -------------------------------------------------------------------------------------- matcher


@pytest.mark.parametrize(
    ("pattern", "regex"),
    [
        ("*.py", r"^[^/]*\.py$"),
        ("**/*.py", r"^.*[^/]*\.py$"),
        ("src/**", r"^src/.*$"),
        ("a?c", r"^a[^/]c$"),
        ("[ab]{1}(x)|y+$^", r"^\[ab\]\{1\}\(x\)\|y\+\$\^$"),
    ],
)
def test_glob_translation(pattern, regex):
    assert glob_to_regex(pattern) == regex


@pytest.mark.parametrize(
    ("pattern", "rel", "matches"),
    [
        ("*.txt", "b.txt", True),
        ("*.txt", "src/deep/notes.txt", True),  # no "/" in the pattern: basename at any depth
        ("*.txt", "src/main.py", False),
        ("src/*.py", "src/main.py", True),
        ("src/*.py", "src/deep/x.py", False),  # "*" does not cross "/"
        ("src/**/*.py", "src/deep/x.py", True),
        ("**/*.py", "a.py", True),  # "**/" also matches nothing at the top level
        ("**/*.py", "src/deep/x.py", True),
        ("?.py", "a.py", True),
        ("?.py", "ab.py", False),
        ("[a].py", "a.py", False),  # no character classes
        ("[a].py", "[a].py", True),
    ],
)
def test_glob_matching(pattern, rel, matches):
    assert glob_matcher(pattern)(rel) is matches


# ----------------------------------------------------------------------------------------- glob


async def test_glob_lists_relative_paths_in_order(tools, tree):
    result = await tools["glob"].execute({"pattern": "*.py", "path": str(tree)})
    assert result.output == "a.py\nsrc/deep/x.py\nsrc/main.py" and result.metadata == {"count": 3}


async def test_glob_limit_and_no_match(tools, tree):
    limited = await tools["glob"].execute({"pattern": "*", "path": str(tree), "limit": 2})
    assert limited.output == ".hidden\nZ.txt" and limited.metadata == {"count": 2}
    unlimited = await tools["glob"].execute({"pattern": "*", "path": str(tree), "limit": 0})
    assert unlimited.metadata == {"count": 7}
    none = await tools["glob"].execute({"pattern": "*.rs", "path": str(tree)})
    assert none.output == "" and none.metadata == {"count": 0} and not none.is_error


async def test_glob_defaults_to_100_results(tools, tmp_path):
    for i in range(120):
        (tmp_path / f"f{i:03d}.txt").write_text("")
    result = await tools["glob"].execute({"pattern": "*.txt", "path": str(tmp_path)})
    assert result.metadata == {"count": 100} and result.output.split("\n")[-1] == "f099.txt"


async def test_glob_requires_a_pattern(tools):
    assert (await tools["glob"].execute({})).output == "glob: pattern is required"


async def test_glob_on_a_missing_directory_is_an_error(tools, tmp_path):
    result = await tools["glob"].execute({"pattern": "*", "path": str(tmp_path / "nope")})
    assert result.is_error and result.output == f"glob: [Errno 2] No such file or directory: '{tmp_path / 'nope'}'"


_listed: list[str] = []
_listing = threading.Event()
_hook: list[bool] = []


def _audit(event, args):
    if event == "os.scandir" and _listing.is_set():
        _listed.append(os.fspath(args[0]))


@pytest.fixture
def listed_dirs():
    """Directories `os.scandir` lists while the test runs (audit hooks cannot be removed)."""
    if not _hook:
        sys.addaudithook(_audit)
        _hook.append(True)
    _listed.clear()
    _listing.set()
    yield _listed
    _listing.clear()


async def test_glob_and_grep_stop_walking_once_the_limit_is_reached(tools, tree, listed_dirs):
    # `.hidden` and `Z.txt` come before `src/` in walk order, so `src/` is never listed.
    globbed = await tools["glob"].execute({"pattern": "*", "path": str(tree), "limit": 2})
    grepped = await tools["grep"].execute({"pattern": "needle", "path": str(tree), "limit": 1})
    assert globbed.output == ".hidden\nZ.txt" and grepped.output == ".hidden:1:needle in dotfile"
    assert listed_dirs == [str(tree), str(tree)]


# ----------------------------------------------------------------------------------------- grep


async def test_grep_emits_file_line_text_in_walk_order(tools, tree):
    result = await tools["grep"].execute({"pattern": "needle", "path": str(tree)})
    assert result.output == "\n".join(
        [
            ".hidden:1:needle in dotfile",
            "a.py:2:needle = 1",
            "b.txt:1:beta needle",
            "src/deep/x.py:1:x = 'needle'",  # the CR of a CRLF line is not part of the line
            "src/main.py:2:    return 'needle'",
        ]
    )
    assert result.metadata == {"count": 5}


async def test_grep_include_and_limit(tools, tree):
    only_py = await tools["grep"].execute({"pattern": "needle", "path": str(tree), "include": "*.py"})
    assert only_py.output.split("\n") == [
        "a.py:2:needle = 1",
        "src/deep/x.py:1:x = 'needle'",
        "src/main.py:2:    return 'needle'",
    ]
    first_two = await tools["grep"].execute({"pattern": "needle", "path": str(tree), "limit": 2})
    assert first_two.metadata == {"count": 2} and first_two.output.startswith(".hidden:1:")
    nested = await tools["grep"].execute({"pattern": "needle", "path": str(tree), "include": "src/**/*.py"})
    assert nested.metadata == {"count": 2}


async def test_grep_regex_semantics_and_no_match(tools, tree):
    anchored = await tools["grep"].execute({"pattern": r"^y = \d$", "path": str(tree)})
    assert anchored.output == "src/deep/x.py:2:y = 2"
    none = await tools["grep"].execute({"pattern": "absent-text", "path": str(tree)})
    assert none.output == "" and none.metadata == {"count": 0} and not none.is_error


async def test_grep_skips_binary_and_undecodable_files(tools, tree):
    (tree / "blob.bin").write_bytes(b"needle\0\1\2")
    (tree / "latin1.txt").write_bytes("needle café".encode("latin-1"))
    result = await tools["grep"].execute({"pattern": "needle", "path": str(tree)})
    assert not result.is_error
    assert "blob.bin" not in result.output and "latin1.txt" not in result.output
    assert result.metadata == {"count": 5, "skippedBinary": 2}


async def test_grep_errors(tools, tree):
    assert (await tools["grep"].execute({})).output == "grep: pattern is required"
    bad = await tools["grep"].execute({"pattern": "(", "path": str(tree)})
    try:
        re.compile("(")
    except re.error as exc:
        expected = f"grep: invalid regex: {exc}"
    assert bad.is_error and bad.output == expected


async def test_grep_defaults_to_the_current_directory(tools, tree, monkeypatch):
    monkeypatch.chdir(tree / "src")
    result = await tools["grep"].execute({"pattern": "return"})
    assert result.output == "main.py:2:    return 'needle'"
