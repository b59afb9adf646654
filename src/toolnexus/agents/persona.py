"""Personas: an agent whose home is a directory of bootstrap files.

- `compose_soul(dir)` joins the bootstrap files present, in `BOOTSTRAP_ORDER`, into one soul;
- `memory_tool(dir)` is the opt-in `memory` tool that edits `MEMORY.md` / `USER.md` on disk;
- `agent_from_dir(dir)` builds an `Agent` from the two;
- `start_agent(agent, every_ms=...)` spawns it under a fresh runtime and, optionally, wakes it on
  a heartbeat driven by the runtime's clock.

The soul is a frozen snapshot: memory written during a session is on disk at once but reaches
the prompt only in the next `compose_soul`. Channels (chat, mail, ...) are the host's job: it
calls `post`/`wake` on `started.rt` and `started.handle`. Not here: the runtime itself.

Choices where the spec is silent (deliberate):

- `compose_soul` raises `NotADirectoryError` when `dir` is not a directory (a typo must not yield
  an empty soul); a UTF-8 BOM is dropped; invalid UTF-8 becomes U+FFFD.
- `memory`: empty or non-string `text` is an error for every action, and `replace` needs a string
  `with`. Each edit is read-modify-write under a lock (a per-file thread lock plus an `flock` on
  the directory where available) and lands via the library's atomic write (`toolnexus._fs`:
  staging file, fsync, `os.replace`), keeping the file's mode (a new file gets `0o644`); a
  symlinked file is written through to its target.
- Heartbeat ticks coalesce at post time: the runtime's `post` folds a tick into a tick already
  waiting in the inbox (its `ticks` count grows) instead of taking another slot, so
  a long turn cannot crowd out real posts; the next idle turn still reads `tick (xK coalesced)`.
- The heartbeat is a chain of `clock.call_later` timers, the first armed inside `start_agent`, so
  beats are anchored at start time (a virtual clock advanced right after `start_agent` fires them).
- `on_report` may be async; an exception it raises is logged as a diagnostic, not lost.
- `start_agent` also rejects a non-positive `every_ms` with `ValueError`.
"""

from __future__ import annotations

import asyncio
import codecs
import contextlib
import inspect
import os
import threading
from typing import TYPE_CHECKING, Any, Callable, Iterator, Optional

from .._diag import warn
from .._fs import file_mode, write_atomic
from ..types import Tool, ToolResult
from .handle import Handle, InboxItem, SpawnError
from .vocab import HandleState
from ..errors import ToolnexusRuntimeError, ToolnexusTypeError, ToolnexusValueError

if TYPE_CHECKING:  # pragma: no cover - imports for annotations only (avoids an import cycle)
    from .runtime import AgentRuntime
    from .surface import Agent

try:  # POSIX advisory locks; elsewhere the per-process lock alone serialises edits
    import fcntl
except ImportError:  # pragma: no cover - Windows
    fcntl = None  # type: ignore[assignment]

__all__ = [
    "BOOTSTRAP_ORDER",
    "HEARTBEAT_OK",
    "StartedAgent",
    "agent_from_dir",
    "compose_soul",
    "memory_tool",
    "start_agent",
]

BOOTSTRAP_ORDER = ["AGENTS.md", "SOUL.md", "IDENTITY.md", "USER.md", "TOOLS.md", "HEARTBEAT.md", "MEMORY.md"]
HEARTBEAT_OK = "HEARTBEAT_OK"
HEARTBEAT_PROMPT = (
    "Heartbeat. Read your HEARTBEAT.md section and follow it. If nothing needs attention, reply HEARTBEAT_OK."
)
MAX_BOOTSTRAP_FILE_BYTES = 2097152
TRUNCATION_NOTICE = "\n[truncated: exceeds 2 MB bootstrap cap]"

MEMORY_DESCRIPTION = (
    "Persist durable memory. action=add appends an entry; replace swaps an existing substring; "
    "remove deletes one. target=self (MEMORY.md, default) or user (USER.md). Writes persist to disk "
    "and load at the START of your next session — they do NOT change your current context."
)
MEMORY_SCHEMA: dict[str, Any] = {
    "type": "object",
    "properties": {
        "action": {"type": "string", "enum": ["add", "replace", "remove"]},
        "target": {"type": "string", "enum": ["self", "user"]},
        "text": {"type": "string", "description": "For add: the entry. For replace/remove: the existing text."},
        "with": {"type": "string", "description": "For replace: the replacement text."},
    },
    "required": ["action", "text"],
}
_ACTIONS = ("add", "replace", "remove")


# --------------------------------------------------------------------------- soul


def _decode(data: bytes, *, truncated: bool) -> str:
    """UTF-8 text; when `truncated`, a partial final character is dropped rather than mangled."""
    decoder = codecs.getincrementaldecoder("utf-8-sig")(errors="replace")
    return decoder.decode(data, final=not truncated)


def _read_bootstrap(path: str) -> str:
    with open(path, "rb") as f:
        data = f.read(MAX_BOOTSTRAP_FILE_BYTES + 1)
    truncated = len(data) > MAX_BOOTSTRAP_FILE_BYTES
    body = _decode(data[:MAX_BOOTSTRAP_FILE_BYTES], truncated=truncated).strip()
    return body + TRUNCATION_NOTICE if truncated else body


def compose_soul(dir: str) -> tuple[str, list[str]]:  # noqa: A002 - pinned parameter name
    """The soul composed from `dir`'s bootstrap files, and the files found, in `BOOTSTRAP_ORDER`.

    Each present file contributes `"## <file>\\n\\n" + body.strip()`; sections are joined by a
    blank line. A file over 2 MB is cut (on disk it is left alone) and carries a notice.
    """
    if not os.path.isdir(dir):
        raise NotADirectoryError(f"toolnexus: persona directory not found: {dir}")
    sections: list[str] = []
    found: list[str] = []
    for name in BOOTSTRAP_ORDER:
        path = os.path.join(dir, name)
        if not os.path.isfile(path):
            continue
        found.append(name)
        sections.append(f"## {name}\n\n" + _read_bootstrap(path))
    return "\n\n".join(sections), found


# --------------------------------------------------------------------------- memory tool

_file_locks: dict[str, threading.Lock] = {}
_file_locks_guard = threading.Lock()


@contextlib.contextmanager
def _locked(path: str) -> Iterator[None]:
    """Serialise read-modify-write of `path`: in this process, and across processes via flock."""
    with _file_locks_guard:
        lock = _file_locks.setdefault(path, threading.Lock())
    with lock:
        if fcntl is None:
            yield
            return
        fd = os.open(os.path.dirname(path), os.O_RDONLY)
        try:
            fcntl.flock(fd, fcntl.LOCK_EX)
            yield
        finally:
            os.close(fd)  # closing the descriptor releases the flock


def _atomic_write(path: str, text: str) -> None:
    """Replace `path` with `text` (staging file, fsync, rename), keeping its mode; a new file gets 0o644."""
    mode = file_mode(path)
    write_atomic(path, text, mode=0o644 if mode is None else mode)


def _read_memory(path: str) -> str:
    try:
        with open(path, "rb") as f:
            return f.read().decode("utf-8", errors="replace")
    except FileNotFoundError:
        return ""


def _edit_memory(path: str, action: str, text: str, replacement: str) -> Optional[str]:
    """Apply one edit under the lock; returns None on success, else the missing text."""
    with _locked(path):
        current = _read_memory(path)
        if action == "add":
            updated = (current.rstrip() + f"\n- {text}\n").lstrip()
        elif text not in current:
            return text
        else:
            updated = current.replace(text, replacement)
        _atomic_write(path, updated)
    return None


def _memory_args_error(action: str, text: Any, replacement: Any) -> Optional[str]:
    if not isinstance(text, str) or not text:
        what = "the entry to add" if action == "add" else f"the existing text to {action}"
        return f'memory: "text" must be a non-empty string ({what})'
    if action == "replace" and not isinstance(replacement, str):
        return 'memory: replace needs "with" (the replacement text, a string; "" deletes)'
    return None


def memory_tool(dir: str) -> Tool:  # noqa: A002 - pinned parameter name
    """The opt-in `memory` tool: add/replace/remove entries in `dir`/MEMORY.md or `dir`/USER.md."""

    async def execute(args: Optional[dict[str, Any]] = None, ctx: Any = None) -> ToolResult:
        args = args or {}
        action = args.get("action")
        if action not in _ACTIONS:
            return ToolResult(f"unknown action: {action}", is_error=True)
        problem = _memory_args_error(action, args.get("text"), args.get("with"))
        if problem:
            return ToolResult(problem, is_error=True)
        file_name = "USER.md" if args.get("target") == "user" else "MEMORY.md"
        if not os.path.isdir(dir):
            return ToolResult(f"memory: persona directory not found: {dir}", is_error=True)
        path = os.path.realpath(os.path.join(dir, file_name))
        try:
            missing = await asyncio.to_thread(_edit_memory, path, action, args["text"], args.get("with") or "")
        except OSError as exc:
            return ToolResult(f"memory: could not write {file_name}: {exc}", is_error=True)
        if missing is not None:
            return ToolResult(f"not found: {missing}", is_error=True)
        return ToolResult(f"ok ({action} → {file_name}); loads next session", is_error=False)

    return Tool(name="memory", description=MEMORY_DESCRIPTION, input_schema=MEMORY_SCHEMA, source="native", execute=execute)


# --------------------------------------------------------------------------- agent from a directory


def agent_from_dir(
    dir: str,  # noqa: A002 - pinned parameter name
    *,
    name: Optional[str] = None,
    does: Optional[str] = None,
    memory: bool = True,
    tools: Optional[list[Tool]] = None,
    **opts: Any,
) -> "Agent":
    """An `Agent` whose soul is `compose_soul(dir)`, with the `memory` tool unless `memory=False`.

    Tools are `tools`, then `opts["uses"]["tools"]`, then `memory`. Other `opts` go to `Agent`.
    """
    from .surface import Agent

    for taken in ("soul", "soul_file"):
        if taken in opts:
            raise ToolnexusTypeError(f"toolnexus: agent_from_dir composes the soul from {dir}; do not pass `{taken}`")
    uses = dict(opts.pop("uses", None) or {})
    all_tools = [*(tools or []), *(uses.get("tools") or [])]
    if memory:
        all_tools.append(memory_tool(dir))
    uses["tools"] = all_tools
    soul, _found = compose_soul(dir)
    return Agent(
        name or os.path.basename(str(dir).rstrip("/" + os.sep)),
        does=does or f"persona agent from {dir}",
        soul=soul,
        uses=uses,
        **opts,
    )


# --------------------------------------------------------------------------- heartbeat


class StartedAgent:
    """A persona spawned under its own runtime; `stop()` ends the heartbeat and closes the runtime."""

    def __init__(self, handle: "Handle", rt: "AgentRuntime") -> None:
        self.handle = handle
        self.rt = rt
        self._heartbeat: Optional[_Heartbeat] = None

    async def stop(self) -> None:
        """Cancel the heartbeat and any report collectors, then close the whole runtime."""
        if self._heartbeat is not None:
            await self._heartbeat.stop()
        await self.rt.close(self.rt.root)


class _Heartbeat:
    """Beats every `every_s` on the runtime clock: post a tick; wake only an idle agent.

    Each beat is a `clock.call_later` timer armed by the previous one (the first at start), so the
    schedule is anchored at `start_agent` time and never waits on a turn.
    """

    def __init__(self, rt: "AgentRuntime", h: "Handle", every_s: float, on_report: Optional[Callable[[str], Any]]):
        self._rt, self._h, self._every_s, self._on_report = rt, h, every_s, on_report
        self._timer: Any = None
        self._stopped = False
        self._collectors: set[asyncio.Task[None]] = set()

    def start(self) -> None:
        self._timer = self._rt.clock.call_later(self._every_s, self._beat)

    def _beat(self) -> None:
        if self._stopped or self._h.state == HandleState.CLOSED:
            return
        self.start()  # arm the next beat first: nothing below can stall the schedule
        try:
            self._rt.post(self._h, InboxItem("clock", "timer", "tick"))  # folds into a waiting tick
            if self._h.state == HandleState.IDLE and self._rt.wake(self._h, HEARTBEAT_PROMPT).ok:
                collector = asyncio.ensure_future(self._report())
                self._collectors.add(collector)
                collector.add_done_callback(self._collectors.discard)
        except Exception as exc:  # noqa: BLE001 - a timer callback has nobody to raise to
            warn(f"[toolnexus] heartbeat of {self._h.id} failed: {exc!r}")

    async def _report(self) -> None:
        result = await self._rt.wait(self._h)
        if self._on_report is None or result.is_error or HEARTBEAT_OK in result.text:
            return
        try:
            out = self._on_report(result.text)
            if inspect.isawaitable(out):
                await out
        except Exception as exc:  # noqa: BLE001 - a host callback must not kill the heartbeat
            warn(f"[toolnexus] heartbeat on_report for {self._h.id} raised: {exc!r}")

    async def stop(self) -> None:
        self._stopped = True
        if self._timer is not None:
            self._timer.cancel()
        collectors = list(self._collectors)
        for task in collectors:
            task.cancel()
        await asyncio.gather(*collectors, return_exceptions=True)


def start_agent(
    a: "Agent",
    *,
    every_ms: Optional[float] = None,
    on_report: Optional[Callable[[str], Any]] = None,
    **rt_opts: Any,
) -> StartedAgent:
    """Spawn `a` under a fresh runtime; with `every_ms`, wake it on a heartbeat (needs a running loop).

    Each beat posts a clock tick and, only if the agent is idle, wakes it with `HEARTBEAT_PROMPT`;
    a non-error reply without `HEARTBEAT_OK` goes to `on_report`. The beat never waits on a turn.
    """
    from .surface import build_runtime  # surface imports this module

    if every_ms is not None:
        if not isinstance(every_ms, (int, float)) or isinstance(every_ms, bool) or every_ms <= 0:
            raise ToolnexusValueError(f"toolnexus: start_agent every_ms must be a positive number, got {every_ms!r}")
        try:
            asyncio.get_running_loop()
        except RuntimeError:
            raise ToolnexusRuntimeError("toolnexus: start_agent(every_ms=...) needs a running event loop") from None
    rt = build_runtime(a, rt_opts)
    spawned = rt.spawn(rt.root, a.name)
    if isinstance(spawned, SpawnError):
        raise ToolnexusRuntimeError(spawned.error)
    started = StartedAgent(spawned, rt)
    if every_ms is not None:
        started._heartbeat = _Heartbeat(rt, spawned, every_ms / 1000, on_report)
        started._heartbeat.start()
    return started
