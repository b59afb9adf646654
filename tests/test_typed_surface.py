"""The typed public surface: `py.typed`, lazy exports visible to type checkers, a clean `dir()`,
and `AgentRuntime` as an async context manager."""

from __future__ import annotations

import ast
import importlib.resources
import importlib.util
import inspect
import subprocess
import sys
import textwrap
import tomllib
from pathlib import Path

import pytest

import toolnexus
from support.llm_server import Json, LlmServer, openai_text
from toolnexus.agents import AgentDef, AgentRuntime

ROOT = Path(__file__).resolve().parents[1]


def test_the_package_ships_py_typed_and_installs_it():
    assert (importlib.resources.files("toolnexus") / "py.typed").is_file()
    pyproject = tomllib.loads((ROOT / "pyproject.toml").read_text())
    assert "py.typed" in pyproject["tool"]["setuptools"]["package-data"]["toolnexus"]


def test_dir_lists_only_public_names():
    names = dir(toolnexus)
    assert names == sorted({*toolnexus.__all__, "__version__"})
    for internal in ("Any", "annotations", "importlib", "_LAZY", "_register", "_importlib", "_typing"):
        assert internal not in names
    assert {"create_client", "define_tool", "Answer", "Toolkit", "RunResult"} <= set(names)


def test_every_listed_name_resolves():
    for name in toolnexus.__all__:
        assert getattr(toolnexus, name) is not None, name


def test_the_type_checking_block_mirrors_the_lazy_table():
    tree = ast.parse((ROOT / "src/toolnexus/__init__.py").read_text())
    blocks = [n for n in tree.body if isinstance(n, ast.If) and ast.unparse(n.test) == "_typing.TYPE_CHECKING"]
    assert len(blocks) == 1
    seen = {}
    for node in blocks[0].body:
        assert isinstance(node, ast.ImportFrom)
        for alias in node.names:
            assert alias.asname is not None, f"{alias.name}: spell re-exports as `X as X`"
            seen[alias.asname] = ("." * node.level + (node.module or ""), alias.name)
    assert seen == toolnexus._LAZY


def test_import_toolnexus_stays_cheap():
    code = ("import sys, toolnexus\n"
            "heavy = ('toolnexus.client', 'toolnexus.mcp_source', 'mcp', 'httpx', 'pydantic', 'opentelemetry')\n"
            "print(sorted(m for m in sys.modules if m.split('.')[0] in heavy or m in heavy))\n")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "[]"


def test_create_client_and_agent_carry_their_class_signatures():
    params = inspect.signature(toolnexus.create_client).parameters
    assert list(params)[:3] == ["base_url", "style", "model"]
    assert all(p.kind is inspect.Parameter.KEYWORD_ONLY for p in params.values())
    assert inspect.signature(toolnexus.create_client).return_annotation is toolnexus.Client
    from toolnexus.agents import Agent, agent

    agent_params = inspect.signature(agent).parameters
    assert list(agent_params)[:2] == ["name", "does"] and "output_type" in agent_params
    assert inspect.signature(agent).return_annotation is Agent


USER_FILE = '''
import asyncio

from toolnexus import Answer, Tool, create_client, define_tool, tool
from toolnexus.agents import agent


@tool
def add(a: int, b: int = 0) -> str:
    """Add two numbers."""
    return str(a + b)


def shout(text: str) -> str:
    return text.upper()


loud: Tool = define_tool(shout, name="shout")
names: list[str] = [add.name, loud.name]
client = create_client(base_url="http://127.0.0.1:9/v1", style="openai", model="m", api_key="k")
answer: Answer = Answer(id="r1", ok=True)
helper = agent("helper", does="answers questions", uses={"tools": [add, loud]})


async def main() -> str:
    result = await client.run("hi")
    return result.text
'''

BAD_FILE = '''
from toolnexus import create_client, NotAName
import toolnexus
from toolnexus.agents import agent

client = create_client(base_url="x", style="openai", model="m", max_turn=3)
count: int = client.max_turns
label: int = toolnexus.define_tool(print).name
toolnexus.nothing_here
helper = agent("x", doez="typo")
'''


@pytest.mark.skipif(importlib.util.find_spec("mypy") is None, reason="mypy is in the dev extra")
def test_mypy_checks_a_user_file_against_the_lazy_exports(tmp_path):
    (tmp_path / "user_ok.py").write_text(textwrap.dedent(USER_FILE))
    (tmp_path / "user_bad.py").write_text(textwrap.dedent(BAD_FILE))
    proc = subprocess.run(
        [sys.executable, "-m", "mypy", "--no-implicit-reexport", "--cache-dir", str(tmp_path / ".mypy_cache"),
         "--no-error-summary", "--hide-error-context", "user_ok.py", "user_bad.py"],
        cwd=tmp_path, capture_output=True, text=True, timeout=120,
    )
    errors = [line.split("  [")[0].rstrip() for line in proc.stdout.splitlines() if ": error:" in line]
    assert errors == [
        'user_bad.py:2: error: Module "toolnexus" has no attribute "NotAName"',
        'user_bad.py:6: error: Unexpected keyword argument "max_turn" for "create_client"; did you mean "max_turns"?',
        'user_bad.py:8: error: Incompatible types in assignment (expression has type "str", variable has type "int")',
        'user_bad.py:9: error: Module has no attribute "nothing_here"',
        'user_bad.py:10: error: Unexpected keyword argument "doez" for "agent"',
    ], proc.stdout + proc.stderr


async def test_agent_runtime_as_async_context_manager_releases_its_transport():
    with LlmServer() as server:
        server.add(Json(openai_text("hello")))
        llm = {"base_url": server.base_url, "style": "openai", "model": "m", "api_key": "k"}
        defn = AgentDef(name="solo", description="answers", system_prompt="", model="inherit")
        async with AgentRuntime(registry={"solo": defn}, llm=llm) as rt:
            h = rt.spawn(rt.root, "solo")
            rt.wake(h, "hi")
            result = await rt.wait(h)
            pooled = [conn for conns in rt.transport._idle.values() for conn in conns]
            assert (result.status, result.text) == ("done", "hello")
            assert len(pooled) == 1 and pooled[0].alive()  # the keep-alive connection waits in the pool
        assert rt.transport._idle == {}
        assert not pooled[0].alive()
        assert len(server.requests) == 1
