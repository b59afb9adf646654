"""One clock, one cancel race, one atomic write, and the run's cancel signal reaching tools.

The clock and race tests exercise the shared modules directly (`toolnexus._clock`, `_abort`) and
through the names users already import; the atomic-write tests use real files in `tmp_path`; the
signal tests run real clients against a loopback LLM server (`support.llm_server`), a real agent
runtime with a scripted model, and the real stdio MCP demo server. Nothing here sleeps to
synchronise: tests wait on events, advance a `VirtualClock`, or poll a real condition with a bound.
"""

from __future__ import annotations

import asyncio
import dataclasses
import json
import os
import re
import stat
import threading
import time
from datetime import UTC, datetime

import pytest

import toolnexus._fs as fs
from support.agent_kit import calls, make_runtime, scripted, until
from support.llm_server import Json, LlmServer, openai_calls, openai_text, toolkit_of
from support.mcp_servers.helpers import demo_cmd
from toolnexus import _abort, _clock
from toolnexus._abort import STOPPED, Aborted, unless_aborted
from toolnexus.agents import AgentDef
from toolnexus.client import RunCancelled, RunTimeout, create_client
from toolnexus.client._retry import Abort, check_timer, pause, race as client_race
from toolnexus.client._run_signal import RunSignal, takes_signal, wants_signal
from toolnexus.client._tool_calls import ToolRunner
from toolnexus.errors import ToolnexusTypeError
from toolnexus.native import define_tool
from toolnexus.toolkit import create_toolkit
from toolnexus.types import Answer, Tool, ToolContext, ToolResult, signal_fired

STAGING = re.compile(r"^\..+\.[0-9a-f]{12}\.tmp$")  # what tests/conftest.py's leak check looks for


# -- one clock -----------------------------------------------------------------------------------


class JumpClock:
    """Only `now` and `sleep`, the shape a user hands the client or an A2A tool."""

    def __init__(self) -> None:
        self.t = 0.0

    def now(self) -> float:
        return self.t

    async def sleep(self, seconds: float) -> None:
        self.t += seconds


def test_each_clock_shape_has_one_public_name():
    import toolnexus.a2a as a2a
    import toolnexus.a2a._call as a2a_call
    import toolnexus.agents as agents
    import toolnexus.agents.clock as agents_clock
    import toolnexus.client as client
    import toolnexus.client._retry as retry

    assert client.Timer is retry.Timer is _clock.Timer
    assert agents.Clock is agents_clock.Clock is _clock.Clock
    assert agents.AsyncioClock is agents_clock.AsyncioClock is _clock.AsyncioClock
    # the A2A package's own names for the same two were dropped: one name each
    assert not hasattr(a2a, "Clock") and not hasattr(a2a, "SystemClock") and not hasattr(a2a_call, "Clock")
    assert agents_clock.VirtualClock is _clock.VirtualClock and agents_clock.wall_now is _clock.wall_now


def test_the_real_and_virtual_clocks_fit_every_user_and_a_two_method_clock_fits_the_timer_users():
    for clock in (_clock.AsyncioClock(), _clock.VirtualClock()):
        assert isinstance(clock, _clock.Clock) and isinstance(clock, _clock.Timer)
        assert check_timer(clock) is clock
    jump = JumpClock()
    assert isinstance(jump, _clock.Timer) and not isinstance(jump, _clock.Clock)  # no call_later
    assert check_timer(jump) is jump
    with pytest.raises(ToolnexusTypeError, match=r"`timer` needs now\(\)"):
        check_timer(object())


def test_wall_now_prefers_the_clocks_own_utc_reading():
    class Workflowish(JumpClock):
        def utc_now(self) -> datetime:
            return datetime(2030, 1, 2, tzinfo=UTC)

    assert _clock.wall_now(Workflowish()) == datetime(2030, 1, 2, tzinfo=UTC)
    machine = _clock.wall_now(JumpClock())
    assert machine.tzinfo is not None and abs((datetime.now(UTC) - machine).total_seconds()) < 60


async def test_the_virtual_clock_fires_timers_in_deadline_order_only_when_advanced():
    clock = _clock.VirtualClock(start=10.0)
    fired: list[str] = []
    clock.call_later(2, lambda: fired.append("b"))
    clock.call_later(1, lambda: fired.append("a"))
    clock.call_later(3, lambda: fired.append("never")).cancel()
    sleeper = asyncio.ensure_future(clock.sleep(1.5))
    await asyncio.sleep(0)
    assert clock.pending_timers == 3 and fired == [] and not sleeper.done()
    await clock.advance(2)
    assert fired == ["a", "b"] and sleeper.done() and clock.now() == 12.0 and clock.pending_timers == 0


# -- one cancel race -----------------------------------------------------------------------------


class Work:
    """A piece of work that records how it ended; `release` lets it finish."""

    def __init__(self, value: str = "done", *, stubborn: bool = False) -> None:
        self.value = value
        self.stubborn = stubborn  # keeps waiting after being cancelled, until released
        self.started = asyncio.Event()
        self.release = asyncio.Event()
        self.ended: list[str] = []

    async def run(self) -> str:
        self.started.set()
        try:
            await self.release.wait()
        except asyncio.CancelledError:
            if not self.stubborn:
                self.ended.append("cancelled")
                raise
            await self.release.wait()
            self.ended.append("finished late")
            return self.value
        self.ended.append("finished")
        return self.value


async def watched(event: asyncio.Event, log: list[str]) -> None:
    try:
        await event.wait()
    finally:
        log.append("stopper reaped")


async def test_race_returns_the_works_value_and_reaps_every_stopper():
    work, stop, log = Work(), asyncio.Event(), []
    task = asyncio.ensure_future(_abort.race(work.run(), watched(stop, log)))
    await work.started.wait()
    work.release.set()
    assert await task == "done"
    assert work.ended == ["finished"] and log == ["stopper reaped"]  # reaped before race returned


async def test_race_gives_up_the_work_when_a_stopper_completes_and_reaps_it_first():
    work, stop, closed = Work(), asyncio.Event(), []

    async def on_abandon() -> None:
        closed.append(list(work.ended))  # runs after the cancel, before the reap

    task = asyncio.ensure_future(_abort.race(work.run(), stop.wait(), on_abandon=on_abandon))
    await work.started.wait()
    stop.set()
    assert await task is STOPPED
    assert closed == [[]] and work.ended == ["cancelled"]


async def test_race_with_a_grace_leaves_a_stubborn_work_behind_instead_of_waiting_for_it():
    work, stop = Work(stubborn=True), asyncio.Event()
    task = asyncio.ensure_future(_abort.race(work.run(), stop.wait(), grace=0.01))
    await work.started.wait()
    stop.set()
    assert await asyncio.wait_for(task, 5) is STOPPED
    assert work.ended == []  # still running: abandoned, not awaited
    work.release.set()
    await until(lambda: work.ended == ["finished late"])


async def test_race_propagates_the_works_exception_and_the_callers_cancellation():
    async def boom() -> None:
        raise KeyError("boom")

    with pytest.raises(KeyError):
        await _abort.race(boom(), asyncio.Event().wait())
    work = Work()
    task = asyncio.ensure_future(_abort.race(work.run(), asyncio.Event().wait()))
    await work.started.wait()
    task.cancel()
    with pytest.raises(asyncio.CancelledError):
        await task
    assert work.ended == ["cancelled"]


async def test_the_work_wins_when_it_finishes_in_the_same_moment_as_the_stopper():
    stop = asyncio.Event()
    stop.set()

    async def instant() -> str:
        return "mine"

    # Both are ready on the first loop turn; the finished work's outcome is kept.
    assert await _abort.race(instant(), stop.wait()) == "mine"


async def test_unless_aborted_and_the_clients_race_say_what_a_stop_means():
    work, signal = Work(), asyncio.Event()
    task = asyncio.ensure_future(unless_aborted(work.run(), signal))
    await work.started.wait()
    signal.set()
    with pytest.raises(Aborted):
        await task
    assert work.ended == ["cancelled"]

    cancel = asyncio.Event()
    work = Work()
    task = asyncio.ensure_future(client_race(work.run(), Abort(cancel=cancel)))
    await work.started.wait()
    cancel.set()
    with pytest.raises(RunCancelled):
        await task
    assert work.ended == ["cancelled"]

    clock = _clock.VirtualClock()
    work = Work()
    task = asyncio.ensure_future(client_race(work.run(), Abort(deadline=1.0, timeout_ms=1000, timer=clock)))
    await work.started.wait()
    await clock.advance(1.0)
    with pytest.raises(RunTimeout, match="1000ms"):
        await task
    assert work.ended == ["cancelled"]


async def test_a_stop_that_already_happened_never_starts_the_work():
    started = []

    async def never() -> None:
        started.append(1)

    with pytest.raises(Aborted):
        await unless_aborted(never(), type("Flag", (), {"aborted": True})())
    cancel = asyncio.Event()
    cancel.set()
    with pytest.raises(RunCancelled):
        await client_race(never(), Abort(cancel=cancel))
    assert started == []


async def test_a_backoff_pause_wakes_on_cancel_and_runs_on_the_injected_clock():
    clock, cancel = _clock.VirtualClock(), asyncio.Event()
    sleeping = asyncio.ensure_future(pause(30, Abort(cancel=cancel, timer=clock)))
    await until(lambda: clock.pending_timers == 1)
    await clock.advance(29)
    assert not sleeping.done()
    cancel.set()
    with pytest.raises(RunCancelled):
        await sleeping
    assert clock.pending_timers == 0  # the sleep was reaped, not left on the clock
    await pause(5, Abort(timer=JumpClock()))  # no cancel event: just the clock's sleep


# -- one atomic write ----------------------------------------------------------------------------


def staged_files(folder) -> list[str]:
    return [name for name in os.listdir(folder) if STAGING.match(name)]


def test_write_atomic_writes_text_and_bytes_through_one_rename(tmp_path):
    path = tmp_path / "a.txt"
    fs.write_atomic(str(path), "héllo\n")
    assert path.read_bytes() == "héllo\n".encode()
    inode = path.stat().st_ino
    fs.write_atomic(str(path), b"\x00bytes", fsync=False)
    assert path.read_bytes() == b"\x00bytes" and path.stat().st_ino != inode
    assert os.listdir(tmp_path) == ["a.txt"]


def test_write_atomic_modes_keep_an_existing_files_bits_or_set_the_given_ones(tmp_path):
    kept = tmp_path / "kept"
    kept.write_text("old")
    kept.chmod(0o640)
    fs.write_atomic(str(kept), "new")
    assert stat.S_IMODE(kept.stat().st_mode) == 0o640
    fs.write_atomic(str(tmp_path / "private"), "x", mode=0o600)
    assert stat.S_IMODE((tmp_path / "private").stat().st_mode) == 0o600
    umask = os.umask(0o022)
    os.umask(umask)
    fs.write_atomic(str(tmp_path / "fresh"), "x")
    assert stat.S_IMODE((tmp_path / "fresh").stat().st_mode) == 0o666 & ~umask


def test_write_atomic_fsyncs_the_file_and_folder_only_when_asked(tmp_path, monkeypatch):
    synced: list[int] = []
    real = os.fsync
    monkeypatch.setattr(os, "fsync", lambda fd: (synced.append(fd), real(fd))[1])
    fs.write_atomic(str(tmp_path / "durable"), "x")
    assert len(synced) == 2  # the staging file before the rename, the folder after it
    synced.clear()
    fs.write_atomic(str(tmp_path / "quick"), "x", fsync=False)
    assert synced == []


def test_a_failed_rename_leaves_the_old_file_and_no_staging_file_and_names_the_target(tmp_path, monkeypatch):
    path = tmp_path / "keep.json"
    path.write_text("old")

    def refuse(src, dst, *a, **k):
        assert STAGING.match(os.path.basename(src)), src  # the pinned staging-name pattern
        raise PermissionError(13, "refused", src)

    monkeypatch.setattr(os, "replace", refuse)
    with pytest.raises(PermissionError) as info:
        fs.write_atomic(str(path), "new")
    assert info.value.filename == str(path)
    assert path.read_text() == "old" and staged_files(tmp_path) == []


def test_write_atomic_links_and_parents_are_options(tmp_path):
    real = tmp_path / "real.txt"
    real.write_text("old")
    link = tmp_path / "link.txt"
    link.symlink_to(real)
    fs.write_atomic(str(link), "through", follow_links=True)
    assert link.is_symlink() and real.read_text() == "through"
    fs.write_atomic(str(link), "replaced")
    assert not link.is_symlink() and link.read_text() == "replaced" and real.read_text() == "through"
    with pytest.raises(FileNotFoundError):
        fs.write_atomic(str(tmp_path / "no" / "such" / "f"), "x")
    fs.write_atomic(str(tmp_path / "made" / "here" / "f"), "x", parents=True)
    assert (tmp_path / "made" / "here" / "f").read_text() == "x"
    with pytest.raises(IsADirectoryError):
        fs.write_atomic(str(tmp_path / "made"), "x")


async def test_every_atomic_writer_in_the_library_goes_through_the_one_helper(tmp_path, monkeypatch):
    from toolnexus.agents._persona import memory_tool
    from toolnexus.builtin import create_builtin_tools
    from toolnexus.serve._tasks import FileTaskStore
    from toolnexus.stores import open_store

    targets: list[str] = []
    real_name = fs.staging_name
    monkeypatch.setattr(
        fs, "staging_name", lambda target: (targets.append(os.path.basename(target)), real_name(target))[1]
    )

    store = FileTaskStore(str(tmp_path / "tasks"))
    await store.save({"id": "t1", "status": {"state": "working"}})
    assert targets == ["t1.json"] and stat.S_IMODE((tmp_path / "tasks" / "t1.json").stat().st_mode) == 0o600

    (tmp_path / "persona").mkdir()
    result = await memory_tool(str(tmp_path / "persona")).execute({"action": "add", "text": "a fact"})
    assert not result.is_error and targets[-1] == "MEMORY.md"
    assert stat.S_IMODE((tmp_path / "persona" / "MEMORY.md").stat().st_mode) == 0o644

    async with open_store(f"file:{tmp_path / 'runs'}") as runs:
        await runs.save("conv", [{"role": "user", "content": "hi"}])
    assert {"store.json", "redo.json"} <= set(targets)
    assert stat.S_IMODE((tmp_path / "runs" / "store.json").stat().st_mode) == 0o600

    tools = {t.name: t for t in create_builtin_tools({"base_dir": str(tmp_path)})}
    written = await tools["write"].execute({"path": str(tmp_path / "w.txt"), "content": "x"})
    assert not written.is_error and targets[-1] == "w.txt"

    for folder, _, names in os.walk(tmp_path):
        assert [n for n in names if STAGING.match(n)] == [], folder


async def test_the_temporal_payload_codec_writes_through_the_one_helper(tmp_path, monkeypatch):
    pytest.importorskip("temporalio")
    from toolnexus.temporal._payloads import ExternalPayloadCodec

    targets: list[str] = []
    real_name = fs.staging_name
    monkeypatch.setattr(
        fs, "staging_name", lambda target: (targets.append(os.path.basename(target)), real_name(target))[1]
    )
    codec = ExternalPayloadCodec(tmp_path, threshold=1024)
    codec.put("k" * 64, b"payload")
    assert targets == ["k" * 64] and codec.get("k" * 64) == b"payload"
    assert stat.S_IMODE((tmp_path / ("k" * 64)).stat().st_mode) == 0o600


# -- tools receive the run's cancel signal -------------------------------------------------------


@pytest.fixture
def server():
    with LlmServer() as s:
        yield s


def llm(server: LlmServer, **kw):
    return create_client(base_url=server.base_url, style="openai", model="m", api_key="k", **kw)


class Watcher:
    """A native async tool that waits on `ctx.signal` and reports what it saw."""

    def __init__(self) -> None:
        self.entered = asyncio.Event()
        self.seen: list[object] = []

        async def watch(ctx) -> str:
            """Wait until the run is stopped."""
            self.seen.append(ctx.signal)
            self.entered.set()
            await ctx.signal.wait()
            return f"stopped: {ctx.signal.reason}"

        self.tool = wants_signal(define_tool(watch))  # its first run gets a context (by default: None)


async def test_a_native_tool_awaiting_ctx_signal_returns_when_the_run_is_cancelled(server):
    watcher, results = Watcher(), []
    server.add(Json(openai_calls(("c1", "watch", {}))))
    cancel = asyncio.Event()
    async with llm(server, hooks={"after_tool": lambda ev: results.append(ev["result"].output)}) as client:
        run = asyncio.ensure_future(client.run("go", toolkit_of(watcher.tool), cancel=cancel))
        await asyncio.wait_for(watcher.entered.wait(), 10)
        assert not signal_fired(watcher.seen[0])
        cancel.set()
        with pytest.raises(RunCancelled):
            await asyncio.wait_for(run, 10)
    assert results == ["stopped: cancelled"] and len(server.requests) == 1


async def test_the_signal_fires_at_the_runs_deadline_on_the_clients_clock(server):
    watcher, results = Watcher(), []
    clock = _clock.VirtualClock()
    server.add(Json(openai_calls(("c1", "watch", {}))))
    async with llm(server, timeout_ms=5000, timer=clock,
                   hooks={"after_tool": lambda ev: results.append(ev["result"].output)}) as client:
        run = asyncio.ensure_future(client.run("go", toolkit_of(watcher.tool)))
        await asyncio.wait_for(watcher.entered.wait(), 10)
        await clock.advance(4.9)
        assert results == [] and not watcher.seen[0].is_set()
        await clock.advance(0.1)
        with pytest.raises(RunTimeout):
            await asyncio.wait_for(run, 10)
    assert results == ["stopped: timeout"] and len(server.requests) == 1


async def test_who_gets_the_signal_first_runs_keep_ctx_none_unless_the_tool_takes_it(server):
    seen: list[tuple[str, object]] = []

    def probe(name: str, **kw):
        async def execute(args=None, ctx=None):
            seen.append((name, ctx))
            return ToolResult("fired" if ctx is not None and signal_fired(ctx.signal) else "quiet", False)

        return Tool(name, name, {"type": "object", "properties": {}}, "custom", execute, **kw)

    plain, taking = probe("plain"), wants_signal(probe("taking"))
    server.add(Json(openai_calls(("c1", "plain", {}), ("c2", "taking", {}), ("c3", "taking", {}))),
               Json(openai_text("ok")))
    async with llm(server) as client:
        result = await client.run("go", toolkit_of(plain, taking))
        assert result.text == "ok" and [c["output"] for c in result.tool_calls] == ["quiet"] * 3
        assert seen[0] == ("plain", None)  # a hand-written tool still tells its first run by `ctx is None`
        signals = [ctx.signal for name, ctx in seen[1:]]
        assert all(isinstance(s, RunSignal) and s.reason is None for s in signals)
        assert signals[0] is not signals[1]  # one per call: abandoning one call fires only its own

        runner = ToolRunner(client.provider, toolkit_of(plain), 0)
        mine = asyncio.Event()
        await runner.execute("plain", {}, ToolContext(signal=mine, timeout=3.0))
        assert seen[-1][1].signal is mine and seen[-1][1].timeout == 3.0  # a given signal is kept
        answer = Answer("r1", True, {"x": 1})
        await runner.execute("plain", {}, ToolContext(answer=answer))
        assert isinstance(seen[-1][1].signal, RunSignal) and seen[-1][1].answer is answer  # the retry has it


def test_the_librarys_signal_aware_sources_take_the_signal_without_being_asked():
    def tool(source: str) -> Tool:
        async def execute(args=None, ctx=None):
            return ToolResult("", False)

        return Tool("t", "", {"type": "object"}, source, execute)

    assert [s for s in ("mcp", "http", "a2a", "native", "custom", "builtin", "skill", "relay")
            if takes_signal(tool(s))] == ["mcp", "http", "a2a"]
    marked = wants_signal(tool("native"))
    assert takes_signal(marked) and isinstance(marked, Tool) and not takes_signal(None)
    assert [f.name for f in dataclasses.fields(marked)] == [f.name for f in dataclasses.fields(Tool)]
    assert takes_signal(dataclasses.replace(marked, description="copied"))  # how wrappers copy tools
    with pytest.raises(ToolnexusTypeError, match="wants_signal needs a Tool"):
        wants_signal(lambda: None)


async def test_interrupting_an_agent_handle_fires_the_signal_a_tool_thread_is_polling():
    entered, left, give_up = threading.Event(), threading.Event(), threading.Event()
    reasons: list[object] = []

    def crunch(ctx) -> str:
        """Work in a thread until told to stop."""
        entered.set()
        while not ctx.signal.is_set() and not give_up.wait(0.005):  # a thread's own check cadence
            pass
        reasons.append(ctx.signal.reason)
        left.set()
        return "stopped"

    tool = wants_signal(define_tool(crunch))  # the runtime wraps it (dataclasses.replace): still takes it
    transport = scripted({"m": [{"whenToolMsgs": 0, "toolCalls": calls(("crunch", {}))},
                                {"whenToolMsgs": ">=1", "text": "done"}]})
    rt = make_runtime([AgentDef("worker", "works", "", "m", tools=[tool])], transport)
    try:
        h = rt.spawn(rt.root, "worker")
        rt.wake(h, "crunch")
        assert await asyncio.to_thread(entered.wait, 10), "the tool never started"
        rt.interrupt(h)
        assert (await rt.wait(h)).status == "interrupted"
        assert await asyncio.to_thread(left.wait, 10), "the tool thread never saw the signal"
        assert reasons == ["interrupted"]
    finally:
        give_up.set()
        await rt.close(rt.root, force=True)


async def stats(toolkit) -> dict:
    return json.loads((await toolkit.execute("demo_stats", {})).output)


async def test_cancelling_a_run_abandons_its_mcp_call_on_the_real_stdio_server(server):
    toolkit = await create_toolkit(mcp_config={"mcpServers": {"demo": {"command": demo_cmd()}}}, builtins=False)
    try:
        assert toolkit.get("demo_sleep") is not None
        before = (await stats(toolkit))["cancelled"]
        results: list[tuple[str, bool, object]] = []
        server.add(Json(openai_calls(("c1", "demo_sleep", {"seconds": 30}))))
        cancel = asyncio.Event()
        hooks = {"after_tool": lambda ev: results.append((ev["result"].output, ev["result"].is_error,
                                                          ev["result"].metadata))}
        async with llm(server, hooks=hooks) as client:
            run = asyncio.ensure_future(client.run("nap", toolkit, cancel=cancel))
            deadline = time.monotonic() + 10
            while (await stats(toolkit))["sleeping"] == 0:  # the call is running on the server
                assert time.monotonic() < deadline and not run.done(), "the MCP call never reached the server"
            cancel.set()
            with pytest.raises(RunCancelled):
                await asyncio.wait_for(run, 10)
        assert results == [("MCP call cancelled", True, {"server": "demo"})]
        deadline = time.monotonic() + 10
        while (now := await stats(toolkit))["sleeping"] != 0 or now["cancelled"] != before + 1:
            assert time.monotonic() < deadline, f"the server was not told to cancel: {now}"
        assert len(server.requests) == 1
    finally:
        await toolkit.close()

