"""Property tests: the apply_patch grammar and hunk matching never raise anything but `ToolError`
(which the tool turns into `apply_patch: <message>`), and never hang (issue #11, fuzzing)."""

from __future__ import annotations

import pytest
from hypothesis import given, strategies as st

from toolnexus.builtin._patch_text import apply_hunks, parse_patch
from toolnexus.builtin._tooling import ToolError

pytestmark = pytest.mark.timeout(60)

LINES = st.sampled_from([
    "*** Begin Patch", "*** End Patch", "*** Add File: a.txt", "*** Update File: a.txt", "*** Delete File: b.txt",
    "*** Move to: c.txt", "*** Move to:", "*** End of File", "@@", "@@ def f():", "+added", "-removed", " context",
    "", "   ", "\r", "+", "-", "*** Add File: ", "*** Update File:   ", "plain", "\ufeffx", "\t-x",
]) | st.text(max_size=20)


@given(st.lists(LINES, max_size=25), st.sampled_from(["\n", "\r\n"]))
def test_patch_documents_parse_or_fail_with_a_tool_error(lines, eol):
    try:
        ops = parse_patch(eol.join(lines))
    except ToolError:
        return
    for op in ops:
        assert op.kind in ("add", "update", "delete") and op.path.strip()


@given(st.text(max_size=300))
def test_arbitrary_text_is_never_a_crash(text):
    try:
        parse_patch(text)
    except ToolError:
        pass


@given(st.lists(LINES, max_size=20), st.lists(st.sampled_from(["x", "context", "removed", "", "a\r", "\ufeffb"])
                                          | st.text(max_size=10), max_size=15), st.sampled_from(["\n", "\r\n"]))
def test_hunks_apply_or_fail_with_a_tool_error(body, file_lines, eol):
    text = eol.join(file_lines)
    try:
        ops = parse_patch("\n".join(["*** Begin Patch", "*** Update File: f", *body, "*** End Patch"]))
    except ToolError:
        return
    for op in ops:
        if op.kind == "update":
            try:
                out = apply_hunks(text, op.hunks, "f")
            except ToolError:
                continue
            assert isinstance(out, str)
