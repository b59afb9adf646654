"""`apply_patch` on real files: grammar, hunks, moves, line endings, and all-or-nothing commits."""

from __future__ import annotations

import errno
import os
import stat

import pytest

from toolnexus.builtin import create_builtin_tools


@pytest.fixture
def apply(tmp_path):
    tool = {t.name: t for t in create_builtin_tools({"base_dir": str(tmp_path), "confine_to_base_dir": True})}[
        "apply_patch"
    ]

    async def run(*lines: str):
        return await tool.execute({"patchText": "\n".join(lines)})

    return run


def snapshot(root) -> dict[str, bytes]:
    """Every file and directory under `root` (directories map to b"<dir>")."""
    found: dict[str, bytes] = {}
    for dirpath, dirnames, filenames in os.walk(root):
        for name in dirnames:
            found[os.path.relpath(os.path.join(dirpath, name), root)] = b"<dir>"
        for name in filenames:
            path = os.path.join(dirpath, name)
            with open(path, "rb") as handle:
                found[os.path.relpath(path, root)] = handle.read()
    return found


# ------------------------------------------------------------------------------ add/update/delete


async def test_add_update_delete_in_one_patch(apply, tmp_path):
    (tmp_path / "keep.py").write_text("def f():\n    return 1\n")
    (tmp_path / "old.txt").write_text("bye\n")
    result = await apply(
        "*** Begin Patch",
        "*** Add File: pkg/new.txt",
        "+hello",
        "+world",
        "*** Update File: keep.py",
        "@@ def f():",
        " def f():",
        "-    return 1",
        "+    return 2",
        "*** Delete File: old.txt",
        "*** End Patch",
    )
    assert not result.is_error
    assert result.output == "Applied patch: 3 file operations"
    assert result.metadata == {"added": ["pkg/new.txt"], "updated": ["keep.py"], "deleted": ["old.txt"]}
    assert (tmp_path / "pkg" / "new.txt").read_bytes() == b"hello\nworld"  # no trailing newline added
    assert (tmp_path / "keep.py").read_text() == "def f():\n    return 2\n"
    assert not (tmp_path / "old.txt").exists()


async def test_one_operation_is_singular(apply, tmp_path):
    result = await apply("*** Begin Patch", "*** Add File: a.txt", "+x", "*** End Patch")
    assert result.output == "Applied patch: 1 file operation"


async def test_add_keeps_non_plus_lines_verbatim(apply, tmp_path):
    await apply("*** Begin Patch", "*** Add File: a.txt", "+one", "two", "", "+four", "*** End Patch")
    assert (tmp_path / "a.txt").read_bytes() == b"one\ntwo\n\nfour"


async def test_multiple_hunks_apply_in_order(apply, tmp_path):
    (tmp_path / "f.txt").write_text("".join(f"line {i}\n" for i in range(1, 21)))
    result = await apply(
        "*** Begin Patch",
        "*** Update File: f.txt",
        "@@",
        " line 2",
        "-line 3",
        "+line three",
        "@@",
        " line 10",
        "+line 10.5",
        " line 11",
        "@@",
        "-line 20",
        "+line twenty",
        "*** End Patch",
    )
    assert not result.is_error, result.output
    expected = [f"line {i}" for i in range(1, 21)]
    expected[2] = "line three"
    expected[19] = "line twenty"
    expected.insert(10, "line 10.5")
    assert (tmp_path / "f.txt").read_text() == "\n".join(expected) + "\n"


async def test_hunks_match_whole_lines_not_mid_line_substrings(apply, tmp_path):
    (tmp_path / "f.txt").write_text("prefix-target\ntarget\n")
    await apply("*** Begin Patch", "*** Update File: f.txt", "@@", "-target", "+done", "*** End Patch")
    assert (tmp_path / "f.txt").read_text() == "prefix-target\ndone\n"


async def test_later_hunk_searches_after_the_previous_one(apply, tmp_path):
    (tmp_path / "f.txt").write_text("a\nx\nb\nx\n")
    await apply(
        "*** Begin Patch", "*** Update File: f.txt", "@@", " b", "@@", "-x", "+second x", "*** End Patch"
    )
    assert (tmp_path / "f.txt").read_text() == "a\nx\nb\nsecond x\n"


async def test_exact_match_wins_over_whitespace_tolerant_match(apply, tmp_path):
    (tmp_path / "f.txt").write_text("value   \nvalue\n")
    await apply("*** Begin Patch", "*** Update File: f.txt", "@@", "-value", "+changed", "*** End Patch")
    assert (tmp_path / "f.txt").read_text() == "value   \nchanged\n"
    (tmp_path / "g.txt").write_text("value   \n")
    await apply("*** Begin Patch", "*** Update File: g.txt", "@@", "-value", "+changed", "*** End Patch")
    assert (tmp_path / "g.txt").read_text() == "changed\n"


async def test_end_of_file_marker_anchors_the_hunk_at_the_end(apply, tmp_path):
    (tmp_path / "f.txt").write_text("x\nmiddle\nx\n")
    await apply(
        "*** Begin Patch", "*** Update File: f.txt", "@@", "-x", "+last", "*** End of File", "*** End Patch"
    )
    assert (tmp_path / "f.txt").read_text() == "x\nmiddle\nlast\n"


async def test_pure_addition_hunk_appends_and_keeps_the_final_newline_state(apply, tmp_path):
    (tmp_path / "with.txt").write_text("a\n")
    (tmp_path / "without.txt").write_text("a")
    for name in ("with.txt", "without.txt"):
        await apply("*** Begin Patch", f"*** Update File: {name}", "@@", "+b", "*** End Patch")
    assert (tmp_path / "with.txt").read_text() == "a\nb\n"
    assert (tmp_path / "without.txt").read_text() == "a\nb"


async def test_blank_separator_lines_between_sections_are_not_context(apply, tmp_path):
    (tmp_path / "f.txt").write_text("one\ntwo\n")
    result = await apply(
        "",
        "*** Begin Patch",
        "",
        "*** Update File: f.txt",
        "@@",
        "-two",
        "+2",
        "",
        "*** End Patch",
        "trailing text after the end is ignored",
    )
    assert not result.is_error, result.output
    assert (tmp_path / "f.txt").read_text() == "one\n2\n"


async def test_crlf_is_kept_for_untouched_lines_and_used_for_new_ones(apply, tmp_path):
    (tmp_path / "dos.txt").write_bytes(b"a\r\nb\r\nc\r\n")
    await apply(
        "*** Begin Patch", "*** Update File: dos.txt", "@@", " a", "-b", "+B", "+B2", " c", "*** End Patch"
    )
    assert (tmp_path / "dos.txt").read_bytes() == b"a\r\nB\r\nB2\r\nc\r\n"


async def test_crlf_patch_text_is_read_as_lf(tmp_path):
    tool = create_builtin_tools({"base_dir": str(tmp_path), "confine_to_base_dir": True})[8]
    (tmp_path / "f.txt").write_text("a\nb\n")
    patch = "*** Begin Patch\r\n*** Update File: f.txt\r\n@@\r\n-b\r\n+c\r\n*** End Patch\r\n"
    assert not (await tool.execute({"patchText": patch})).is_error
    assert (tmp_path / "f.txt").read_bytes() == b"a\nc\n"


async def test_missing_final_newline_is_preserved(apply, tmp_path):
    (tmp_path / "f.txt").write_text("a\nb")
    await apply("*** Begin Patch", "*** Update File: f.txt", "@@", "-b", "+B", "*** End Patch")
    assert (tmp_path / "f.txt").read_bytes() == b"a\nB"


async def test_utf8_bom_is_kept(apply, tmp_path):
    (tmp_path / "f.txt").write_bytes("\ufeffstart\nend\n".encode())
    await apply("*** Begin Patch", "*** Update File: f.txt", "@@", "-start", "+begin", "*** End Patch")
    assert (tmp_path / "f.txt").read_bytes() == "\ufeffbegin\nend\n".encode()


async def test_update_keeps_file_permissions(apply, tmp_path):
    path = tmp_path / "run.sh"
    path.write_text("echo 1\n")
    path.chmod(0o755)
    await apply("*** Begin Patch", "*** Update File: run.sh", "@@", "-echo 1", "+echo 2", "*** End Patch")
    assert stat.S_IMODE(path.stat().st_mode) == 0o755


async def test_delete_does_not_need_text_and_removes_a_symlink_not_its_target(apply, tmp_path):
    (tmp_path / "blob.bin").write_bytes(b"\xff\x00\xfe")
    (tmp_path / "target.txt").write_text("kept")
    (tmp_path / "link.txt").symlink_to(tmp_path / "target.txt")
    result = await apply("*** Begin Patch", "*** Delete File: blob.bin", "*** Delete File: link.txt", "*** End Patch")
    assert result.output == "Applied patch: 2 file operations"
    assert snapshot(tmp_path) == {"target.txt": b"kept"}


async def test_delete_then_add_replaces_a_symlink_with_a_file(apply, tmp_path):
    (tmp_path / "target.txt").write_text("kept")
    (tmp_path / "link.txt").symlink_to(tmp_path / "target.txt")
    await apply("*** Begin Patch", "*** Delete File: link.txt", "*** Add File: link.txt", "+own", "*** End Patch")
    assert not (tmp_path / "link.txt").is_symlink()
    assert snapshot(tmp_path) == {"target.txt": b"kept", "link.txt": b"own"}


# ------------------------------------------------------------------------------------------ move


async def test_move_with_hunks_renames_and_edits(apply, tmp_path):
    (tmp_path / "old.py").write_text("name = 'old'\n")
    (tmp_path / "old.py").chmod(0o700)
    result = await apply(
        "*** Begin Patch",
        "*** Update File: old.py",
        "*** Move to: pkg/new.py",
        "@@",
        "-name = 'old'",
        "+name = 'new'",
        "*** End Patch",
    )
    assert result.output == "Applied patch: 1 file operation"
    assert result.metadata == {"added": [], "updated": ["old.py"], "deleted": [], "moved": {"old.py": "pkg/new.py"}}
    assert not (tmp_path / "old.py").exists()
    assert (tmp_path / "pkg" / "new.py").read_text() == "name = 'new'\n"
    assert stat.S_IMODE((tmp_path / "pkg" / "new.py").stat().st_mode) == 0o700


async def test_move_without_hunks_is_a_rename(apply, tmp_path):
    (tmp_path / "a.txt").write_bytes(b"same\r\n")
    await apply("*** Begin Patch", "*** Update File: a.txt", "*** Move to: b.txt", "*** End Patch")
    assert not (tmp_path / "a.txt").exists() and (tmp_path / "b.txt").read_bytes() == b"same\r\n"


async def test_move_onto_an_existing_file_is_refused(apply, tmp_path):
    (tmp_path / "a.txt").write_text("a")
    (tmp_path / "b.txt").write_text("b")
    result = await apply("*** Begin Patch", "*** Update File: a.txt", "*** Move to: b.txt", "*** End Patch")
    assert result.output == f"apply_patch: move target already exists: {tmp_path / 'b.txt'}"
    assert snapshot(tmp_path) == {"a.txt": b"a", "b.txt": b"b"}


async def test_move_to_must_directly_follow_the_update_header(apply, tmp_path):
    (tmp_path / "a.txt").write_text("a\n")
    result = await apply("*** Begin Patch", "*** Update File: a.txt", "@@", "-a", "*** Move to: b.txt", "*** End Patch")
    assert result.output == "apply_patch: '*** Move to:' must directly follow '*** Update File: a.txt'"


# ------------------------------------------------------------------------- several ops, one file


async def test_two_updates_of_one_file_compose(apply, tmp_path):
    (tmp_path / "f.txt").write_text("a\nb\n")
    result = await apply(
        "*** Begin Patch",
        "*** Update File: f.txt",
        "@@",
        "-a",
        "+A",
        "*** Update File: f.txt",
        "@@",
        "-b",
        "+B",
        "*** End Patch",
    )
    assert result.output == "Applied patch: 2 file operations"
    assert (tmp_path / "f.txt").read_text() == "A\nB\n"


async def test_delete_then_add_recreates_and_add_then_update_sees_the_new_content(apply, tmp_path):
    (tmp_path / "f.txt").write_text("old")
    await apply(
        "*** Begin Patch",
        "*** Delete File: f.txt",
        "*** Add File: f.txt",
        "+fresh",
        "*** Add File: g.txt",
        "+one",
        "*** Update File: g.txt",
        "@@",
        "-one",
        "+two",
        "*** End Patch",
    )
    assert (tmp_path / "f.txt").read_text() == "fresh" and (tmp_path / "g.txt").read_text() == "two"


async def test_update_after_delete_of_the_same_file_is_refused(apply, tmp_path):
    (tmp_path / "f.txt").write_text("x\n")
    result = await apply(
        "*** Begin Patch", "*** Delete File: f.txt", "*** Update File: f.txt", "@@", "-x", "*** End Patch"
    )
    assert result.output == f"apply_patch: file not found: {tmp_path / 'f.txt'}"
    assert (tmp_path / "f.txt").read_text() == "x\n"


# ------------------------------------------------------------------------------- all or nothing


async def test_context_mismatch_writes_nothing(apply, tmp_path):
    (tmp_path / "a.txt").write_text("alpha\n")
    (tmp_path / "b.txt").write_text("beta\n")
    before = snapshot(tmp_path)
    result = await apply(
        "*** Begin Patch",
        "*** Update File: a.txt",
        "@@",
        "-alpha",
        "+ALPHA",
        "*** Update File: b.txt",
        "@@",
        " gamma",
        "-beta",
        "+BETA",
        "*** End Patch",
    )
    assert result.is_error
    assert result.output == f"apply_patch: hunk does not match file contents of {tmp_path / 'b.txt'} (hunk 1 of 1)"
    assert snapshot(tmp_path) == before


async def test_second_hunk_mismatch_leaves_the_file_untouched(apply, tmp_path):
    (tmp_path / "f.txt").write_text("a\nb\n")
    result = await apply(
        "*** Begin Patch", "*** Update File: f.txt", "@@", "-a", "+A", "@@", "-zzz", "+Z", "*** End Patch"
    )
    assert result.output.endswith("(hunk 2 of 2)")
    assert (tmp_path / "f.txt").read_text() == "a\nb\n"


async def test_three_files_where_the_third_hunk_fails_write_nothing(apply, tmp_path):
    (tmp_path / "one.txt").write_text("1\n")
    (tmp_path / "three.txt").write_text("3\n")
    before = snapshot(tmp_path)
    result = await apply(
        "*** Begin Patch",
        "*** Update File: one.txt",
        "@@",
        "-1",
        "+one",
        "*** Add File: new/two.txt",
        "+2",
        "*** Update File: three.txt",
        "@@",
        "-not three",
        "+three",
        "*** End Patch",
    )
    assert result.is_error and "hunk does not match file contents" in result.output
    assert snapshot(tmp_path) == before  # not even the directory `new/`


async def test_three_files_where_the_third_write_fails_write_nothing(apply, tmp_path):
    (tmp_path / "one.txt").write_text("1\n")
    (tmp_path / "blocker").write_text("a file, not a directory")
    before = snapshot(tmp_path)
    result = await apply(
        "*** Begin Patch",
        "*** Update File: one.txt",
        "@@",
        "-1",
        "+one",
        "*** Add File: fresh/dir/two.txt",
        "+2",
        "*** Add File: blocker/three.txt",
        "+3",
        "*** End Patch",
    )
    assert result.is_error
    assert result.output == f"apply_patch: [Errno 20] Not a directory: '{tmp_path / 'blocker'}' (no file was changed)"
    assert snapshot(tmp_path) == before  # no temp files, no `fresh/dir`


async def test_a_rename_that_fails_after_others_succeeded_is_rolled_back(apply, tmp_path):
    # `x` as a file and `x/y.txt` both stage fine; renaming onto `x` fails once `x/` exists,
    # after `one.txt` was already replaced.
    (tmp_path / "one.txt").write_text("1\n")
    before = snapshot(tmp_path)
    result = await apply(
        "*** Begin Patch",
        "*** Update File: one.txt",
        "@@",
        "-1",
        "+one",
        "*** Add File: x",
        "+file",
        "*** Add File: x/y.txt",
        "+nested",
        "*** End Patch",
    )
    assert result.is_error
    assert result.output == f"apply_patch: [Errno 21] Is a directory: '{tmp_path / 'x'}' (patch rolled back)"
    assert snapshot(tmp_path) == before


async def test_a_rollback_that_cannot_restore_a_file_names_it(apply, tmp_path, monkeypatch):
    # The x / x/y.txt rename failure again, plus a fault at the OS boundary: the rename that
    # would put `one.txt` back fails. The error must not claim the patch was rolled back.
    (tmp_path / "one.txt").write_text("1\n")
    target = str(tmp_path / "one.txt")
    real_replace = os.replace
    renames_onto_target = []

    def replace(src, dst, *args, **kwargs):
        if os.fspath(dst) == target:
            renames_onto_target.append(src)
            if len(renames_onto_target) > 1:  # the first is the commit, the second the restore
                raise PermissionError(errno.EACCES, "injected failure", target)
        return real_replace(src, dst, *args, **kwargs)

    monkeypatch.setattr(os, "replace", replace)
    result = await apply(
        "*** Begin Patch",
        "*** Update File: one.txt",
        "@@",
        "-1",
        "+one",
        "*** Add File: x",
        "+file",
        "*** Add File: x/y.txt",
        "+nested",
        "*** End Patch",
    )
    assert result.output == (
        f"apply_patch: [Errno 21] Is a directory: '{tmp_path / 'x'}' (rollback failed, could not restore: {target})"
    )
    assert (tmp_path / "one.txt").read_text() == "one\n"
    assert len(renames_onto_target) == 2


async def test_failing_patch_leaves_a_deleted_file_in_place(apply, tmp_path):
    (tmp_path / "gone.txt").write_text("still here")
    result = await apply(
        "*** Begin Patch", "*** Delete File: gone.txt", "*** Delete File: missing.txt", "*** End Patch"
    )
    assert result.output == f"apply_patch: file not found: {tmp_path / 'missing.txt'}"
    assert (tmp_path / "gone.txt").read_text() == "still here"


# ---------------------------------------------------------------------------------------- errors


@pytest.mark.parametrize(
    ("lines", "message"),
    [
        ([""], "patchText is required"),
        (["", "  ", "*** Add File: x", "*** End Patch"], "missing '*** Begin Patch'"),
        (["*** Begin Patch", "*** Add File: x", "+x"], "missing '*** End Patch'"),
        (["*** Begin Patch", "garbage here", "*** End Patch"], "unexpected line: garbage here"),
        (["*** Begin Patch", " *** Add File: x", "*** End Patch"], "unexpected line:  *** Add File: x"),
        (["*** Begin Patch", "*** Rename File: x", "*** End Patch"], "unexpected line: *** Rename File: x"),
    ],
)
async def test_grammar_errors(apply, lines, message):
    result = await apply(*lines)
    assert result.is_error and result.output == f"apply_patch: {message}"


async def test_patch_text_must_be_a_string(tmp_path):
    tool = create_builtin_tools()[8]
    assert (await tool.execute({})).output == "apply_patch: patchText is required"
    assert (await tool.execute({"patchText": 5})).output == "apply_patch: patchText is required"


async def test_add_on_an_existing_file_is_refused(apply, tmp_path):
    (tmp_path / "a.txt").write_text("a")
    result = await apply("*** Begin Patch", "*** Add File: a.txt", "+b", "*** End Patch")
    assert result.output == f"apply_patch: file already exists: {tmp_path / 'a.txt'}"
    assert (tmp_path / "a.txt").read_text() == "a"


async def test_update_of_a_missing_file_reports_the_os_error(apply, tmp_path):
    result = await apply("*** Begin Patch", "*** Update File: nope.txt", "@@", "-a", "*** End Patch")
    assert result.output == f"apply_patch: [Errno 2] No such file or directory: '{tmp_path / 'nope.txt'}'"


async def test_patch_paths_are_confined_to_base_dir(apply, tmp_path):
    result = await apply("*** Begin Patch", "*** Add File: ../escape.txt", "+x", "*** End Patch")
    assert result.output == f"apply_patch: ../escape.txt resolves outside baseDir {tmp_path}"
    assert not (tmp_path.parent / "escape.txt").exists()
