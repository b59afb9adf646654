"""Every code block of the README and docs/ is tested: programs run, data parses, output matches.

The rules a block follows are in `tests/support/doc_blocks.py` (and, for authors, in
docs/contributing-docs.md). Programs run as real subprocesses — a fresh interpreter in a fresh
directory — with the environment a user would set: `OPENAI_BASE_URL` / `OPENAI_API_KEY`,
`ANTHROPIC_BASE_URL` / `ANTHROPIC_API_KEY` and `TYPESAFE_BASE_URL` / `TYPESAFE_API_KEY` point at
a loopback stand-in model (`tests/support/doc_model.py`) that refuses any other key. Nothing
reaches a real provider: an example that ignores those variables fails here (no network).

Shell and console blocks run the INSTALLED `toolnexus` console script (the venv's `bin` is first
on `PATH`) from the block's folder, with no `PYTHONPATH`: `--tools-from mytools:TOOLS` must find
`./mytools.py` as it does for a user. Python blocks run as `python file.py` would, forked from one
warmed-up interpreter (`support/doc_zygote.py`) to keep the suite's time down; the README's first
example always runs in a fresh interpreter.
"""

from __future__ import annotations

import json
import os
import re
import secrets
import shutil
import subprocess
import sys
import tomllib
from pathlib import Path

import pytest
import yaml

from support.doc_blocks import DATA_LANGS, RUN_LANGS, SHELL_LANGS, Block, api_directives, blocks_of, expected_matches
from support.doc_model import DocModelServer
from support.doc_zygote import Zygote

ROOT = Path(__file__).resolve().parent.parent
PAGES = [ROOT / "README.md", *sorted((ROOT / "docs").rglob("*.md"))]
BLOCKS = {page: blocks_of(page) for page in PAGES}
ALL = [b for blocks in BLOCKS.values() for b in blocks]
RUNNABLE = [b for b in ALL if b.runs or (b.is_file and b.lang in ("python", "py") and not b.no_run)]
DATA = [b for b in ALL if b.lang in DATA_LANGS and not b.no_run]
SHOWN_LANGS = {"text", "jsonc", "ini", "dockerfile", "diff", "http", "markdown", "md"}
TIMEOUT = 120

KEYS = {"openai": f"sk-doc-openai-{secrets.token_hex(6)}", "anthropic": f"sk-ant-doc-{secrets.token_hex(6)}",
        "typesafe": f"ts-doc-{secrets.token_hex(6)}"}
_SCRUBBED = ("OPENROUTER_API_KEY", "OPENAI_API_KEY", "ANTHROPIC_API_KEY", "TYPESAFE_API_KEY", "OPENAI_BASE_URL",
             "ANTHROPIC_BASE_URL", "TYPESAFE_BASE_URL", "TOOLNEXUS_AUTH_TOKEN", "TOOLNEXUS_DEMO_STORE",
             "TOOLNEXUS_MODEL", "PYTHONPATH")


@pytest.fixture(scope="module")
def model():
    with DocModelServer(KEYS) as server:
        yield server


@pytest.fixture(scope="module")
def python():
    """`python file.py` for the Python blocks, forked from one warmed-up interpreter (support/doc_zygote.py)."""
    with Zygote() as zygote:
        yield zygote


def user_env(model: DocModelServer, workdir: Path, **overrides: str) -> dict[str, str]:
    """The environment of a user who pointed the provider variables at `model`."""
    env = {k: v for k, v in os.environ.items() if k not in _SCRUBBED}
    env.update({
        "OPENAI_BASE_URL": f"{model.url}/v1", "OPENAI_API_KEY": KEYS["openai"],
        "ANTHROPIC_BASE_URL": model.url, "ANTHROPIC_API_KEY": KEYS["anthropic"],
        "TYPESAFE_BASE_URL": model.url, "TYPESAFE_API_KEY": KEYS["typesafe"],
        "PATH": f"{Path(sys.executable).parent}{os.pathsep}{env.get('PATH', '')}",
        "PYTHONUNBUFFERED": "1", "NO_COLOR": "1",
    })
    env.pop("PYTHONPATH", None)  # a user's shell has none: `--tools-from mytools:TOOLS` must find ./mytools.py itself
    env.update(overrides)
    return env


def prepare(block: Block, workdir: Path) -> None:
    """Write the page's files (titled blocks) that come before `block` — and `block` itself if it is one."""
    for other in BLOCKS[block.path]:
        if other.line > block.line:
            break
        if other.is_file:
            target = workdir / other.title
            target.parent.mkdir(parents=True, exist_ok=True)
            target.write_text(other.code, encoding="utf-8")


def run(args: list[str], workdir: Path, env: dict[str, str]) -> subprocess.CompletedProcess:
    return subprocess.run(args, cwd=workdir, env=env, capture_output=True, text=True, timeout=TIMEOUT,
                          stdin=subprocess.DEVNULL)


def shell_script(code: str) -> str:
    # `make demo` and friends: the repository's Makefile, with the interpreter running these tests.
    make = f'make() {{ command make -C "{ROOT}" STAMP= PY="{sys.executable}" "$@"; }}\n'
    return "set -euo pipefail\n" + make + code


def console_commands(code: str) -> list[tuple[str, str, int]]:
    """`(command, shown output, expected exit code)` per `$ ` line of a console block."""
    out: list[tuple[str, list[str], int]] = []
    lines = code.splitlines()
    i = 0
    while i < len(lines):
        line = lines[i]
        if not line.startswith("$ "):
            if out:
                out[-1][1].append(line)
            i += 1
            continue
        command = line[2:]
        while command.endswith("\\") and i + 1 < len(lines):
            i += 1
            command = command + "\n" + lines[i]  # bash reads the backslash-newline as one line
        exit_code = 0
        m = re.search(r"\s+# exits (\d+)$", command)
        if m:
            exit_code = int(m.group(1))
        out.append((command, [], exit_code))
        i += 1
    return [(c, "\n".join(o), e) for c, o, e in out]


def describe(result: subprocess.CompletedProcess) -> str:
    return f"exit {result.returncode}\n--- stdout ---\n{result.stdout}\n--- stderr ---\n{result.stderr}"


def test_shell_blocks_run_the_installed_console_script_with_no_pythonpath(model: DocModelServer, tmp_path: Path):
    env = user_env(model, tmp_path)
    assert shutil.which("toolnexus", path=env["PATH"]) == str(Path(sys.executable).with_name("toolnexus"))
    assert "PYTHONPATH" not in env


@pytest.mark.parametrize("block", RUNNABLE, ids=lambda b: b.id)
def test_doc_example_runs(block: Block, model: DocModelServer, python: Zygote, tmp_path: Path):
    prepare(block, tmp_path)
    env = user_env(model, tmp_path)
    if block.lang in ("python", "py"):
        script = tmp_path / (block.title if block.is_file else f"example_{block.line}.py")
        script.write_text(block.code, encoding="utf-8")
        result = python.run(script, tmp_path, env, TIMEOUT)
        assert result.returncode == 0, describe(result)
        if block.expected is not None:
            assert expected_matches(block.expected, result.stdout), describe(result)
    elif block.lang in SHELL_LANGS:
        result = run(["bash", "-c", shell_script(block.code)], tmp_path, env)
        assert result.returncode == 0, describe(result)
        if block.expected is not None:
            assert expected_matches(block.expected, result.stdout), describe(result)
    else:  # console
        commands = console_commands(block.code)
        assert commands, f"{block.id}: a console block needs at least one `$ ` command"
        for command, shown, exit_code in commands:
            result = run(["bash", "-c", shell_script(command)], tmp_path, env)
            assert result.returncode == exit_code, f"$ {command}\n{describe(result)}"
            if shown.strip():  # a command shown without output is checked by its exit code alone
                assert expected_matches(shown, result.stdout), f"$ {command}\nshown:\n{shown}\n{describe(result)}"


@pytest.mark.parametrize("block", DATA, ids=lambda b: b.id)
def test_doc_data_block_parses(block: Block):
    if block.lang == "json":
        json.loads(block.code)
    elif block.lang in ("yaml", "yml"):
        yaml.safe_load(block.code)
    else:
        tomllib.loads(block.code)


def test_every_block_declares_a_known_language():
    unknown = [f"{b.id} ({b.info!r})" for b in ALL if b.lang not in RUN_LANGS | DATA_LANGS | SHOWN_LANGS]
    assert not unknown, "fences need a known language (see docs/contributing-docs.md): " + ", ".join(unknown)


def test_python_blocks_are_programs_unless_marked():
    """A `python` block that is not a whole program (top-level `await`, names it never defines)
    must say `no-run`: compiling each one catches the fragments."""
    for b in ALL:
        if b.lang in ("python", "py") and not b.no_run:
            compile(b.code, b.id, "exec")


# -- the README's first example, verbatim, against a key-checking endpoint -----------------------------------


def readme_taste() -> Block:
    text = (ROOT / "README.md").read_text(encoding="utf-8").splitlines()
    start = text.index("## A taste") + 1
    return next(b for b in BLOCKS[ROOT / "README.md"] if b.line > start and b.lang == "python")


def test_readme_taste_runs_verbatim_and_prints_the_final_text(model: DocModelServer, tmp_path: Path):
    block = readme_taste()
    script = tmp_path / "taste.py"
    script.write_text(block.code, encoding="utf-8")
    seen = len(model.requests)
    result = run([sys.executable, str(script)], tmp_path, user_env(model, tmp_path))
    assert result.returncode == 0, describe(result)
    mine = model.requests[seen:]
    assert mine and all(r["headers"]["authorization"] == f"Bearer {KEYS['openai']}" for r in mine)
    final_text = model.replies[-1][1]["choices"][0]["message"]["content"]
    assert final_text == "deploy the latest build deployed"  # the tool's output, reported by the model
    assert result.stdout.splitlines() == [  # the approval it was asked: tool, arguments, agent, in one line
        'asked: Approve deploy {"service": "deploy the latest build"}? (native, agent root/approver.1) '
        "Deploy a service to production.", f"done {final_text}"], describe(result)


def test_readme_taste_is_refused_with_any_other_key(model: DocModelServer, tmp_path: Path):
    script = tmp_path / "taste.py"
    script.write_text(readme_taste().code, encoding="utf-8")
    result = run([sys.executable, str(script)], tmp_path, user_env(model, tmp_path, OPENAI_API_KEY="sk-wrong"))
    assert model.replies[-1][0] == 401
    assert "done" not in result.stdout and "LLM 401" in result.stdout + result.stderr, describe(result)


# -- the site ------------------------------------------------------------------------------------------------


def test_docs_site_builds_without_warnings(tmp_path: Path):
    """`make docs` in miniature: `mkdocs build --strict` (needs the `docs` extra; CI installs it)."""
    pytest.importorskip("mkdocs", reason="the docs extra is not installed (make docs installs it)")
    pytest.importorskip("material", reason="the docs extra is not installed (make docs installs it)")
    result = run([sys.executable, "-m", "mkdocs", "build", "--strict", "--site-dir", str(tmp_path / "site")], ROOT,
                 {**os.environ, "NO_COLOR": "1", "NO_MKDOCS_2_WARNING": "1"})
    assert result.returncode == 0, describe(result)
    assert "WARNING" not in result.stderr, result.stderr
    assert (tmp_path / "site" / "index.html").is_file()
    missing = []  # every name the reference pages list is rendered, with its own anchor
    for module, [(page, members)] in api_directives(ROOT / "docs" / "api").items():
        html = (tmp_path / "site" / "api" / page.removesuffix(".md") / "index.html").read_text(encoding="utf-8")
        missing += [f"{module}.{n}" for n in members if f'id="{module}.{n}"' not in html]
    assert not missing, f"listed on a reference page but not rendered: {missing}"
