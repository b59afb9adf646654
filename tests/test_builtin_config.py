"""Built-in tools: the config API, the pinned names/descriptions/schemas, and path confinement."""

from __future__ import annotations

import json
import logging
import os

import pytest

import toolnexus.builtin as builtin
from toolnexus.builtin import (
    BUILTIN_NAMES,
    IGNORE_DIRS,
    KILL_GRACE_MS,
    builtin_shell,
    builtins_enabled,
    create_builtin_tools,
    select_builtins,
)
from toolnexus.builtin._paths import is_reserved_device_name
from toolnexus.builtin._shell import find_shell

ORDER = ["bash", "read", "write", "edit", "grep", "glob", "webfetch", "question", "apply_patch", "todowrite"]

# Verbatim from the spec (§3.3): description, then the schema as compact JSON.
PINNED = {
    "bash": (
        "Run a shell command and return its combined stdout+stderr. Non-zero exit is an error.",
        '{"type":"object","properties":{"command":{"type":"string","description":"The shell command to run"},"workdir":{"type":"string","description":"Working directory (default: process cwd)"},"timeout":{"type":"number","description":"Timeout in milliseconds (default 60000)"},"description":{"type":"string","description":"Human-readable description of the command"}},"required":["command"],"additionalProperties":false}',
    ),
    "read": (
        "Read a file. A known media file (png/jpg/jpeg/gif/webp/pdf/mp3/wav) comes back as a content part; otherwise it is read as UTF-8 text, and with offset/limit only that line window is returned.",
        '{"type":"object","properties":{"path":{"type":"string","description":"Path to the file to read"},"offset":{"type":"number","description":"1-based line to start from"},"limit":{"type":"number","description":"Maximum number of lines to read"}},"required":["path"],"additionalProperties":false}',
    ),
    "write": (
        "Write content to a file (create/overwrite), creating parent directories.",
        '{"type":"object","properties":{"path":{"type":"string","description":"Path to write to"},"content":{"type":"string","description":"Content to write"}},"required":["path","content"],"additionalProperties":false}',
    ),
    "edit": (
        "Exact-string replace in a file. Default replaces a single unique occurrence; replaceAll replaces all.",
        '{"type":"object","properties":{"path":{"type":"string","description":"Path to the file to edit"},"oldString":{"type":"string","description":"Exact string to replace"},"newString":{"type":"string","description":"Replacement string"},"replaceAll":{"type":"boolean","description":"Replace all occurrences"}},"required":["path","oldString","newString"],"additionalProperties":false}',
    ),
    "grep": (
        "Search file contents by regex under a directory. Output is file:line:text matches.",
        '{"type":"object","properties":{"pattern":{"type":"string","description":"Regular expression to search for"},"path":{"type":"string","description":"Directory to search (default: process cwd)"},"include":{"type":"string","description":"Glob filter for file names"},"limit":{"type":"number","description":"Maximum number of matches (default 100)"}},"required":["pattern"],"additionalProperties":false}',
    ),
    "glob": (
        "List files matching a glob under a directory. Output is newline-joined relative paths.",
        '{"type":"object","properties":{"pattern":{"type":"string","description":"Glob pattern to match"},"path":{"type":"string","description":"Directory to search (default: process cwd)"},"limit":{"type":"number","description":"Maximum number of results (default 100)"}},"required":["pattern"],"additionalProperties":false}',
    ),
    "webfetch": (
        "HTTP GET a URL and return its body as text, markdown, or html.",
        '{"type":"object","properties":{"url":{"type":"string","description":"URL to fetch"},"format":{"type":"string","enum":["text","markdown","html"],"description":"Response format (default markdown)"},"timeout":{"type":"number","description":"Timeout in seconds (default 30)"}},"required":["url"],"additionalProperties":false}',
    ),
    "question": (
        'Ask the host one or more questions. Suspends via a kind:"question" Request (§10); the host\'s waitFor resolves it and the answer is returned to the model.',
        '{"type":"object","properties":{"questions":{"type":"array","description":"Questions to ask","items":{"type":"object","properties":{"question":{"type":"string"},"header":{"type":"string"},"options":{"type":"array","items":{"type":"string"}},"multiple":{"type":"boolean"}},"required":["question"]}}},"required":["questions"],"additionalProperties":false}',
    ),
    "apply_patch": (
        "Apply a patch (Begin/End Patch grammar: Add/Update/Delete File). Atomic — a non-matching hunk aborts with no writes.",
        '{"type":"object","properties":{"patchText":{"type":"string","description":"The patch text in Begin/End Patch format"}},"required":["patchText"],"additionalProperties":false}',
    ),
    "todowrite": (
        "Replace the session todo list. Returns the rendered list.",
        '{"type":"object","properties":{"todos":{"type":"array","description":"The full todo list to store","items":{"type":"object","properties":{"id":{"type":"string"},"text":{"type":"string"},"completed":{"type":"boolean"}},"required":["id","text","completed"]}}},"required":["todos"],"additionalProperties":false}',
    ),
}

NO_SHELL = (
    "no shell interpreter found (tried: /nonexistent/sh, definitely-not-a-shell-xyz); set builtins['shell'], "
    "or disable the bash builtin with builtins['tools']['bash'] = False"
)


def test_module_exposes_the_pinned_constants_and_names():
    assert BUILTIN_NAMES == tuple(ORDER)
    assert KILL_GRACE_MS == 2000
    assert {"node_modules", ".git"} <= set(IGNORE_DIRS)
    for name in ("BuiltinsConfig", "builtins_enabled", "select_builtins", "create_builtin_tools", "builtin_shell"):
        assert name in builtin.__all__ and hasattr(builtin, name)


def test_create_builtin_tools_builds_all_ten_in_order_with_source_builtin():
    tools = create_builtin_tools()
    assert [t.name for t in tools] == ORDER
    assert {t.source for t in tools} == {"builtin"}


def test_create_builtin_tools_ignores_toggles():
    tools = create_builtin_tools({"disabled": True, "tools": {"bash": False}})
    assert [t.name for t in tools] == ORDER


@pytest.mark.parametrize("name", ORDER)
def test_description_and_schema_are_pinned_byte_for_byte(name):
    tool = {t.name: t for t in create_builtin_tools()}[name]
    description, schema = PINNED[name]
    assert tool.description == description
    assert json.dumps(tool.input_schema, separators=(",", ":"), ensure_ascii=False) == schema


def test_each_tool_gets_its_own_schema_copy():
    first, second = create_builtin_tools(), create_builtin_tools()
    first[0].input_schema["properties"]["command"]["description"] = "changed"
    assert second[0].input_schema["properties"]["command"]["description"] == "The shell command to run"


@pytest.mark.parametrize(
    ("cfg", "expected"),
    [
        (None, True),
        (True, True),
        (False, False),
        ({}, True),
        ({"disabled": True}, False),
        ({"disabled": 1}, True),  # only `is True` disables
        ({"enabled": False}, False),
        ({"enabled": 0}, True),  # only `is False` disables
        ({"enabled": True, "disabled": True}, False),
    ],
)
def test_builtins_enabled(cfg, expected):
    assert builtins_enabled(cfg) is expected


def test_a_config_that_is_neither_bool_nor_dict_is_a_clear_type_error():
    with pytest.raises(TypeError, match="builtins config must be a bool or a dict, got list"):
        builtins_enabled(["bash"])


def test_select_builtins_off_gives_nothing():
    assert select_builtins(False) == []
    assert select_builtins({"enabled": False}) == []


def test_select_builtins_tools_is_a_drop_list_only_false_removes():
    assert [t.name for t in select_builtins({"tools": {"bash": True}})] == ORDER
    kept = [t.name for t in select_builtins({"tools": {"bash": False, "webfetch": False, "nope": False, "read": 0}})]
    assert kept == [n for n in ORDER if n not in ("bash", "webfetch")]


def test_select_builtins_rejects_a_tools_value_that_is_not_a_dict():
    with pytest.raises(TypeError, match=r"builtins\['tools'\] must be a dict"):
        select_builtins({"tools": ["bash"]})


def test_shell_probe_failure_is_the_pinned_runtime_error():
    with pytest.raises(RuntimeError) as caught:
        find_shell([("/nonexistent/sh", "-c"), ("definitely-not-a-shell-xyz", "-c")])
    assert str(caught.value) == NO_SHELL


def test_builtin_shell_probes_posix_shells_in_order():
    assert builtin_shell() == ["/bin/sh", "-c"]
    assert builtin_shell({"tools": {}}) == ["/bin/sh", "-c"]


def test_builtin_shell_uses_the_configured_prefix_verbatim():
    assert builtin_shell({"shell": ["/no/such/shell", "-x", "-c"]}) == ["/no/such/shell", "-x", "-c"]


def test_a_malformed_shell_prefix_is_refused_at_construction():
    with pytest.raises(ValueError, match=r"builtins\['shell'\] must be a non-empty list of strings"):
        select_builtins({"shell": "/bin/bash -c"})


async def test_select_builtins_uses_the_configured_shell_for_bash(tmp_path):
    script = tmp_path / "myshell"
    script.write_text('#!/bin/sh\necho "via myshell: $*"\n')
    script.chmod(0o755)
    bash = select_builtins({"shell": [str(script), "--run"]})[0]
    result = await bash.execute({"command": "hello"})
    assert result.output == "via myshell: --run hello\n"
    assert result.metadata == {"shell": f"{script} --run", "exitCode": 0}


# ------------------------------------------------------------------------------- base_dir rules


def _tools(cfg):
    return {t.name: t for t in create_builtin_tools(cfg)}


async def test_relative_paths_join_base_dir(tmp_path):
    (tmp_path / "note.txt").write_text("inside\n")
    tools = _tools({"base_dir": str(tmp_path), "confine_to_base_dir": True})
    assert (await tools["read"].execute({"path": "note.txt"})).output == "inside\n"
    written = await tools["write"].execute({"path": "sub/new.txt", "content": "x"})
    assert not written.is_error and (tmp_path / "sub" / "new.txt").read_text() == "x"
    assert (await tools["bash"].execute({"command": "pwd"})).output == f"{os.path.realpath(tmp_path)}\n"
    assert (await tools["glob"].execute({"pattern": "*.txt"})).output == "note.txt\nsub/new.txt"


async def test_camel_case_keys_are_accepted(tmp_path):
    (tmp_path / "a.txt").write_text("A")
    tools = _tools({"baseDir": str(tmp_path), "confineToBaseDir": True})
    assert (await tools["read"].execute({"path": "a.txt"})).output == "A"
    refused = await tools["read"].execute({"path": "/etc/hostname"})
    assert refused.output == f"read: /etc/hostname resolves outside baseDir {tmp_path}"


async def test_confinement_refuses_paths_escaping_base_dir(tmp_path):
    base = tmp_path / "base"
    base.mkdir()
    (tmp_path / "secret.txt").write_text("secret")
    tools = _tools({"base_dir": str(base), "confine_to_base_dir": True})
    cases = {
        "read": {"path": "../secret.txt"},
        "write": {"path": "../evil.txt", "content": "x"},
        "edit": {"path": str(tmp_path / "secret.txt"), "oldString": "s", "newString": "t"},
        "grep": {"pattern": "secret", "path": ".."},
        "glob": {"pattern": "*", "path": ".."},
        "bash": {"command": "pwd", "workdir": ".."},
    }
    for name, args in cases.items():
        shown = args.get("path") or args.get("workdir")
        result = await tools[name].execute(args)
        assert result.is_error and result.output == f"{name}: {shown} resolves outside baseDir {base}", name
    assert not (tmp_path / "evil.txt").exists()
    assert (tmp_path / "secret.txt").read_text() == "secret"


async def test_confinement_follows_symlinks_out_of_base_dir(tmp_path):
    base = tmp_path / "base"
    base.mkdir()
    outside = tmp_path / "outside"
    outside.mkdir()
    (outside / "f.txt").write_text("out")
    (base / "link").symlink_to(outside)
    tools = _tools({"base_dir": str(base), "confine_to_base_dir": True})
    result = await tools["read"].execute({"path": "link/f.txt"})
    assert result.output == f"read: link/f.txt resolves outside baseDir {base}"
    created = await tools["write"].execute({"path": "link/new/deeper.txt", "content": "x"})
    assert created.is_error and not (outside / "new").exists()


async def test_dotdot_that_stays_inside_is_allowed(tmp_path):
    (tmp_path / "a").mkdir()
    (tmp_path / "b.txt").write_text("B")
    tools = _tools({"base_dir": str(tmp_path), "confine_to_base_dir": True})
    assert (await tools["read"].execute({"path": "a/../b.txt"})).output == "B"


async def test_confine_without_base_dir_is_an_error_for_every_file_tool():
    tools = _tools({"confine_to_base_dir": True})
    for name, args in {
        "read": {"path": "x"},
        "write": {"path": "x", "content": ""},
        "grep": {"pattern": "x"},
        "glob": {"pattern": "x"},
        "bash": {"command": "true"},
        "apply_patch": {"patchText": "*** Begin Patch\n*** Delete File: x\n*** End Patch"},
    }.items():
        result = await tools[name].execute(args)
        assert result.output == f"{name}: confine_to_base_dir is set but base_dir is empty"


def test_unconfined_base_dir_warns_once_at_construction(tmp_path, caplog):
    caplog.set_level(logging.WARNING, logger="toolnexus")
    create_builtin_tools({"base_dir": str(tmp_path)})
    select_builtins({"base_dir": str(tmp_path)})
    lines = [r.getMessage() for r in caplog.records]
    assert lines == [
        f"[toolnexus] builtins base_dir {tmp_path} is not enforced — absolute paths and ../ can "
        "leave it; set confine_to_base_dir to keep file tools inside it"
    ]


def test_confined_base_dir_does_not_warn(tmp_path, caplog):
    caplog.set_level(logging.WARNING, logger="toolnexus")
    create_builtin_tools({"base_dir": str(tmp_path), "confine_to_base_dir": True})
    assert caplog.records == []


async def test_unconfined_base_dir_only_sets_the_default_directory(tmp_path):
    base = tmp_path / "base"
    base.mkdir()
    (tmp_path / "up.txt").write_text("up")
    tools = _tools({"base_dir": str(base)})
    assert (await tools["read"].execute({"path": "../up.txt"})).output == "up"


@pytest.mark.parametrize("path", ["NUL", "con.txt", "dir/COM1", "lpt9.log", "aux ", "dir\\prn.x"])
def test_windows_device_names_are_recognised(path):
    assert is_reserved_device_name(path)


@pytest.mark.parametrize("path", ["console.txt", "nully", "com10", "a/b/c.txt", ""])
def test_ordinary_names_are_not_devices(path):
    assert not is_reserved_device_name(path)


async def test_arguments_that_are_not_an_object_are_an_error_result():
    tool = _tools(None)["read"]
    result = await tool.execute(["path"])
    assert result.is_error and result.output == "read: arguments must be a JSON object, got list"
    assert (await tool.execute(None)).output == "read: path is required"


def test_the_read_only_builtins_are_declared_idempotent_and_the_others_are_not(tmp_path):
    """A durable run that crashed inside a read simply reads again; a crashed `bash`, `write`,
    `edit` or `apply_patch` asks the host whether it may run again (`in_doubt`)."""
    tools = create_builtin_tools({"cwd": str(tmp_path)})
    assert sorted(t.name for t in tools if t.idempotent) == ["glob", "grep", "read", "todowrite", "webfetch"]
