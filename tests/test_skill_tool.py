"""The `skill` tool's pinned output, file sample, cache and threading; the pinned prompt (§2.5, §2.6)."""

import asyncio
import json
import sys
import threading
from pathlib import Path

import pytest

from toolnexus import ToolResult
from toolnexus.skill import (
    SKILL_TOOL_DESCRIPTION,
    SKILLS_PROMPT_PREAMBLE,
    SkillDef,
    aload_skills,
    load_skills,
)

PINNED_DESCRIPTION = (
    "Load a specialized skill when the task at hand matches one of the skills listed in the system prompt.\n"
    "\n"
    "Use this tool to inject the skill's instructions and resources into current conversation. The output may "
    "contain detailed workflow guidance as well as references to scripts, files, etc in the same directory as "
    "the skill.\n"
    "\n"
    "The skill name must match one of the skills listed in your system prompt."
)
PINNED_SCHEMA = (
    '{"type":"object","properties":{"name":{"type":"string","description":"The name of the skill to load"}},'
    '"required":["name"],"additionalProperties":false}'
)
PINNED_PREAMBLE = (
    "Skills provide specialized instructions and workflows for specific tasks.\n"
    "Use the skill tool to load a skill when a task matches its description."
)
RELATIVE_LINE = "Relative paths in this skill (e.g., scripts/, reference/) are relative to this base directory."


def write(path: Path, text: str = "x") -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(text)
    return path


def write_skill(directory: Path, name: str, description: str = "d", body: str = "Body.") -> Path:
    return write(directory / "SKILL.md", f"---\nname: {name}\ndescription: {description}\n---\n{body}")


# --- recording which thread lists a directory (sys.audit "os.scandir" events) ---------------

_scandir_log: list[tuple[str, int]] = []
_recording = threading.Event()
_hook_installed = False


def _audit(event, args):
    if event == "os.scandir" and _recording.is_set() and isinstance(args[0], str):
        _scandir_log.append((args[0], threading.get_ident()))


@pytest.fixture
def scandir_log():
    """Directories listed while the test runs, with the listing thread's id."""
    global _hook_installed
    if not _hook_installed:
        sys.addaudithook(_audit)  # audit hooks cannot be removed; it records only while enabled
        _hook_installed = True
    _scandir_log.clear()
    _recording.set()
    yield _scandir_log
    _recording.clear()


# --- tool declaration ----------------------------------------------------------------------


def test_tool_declaration_is_pinned():
    tool = load_skills(skills=[]).tool
    assert SKILL_TOOL_DESCRIPTION == PINNED_DESCRIPTION
    assert (tool.name, tool.source, tool.description) == ("skill", "skill", PINNED_DESCRIPTION)
    assert json.dumps(tool.input_schema, separators=(",", ":")) == PINNED_SCHEMA


def test_each_source_gets_its_own_schema_dict():
    first, second = load_skills(skills=[]).tool, load_skills(skills=[]).tool
    first.input_schema["properties"]["name"]["description"] = "changed"
    assert json.dumps(second.input_schema, separators=(",", ":")) == PINNED_SCHEMA


# --- filesystem skill output -----------------------------------------------------------------


@pytest.fixture
def pdf_skill(tmp_path):
    """A skill dir with files whose code-point order differs from per-directory name order."""
    root = tmp_path / "my skills"
    skill_dir = root / "pdf"
    write_skill(skill_dir, "pdf", "Fill PDF forms", body="\n\n  Use pdftk.\n  Then check.\n\n")
    for rel in ["B.md", "a-b/y", "a.txt", "a/x", "a0", "nested/helper.sh", "scripts/fill.py"]:
        write(skill_dir / rel)
    write_skill(skill_dir / "nested", "nested")  # every SKILL.md is excluded from the sample
    write(skill_dir / "node_modules" / "dep.js")
    write(skill_dir / ".git" / "config")
    (skill_dir / "link.txt").symlink_to(write(tmp_path / "outside.txt"))
    (skill_dir / "loop").symlink_to(skill_dir, target_is_directory=True)
    return root, skill_dir


async def test_fs_skill_output_is_byte_exact(pdf_skill):
    root, skill_dir = pdf_skill
    source = load_skills(str(root))
    result = await source.tool.execute({"name": "pdf"})
    d = str(skill_dir)
    expected = (
        '<skill_content name="pdf">\n'
        "# Skill: pdf\n"
        "\n"
        "Use pdftk.\n"
        "  Then check.\n"
        "\n"
        f"Base directory for this skill: {skill_dir.as_uri()}\n"
        f"{RELATIVE_LINE}\n"
        "Note: file list is sampled.\n"
        "\n"
        "<skill_files>\n"
        f"<file>{d}/B.md</file>\n"
        f"<file>{d}/a-b/y</file>\n"
        f"<file>{d}/a.txt</file>\n"
        f"<file>{d}/a/x</file>\n"
        f"<file>{d}/a0</file>\n"
        f"<file>{d}/link.txt</file>\n"
        f"<file>{d}/nested/helper.sh</file>\n"
        f"<file>{d}/scripts/fill.py</file>\n"
        "</skill_files>\n"
        "</skill_content>"
    )
    assert result == ToolResult(expected, False, {"name": "pdf", "dir": d})
    assert "%20" in skill_dir.as_uri()  # the base is percent-encoded


async def test_sample_is_the_first_n_in_code_point_order(pdf_skill):
    root, skill_dir = pdf_skill
    result = await load_skills(str(root), sample_limit=3).tool.execute({"name": "pdf"})
    files = [line for line in result.output.split("\n") if line.startswith("<file>")]
    assert files == [f"<file>{skill_dir}/{rel}</file>" for rel in ["B.md", "a-b/y", "a.txt"]]


async def test_default_sample_is_ten_files(tmp_path):
    write_skill(tmp_path / "s", "s")
    for i in range(12):
        write(tmp_path / "s" / f"f{i:02d}")
    result = await load_skills(str(tmp_path)).tool.execute({"name": "s"})
    files = [line for line in result.output.split("\n") if line.startswith("<file>")]
    assert files == [f"<file>{tmp_path}/s/f{i:02d}</file>" for i in range(10)]


async def test_zero_files_gives_an_empty_files_block(tmp_path):
    write_skill(tmp_path / "s", "s", body="Only instructions.")
    result = await load_skills(str(tmp_path)).tool.execute({"name": "s"})
    assert result.output.endswith(
        f"{RELATIVE_LINE}\nNote: file list is sampled.\n\n<skill_files>\n\n</skill_files>\n</skill_content>"
    )


async def test_sample_limit_minus_one_omits_the_file_block(tmp_path):
    write_skill(tmp_path / "s", "s", body="B")
    write(tmp_path / "s" / "file.txt")
    result = await load_skills(str(tmp_path), sample_limit=-1).tool.execute({"name": "s"})
    assert result.output == (
        '<skill_content name="s">\n# Skill: s\n\nB\n\n'
        f"Base directory for this skill: {(tmp_path / 's').as_uri()}\n"
        f"{RELATIVE_LINE}\n"
        "</skill_content>"
    )


# --- data skill output ---------------------------------------------------------------------


async def test_data_skill_output_is_byte_exact_with_resources():
    source = load_skills(skills=[SkillDef("d", "  Steps.  ", "data", ["scripts/run.sh", "ref.md"])])
    result = await source.tool.execute({"name": "d"})
    expected = (
        '<skill_content name="d">\n'
        "# Skill: d\n"
        "\n"
        "Steps.\n"
        "\n"
        "Base directory for this skill: skill://d/\n"
        f"{RELATIVE_LINE}\n"
        "Note: file list is sampled.\n"
        "\n"
        "<skill_files>\n"
        "<file>scripts/run.sh</file>\n"
        "<file>ref.md</file>\n"
        "</skill_files>\n"
        "</skill_content>"
    )
    assert result == ToolResult(expected, False, {"name": "d", "dir": "skill://d/"})


async def test_data_skill_without_resources_has_no_file_block_and_custom_base():
    source = load_skills(skills=[SkillDef("d", "Steps.", base="mem://kb/d/")])
    result = await source.tool.execute({"name": "d"})
    assert result.output == (
        '<skill_content name="d">\n# Skill: d\n\nSteps.\n\n'
        f"Base directory for this skill: mem://kb/d/\n{RELATIVE_LINE}\n</skill_content>"
    )
    assert result.metadata == {"name": "d", "dir": "mem://kb/d/"}


async def test_data_skill_resources_follow_the_sample_limit():
    defs = [SkillDef("d", "c", resources=[f"r{i}" for i in range(15)])]
    capped = await load_skills(skills=defs, sample_limit=2).tool.execute({"name": "d"})
    default = await load_skills(skills=defs).tool.execute({"name": "d"})
    hidden = await load_skills(skills=defs, sample_limit=-1).tool.execute({"name": "d"})
    assert [ln for ln in capped.output.split("\n") if ln.startswith("<file>")] == ["<file>r0</file>", "<file>r1</file>"]
    assert len([ln for ln in default.output.split("\n") if ln.startswith("<file>")]) == 10
    assert "<skill_files>" not in hidden.output and "Note: file list is sampled." not in hidden.output


# --- unknown names ---------------------------------------------------------------------------


async def test_unknown_skill_lists_available_names_in_code_point_order():
    source = load_skills(skills=[SkillDef(n, "c") for n in ("c", "a", "B")])
    result = await source.tool.execute({"name": "zzz"})
    assert result == ToolResult('Skill "zzz" not found. Available skills: B, a, c', True, None)


async def test_unknown_skill_with_no_skills_says_none():
    result = await load_skills(skills=[]).tool.execute({"name": "x"})
    assert result == ToolResult('Skill "x" not found. Available skills: none', True, None)


async def test_missing_or_odd_arguments_are_stringified_not_raised():
    source = load_skills(skills=[SkillDef("5", "five")])
    assert (await source.tool.execute(None)).output == 'Skill "" not found. Available skills: 5'
    assert (await source.tool.execute("not a dict")).output == 'Skill "" not found. Available skills: 5'
    found = await source.tool.execute({"name": 5})
    assert not found.is_error and found.output.startswith('<skill_content name="5">')


# --- threading, cache, bounds ----------------------------------------------------------------


async def test_sample_walk_runs_off_the_event_loop(tmp_path, scandir_log):
    write_skill(tmp_path / "s", "s")
    write(tmp_path / "s" / "sub" / "f")
    source = load_skills(str(tmp_path))
    scandir_log.clear()
    await source.tool.execute({"name": "s"})
    walks = [tid for path, tid in scandir_log if path.startswith(str(tmp_path / "s"))]
    assert len(walks) == 2  # the skill dir and sub/
    assert threading.get_ident() not in walks


async def test_aload_skills_discovers_off_the_event_loop(tmp_path, scandir_log):
    write_skill(tmp_path / "s", "s")
    source = await aload_skills(str(tmp_path))
    assert list(source.skills) == ["s"]
    walks = [tid for path, tid in scandir_log if path.startswith(str(tmp_path))]
    assert walks and threading.get_ident() not in walks


async def test_sample_is_cached_for_the_life_of_the_source(tmp_path, scandir_log):
    write_skill(tmp_path / "s", "s")
    write(tmp_path / "s" / "b.txt")
    source = load_skills(str(tmp_path))
    first = await source.tool.execute({"name": "s"})
    walks_after_first = len(scandir_log)
    write(tmp_path / "s" / "a.txt")  # would sort first if the directory were walked again
    second = await source.tool.execute({"name": "s"})
    assert second.output == first.output
    assert f"<file>{tmp_path}/s/a.txt</file>" not in second.output
    assert len(scandir_log) == walks_after_first
    fresh = await load_skills(str(tmp_path)).tool.execute({"name": "s"})
    assert f"<file>{tmp_path}/s/a.txt</file>" in fresh.output


async def test_concurrent_calls_share_one_walk(tmp_path, scandir_log):
    write_skill(tmp_path / "s", "s")
    write(tmp_path / "s" / "f.txt")
    source = load_skills(str(tmp_path))
    scandir_log.clear()
    results = await asyncio.gather(*(source.tool.execute({"name": "s"}) for _ in range(5)))
    assert len({r.output for r in results}) == 1
    assert [p for p, _ in scandir_log] == [str(tmp_path / "s")]


async def test_sample_walk_is_bounded_by_the_entry_cap(tmp_path, monkeypatch):
    import toolnexus.skill._tool as skill_tool

    write_skill(tmp_path / "s", "s")
    for i in range(5):
        write(tmp_path / "s" / "d" / f"f{i}")
    monkeypatch.setattr(skill_tool, "MAX_SAMPLE_WALK_ENTRIES", 2)  # the skill dir's 2 entries only
    result = await load_skills(str(tmp_path)).tool.execute({"name": "s"})
    assert result.output.endswith("<skill_files>\n\n</skill_files>\n</skill_content>")


# --- prompt ----------------------------------------------------------------------------------


def test_prompt_preamble_is_pinned():
    assert SKILLS_PROMPT_PREAMBLE == PINNED_PREAMBLE


def test_prompt_lists_described_skills_sorted_by_code_point(tmp_path):
    write_skill(tmp_path / "fs", "mid", "from disk")
    source = load_skills(
        str(tmp_path),
        skills=[
            SkillDef("zeta", "c", "last"),
            SkillDef("Alpha", "c", "capital first"),
            SkillDef("empty", "c", ""),
            SkillDef("hidden", "c", None),
        ],
    )
    assert source.prompt() == (
        f"{PINNED_PREAMBLE}\n"
        "\n"
        "## Available Skills\n"
        "- **Alpha**: capital first\n"
        "- **empty**: \n"
        "- **mid**: from disk\n"
        "- **zeta**: last"
    )


def test_prompt_without_described_skills_is_pinned():
    assert load_skills(skills=[]).prompt() == "No skills are currently available."
    assert load_skills(skills=[SkillDef("quiet", "c")]).prompt() == "No skills are currently available."
