"""Skill discovery, frontmatter, data skills, merge, filter and inventory (spec §2.2-§2.4, §5)."""

import logging
import os
from pathlib import Path

import pytest

import toolnexus.skill._loader as skill_loader
from toolnexus._walk import walk_files
from toolnexus.skill import (
    SkillDef,
    SkillInfo,
    SkillInventory,
    SkillSkip,
    SkillSource,
    alist_skills,
    aload_skills,
    list_skills,
    load_skills,
)


def write_skill(directory: Path, name=None, description=None, body="Body text.\n", *, raw=None) -> Path:
    """A SKILL.md under `directory` (created); `raw` replaces the whole file text."""
    directory.mkdir(parents=True, exist_ok=True)
    path = directory / "SKILL.md"
    if raw is None:
        front = [] if name is None else [f"name: {name}"]
        if description is not None:
            front.append(f"description: {description}")
        raw = "---\n" + "\n".join(front) + "\n---\n" + body
    path.write_bytes(raw.encode("utf-8") if isinstance(raw, str) else raw)
    return path


def messages(caplog):
    return [r.getMessage() for r in caplog.records if r.name == "toolnexus"]


def skip_tuples(skipped):
    return [(s.location, s.reason) for s in skipped]


@pytest.fixture(autouse=True)
def _capture_toolnexus_warnings(caplog):
    caplog.set_level(logging.WARNING, "toolnexus")


# --- discovery -----------------------------------------------------------------------------


def test_discovery_orders_shallower_first_then_code_point_path(tmp_path):
    write_skill(tmp_path / "b" / "deep", "b-deep")
    write_skill(tmp_path / "a" / "x" / "y", "a-xy")
    write_skill(tmp_path / "b", "b")
    write_skill(tmp_path / "B", "upper-b")  # "B" < "b" in code-point order
    write_skill(tmp_path / "a", "a")
    write_skill(tmp_path, "top")
    inv = list_skills(str(tmp_path))
    assert [s.name for s in inv.skills] == ["top", "upper-b", "a", "b", "b-deep", "a-xy"]
    assert inv.skipped == []


def test_locations_are_joined_paths_and_fs_fields(tmp_path):
    path = write_skill(tmp_path / "pdf", "pdf", "Fill PDF forms", body="Use pdftk.\n")
    [info] = list_skills(str(tmp_path)).skills
    assert info == SkillInfo("pdf", str(path), "Use pdftk.\n", "Fill PDF forms", "fs", None, None)


def test_absolute_root_is_walked_as_given_not_normalized(tmp_path):
    write_skill(tmp_path / "s", "s")
    root = str(tmp_path) + "/./"
    [info] = list_skills(root).skills
    assert info.location == os.path.join(root, "s", "SKILL.md")


def test_symlinked_directory_and_symlinked_skill_file_are_followed(tmp_path):
    outside = tmp_path / "outside"
    write_skill(outside / "linked-dir", "via-dir-link")
    real_file = write_skill(outside / "file-target", "via-file-link")
    root = tmp_path / "root"
    root.mkdir()
    (root / "dirlink").symlink_to(outside / "linked-dir", target_is_directory=True)
    (root / "filelink").mkdir()
    (root / "filelink" / "SKILL.md").symlink_to(real_file)
    inv = list_skills(str(root))
    assert {s.name: s.location for s in inv.skills} == {
        "via-dir-link": str(root / "dirlink" / "SKILL.md"),
        "via-file-link": str(root / "filelink" / "SKILL.md"),
    }


def test_symlink_cycles_terminate_and_root_is_not_pre_seeded(tmp_path):
    write_skill(tmp_path, "top")
    write_skill(tmp_path / "a", "a")
    write_skill(tmp_path / "b", "b")
    (tmp_path / "a" / "to-root").symlink_to(tmp_path, target_is_directory=True)
    (tmp_path / "a" / "to-b").symlink_to(tmp_path / "b", target_is_directory=True)
    (tmp_path / "b" / "to-a").symlink_to(tmp_path / "a", target_is_directory=True)
    inv = list_skills(str(tmp_path))
    assert sorted(s.name for s in inv.skills) == ["a", "b", "top"]
    # The root's realpath is only marked once a link re-enters it, so its SKILL.md is seen again
    # through that link (deeper, hence a duplicate) and then never a third time.
    assert skip_tuples(inv.skipped) == [(str(tmp_path / "a" / "to-root" / "SKILL.md"), "duplicate-name")]


def test_node_modules_and_git_directories_are_skipped(tmp_path):
    write_skill(tmp_path / "node_modules" / "pkg", "from-node-modules")
    write_skill(tmp_path / ".git" / "hooks", "from-git")
    write_skill(tmp_path / "src" / "node_modules", "nested-node-modules")
    write_skill(tmp_path / "ok", "ok")
    assert [s.name for s in list_skills(str(tmp_path)).skills] == ["ok"]


def test_only_files_named_exactly_skill_md_count(tmp_path):
    (tmp_path / "a").mkdir()
    (tmp_path / "a" / "skill.md").write_text("---\nname: lower\n---\n")
    (tmp_path / "a" / "SKILL.md.bak").write_text("---\nname: backup\n---\n")
    (tmp_path / "b" / "SKILL.md").mkdir(parents=True)  # a directory named SKILL.md is walked, not read
    write_skill(tmp_path / "b" / "SKILL.md" / "inner", "inner")
    assert [s.name for s in list_skills(str(tmp_path)).skills] == ["inner"]


@pytest.mark.skipif(os.name != "posix" or os.geteuid() == 0, reason="needs a non-root POSIX user for chmod 000")
def test_unreadable_directory_is_skipped_and_the_rest_loads(tmp_path):
    write_skill(tmp_path / "locked" / "inside", "hidden")
    write_skill(tmp_path / "open", "visible")
    (tmp_path / "locked").chmod(0)
    try:
        inv = list_skills(str(tmp_path))
    finally:
        (tmp_path / "locked").chmod(0o755)
    assert [s.name for s in inv.skills] == ["visible"]


def test_dangling_and_looping_symlinks_are_ignored(tmp_path):
    (tmp_path / "dangling").symlink_to(tmp_path / "nowhere")
    (tmp_path / "loop1").symlink_to(tmp_path / "loop2")
    (tmp_path / "loop2").symlink_to(tmp_path / "loop1")
    write_skill(tmp_path / "ok", "ok")
    inv = list_skills(str(tmp_path))
    assert [s.name for s in inv.skills] == ["ok"] and inv.skipped == []


def test_missing_root_warns_pinned_line_without_skip_entry_and_other_roots_load(tmp_path, caplog):
    write_skill(tmp_path / "real" / "s", "s")
    missing = str(tmp_path / "missing")
    a_file = tmp_path / "file.txt"
    a_file.write_text("x")
    inv = list_skills([missing, str(a_file), str(tmp_path / "real")])
    assert [s.name for s in inv.skills] == ["s"]
    assert inv.skipped == []
    assert messages(caplog) == [
        f"[toolnexus] skills dir not found: {missing}",
        f"[toolnexus] skills dir not found: {a_file}",
    ]


def test_relative_root_is_absolutized_so_locations_and_skill_tool_work(tmp_path, monkeypatch):
    write_skill(tmp_path / "skills" / "rel", "rel", "relative")
    monkeypatch.chdir(tmp_path)
    source = load_skills("skills")
    info = source.skills["rel"]
    assert info.location == str(tmp_path / "skills" / "rel" / "SKILL.md")
    assert os.path.isabs(info.location)


async def test_relative_root_skill_tool_returns_file_uri_base(tmp_path, monkeypatch):
    write_skill(tmp_path / "skills" / "rel", "rel", "relative")
    monkeypatch.chdir(tmp_path)
    source = await aload_skills(["skills"])
    result = await source.tool.execute({"name": "rel"})
    assert not result.is_error
    assert f"Base directory for this skill: {(tmp_path / 'skills' / 'rel').as_uri()}\n" in result.output


def test_missing_relative_root_names_the_absolute_path(tmp_path, monkeypatch, caplog):
    monkeypatch.chdir(tmp_path)
    list_skills("nope")
    assert messages(caplog) == [f"[toolnexus] skills dir not found: {tmp_path / 'nope'}"]


def test_empty_string_root_is_not_the_working_directory(tmp_path, monkeypatch, caplog):
    write_skill(tmp_path / "cwd-skill", "cwd-skill")
    monkeypatch.chdir(tmp_path)
    assert list_skills("").skills == []
    assert messages(caplog) == ["[toolnexus] skills dir not found: "]


def test_roots_accept_path_objects(tmp_path):
    write_skill(tmp_path / "p", "p")
    assert [s.name for s in list_skills([tmp_path]).skills] == ["p"]


# --- reading and frontmatter ---------------------------------------------------------------


def test_non_utf8_skill_is_skipped_as_unreadable_and_others_load(tmp_path):
    bad = write_skill(tmp_path / "bad", raw=b"---\nname: bad\n---\n\xff\xfe broken")
    write_skill(tmp_path / "good", "good")
    inv = list_skills(str(tmp_path))
    assert [s.name for s in inv.skills] == ["good"]
    [skip] = inv.skipped
    assert (skip.location, skip.reason) == (str(bad), "unreadable")
    assert skip.detail.startswith("not valid UTF-8: 'utf-8' codec can't decode byte 0xff")


@pytest.mark.skipif(not os.path.exists("/proc/self/mem"), reason="needs Linux /proc/self/mem")
def test_file_that_fails_to_read_is_skipped_as_unreadable(tmp_path):
    # /proc/self/mem is a regular file whose read at offset 0 fails with EIO, even for root.
    (tmp_path / "io").mkdir()
    (tmp_path / "io" / "SKILL.md").symlink_to("/proc/self/mem")
    inv = list_skills(str(tmp_path))
    [skip] = inv.skipped
    assert (skip.location, skip.reason) == (str(tmp_path / "io" / "SKILL.md"), "unreadable")
    assert "Input/output error" in skip.detail


def test_bom_prefixed_skill_loads_with_its_frontmatter(tmp_path):
    write_skill(tmp_path / "bom", raw=b"\xef\xbb\xbf---\nname: bom\ndescription: has a BOM\n---\nBody")
    [info] = list_skills(str(tmp_path)).skills
    assert (info.name, info.description, info.content) == ("bom", "has a BOM", "Body")


def test_crlf_file_loads_and_body_uses_lf(tmp_path):
    write_skill(tmp_path / "crlf", raw=b"---\r\nname: crlf\r\ndescription: d\r\n---\r\nline1\r\nline2\r\n")
    [info] = list_skills(str(tmp_path)).skills
    assert (info.name, info.description, info.content) == ("crlf", "d", "line1\nline2\n")


@pytest.mark.parametrize(
    ("yaml_value", "expected"),
    [
        ("yes", "yes"),
        ("no", "no"),
        ("on", "on"),
        ("true", "true"),
        ("0x1F", "0x1F"),
        ("010", "010"),
        ("1.50", "1.50"),
        ("1_000", "1_000"),
        ("2024-01-01", "2024-01-01"),
        ("null", "null"),
        ("~", "~"),
        ("'quoted: yes'", "quoted: yes"),
        ('"  padded  "', "padded"),
    ],
)
def test_name_and_description_keep_the_literal_scalar_text(tmp_path, yaml_value, expected):
    write_skill(tmp_path / "s", raw=f"---\nname: {yaml_value}\ndescription: {yaml_value}\n---\nb")
    [info] = list_skills(str(tmp_path)).skills
    assert (info.name, info.description) == (expected, expected)


def test_block_scalar_description_is_stripped(tmp_path):
    write_skill(tmp_path / "s", raw="---\nname: s\ndescription: |\n  line one\n  line two\n---\nb")
    [info] = list_skills(str(tmp_path)).skills
    assert info.description == "line one\nline two"


def test_merge_key_still_supplies_fields(tmp_path):
    write_skill(tmp_path / "s", raw="---\ndefaults: &d {name: merged, description: from anchor}\n<<: *d\n---\n")
    [info] = list_skills(str(tmp_path)).skills
    assert (info.name, info.description) == ("merged", "from anchor")


def test_lenient_fallback_recovers_colon_in_plain_description(tmp_path):
    write_skill(tmp_path / "s", raw="---\nname: s\ndescription: Use when: the user asks\n---\nb")
    inv = list_skills(str(tmp_path))
    assert [(s.name, s.description) for s in inv.skills] == [("s", "Use when: the user asks")]
    assert inv.skipped == []


def test_lenient_fallback_rules(tmp_path):
    raw = (
        "---\n"
        "# name: commented\n"
        "  name: indented\n"
        "name:\n"
        "name: |\n"
        "name: [list]\n"
        "name: 'first: real'\n"
        "name: second\n"
        "description: \"quoted\"\n"
        "broken: [unclosed\n"
        "---\n"
        "body"
    )
    write_skill(tmp_path / "s", raw=raw)
    [info] = list_skills(str(tmp_path)).skills
    assert (info.name, info.description, info.content) == ("first: real", "quoted", "body")


def test_name_given_as_a_map_is_missing_name_not_its_repr(tmp_path):
    write_skill(tmp_path / "s", raw="---\nname: {a: 1}\ndescription: kept\n---\n")
    inv = list_skills(str(tmp_path))
    assert inv.skills == []
    assert [(s.reason, s.detail) for s in inv.skipped] == [("missing-name", "frontmatter has no non-empty 'name'")]


def test_yaml_error_without_recoverable_name_is_malformed_with_one_line_detail(tmp_path):
    path = write_skill(tmp_path / "m", raw="---\ndescription: [unclosed\nother: x\n---\nbody")
    inv = list_skills(str(tmp_path))
    [skip] = inv.skipped
    assert (skip.location, skip.reason) == (str(path), "malformed-frontmatter")
    assert "\n" not in skip.detail and skip.detail == skip.detail.strip()
    assert skip.detail.startswith("while parsing a flow sequence")


def test_missing_name_cases(tmp_path):
    no_block = write_skill(tmp_path / "a", raw="# Just markdown\n")
    no_name_key = write_skill(tmp_path / "b", raw="---\ndescription: no name here\n---\nbody")
    empty_name = write_skill(tmp_path / "c", raw="---\nname: ''\n---\nbody")
    null_name = write_skill(tmp_path / "d", raw="---\nname:\n---\nbody")
    inv = list_skills(str(tmp_path))
    assert inv.skills == []
    assert [(s.location, s.reason, s.detail) for s in inv.skipped] == [
        (str(no_block), "missing-name", "no '---' frontmatter block with a name"),
        (str(no_name_key), "missing-name", "frontmatter has no non-empty 'name'"),
        (str(empty_name), "missing-name", "frontmatter has no non-empty 'name'"),
        (str(null_name), "missing-name", "frontmatter has no non-empty 'name'"),
    ]


def test_non_mapping_frontmatter_falls_back_to_line_scan(tmp_path):
    write_skill(tmp_path / "s", raw="---\njust a string\n---\nb")
    write_skill(tmp_path / "t", raw="---\n- name: in-a-list\n---\nb")
    inv = list_skills(str(tmp_path))
    assert inv.skills == [] and [s.reason for s in inv.skipped] == ["missing-name", "missing-name"]


def test_empty_description_is_none_but_quoted_empty_is_kept(tmp_path):
    write_skill(tmp_path / "a", raw="---\nname: a\ndescription:\n---\n")
    write_skill(tmp_path / "b", raw="---\nname: b\ndescription: ''\n---\n")
    inv = list_skills(str(tmp_path))
    assert [(s.name, s.description) for s in inv.skills] == [("a", None), ("b", "")]


def test_body_is_everything_after_the_closing_fence(tmp_path):
    write_skill(tmp_path / "s", raw="---\nname: s\n---\n\n# Title\n---\nmore\n")
    [info] = list_skills(str(tmp_path)).skills
    assert info.content == "\n# Title\n---\nmore\n"


def test_deeply_nested_yaml_does_not_crash(tmp_path):
    write_skill(tmp_path / "s", raw="---\nname: deep\nx: " + "[" * 5000 + "\n---\n")
    inv = list_skills(str(tmp_path))
    assert [s.name for s in inv.skills] == ["deep"]


# --- data skills, merge, filter ------------------------------------------------------------


def test_data_skill_defaults_and_fields():
    inv = list_skills(
        skills=[
            SkillDef("plain", "Do it."),
            SkillDef("custom", "", "desc", ["a.py", "b.md"], "https://example.com/skills/custom/"),
        ]
    )
    assert inv.skills == [
        SkillInfo("plain", "skill://plain/", "Do it.", None, "logical", [], "skill://plain/"),
        SkillInfo(
            "custom",
            "https://example.com/skills/custom/",
            "",
            "desc",
            "logical",
            ["a.py", "b.md"],
            "https://example.com/skills/custom/",
        ),
    ]


def test_data_skill_resources_are_copied():
    resources = ["x"]
    [info] = list_skills(skills=[SkillDef("d", "c", resources=resources)]).skills
    resources.append("y")
    assert info.resources == ["x"]


def test_data_skill_with_empty_name_is_missing_name_at_its_base():
    inv = list_skills(skills=[SkillDef("", "c"), SkillDef("  ", "c", base="mem://x/"), SkillDef("ok", "c")])
    assert [s.name for s in inv.skills] == ["ok"]
    assert skip_tuples(inv.skipped) == [("skill://", "missing-name"), ("mem://x/", "missing-name")]


def test_non_skilldef_entry_is_a_clear_type_error():
    with pytest.raises(TypeError, match=r"skills\[1\] must be a SkillDef, got dict"):
        list_skills(skills=[SkillDef("a", "c"), {"name": "b", "content": "c"}])


def test_first_name_wins_across_roots_then_data_with_pinned_warning(tmp_path, caplog):
    first = write_skill(tmp_path / "r1" / "dup", "dup", "from r1")
    second = write_skill(tmp_path / "r2" / "dup", "dup", "from r2")
    inv = list_skills([str(tmp_path / "r1"), str(tmp_path / "r2")], skills=[SkillDef("dup", "data")])
    assert [(s.name, s.location) for s in inv.skills] == [("dup", str(first))]
    assert skip_tuples(inv.skipped) == [(str(second), "duplicate-name"), ("skill://dup/", "duplicate-name")]
    assert inv.skipped[0].detail == f'"dup" already loaded from {first}'
    assert messages(caplog) == [
        f'[toolnexus] duplicate skill name "dup" ({second}) \u2014 keeping first',
        '[toolnexus] duplicate skill name "dup" (skill://dup/) \u2014 keeping first',
    ]


def test_shallower_skill_wins_a_duplicate_within_one_root(tmp_path):
    deep = write_skill(tmp_path / "a" / "b", "same", "deep")
    shallow = write_skill(tmp_path / "z", "same", "shallow")
    inv = list_skills(str(tmp_path))
    assert [(s.name, s.description) for s in inv.skills] == [("same", "shallow")]
    assert skip_tuples(inv.skipped) == [(str(deep), "duplicate-name")]
    assert inv.skills[0].location == str(shallow)


def test_filter_allowlist_keeps_only_true_names(tmp_path):
    source = load_skills(skills=[SkillDef(n, "c", "d") for n in ("a", "b", "c")], filter={"a": True, "b": False})
    assert list(source.skills) == ["a"]


def test_filter_denylist_drops_false_names():
    source = load_skills(skills=[SkillDef(n, "c", "d") for n in ("a", "b", "c")], filter={"b": False})
    assert list(source.skills) == ["a", "c"]


def test_filter_unknown_key_warns_pinned_line(caplog):
    load_skills(skills=[SkillDef("a", "c")], filter={"ghost": False})
    assert messages(caplog) == ['[toolnexus] skill filter name "ghost" matched no skill']


async def test_filter_applies_before_tool_and_prompt():
    source = load_skills(skills=[SkillDef("a", "c", "A"), SkillDef("b", "c", "B")], filter={"b": False})
    assert "**b**" not in source.prompt()
    result = await source.tool.execute({"name": "b"})
    assert (result.output, result.is_error) == ('Skill "b" not found. Available skills: a', True)


def test_filtered_out_first_skill_still_shadows_a_later_duplicate(tmp_path):
    write_skill(tmp_path / "s", "s", "fs")
    source = load_skills(str(tmp_path), skills=[SkillDef("s", "data")], filter={"s": False})
    assert source.skills == {}
    assert [s.reason for s in source.skipped] == ["duplicate-name"]


def test_list_skills_has_no_filter_and_returns_inventory(tmp_path):
    write_skill(tmp_path / "s", "s")
    inv = list_skills(str(tmp_path), skills=[SkillDef("d", "c")])
    assert isinstance(inv, SkillInventory)
    assert [s.name for s in inv.skills] == ["s", "d"]
    with pytest.raises(TypeError):
        list_skills(str(tmp_path), filter={"s": False})  # type: ignore[call-arg]


def test_load_skills_reports_skips_on_source_and_logs_non_duplicate_ones(tmp_path, caplog):
    bad = write_skill(tmp_path / "bad", raw="no frontmatter")
    write_skill(tmp_path / "good", "good", "ok")
    source = load_skills(str(tmp_path))
    assert isinstance(source, SkillSource)
    assert list(source.skills) == ["good"]
    assert source.skipped == [SkillSkip(str(bad), "missing-name", "no '---' frontmatter block with a name")]
    assert messages(caplog) == [
        f"[toolnexus] skill skipped (missing-name): {bad} \u2014 no '---' frontmatter block with a name"
    ]


def test_list_skills_does_not_log_skips(tmp_path, caplog):
    write_skill(tmp_path / "bad", raw="no frontmatter")
    assert len(list_skills(str(tmp_path)).skipped) == 1
    assert messages(caplog) == []


def test_everything_broken_at_once_never_crashes(tmp_path):
    write_skill(tmp_path / "utf", raw=b"\x80\x81")
    write_skill(tmp_path / "yaml", raw="---\n: : :\n  - [\n---\n")
    write_skill(tmp_path / "noname", raw="---\ndescription: x\n---\n")
    write_skill(tmp_path / "empty", raw="")
    (tmp_path / "dangling").symlink_to(tmp_path / "gone")
    write_skill(tmp_path / "ok", "ok")
    inv = list_skills(str(tmp_path))
    assert [s.name for s in inv.skills] == ["ok"]
    assert sorted(s.reason for s in inv.skipped) == [
        "malformed-frontmatter",
        "missing-name",
        "missing-name",
        "unreadable",
    ]


# --- async variants and walk bounds --------------------------------------------------------


async def test_async_variants_match_sync_results(tmp_path):
    write_skill(tmp_path / "s", "s", "d")
    assert (await alist_skills(str(tmp_path))) == list_skills(str(tmp_path))
    source = await aload_skills(str(tmp_path), filter={"s": True})
    assert list(source.skills) == ["s"]


def test_walk_stops_at_entry_cap_and_says_so(tmp_path):
    for i in range(10):
        (tmp_path / f"f{i}").write_text("x")
    capped = walk_files(str(tmp_path), include=lambda n: True, seed_root=True, max_entries=4)
    assert capped.truncated and len(capped.files) == 4
    full = walk_files(str(tmp_path), include=lambda n: True, seed_root=True, max_entries=10)
    assert not full.truncated and len(full.files) == 10


def test_discovery_cap_warns_and_keeps_what_it_found(tmp_path, monkeypatch, caplog):
    # Entries listed: root -> [a] (1), a -> [SKILL.md, b] (2, 3), a/b -> [SKILL.md] (4: over the cap).
    write_skill(tmp_path / "a", "kept")
    write_skill(tmp_path / "a" / "b", "beyond-cap")
    monkeypatch.setattr(skill_loader, "MAX_DISCOVERY_ENTRIES", 3)
    inv = list_skills(str(tmp_path))
    assert [s.name for s in inv.skills] == ["kept"]
    assert messages(caplog) == [f"[toolnexus] skills dir walk stopped after 3 entries: {tmp_path}"]


def test_bad_sample_limit_and_filter_types_are_clear_errors():
    with pytest.raises(TypeError, match="sample_limit must be an int, got str"):
        load_skills(skills=[], sample_limit="5")
    with pytest.raises(TypeError, match="skills filter must be a dict of name -> bool, got list"):
        load_skills(skills=[], filter=["a"])
