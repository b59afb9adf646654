"""The installed `toolnexus` command: usage, help, version, flag grammar, usage exit codes, `tools`.

Every test runs the console script from the venv as a subprocess; none needs a model.
"""

from __future__ import annotations

import json
import subprocess
import sys

import pytest

from support.cli_run import TOOLNEXUS, cli_env, run_cli

FLAGS = ["--config", "--skills", "--base-url", "--style", "--model", "--system", "--api-key", "--once", "--addr",
         "--a2a", "--mcp", "--name", "--description", "--agent-version", "--a2a-skill", "--store", "--mcp-tool",
         "--mcp-name", "--no-builtins", "--disable-tool", "--json", "--mcp-stdio", "--auth-token"]


@pytest.mark.parametrize("arg", ["--help", "-h", "help"])
def test_top_level_help_lists_subcommands_every_flag_and_the_key_variables(arg: str) -> None:
    done = run_cli(arg)
    assert done.returncode == 0 and done.stderr == ""
    for word in ("run", "tools", "serve", *FLAGS, "OPENROUTER_API_KEY", "OPENAI_API_KEY", "ANTHROPIC_API_KEY"):
        assert word in done.stdout, word


def test_version() -> None:
    from toolnexus import __version__

    done = run_cli("--version")
    assert (done.returncode, done.stdout) == (0, f"toolnexus {__version__}\n")


def test_python_dash_m_is_the_same_command() -> None:
    done = subprocess.run([sys.executable, "-m", "toolnexus", "--version"], capture_output=True, text=True,
                          env=cli_env(), timeout=60)
    assert done.returncode == 0 and done.stdout.startswith("toolnexus ")


@pytest.mark.parametrize("sub, flag", [("run", "--once PROMPT"), ("tools", "--json"), ("serve", "--mcp-stdio")])
def test_subcommand_help(sub: str, flag: str) -> None:
    done = run_cli(sub, "--help")
    assert done.returncode == 0 and f"usage: toolnexus {sub}" in done.stdout and flag in done.stdout


def test_no_subcommand_is_usage_exit_2() -> None:
    done = run_cli()
    assert done.returncode == 2 and done.stdout.startswith("usage: toolnexus")


def test_an_unknown_subcommand_is_named_then_usage() -> None:
    done = run_cli("launch")
    assert done.returncode == 2
    assert done.stderr == 'unknown command "launch"\n\n'
    assert done.stdout.startswith("usage: toolnexus")


@pytest.mark.parametrize("args, message", [
    (["run", "--bogus"], "unknown flag --bogus for run"),
    (["run", "--style", "gemini"], "--style must be one of openai, anthropic"),
    (["run", "--model"], "--model needs a value"),
    (["tools", "stray"], 'unexpected argument "stray" for tools'),
    (["serve", "--a2a=yes"], "--a2a takes no value"),
])
def test_bad_flags_are_usage_errors(args: list[str], message: str) -> None:
    done = run_cli(*args)
    assert done.returncode == 2 and message in done.stderr and "Traceback" not in done.stderr


@pytest.mark.parametrize("args", [["run", "--once", "hi"], ["run", "--once", "hi", "--model", "m"],
                                  ["serve", "--a2a", "--base-url", "http://127.0.0.1:9"]])
def test_missing_base_url_or_model(args: list[str]) -> None:
    done = run_cli(*args)
    assert (done.returncode, done.stderr) == (2, "error: --base-url and --model are required\n")


def test_missing_api_key() -> None:
    done = run_cli("run", "-once", "hi", "-base-url", "http://llm.invalid/v1", "-model=m")
    assert (done.returncode, done.stderr) == (
        2, "error: No API key: set api_key or OPENROUTER_API_KEY / OPENAI_API_KEY / ANTHROPIC_API_KEY\n")


def test_tools_lists_builtins_and_python_tools_in_toolkit_order() -> None:
    done = run_cli("tools", "--tools-from", "cli_tools:make_tools")
    lines = done.stdout.splitlines()
    assert done.returncode == 0
    assert lines[:3] == ["bash\t(builtin)", "read\t(builtin)", "write\t(builtin)"]
    assert lines[-4:] == ["echo\t(native)", "fail\t(native)", "ask\t(native)", "approve\t(native)"]


def test_no_builtins_and_disable_tool_keep_tools_from_the_model() -> None:
    done = run_cli("tools", "--disable-tool", "bash", "--disable-tool=write")
    names = [line.split("\t")[0] for line in done.stdout.splitlines()]
    assert done.returncode == 0 and "bash" not in names and "write" not in names and "read" in names
    none = run_cli("tools", "--no-builtins")
    assert (none.returncode, none.stdout) == (0, "")


def test_tools_reports_mcp_servers_in_config_order_and_json(tmp_path) -> None:
    config = tmp_path / "tools.json"
    config.write_text(json.dumps({"mcpServers": {
        "broken": {"command": str(tmp_path / "no-such-server")},
        "off": {"command": "whatever", "disabled": True},
    }, "builtins": False}))
    done = run_cli("tools", "--config", str(config))
    as_json = run_cli("tools", f"--config={config}", "--json", "--tools-from", "cli_tools:TOOLS")
    assert done.returncode == 0
    reason = f'cannot start "{tmp_path / "no-such-server"}": no such executable (check "command", or install it)'
    assert done.stdout.splitlines() == [f"# mcp broken: failed ({reason})", "# mcp off: disabled"]
    parsed = json.loads(as_json.stdout)
    assert parsed["mcp"] == {"broken": "failed", "off": "disabled"}
    assert parsed["mcp_reasons"] == {"broken": reason}
    assert [t["name"] for t in parsed["tools"]] == ["echo", "fail", "ask", "approve"]
    assert parsed["tools"][0] == {"name": "echo", "source": "native", "description": "Echo x back"}


@pytest.mark.parametrize("content, message", [
    (None, "cannot read config file"),
    ("{not json", "is not valid JSON"),
    ("[1]", "must hold a JSON object"),
])
def test_a_bad_config_file_is_a_build_error_exit_1(tmp_path, content: str | None, message: str) -> None:
    path = tmp_path / "cfg.json"
    if content is not None:
        path.write_text(content)
    done = run_cli("tools", "--config", str(path))
    assert done.returncode == 1 and done.stderr.startswith("error: ") and message in done.stderr
    assert "Traceback" not in done.stderr


def test_a_bad_tools_from_is_a_build_error() -> None:
    done = run_cli("tools", "--tools-from", "cli_tools:NOPE")
    assert done.returncode == 1 and "has no attribute NOPE" in done.stderr
    bad = run_cli("tools", "--tools-from", "no_colon")
    assert bad.returncode == 1 and "MODULE:ATTR" in bad.stderr


def test_the_script_is_the_installed_one() -> None:
    assert TOOLNEXUS.endswith("/toolnexus")
    first = open(TOOLNEXUS).readline()
    assert first.startswith("#!") and "python" in first
