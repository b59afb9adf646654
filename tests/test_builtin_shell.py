"""The `bash` built-in with real subprocesses: exit codes, bounded output, no stdin, timeouts, cancel."""

from __future__ import annotations

import asyncio
import os
import select
import time

import pytest

from toolnexus.builtin import create_builtin_tools
from toolnexus.builtin._settings import BuiltinSettings
from toolnexus.builtin._shell import make_bash

pytestmark = pytest.mark.skipif(not os.path.isdir("/proc/self"), reason="process checks read /proc (Linux)")

SHELL = ("/bin/sh", "-c")


def _bash(**overrides):
    """A bash tool with a short kill grace, so the escalation paths run in a fraction of a second."""
    return make_bash(BuiltinSettings(shell=SHELL, kill_grace=0.3, **overrides))


def _state(pid: int) -> str | None:
    """The /proc state letter of a process, or None when it is gone."""
    try:
        with open(f"/proc/{pid}/stat") as handle:
            return handle.read().rsplit(")", 1)[1].split()[0]
    except FileNotFoundError:
        return None


def _alive(pid: int) -> bool:
    return _state(pid) not in (None, "Z", "X")


def _exits_within(pid: int, seconds: float = 5.0) -> bool:
    """Wait (on a pidfd, not by polling) until `pid` has terminated; False if it outlives `seconds`.

    A signalled process closes its files (our pipe sees EOF) a moment before it is marked dead,
    so "already gone" checks right after a kill need this wait.
    """
    try:
        pidfd = os.pidfd_open(pid)
    except ProcessLookupError:
        return True
    try:
        readable, _, _ = select.select([pidfd], [], [], seconds)
        return bool(readable) or not _alive(pid)
    finally:
        os.close(pidfd)


def _group_members(pgid: int) -> list[int]:
    members = []
    for entry in os.listdir("/proc"):
        if entry.isdigit():
            try:
                with open(f"/proc/{entry}/stat") as handle:
                    fields = handle.read().rsplit(")", 1)[1].split()
            except (FileNotFoundError, ProcessLookupError):
                continue
            if int(fields[2]) == pgid and fields[0] not in ("Z", "X"):
                members.append(int(entry))
    return members


async def _read_fifo(path: str) -> str:
    """Block (in a thread) until a writer opens the FIFO, writes and closes it."""

    def read() -> str:
        with open(path) as handle:
            return handle.read()

    return await asyncio.to_thread(read)


# ----------------------------------------------------------------------------------- exit codes


async def test_exit_zero_returns_combined_output_and_pinned_metadata():
    bash = create_builtin_tools()[0]
    result = await bash.execute({"command": "echo out; echo err 1>&2; printf tail"})
    assert not result.is_error
    assert result.output == "out\nerr\ntail"
    assert result.metadata == {"shell": "/bin/sh -c", "exitCode": 0}


async def test_non_zero_exit_is_an_error_with_the_code_appended():
    result = await _bash().execute({"command": "echo partial; exit 3"})
    assert result.is_error
    assert result.output == "partial\n\nbash: command exited with code 3"
    assert result.metadata == {"shell": "/bin/sh -c", "exitCode": 3}


async def test_death_by_signal_reports_a_negative_code():
    result = await _bash().execute({"command": "kill -9 $$"})
    assert result.output == "\nbash: command exited with code -9"
    assert result.metadata["exitCode"] == -9


async def test_missing_command_is_an_error():
    bash = _bash()
    assert (await bash.execute({})).output == "bash: command is required"
    assert (await bash.execute({"command": ""})).output == "bash: command is required"


async def test_bad_workdir_reports_the_os_error(tmp_path):
    missing = str(tmp_path / "nope")
    result = await _bash().execute({"command": "true", "workdir": missing})
    assert result.is_error and result.output == f"bash: [Errno 2] No such file or directory: '{missing}'"


async def test_workdir_sets_the_directory(tmp_path):
    result = await _bash().execute({"command": "pwd", "workdir": str(tmp_path)})
    assert result.output == f"{tmp_path}\n"


async def test_invalid_utf8_output_is_replaced_not_fatal():
    result = await _bash().execute({"command": r"printf 'a\377b'"})
    assert result.output == "a\ufffdb"


# ------------------------------------------------------------------------------------ no stdin


@pytest.fixture
def stdin_held_open():
    """Make this process's fd 0 a pipe nobody writes to: a child inheriting it would block forever."""
    read_end, write_end = os.pipe()
    saved = os.dup(0)
    os.dup2(read_end, 0)
    try:
        yield
    finally:
        os.dup2(saved, 0)
        for fd in (saved, read_end, write_end):
            os.close(fd)


async def test_child_gets_no_stdin_so_cat_returns_at_once(stdin_held_open):
    started = time.monotonic()
    result = await _bash().execute({"command": "cat; echo after-cat", "timeout": 5000})
    assert result.output == "after-cat\n" and not result.is_error
    assert time.monotonic() - started < 3


# -------------------------------------------------------------------------------- huge output


async def test_huge_output_keeps_head_and_tail_and_notes_the_size():
    lines = 200_000
    total = sum(len(str(i)) + 1 for i in range(1, lines + 1))
    result = await _bash(bash_output_head=1000, bash_output_tail=2000).execute({"command": f"seq 1 {lines}"})
    assert not result.is_error
    head, marker_and_tail = result.output.split("\n[bash: output truncated", 1)
    assert head.startswith("1\n2\n3\n")
    assert len(head.encode()) <= 1000
    marker, tail = marker_and_tail.split("]\n", 1)
    assert marker == f" — {total} bytes in all; kept the first 1000 and the last 2000"
    assert tail.endswith("199999\n200000\n") and len(tail.encode()) <= 2000
    assert result.metadata == {
        "shell": "/bin/sh -c",
        "exitCode": 0,
        "truncated": True,
        "outputBytes": total,
    }


async def test_default_output_bound_is_thirty_thousand_bytes():
    result = await create_builtin_tools()[0].execute({"command": "head -c 5000000 /dev/zero | tr '\\0' a"})
    assert "[bash: output truncated — 5000000 bytes in all; kept the first 10000 and the last 20000]" in result.output
    assert len(result.output) < 30_200


async def test_a_cut_multibyte_character_is_not_turned_into_garbage():
    # 'é' is two bytes; with an odd head size the cut falls inside a character.
    result = await _bash(bash_output_head=5, bash_output_tail=5).execute({"command": "printf 'éééééééééé'"})
    head, rest = result.output.split("\n[bash:", 1)
    tail = rest.split("]\n", 1)[1]
    assert head == "éé" and tail == "éé"


# ------------------------------------------------------------------------------------ timeouts


async def test_timeout_kills_the_whole_process_tree(tmp_path):
    pids = tmp_path / "pids"
    command = f"sleep 30 & echo $! > {pids}; sh -c 'sleep 30' & echo $! >> {pids}; echo started; wait"
    started = time.monotonic()
    result = await _bash().execute({"command": command, "timeout": 500})
    assert time.monotonic() - started < 5
    assert result.is_error
    assert result.output == "bash: command timed out after 500ms\nstarted\n"
    assert result.metadata == {"shell": "/bin/sh -c", "timedOut": True, "killedTree": True}
    children = [int(p) for p in pids.read_text().split()]
    assert len(children) == 2 and all(_exits_within(pid) for pid in children)


async def test_timeout_sends_sigterm_first_and_collects_output_during_the_grace():
    command = "trap 'echo got-term; exit 7' TERM; echo waiting; sleep 30 & wait"
    result = await _bash().execute({"command": command, "timeout": 300})
    assert result.output == "bash: command timed out after 300ms\nwaiting\ngot-term\n"
    assert result.metadata["killedTree"] is True


async def test_a_group_ignoring_sigterm_is_sigkilled_after_the_grace(tmp_path):
    pidfile = tmp_path / "pid"
    command = f"trap '' TERM; sleep 30 & echo $! > {pidfile}; wait"
    started = time.monotonic()
    result = await _bash().execute({"command": command, "timeout": 200})
    elapsed = time.monotonic() - started
    assert result.metadata["timedOut"] is True
    assert 0.45 <= elapsed < 5  # 0.2 s timeout + 0.3 s grace, then SIGKILL
    assert _exits_within(int(pidfile.read_text()))


async def test_timeout_in_milliseconds_is_reported_as_an_integer():
    result = await _bash().execute({"command": "sleep 5", "timeout": 100.7})
    assert result.output.startswith("bash: command timed out after 100ms\n")


async def test_a_background_job_holding_the_pipe_does_not_hang_the_call():
    started = time.monotonic()
    result = await _bash().execute({"command": "sleep 30 & echo $!", "timeout": 20000})
    assert time.monotonic() - started < 3
    assert result.metadata == {"shell": "/bin/sh -c", "exitCode": 0}
    assert _exits_within(int(result.output))


async def test_a_background_job_with_its_own_output_does_not_outlive_the_call(tmp_path):
    # Issue #11 changed this: every process the command starts is stopped when the call ends
    # (it used to be left running when it had redirected its output).
    result = await _bash().execute({"command": "sleep 30 > /dev/null 2>&1 & echo $!"})
    assert _exits_within(int(result.output))


# -------------------------------------------------------------------------------- cancellation


async def test_cancelling_the_call_kills_the_process_group_and_reraises(tmp_path):
    fifo = tmp_path / "fifo"
    os.mkfifo(fifo)
    # start the background sleep BEFORE reporting, so both are in the group when we look
    task = asyncio.create_task(_bash().execute({"command": f"sleep 30 & echo $$ > {fifo}; wait"}))
    pgid = int(await _read_fifo(str(fifo)))
    members = _group_members(pgid)
    assert pgid in members and len(members) >= 2  # the shell and its sleep are running
    task.cancel()
    with pytest.raises(asyncio.CancelledError):
        await task
    assert all(_exits_within(pid) for pid in members)


async def test_event_loop_keeps_running_while_a_command_runs():
    ticks = 0

    async def ticker() -> None:
        nonlocal ticks
        while True:
            await asyncio.sleep(0.01)
            ticks += 1

    counting = asyncio.create_task(ticker())
    try:
        await _bash().execute({"command": "sleep 0.3"})
    finally:
        counting.cancel()
    assert ticks >= 10
