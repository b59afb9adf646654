"""The installed `toolnexus` as a new user meets it: modules from the current folder, config files
with comments and typos, read-only verbs on a store that does not exist, model settings given once,
a mistyped command.

Every test runs the console script from the venv as a subprocess, in a folder of its own, with no
`PYTHONPATH` pointing at the test helpers unless it says so.
"""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Iterator

import pytest

from support.cli_run import TOOLNEXUS, cli_env, run_cli
from support.llm_server import Json, LlmServer, openai_text

KEY = "sk-test-SETTINGS-0123456789"

MYTOOLS = '''
from toolnexus import tool


@tool
def lookup(term: str) -> str:
    """Look a term up."""
    return term + ": see the wiki"


TOOLS = [lookup]
'''


@pytest.fixture
def llm() -> Iterator[LlmServer]:
    with LlmServer() as server:
        yield server


def bare_env(**extra: str) -> dict[str, str]:
    """`cli_env()` without the test helpers on PYTHONPATH: only what a user's shell would have."""
    env = cli_env(**extra)
    env.pop("PYTHONPATH", None)
    return env


def in_folder(folder: Path, *args: str, env: dict[str, str] | None = None):
    return run_cli(*args, env=env if env is not None else bare_env(), cwd=folder)


# -- 1. MODULE:ATTR from the current folder ----------------------------------------------------------------


def test_tools_from_a_module_in_the_current_folder_load_as_with_python_dash_m(tmp_path: Path) -> None:
    (tmp_path / "mytools.py").write_text(MYTOOLS)
    done = in_folder(tmp_path, "tools", "--no-builtins", "--tools-from", "mytools:TOOLS")
    assert (done.returncode, done.stdout, done.stderr) == (0, "lookup\t(native)\n", "")
    safe = in_folder(tmp_path, "tools", "--no-builtins", "--tools-from", "mytools:TOOLS",
                     env=bare_env(PYTHONSAFEPATH="1"))  # the user asked Python not to: as for `python -m`
    assert safe.returncode == 1 and "cannot import mytools: No module named 'mytools'" in safe.stderr


# -- 2. and 3. the config file: comments as the library reads them; typos ------------------------------------


def test_a_config_with_comments_reads_as_create_toolkit_reads_it(tmp_path: Path) -> None:
    import asyncio

    from toolnexus import create_toolkit

    config = tmp_path / "team.jsonc"
    config.write_text('{\n  // no shell for this team\n'
                      '  "builtins": {"tools": {"bash": false /* nor */, "write": false}}\n}\n')
    done = in_folder(tmp_path, "tools", "--config", str(config))
    assert done.returncode == 0, done.stderr
    listed = [line.split("\t")[0] for line in done.stdout.splitlines()]

    async def library() -> list[str]:
        toolkit = await create_toolkit(str(config))
        try:
            return [t.name for t in toolkit.tools()]
        finally:
            await toolkit.close()

    assert listed == asyncio.run(library()) and "bash" not in listed and "read" in listed


@pytest.mark.parametrize("config, message", [
    ({"mcpServer": {"glossary": {"command": ["toolnexus", "serve", "--mcp-stdio"]}}},
     '"mcpServer" is the MCP serve profile, but "glossary" in it is an MCP server entry: did you mean "mcpServers"?'),
    ({"mcpServers": {}, "agnets": {"billing": {"card": "http://127.0.0.1:9/card.json"}}},
     'unknown top-level key "agnets" ignored (did you mean "agents"?)'),
    ({"builtin": {"tools": {"bash": False}}},
     'unknown top-level key "builtin" (did you mean "builtins"?) — it would be read as an MCP server'),
])
def test_a_top_level_key_that_is_a_typo_of_ours_is_refused_naming_the_nearest(tmp_path: Path, config: dict,
                                                                               message: str) -> None:
    path = tmp_path / "typo.json"
    path.write_text(json.dumps(config))
    done = in_folder(tmp_path, "tools", "--config", str(path))
    assert (done.returncode, done.stdout) == (1, "")
    assert done.stderr == f"error: config file {path}: {message}\n"


def test_a_key_another_mcp_host_reads_is_only_a_warning(tmp_path: Path) -> None:
    path = tmp_path / "shared.json"
    path.write_text(json.dumps({"mcpServers": {}, "inputs": [], "builtins": False}))
    done = in_folder(tmp_path, "tools", "--config", str(path))
    assert (done.returncode, done.stdout) == (0, "")
    assert 'unknown top-level key "inputs" ignored (known: mcpServers, servers, mcp, builtins' in done.stderr


# -- 3. read-only verbs never create a store -----------------------------------------------------------------


@pytest.mark.parametrize("url, message", [
    ("sqlite:///rnus.db", "error: --store sqlite:///rnus.db: no SQLite database at {folder}/rnus.db (nothing was "
                          "created"),
    ("file:tasks", "error: --store file:tasks: no store folder at {folder}/tasks (nothing was created"),
    ("memory:", "error: --store memory: is a store of one process: it holds no runs here"),
])
def test_pending_and_answer_on_a_store_that_does_not_exist_say_so_and_create_nothing(tmp_path: Path, url: str,
                                                                                       message: str) -> None:
    commands = [("pending", "--store", url)]
    if url.startswith("sqlite"):  # answer opens the store the same way (and before anything else)
        commands.append(("answer", "--store", url, "--id", "pnd-x", "--ok", "--agents", "m:A", "--base-url",
                         "http://127.0.0.1:9/v1"))
    for args in commands:
        done = in_folder(tmp_path, *args)
        assert done.returncode == 2 and done.stdout == "", (args, done.stderr)
        assert done.stderr.startswith(message.format(folder=tmp_path)), (args, done.stderr)
    assert list(tmp_path.iterdir()) == []


# -- 5. model settings, once ---------------------------------------------------------------------------------


def test_the_model_comes_from_the_environment_then_the_config_then_the_flags(llm: LlmServer, tmp_path: Path) -> None:
    llm.add(*(Json(openai_text(f"answer {i}")) for i in range(3)))
    env = bare_env(OPENAI_BASE_URL=llm.base_url + "/v1", TOOLNEXUS_MODEL="m-env", OPENAI_API_KEY=KEY)
    from_env = in_folder(tmp_path, "run", "--no-builtins", "--once", "hi", env=env)
    config = tmp_path / "cfg.json"
    config.write_text(json.dumps({"llm": {"model": "m-config"}, "builtins": False}))
    from_config = in_folder(tmp_path, "run", "--config", str(config), "--once", "hi", env=env)
    from_flag = in_folder(tmp_path, "run", "--config", str(config), "--model", "m-flag", "--once", "hi", env=env)
    assert [d.stdout for d in (from_env, from_config, from_flag)] == ["answer 0\n", "answer 1\n", "answer 2\n"]
    assert [r.json["model"] for r in llm.requests] == ["m-env", "m-config", "m-flag"]


def test_a_config_llm_block_never_holds_a_key(tmp_path: Path) -> None:
    config = tmp_path / "cfg.json"
    config.write_text(json.dumps({"llm": {"base_url": "http://127.0.0.1:9/v1", "model": "m", "api_key": "sk-no"}}))
    done = in_folder(tmp_path, "run", "--config", str(config), "--once", "hi")
    assert done.returncode == 1 and 'config "llm" holds an api_key: keep keys out of config files' in done.stderr


def test_a_loopback_endpoint_needs_no_key_a_remote_one_does(llm: LlmServer, tmp_path: Path) -> None:
    llm.add(Json(openai_text("local answer")))
    local = in_folder(tmp_path, "run", "--no-builtins", "--base-url", llm.base_url + "/v1", "--model", "m",
                      "--once", "hi")
    assert (local.returncode, local.stdout) == (0, "local answer\n")
    assert llm.requests[0].headers["authorization"] == "Bearer unused"  # the agent runtime's placeholder
    remote = in_folder(tmp_path, "run", "--no-builtins", "--base-url", "https://llm.invalid/v1", "--model", "m",
                       "--once", "hi")
    assert (remote.returncode, remote.stderr) == (
        2, "error: No API key: set api_key or OPENROUTER_API_KEY / OPENAI_API_KEY / ANTHROPIC_API_KEY\n")


# -- 6. a mistyped command, -V -------------------------------------------------------------------------------


def test_a_near_miss_command_is_named_in_one_line_not_the_whole_usage() -> None:
    done = run_cli("runn")
    assert (done.returncode, done.stdout) == (2, "")
    assert done.stderr == 'unknown command "runn"; did you mean "run"?\nrun "toolnexus --help" to see every command\n'


def test_dash_capital_v_is_the_version() -> None:
    from toolnexus import __version__

    done = run_cli("-V")
    assert (done.returncode, done.stdout) == (0, f"toolnexus {__version__}\n")


def test_the_script_under_test_is_the_installed_console_script() -> None:
    assert os.path.basename(TOOLNEXUS) == "toolnexus" and os.access(TOOLNEXUS, os.X_OK)
