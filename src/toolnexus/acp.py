"""An Agent Client Protocol (ACP) agent as a model source for the in-process client.

    acp = load_acp(ACPOptions("opencode", ["acp"]))
    client = create_in_process_client(model="opencode", generate=acp.generate)
    ...
    acp.close()

`load_acp` spawns the agent CLI, performs the handshake (`initialize`, `session/new`, optionally
`session/set_mode`) and keeps that one warm session. `generate(request)` turns the client's
messages into one prompt text, sends `session/prompt`, collects the `agent_message_chunk` text the
agent streams back and returns `{"content": text}` — no tool calls and no usage, so a run ends on
that turn. The toolkit's tools are never offered to the agent.

Wire: JSON-RPC 2.0, one JSON object per line on the child's stdin/stdout (stderr is discarded). A
daemon reader thread (`acp-reader`) routes replies to their waiters by id, collects chunks, and
answers the agent's own requests: a permission request gets the first option whose `kind` starts
with "allow" (else "cancelled"); any other request gets an empty result. Everything here is
synchronous by design: `generate` runs on the client's worker thread; call `load_acp` (which
blocks for the handshake) before the event loop, or through `asyncio.to_thread`.

Prompt text: one `<role>: <text>` line per message that has text, then
`SUPERSEDES-ALL-PRIOR: <last user text>` (no user text: the last line, role prefix included),
joined by newlines — the agent keeps its own history, so the marker tells it which line is the
request now.

Choices beyond 0.21:
- a turn that times out is cancelled (`session/cancel`), and chunks are dropped until the old
  turn's reply arrives, so its late output never leaks into the next reply;
- `session/new` without a `sessionId` fails `load_acp` with `ACPError`;
- `generate` after `close()` raises `ACPError("acp: client closed")` instead of a pipe error.

Not here: serving toolkits to the agent (no `mcpServers` are offered), authentication.
"""

from __future__ import annotations

import itertools
import json
import os
import subprocess
import threading
from dataclasses import dataclass, field
from typing import Any, Optional

from ._shapes import as_dict, as_list
from .errors import ToolnexusError

__all__ = ["ACPOptions", "ACPError", "ACPPermissionTimeoutError", "ACPClient", "load_acp", "prompt_text",
           "HANDSHAKE_TIMEOUT"]

HANDSHAKE_TIMEOUT = 30.0
_CLOSE_WAIT = 5.0
_EOF_MESSAGE = "acp: child process closed the connection"


@dataclass
class ACPOptions:
    """How to start the agent: `[command, *args]` in `cwd` (absolute; default the current directory)."""

    command: str
    args: list[str] = field(default_factory=list)
    cwd: Optional[str] = None
    env: Optional[dict[str, str]] = None  # merged over os.environ
    protocol_version: int = 1
    permission_timeout: float = 5.0  # seconds; bounds each whole generate() turn
    mode: Optional[str] = None


class ACPError(ToolnexusError, RuntimeError):
    """The agent failed, timed out, replied with an error, or the client is closed."""

    def __init__(self, message: str, code: Optional[int] = None) -> None:
        super().__init__(message)
        self.code = code


class ACPPermissionTimeoutError(ACPError):
    """A `generate` turn got no reply within `permission_timeout` (often an unanswered permission prompt)."""


# -- prompt text ------------------------------------------------------------------------------------------


def _text(content: Any) -> str:
    if content is None:
        return ""
    if isinstance(content, str):
        return content
    if isinstance(content, list):
        out = []
        for item in content:
            if isinstance(item, str):
                out.append(item)
            elif isinstance(item, dict):
                if "text" in item:
                    out.append(str(item["text"]))
                elif item.get("type") == "text" and item.get("value") is not None:
                    out.append(str(item["value"]))
        return "".join(out)
    return str(content)


def prompt_text(messages: Any) -> str:
    """The one prompt text sent for a turn (see the module docstring)."""
    lines: list[str] = []
    last_user: Optional[str] = None
    for m in messages if isinstance(messages, list) else []:
        if not isinstance(m, dict):
            continue
        role = m.get("role") or ""
        text = _text(m.get("content"))
        if not text:
            continue
        lines.append(f"{role}: {text}")
        if role == "user":
            last_user = text
    target = last_user if last_user is not None else (lines[-1] if lines else "")
    return "\n".join([*lines, f"SUPERSEDES-ALL-PRIOR: {target}"])


# -- the client --------------------------------------------------------------------------------------------


class _Waiter:
    __slots__ = ("event", "reply")

    def __init__(self) -> None:
        self.event = threading.Event()
        self.reply: Optional[dict[str, Any]] = None


class ACPClient:
    """One spawned ACP agent and its warm session. Build it with `load_acp`."""

    def __init__(self, opts: ACPOptions) -> None:
        self.opts = opts
        self.cwd = os.path.abspath(opts.cwd or os.getcwd())
        env = {**os.environ, **opts.env} if opts.env is not None else None
        self._process = subprocess.Popen([opts.command, *opts.args], stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                                         stderr=subprocess.DEVNULL, text=True, bufsize=1, cwd=self.cwd, env=env)
        self.session_id: Optional[str] = None
        self._ids = itertools.count(1)
        self._write_lock = threading.Lock()
        self._state_lock = threading.Lock()
        self._turn_lock = threading.Lock()
        self._close_lock = threading.Lock()
        self._pending: dict[str, _Waiter] = {}
        self._stale: set[str] = set()
        self._chunks: list[str] = []
        self._closed = False
        self._eof = False
        self._reader = threading.Thread(target=self._read_loop, name="acp-reader", daemon=True)
        self._reader.start()

    def __repr__(self) -> str:
        return f"ACPClient(command={self.opts.command!r}, session_id={self.session_id!r}, alive={self.is_alive()})"

    # -- wire ---------------------------------------------------------------------------------------------

    def _write(self, obj: dict[str, Any]) -> None:
        stdin = self._process.stdin
        if stdin is None:
            raise ACPError("acp: child process has no stdin")
        try:
            with self._write_lock:
                stdin.write(json.dumps(obj) + "\n")
                stdin.flush()
        except (OSError, ValueError) as e:
            raise ACPError(f"acp: failed to write to child process: {e}") from None

    def _fail_waiters(self) -> None:
        with self._state_lock:
            self._eof = True
            waiters, self._pending = list(self._pending.values()), {}
        for w in waiters:
            w.reply = {"error": {"code": -1, "message": _EOF_MESSAGE}}
            w.event.set()

    def _read_loop(self) -> None:
        stdout = self._process.stdout
        try:
            for line in stdout if stdout is not None else []:
                line = line.strip()
                if not line:
                    continue
                try:
                    msg = json.loads(line)
                except ValueError:
                    continue
                if isinstance(msg, dict):
                    self._route(msg)
        except (OSError, ValueError):
            pass
        finally:
            self._fail_waiters()

    def _route(self, msg: dict[str, Any]) -> None:
        method, mid = msg.get("method"), msg.get("id")
        if method is None:
            if mid is None:
                return
            with self._state_lock:
                key = str(mid)
                self._stale.discard(key)
                waiter = self._pending.pop(key, None)
            if waiter is not None:
                waiter.reply = msg
                waiter.event.set()
            return
        if method == "session/update":
            params = as_dict(msg.get("params"))
            update = as_dict(params.get("update"))
            content = as_dict(update.get("content"))
            if update.get("sessionUpdate") == "agent_message_chunk" and content.get("text"):
                with self._state_lock:
                    if not self._stale:  # output of a cancelled turn is not this turn's reply
                        self._chunks.append(str(content["text"]))
            return
        if mid is None:
            return  # other notifications are ignored
        result: dict[str, Any] = {}
        if method == "session/request_permission":
            params = as_dict(msg.get("params"))
            options = as_list(params.get("options"))
            allow = next(
                (o for o in options if isinstance(o, dict) and str(o.get("kind", "")).startswith("allow")), None
            )
            result = ({"outcome": {"outcome": "selected", "optionId": allow.get("optionId")}} if allow is not None
                      else {"outcome": {"outcome": "cancelled"}})
        try:
            self._write({"jsonrpc": "2.0", "id": mid, "result": result})
        except ACPError:
            pass  # the child is gone; its waiters fail on EOF

    def _send(self, method: str, params: dict[str, Any]) -> tuple[str, _Waiter]:
        request_id = f"c-{next(self._ids)}"
        waiter = _Waiter()
        with self._state_lock:
            if self._eof:
                waiter.reply = {"error": {"code": -1, "message": _EOF_MESSAGE}}
                waiter.event.set()
            else:
                self._pending[request_id] = waiter
        if not waiter.event.is_set():
            try:
                self._write({"jsonrpc": "2.0", "id": request_id, "method": method, "params": params})
            except ACPError:
                with self._state_lock:
                    self._pending.pop(request_id, None)
                raise
        return request_id, waiter

    @staticmethod
    def _result(reply: Optional[dict[str, Any]]) -> Any:
        error = reply.get("error") if isinstance(reply, dict) else None
        if error is not None:
            code = error.get("code") if isinstance(error, dict) else None
            message = error.get("message") if isinstance(error, dict) else None
            raise ACPError(f"acp error {code}: {message}", code if isinstance(code, int) else None)
        return reply.get("result") if isinstance(reply, dict) else None

    def call(self, method: str, params: dict[str, Any], timeout: Optional[float] = None) -> Any:
        """One JSON-RPC request and its result (an error reply raises `ACPError`); default timeout 30 s."""
        timeout = HANDSHAKE_TIMEOUT if timeout is None else timeout
        request_id, waiter = self._send(method, params)
        if not waiter.event.wait(timeout):
            with self._state_lock:
                self._pending.pop(request_id, None)
            raise ACPError(f"acp: {method} timed out after {float(timeout)}s")
        return self._result(waiter.reply)

    # -- public -------------------------------------------------------------------------------------------------

    def handshake(self) -> None:
        o = self.opts
        self.call("initialize", {"protocolVersion": o.protocol_version,
                                 "clientCapabilities": {"fs": {"readTextFile": False, "writeTextFile": False}}})
        session = self.call("session/new", {"cwd": self.cwd, "mcpServers": []})
        session_id = session.get("sessionId") if isinstance(session, dict) else None
        if not isinstance(session_id, str) or not session_id:
            raise ACPError("acp: session/new returned no sessionId — the agent did not open a session")
        self.session_id = session_id
        if o.mode:
            self.call("session/set_mode", {"sessionId": session_id, "modeId": o.mode})

    def generate(self, request: dict[str, Any]) -> dict[str, Any]:
        """One turn: the prompt text of `request["messages"]` in, `{"content": reply text}` out."""
        if self._closed:
            raise ACPError("acp: client closed")
        with self._turn_lock:
            if self._closed:
                raise ACPError("acp: client closed")
            with self._state_lock:
                self._chunks = []
            messages = request.get("messages") if isinstance(request, dict) else None
            request_id, waiter = self._send("session/prompt", {
                "sessionId": self.session_id, "prompt": [{"type": "text", "text": prompt_text(messages or [])}]})
            timeout = self.opts.permission_timeout
            if not waiter.event.wait(timeout):
                with self._state_lock:
                    self._pending.pop(request_id, None)
                    self._stale.add(request_id)
                    self._chunks = []
                try:
                    self._write(
                        {"jsonrpc": "2.0", "method": "session/cancel", "params": {"sessionId": self.session_id}}
                    )
                except ACPError:
                    pass
                raise ACPPermissionTimeoutError("acp: turn hung waiting on a reply (possibly an unanswered "
                                                f"session/request_permission) after {float(timeout)}s")
            self._result(waiter.reply)
            with self._state_lock:
                text = "".join(self._chunks)
                self._chunks = []
            return {"content": text}

    def is_alive(self) -> bool:
        return not self._closed and self._process.poll() is None

    def close(self) -> None:
        """Stop the agent (stdin closed, terminate, wait 5 s, kill, wait 5 s) and fail pending waiters. Idempotent."""
        with self._close_lock:
            if self._closed:
                return
            self._closed = True
        p = self._process
        try:
            if p.stdin is not None:
                with self._write_lock:
                    p.stdin.close()
        except OSError:
            pass
        if p.poll() is None:
            p.terminate()
            try:
                p.wait(_CLOSE_WAIT)
            except subprocess.TimeoutExpired:
                p.kill()
                try:
                    p.wait(_CLOSE_WAIT)
                except subprocess.TimeoutExpired:
                    pass
        self._fail_waiters()
        self._reader.join(_CLOSE_WAIT)
        if p.stdout is not None:
            try:
                p.stdout.close()
            except OSError:
                pass

    def __enter__(self) -> "ACPClient":
        return self

    def __exit__(self, *exc: Any) -> None:
        self.close()


def load_acp(opts: ACPOptions) -> ACPClient:
    """Spawn the agent and open its session; on any handshake failure the child is closed and the error re-raised."""
    client = ACPClient(opts)  # spawn errors propagate as they are
    try:
        client.handshake()
    except BaseException:
        client.close()
        raise
    return client
