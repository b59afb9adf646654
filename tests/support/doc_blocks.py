"""The fenced code blocks of the README and docs/, as the doc-example tests see them.

The rules (also written for authors in docs/contributing-docs.md):

- ```` ```python ```` — a program: run in a fresh interpreter, in a fresh directory, must exit 0.
- ```` ```sh ```` (also `bash`, `shell`) — a shell script of ours (`toolnexus …`, `make demo`,
  `python file.py`): run with `bash -e` in that directory; `make` runs the repository's Makefile
  with the interpreter running the tests.
- ```` ```console ```` — a terminal session: each `$ ` line (with `\\` continuations) is a command,
  the lines after it what it prints on stdout; `...` stands for any text (a line of only `...`
  for any number of lines).
- ```` ```python title="name.py" ```` (any language) — a file: written under that name into the
  directory of every later block of the same page before it runs (python files are also run).
- ```` ```text title="Output" ```` right after a runnable block — what that block prints on
  stdout, checked the same way as a console session.
- `json`, `yaml`, `toml` blocks must parse; other languages (`text`, …) are shown only.
- ` no-run` after the language (```` ```sh no-run ````) — shown only: it cannot run here (a
  `pip install` from PyPI, a real provider, a server that runs until stopped, a fragment).
"""

from __future__ import annotations

import itertools
import re
from dataclasses import dataclass, field
from pathlib import Path
from typing import Optional

__all__ = ["Block", "blocks_of", "RUN_LANGS", "SHELL_LANGS", "expected_matches", "api_directives"]

RUN_LANGS = {"python", "py", "sh", "bash", "shell", "console"}
SHELL_LANGS = {"sh", "bash", "shell"}
DATA_LANGS = {"json", "yaml", "yml", "toml"}

_FENCE = re.compile(r"^(?P<indent>[ \t]*)(?P<fence>`{3,}|~{3,})(?P<info>[^\n`]*)$")
_TITLE = re.compile(r'title="(?P<title>[^"]*)"')


@dataclass
class Block:
    path: Path          # the page
    line: int           # 1-based line of the opening fence
    lang: str
    info: str
    code: str
    title: Optional[str] = None
    no_run: bool = False
    expected: Optional[str] = field(default=None, repr=False)  # a following `text title="Output"` block

    @property
    def id(self) -> str:
        return f"{self.path.name}:{self.line}"

    @property
    def runs(self) -> bool:
        return self.lang in RUN_LANGS and not self.no_run

    @property
    def is_file(self) -> bool:
        return self.title is not None and self.title.lower() != "output"


def blocks_of(path: Path) -> list[Block]:
    """Every fenced block of a Markdown page, in order (a fence inside a longer fence is text)."""
    lines = path.read_text(encoding="utf-8").splitlines()
    out: list[Block] = []
    i = 0
    while i < len(lines):
        m = _FENCE.match(lines[i])
        if not m:
            i += 1
            continue
        indent, fence, info = m.group("indent"), m.group("fence"), m.group("info").strip()
        body: list[str] = []
        j = i + 1
        while j < len(lines) and not re.match(rf"^[ \t]*{re.escape(fence[0])}{{{len(fence)},}}[ \t]*$", lines[j]):
            body.append(lines[j][len(indent):] if lines[j].startswith(indent) else lines[j].lstrip())
            j += 1
        words = info.split()
        lang = words[0].lower() if words else ""
        title = _TITLE.search(info)
        out.append(Block(path, i + 1, lang, info, "\n".join(body) + "\n", title.group("title") if title else None,
                         "no-run" in words[1:]))
        i = j + 1
    for prev, block in itertools.pairwise(out):
        if block.lang == "text" and (block.title or "").lower() == "output":
            prev.expected = block.code
    return out


def expected_matches(expected: str, actual: str) -> bool:
    """Whether `actual` output matches a shown one: `...` is any text, a `...` line any lines."""
    parts: list[str] = []
    for line in expected.rstrip("\n").splitlines():
        if line.strip() == "...":
            parts.append(r"(?:.*\n)*?")
        else:
            parts.append(".*?".join(re.escape(piece) for piece in line.rstrip().split("...")) + r"[ \t]*\n")
    return re.fullmatch("".join(parts), actual.rstrip("\n") + "\n") is not None


_DIRECTIVE = re.compile(r"^::: (?P<module>[\w.]+)[ \t]*\n(?P<options>(?:(?:    .*)?\n)*)", re.M)


def api_directives(api_dir: Path) -> dict[str, list[tuple[str, list[str]]]]:
    """The mkdocstrings directives of the reference pages: module → [(page, members)]."""
    import yaml

    found: dict[str, list[tuple[str, list[str]]]] = {}
    for page in sorted(api_dir.glob("*.md")):
        for m in _DIRECTIVE.finditer(page.read_text(encoding="utf-8")):
            block = "\n".join(line[4:] for line in m.group("options").splitlines())
            options = (yaml.safe_load(block) or {}).get("options", {}) if block.strip() else {}
            members = options.get("members")
            assert isinstance(members, list), f"{page.name}: ::: {m.group('module')} needs an explicit members list"
            found.setdefault(m.group("module"), []).append((page.name, [str(n) for n in members]))
    return found
