"""Personas: an agent whose home is a directory of bootstrap files.

- `compose_soul(dir)` joins the bootstrap files present, in `BOOTSTRAP_ORDER`, into one soul;
- `memory_tool(dir)` is the opt-in `memory` tool that edits `MEMORY.md` / `USER.md` on disk.

`agent_from_dir(dir)` (an `Agent` from the two) and `start_agent(agent, every_ms=...)` (a fresh
runtime and, optionally, a heartbeat) are in _launch.py: they build on `surface`, which builds on
this module.

The soul is a frozen snapshot: memory written during a session is on disk at once but reaches
the prompt only in the next `compose_soul`. Channels (chat, mail, ...) are the host's job: it
calls `post`/`wake` on `started.rt` and `started.handle`. Not here: the runtime itself.

Choices of ours (deliberate):

- `compose_soul` raises `NotADirectoryError` when `dir` is not a directory (a typo must not yield
  an empty soul); a UTF-8 BOM is dropped; invalid UTF-8 becomes U+FFFD.
- `memory`: empty or non-string `text` is an error for every action, and `replace` needs a string
  `with`. Each edit is read-modify-write under a lock (a per-file thread lock plus an `flock` on
  the directory where available) and lands via the library's atomic write (`toolnexus._fs`:
  staging file, fsync, `os.replace`), keeping the file's mode (a new file gets `0o644`); a
  symlinked file is written through to its target.
"""

from __future__ import annotations

import asyncio
import codecs
import contextlib
import os
import threading
from typing import Any, Iterator, Optional

from .._fs import file_mode, write_atomic
from ..types import Tool, ToolResult

try:  # POSIX advisory locks; elsewhere the per-process lock alone serialises edits
    import fcntl
except ImportError:  # pragma: no cover - Windows
    fcntl = None  # type: ignore[assignment]

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


def compose_soul(dir: str) -> tuple[str, list[str]]:
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


def memory_tool(dir: str) -> Tool:
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

    return Tool(
        name="memory", description=MEMORY_DESCRIPTION, input_schema=MEMORY_SCHEMA, source="native", execute=execute
    )
