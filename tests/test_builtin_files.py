"""The `read`, `write` and `edit` built-ins on real files."""

from __future__ import annotations

import base64
import os
import stat
import threading

import pytest

from toolnexus.builtin import create_builtin_tools
from toolnexus.builtin._files import make_read
from toolnexus.builtin._settings import BuiltinSettings


@pytest.fixture
def tools():
    return {t.name: t for t in create_builtin_tools()}


# ----------------------------------------------------------------------------------------- read


async def test_read_returns_the_whole_file(tools, tmp_path):
    path = tmp_path / "a.txt"
    path.write_bytes(b"one\ntwo\nthree\n")
    result = await tools["read"].execute({"path": str(path)})
    assert result.output == "one\ntwo\nthree\n" and not result.is_error and result.metadata is None


@pytest.mark.parametrize(
    ("window", "expected"),
    [
        ({"offset": 2}, "two\nthree\n"),
        ({"offset": 2, "limit": 1}, "two"),
        ({"limit": 2}, "one\ntwo"),
        ({"offset": 3, "limit": 5}, "three\n"),  # the split keeps the "" after the final newline
        ({"offset": 4}, ""),
        ({"offset": 9}, ""),
        ({"offset": 0, "limit": 1}, "one"),  # offset below 1 counts as 1
        ({"offset": -5, "limit": 1}, "one"),
        ({"limit": 0}, ""),
        ({"limit": -3}, ""),
        ({"offset": 2.9, "limit": 1.2}, "two"),  # numbers are truncated to int
        ({"offset": True, "limit": "2"}, "one\ntwo\nthree\n"),  # bools and strings do not count
    ],
)
async def test_read_line_window(tools, tmp_path, window, expected):
    path = tmp_path / "a.txt"
    path.write_bytes(b"one\ntwo\nthree\n")
    assert (await tools["read"].execute({"path": str(path), **window})).output == expected


async def test_read_keeps_crlf_line_endings(tools, tmp_path):
    path = tmp_path / "dos.txt"
    path.write_bytes(b"a\r\nb\r\nc\r\n")
    assert (await tools["read"].execute({"path": str(path)})).output == "a\r\nb\r\nc\r\n"
    assert (await tools["read"].execute({"path": str(path), "offset": 2, "limit": 1})).output == "b\r"


async def test_read_errors(tools, tmp_path):
    assert (await tools["read"].execute({})).output == "read: path is required"
    assert (await tools["read"].execute({"path": 7})).output == "read: path is required"
    missing = await tools["read"].execute({"path": "x-does-not-exist"})
    assert missing.is_error and missing.output == "read: [Errno 2] No such file or directory: 'x-does-not-exist'"
    binary = tmp_path / "bin.dat"
    binary.write_bytes(b"ok\n\xff\xfe\n")
    result = await tools["read"].execute({"path": str(binary)})
    assert result.is_error and result.output == f"read: {binary} is not valid UTF-8 text"


@pytest.mark.parametrize(
    ("name", "mime", "kind"),
    [
        ("p.png", "image/png", "image"),
        ("p.JPG", "image/jpeg", "image"),
        ("p.jpeg", "image/jpeg", "image"),
        ("p.gif", "image/gif", "image"),
        ("p.webp", "image/webp", "image"),
        ("d.pdf", "application/pdf", "file"),
        ("s.mp3", "audio/mpeg", "audio"),
        ("s.wav", "audio/wav", "audio"),
    ],
)
async def test_read_media_comes_back_as_a_content_part(tools, tmp_path, name, mime, kind):
    data = bytes(range(256))
    path = tmp_path / name
    path.write_bytes(data)
    result = await tools["read"].execute({"path": str(path)})
    assert not result.is_error
    assert result.output == f"{path} ({mime}, 256 bytes)"
    assert result.parts == [
        {"type": kind, "mimeType": mime, "data": base64.b64encode(data).decode(), "name": name}
    ]


async def test_read_caps_text_output_with_a_notice_that_says_how_to_continue(tmp_path):
    path = tmp_path / "big.txt"
    path.write_bytes(b"".join(b"line %04d\n" % i for i in range(1, 1001)))  # 10 bytes per line
    read = make_read(BuiltinSettings(read_max_bytes=95))
    result = await read.execute({"path": str(path)})
    shown = "\n".join(f"line {i:04d}" for i in range(1, 10))  # 9 lines = 89 bytes; a 10th would pass 95
    assert (
        result.output == f"{shown}\n\n[read: output capped at 95 bytes of a 10000-byte file; continue with offset=10]"
    )
    assert result.metadata == {"truncated": True, "nextOffset": 10}
    follow = await read.execute({"path": str(path), "offset": 10, "limit": 2})
    assert follow.output == "line 0010\nline 0011"


async def test_read_cuts_a_single_line_longer_than_the_cap(tmp_path):
    path = tmp_path / "minified.js"
    path.write_bytes("é".encode() * 100 + b"\nnext\n")  # 200 bytes on line 1
    read = make_read(BuiltinSettings(read_max_bytes=51))
    result = await read.execute({"path": str(path)})
    assert result.output == "é" * 25 + "\n\n[read: line 1 is longer than 51 bytes and was cut; continue with offset=2]"
    assert (await read.execute({"path": str(path), "offset": 2})).output == "next\n"


async def test_read_refuses_media_above_the_media_cap(tmp_path):
    path = tmp_path / "huge.png"
    path.write_bytes(b"\0" * 100)
    result = await make_read(BuiltinSettings(media_max_bytes=10)).execute({"path": str(path)})
    assert result.is_error and result.output == f"read: {path} is 100 bytes, above the 10-byte limit for media files"


# ---------------------------------------------------------------------------------------- write


async def test_write_creates_parents_and_reports_utf8_bytes(tools, tmp_path):
    path = tmp_path / "deep" / "er" / "f.txt"
    result = await tools["write"].execute({"path": str(path), "content": "héllo"})
    assert result.output == f"Wrote 6 bytes to {path}" and result.metadata == {"bytes": 6}
    assert path.read_bytes() == "héllo".encode()


async def test_write_content_none_is_empty_and_non_strings_are_stringified(tools, tmp_path):
    path = tmp_path / "f.txt"
    assert (await tools["write"].execute({"path": str(path), "content": None})).output == f"Wrote 0 bytes to {path}"
    assert path.read_bytes() == b""
    await tools["write"].execute({"path": str(path), "content": 42})
    assert path.read_text() == "42"


async def test_write_writes_line_endings_verbatim(tools, tmp_path):
    path = tmp_path / "f.txt"
    await tools["write"].execute({"path": str(path), "content": "a\r\nb\n"})
    assert path.read_bytes() == b"a\r\nb\n"


async def test_write_replaces_atomically_and_keeps_permissions(tools, tmp_path):
    path = tmp_path / "script.sh"
    path.write_text("old")
    path.chmod(0o750)
    inode_before = path.stat().st_ino
    await tools["write"].execute({"path": str(path), "content": "new"})
    assert path.read_text() == "new"
    assert stat.S_IMODE(path.stat().st_mode) == 0o750
    assert path.stat().st_ino != inode_before  # a new file was renamed over the old one
    assert sorted(os.listdir(tmp_path)) == ["script.sh"]  # no temp file left behind


async def test_write_new_file_gets_umask_permissions(tools, tmp_path):
    umask = os.umask(0o022)
    os.umask(umask)
    path = tmp_path / "new.txt"
    await tools["write"].execute({"path": str(path), "content": "x"})
    assert stat.S_IMODE(path.stat().st_mode) == 0o666 & ~umask


async def test_write_through_a_symlink_updates_the_target(tools, tmp_path):
    target = tmp_path / "real.txt"
    target.write_text("old")
    link = tmp_path / "link.txt"
    link.symlink_to(target)
    await tools["write"].execute({"path": str(link), "content": "new"})
    assert link.is_symlink() and target.read_text() == "new"


async def test_write_errors(tools, tmp_path):
    assert (await tools["write"].execute({"content": "x"})).output == "write: path is required"
    blocker = tmp_path / "file"
    blocker.write_text("")
    result = await tools["write"].execute({"path": str(blocker / "sub" / "x.txt"), "content": "x"})
    assert result.is_error and result.output == f"write: [Errno 20] Not a directory: '{blocker}'"
    onto_dir = await tools["write"].execute({"path": str(tmp_path), "content": "x"})
    assert onto_dir.output == f"write: [Errno 21] Is a directory: '{tmp_path}'"


# ----------------------------------------------------------------------------------------- edit


async def test_edit_replaces_a_unique_occurrence(tools, tmp_path):
    path = tmp_path / "f.py"
    path.write_text("x = 1\ny = 2\n")
    result = await tools["edit"].execute({"path": str(path), "oldString": "y = 2", "newString": "y = 3"})
    assert result.output == f"Edited {path} (1 replacement)" and result.metadata == {"replacements": 1}
    assert path.read_text() == "x = 1\ny = 3\n"


async def test_edit_refuses_an_ambiguous_occurrence_unless_replace_all(tools, tmp_path):
    path = tmp_path / "f.txt"
    path.write_text("a a a")
    args = {"path": str(path), "oldString": "a", "newString": "b"}
    ambiguous = await tools["edit"].execute(args)
    assert ambiguous.output == f"edit: oldString is not unique in {path} (3 occurrences); use replaceAll"
    assert path.read_text() == "a a a"
    assert (await tools["edit"].execute({**args, "replaceAll": "yes"})).is_error  # only `is True` counts
    done = await tools["edit"].execute({**args, "replaceAll": True})
    assert done.output == f"Edited {path} (3 replacements)" and done.metadata == {"replacements": 3}
    assert path.read_text() == "b b b"


async def test_edit_errors(tools, tmp_path):
    path = tmp_path / "f.txt"
    path.write_text("hello")
    edit = tools["edit"].execute
    assert (await edit({"oldString": "a", "newString": "b"})).output == "edit: path is required"
    for old in (None, "", 5):
        assert (await edit({"path": str(path), "oldString": old, "newString": "b"})).output == (
            "edit: oldString is required"
        )
    assert (await edit({"path": str(path), "oldString": "zzz", "newString": "b"})).output == (
        f"edit: oldString not found in {path}"
    )
    assert (await edit({"path": str(path), "oldString": "h"})).output == (
        'edit: newString is required (a string; "" deletes oldString)'
    )
    assert (await edit({"path": "nope.txt", "oldString": "a", "newString": "b"})).output == (
        "edit: [Errno 2] No such file or directory: 'nope.txt'"
    )
    assert path.read_text() == "hello"


async def test_edit_with_empty_new_string_deletes(tools, tmp_path):
    path = tmp_path / "f.txt"
    path.write_text("keep DROP keep")
    await tools["edit"].execute({"path": str(path), "oldString": " DROP", "newString": ""})
    assert path.read_text() == "keep keep"


async def test_edit_preserves_crlf_in_untouched_lines(tools, tmp_path):
    path = tmp_path / "dos.txt"
    path.write_bytes(b"first\r\nsecond\r\nthird\r\n")
    await tools["edit"].execute({"path": str(path), "oldString": "second", "newString": "2nd"})
    assert path.read_bytes() == b"first\r\n2nd\r\nthird\r\n"


async def test_edit_matches_lf_old_string_against_crlf_file(tools, tmp_path):
    path = tmp_path / "dos.txt"
    path.write_bytes(b"a\r\nb\r\nc\r\n")
    result = await tools["edit"].execute({"path": str(path), "oldString": "a\nb", "newString": "A\nB\nB2"})
    assert result.output == f"Edited {path} (1 replacement)"
    assert path.read_bytes() == b"A\r\nB\r\nB2\r\nc\r\n"


async def test_edit_refuses_non_utf8_files(tools, tmp_path):
    path = tmp_path / "latin1.txt"
    path.write_bytes("café".encode("latin-1"))
    result = await tools["edit"].execute({"path": str(path), "oldString": "caf", "newString": "x"})
    assert result.output == f"edit: {path} is not valid UTF-8 text"
    assert path.read_bytes() == "café".encode("latin-1")


# ------------------------------------------------------------------------------ off the event loop


@pytest.mark.parametrize(("name", "extra"), [("read", {}), ("edit", {"oldString": "x", "newString": "y"})])
async def test_file_tools_refuse_a_fifo_without_ever_blocking_on_it(tools, tmp_path, name, extra):
    # Opening a FIFO blocks until a writer comes; reading one may never end (issue #11: six such
    # reads wedged every file tool). It is refused before any open can block. The watchdog only
    # rescues a regression: it briefly opens the FIFO read-write, which unblocks a blocked reader.
    fifo = tmp_path / "fifo"
    os.mkfifo(fifo)

    def rescue() -> None:
        os.close(os.open(fifo, os.O_RDWR | os.O_NONBLOCK))

    watchdog = threading.Timer(5, rescue)
    watchdog.start()
    try:
        result = await tools[name].execute({"path": str(fifo), **extra})
    finally:
        watchdog.cancel()
        watchdog.join()
    assert result.is_error
    assert result.output == f"{name}: {fifo} is a named pipe (FIFO), not a regular file; only regular files can be read"
