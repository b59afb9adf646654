"""The uniform tool model and the suspension wire types.

Everything that crosses a boundary in toolnexus is one of these plain dataclasses: a `Tool`
(what the model can call), a `ToolResult` (what it gets back), and the suspension pair
`Request` / `Answer`, which are plain JSON so a host can persist them, hand them to a UI or a
queue, and resume later in another process.

This module holds data and small pure helpers only: no I/O, no event loop, no imports of the
rest of the package except the dependency-free `errors` and `_shapes` (every other module imports
it).

`Answer` checks its fields when it is built, directly or through `from_dict` (a resume from
JSON): `id` must be a `str`, `ok` a real `bool` (`"yes"`, `1` or `None` are refused, because the
loop branches on `ok` alone and a truthy string must never approve anything), `data` a `dict` or
None, and `reason` one of the three pinned words or None. A wrong type raises
`ToolnexusTypeError`; a wrong `reason` raises the pinned `ValueError` text. The additive fields
(ours, all optional, all plain JSON) are checked the same way: `message` (the answerer's free
text, e.g. why they declined: the model receives it after `declined/expired: <prompt>`),
`arguments` (approve with edited tool arguments: an object), `always` (a real `bool`: the same
decision for this tool for the rest of the run), `by` (who answered) and `via` (through what:
`"api"`, `"cli"`, `"a2a"`, `"mcp"`, ...).

`Tool.needs_approval` declares that a tool's calls wait for an approval (see
`toolnexus.approvals`); `ToolContext.request` is the `Request` a retry answers, next to its
`answer`.

`Answer.from_dict` (an answer read from JSON) also refuses a non-finite number anywhere in it
(NaN, ±Infinity: not JSON, though Python's `json` reads them) with a `ToolnexusValueError` naming
where.
"""

from __future__ import annotations

import itertools
import random
import re
import time
from collections.abc import Mapping
from dataclasses import MISSING, dataclass, field, fields
from typing import Any, Awaitable, Callable, Literal, Optional, Protocol, runtime_checkable

from ._shapes import non_finite
from .errors import ToolnexusTypeError, ToolnexusValueError, UnsupportedOperation

__all__ = [
    "JSONSchema",
    "ToolSource",
    "McpStatus",
    "Tool",
    "ToolResult",
    "ToolContext",
    "ToolCaller",
    "LOG_LEVELS",
    "Request",
    "Answer",
    "pending",
    "auth_required",
    "pending_of",
    "answer_output",
    "answer_declined",
    "declined_text",
    "sanitize",
    "new_request_id",
    "signal_fired",
]

JSONSchema = dict[str, Any]
ToolSource = Literal["mcp", "skill", "native", "http", "builtin", "a2a", "custom", "relay"]
McpStatus = Literal["connected", "disabled", "failed"]
ExecuteFn = Callable[..., Awaitable["ToolResult"]]

ANSWER_REASONS = ("declined", "cancelled", "expired")


@dataclass
class Tool:
    """A callable capability: a name, a description, a JSON schema and an async `execute`.

    `execute(args, ctx=None)` is always a coroutine function returning a `ToolResult`.
    """

    name: str
    description: str
    input_schema: JSONSchema
    source: ToolSource
    execute: ExecuteFn = field(repr=False)
    #: Safe to run twice with the same arguments. After a crash, a durable run re-runs an
    #: idempotent call whose result was never recorded; any other such call asks the host first.
    idempotent: bool = field(default=False, kw_only=True)
    #: The tool's calls wait for a human's approval: `True`, a predicate `(args, ctx) -> bool` (may
    #: be async), or a `toolnexus.approvals.ApprovalRule`. A toolkit enforces it (`toolnexus.approvals`).
    needs_approval: Any = field(default=False, kw_only=True, repr=False)
    #: Where the tool comes from inside its source, as `<server or agent>/<its own name>`
    #: (`github/create_issue` for an MCP server's tool); approval policies match `<source>:<origin>`.
    origin: Optional[str] = field(default=None, kw_only=True, repr=False)


@dataclass
class ToolResult:
    """What a tool hands back. `metadata["pending"]` holding a `Request` marks a suspension."""

    output: str
    is_error: bool
    metadata: Optional[dict[str, Any]] = None
    parts: Optional[list[dict[str, Any]]] = None


def _bad_reason(reason: Any) -> ToolnexusValueError:
    return ToolnexusValueError(f'toolnexus: Answer reason must be "declined", "cancelled" or "expired", got {reason!r}')


def _from_mapping(cls: type, m: Mapping[str, Any]) -> Any:
    if not isinstance(m, Mapping):
        raise ToolnexusTypeError(f"toolnexus: a {cls.__name__} is built from a mapping, got {type(m).__name__}")
    known = {f.name for f in fields(cls)}
    required = [f.name for f in fields(cls) if f.default is MISSING and f.default_factory is MISSING]
    missing = [name for name in required if name not in m]
    if missing:
        raise ToolnexusTypeError(f"toolnexus: a {cls.__name__} needs the key(s) {', '.join(missing)}; got "
                                 f"{sorted(map(str, m))}")
    return cls(**{k: v for k, v in m.items() if k in known})


def _optional(value: Any, kind: type, name: str, what: str) -> None:
    if value is not None and not isinstance(value, kind):
        raise ToolnexusTypeError(f"toolnexus: Answer {name} must be {what} or None, got {type(value).__name__}")


@dataclass
class Answer:
    """The host's reply to a `Request`; `id` echoes `Request.id`. The loop branches only on `ok`.

    `message`, `arguments`, `always`, `by` and `via` are ours and optional (see the module docstring).
    """

    id: str
    ok: bool
    data: Optional[dict[str, Any]] = None
    reason: Optional[Literal["declined", "cancelled", "expired"]] = None
    message: Optional[str] = None
    arguments: Optional[dict[str, Any]] = None
    always: bool = False
    by: Optional[str] = None
    via: Optional[str] = None

    def __post_init__(self) -> None:
        if not isinstance(self.id, str):
            raise ToolnexusTypeError(
                f"toolnexus: Answer id must be a str (the Request's id), got {type(self.id).__name__}"
            )
        if not isinstance(self.ok, bool):
            raise ToolnexusTypeError(
                f"toolnexus: Answer ok must be True or False, got {type(self.ok).__name__} {self.ok!r}"
            )
        if self.data is not None and not isinstance(self.data, dict):
            raise ToolnexusTypeError(f"toolnexus: Answer data must be a dict or None, got {type(self.data).__name__}")
        if self.reason is not None and self.reason not in ANSWER_REASONS:
            raise _bad_reason(self.reason)
        _optional(self.message, str, "message", "a str (free text)")
        _optional(self.arguments, dict, "arguments", "a dict (the edited tool arguments)")
        if not isinstance(self.always, bool):
            raise ToolnexusTypeError(
                f"toolnexus: Answer always must be True or False, got {type(self.always).__name__} {self.always!r}")
        _optional(self.by, str, "by", "a str (who answered)")
        _optional(self.via, str, "via", 'a str (e.g. "cli", "api")')

    @classmethod
    def from_dict(cls, m: Mapping[str, Any]) -> "Answer":
        """Rebuild from JSON, ignoring unknown keys (the fields are checked as in the constructor,
        and a non-finite number anywhere is refused: JSON has none)."""
        answer = _from_mapping(cls, m)
        found = non_finite(dict(m))
        if found is not None:
            raise ToolnexusValueError(f"toolnexus: an Answer holds a number JSON does not have: "
                                      f"{found[0]}: {found[1]}")
        return answer


@dataclass
class Request:
    """Why a tool could not finish: login, approval, input, a question, a relayed call...

    Keys are the wire keys (note `expiresAt`, camelCase on purpose), so
    `json.dumps(dataclasses.asdict(req))` is the pinned wire form.
    """

    id: str
    kind: str
    prompt: str
    url: Optional[str] = None
    data: Optional[dict[str, Any]] = None
    expiresAt: Optional[str] = None

    @classmethod
    def from_dict(cls, m: Mapping[str, Any]) -> "Request":
        """Rebuild from JSON, ignoring unknown keys."""
        return _from_mapping(cls, m)


LOG_LEVELS = ("debug", "info", "notice", "warning", "error", "critical", "alert", "emergency")


class ToolCaller(Protocol):
    """The back channel to whoever called a tool, set as `ToolContext.caller` while a served MCP
    request runs it (`toolnexus.mcp_serve`). Use it through the `ToolContext` methods."""

    async def log(self, level: str, data: Any, logger: Optional[str] = None) -> None: ...

    async def progress(self, progress: float, total: Optional[float] = None, message: Optional[str] = None) -> None: ...

    async def sample(self, messages: Any, *, max_tokens: int, system: Optional[str] = None,
                     temperature: Optional[float] = None, stop: Optional[list[str]] = None) -> str: ...

    async def close_stream(self) -> None: ...


@dataclass
class ToolContext:
    """Per-call context. `answer` is set only on the retry after a suspension was resolved.

    `caller` is the MCP caller's back channel while a served request runs the tool (None
    elsewhere): `log`, `progress` and `sample` use it, and the first two do nothing without it.
    """

    signal: Optional[Any] = None
    timeout: Optional[float] = None  # seconds
    answer: Optional[Answer] = None
    request: Optional[Request] = None  # ours: the Request `answer` answers, on a retry
    caller: Optional[ToolCaller] = field(default=None, kw_only=True)  # keyword-only: the positions are pinned

    async def log(self, level: str, message: Any, *, logger: Optional[str] = None) -> None:
        """Send a log message (`level`: one of `LOG_LEVELS`) to the MCP caller; nothing without one."""
        if level not in LOG_LEVELS:
            raise ToolnexusValueError(f"ctx.log: level must be one of {', '.join(LOG_LEVELS)}, got {level!r}")
        if self.caller is not None:
            await self.caller.log(level, message, logger)

    async def progress(self, progress: float, total: Optional[float] = None, message: Optional[str] = None) -> None:
        """Report progress to the MCP caller when its request asked for it (a progress token)."""
        if self.caller is not None:
            await self.caller.progress(progress, total, message)

    async def sample(self, prompt: Any, *, max_tokens: int = 1000, system: Optional[str] = None,
                     temperature: Optional[float] = None, stop: Optional[list[str]] = None) -> str:
        """Ask the MCP caller's model (`prompt`: a text, or a list of `{"role", "content"}`); its reply text.

        Raises `UnsupportedOperation` when no caller can be asked: the tool is not running for a
        served MCP request, or the client did not declare sampling, or it has no back channel.
        """
        if self.caller is None:
            raise UnsupportedOperation("ctx.sample(): no model to ask — sampling works only while the tool runs "
                                       "for an MCP client that declared sampling")
        return await self.caller.sample(prompt, max_tokens=max_tokens, system=system, temperature=temperature,
                                        stop=stop)


# Generated ids keep the pinned shape `pnd-<hex ms>-<n>`, but `n` starts at a random offset so
# two processes minting ids in the same millisecond do not collide.
_counter = itertools.count(random.randrange(1, 1 << 24))


def new_request_id(prefix: str = "pnd") -> str:
    """A fresh request id: `<prefix>-<hex of epoch ms>-<n>`."""
    return f"{prefix}-{int(time.time() * 1000):x}-{next(_counter)}"


def pending(
    *,
    kind: str,
    prompt: str,
    id: Optional[str] = None,
    url: Optional[str] = None,
    data: Optional[dict[str, Any]] = None,
    expiresAt: Optional[str] = None,
) -> ToolResult:
    """A suspension result: the run parks until a host answers the `Request`."""
    req = Request(id=id or new_request_id(), kind=kind, prompt=prompt, url=url, data=data, expiresAt=expiresAt)
    output = prompt + ("\n" + url if url else "")
    return ToolResult(output=output, is_error=True, metadata={"pending": req})


def auth_required(url: str, prompt: str = "Authorization required to continue") -> ToolResult:
    """The OAuth-shaped suspension: `url` is the authorize endpoint the user must visit."""
    return pending(kind="authorization", prompt=prompt, url=url)


def _coerce_request(value: Any) -> Optional[Request]:
    if isinstance(value, Request):
        return value
    if isinstance(value, Mapping) and all(isinstance(value.get(k), str) for k in ("id", "kind", "prompt")):
        return Request.from_dict(value)
    return None


@runtime_checkable
class _RunOutcome(Protocol):
    """What `pending_of` reads of a run's result (`RunResult`, `TaskResult`, a host's own): its
    status and, when that is "pending", the request it is parked on."""

    status: Any
    pending: Any


def pending_of(result: Any) -> Optional[Request]:
    """The `Request` a result is parked on, or None.

    Accepts a `ToolResult` (its `metadata["pending"]`, a mapping with string id/kind/prompt is
    coerced), or any run result (`RunResult`, `TaskResult`) whose `status == "pending"`.
    """
    if result is None:
        return None
    if isinstance(result, ToolResult):
        meta = result.metadata
        if not isinstance(meta, Mapping):
            return None
        return _coerce_request(meta.get("pending"))
    if isinstance(result, _RunOutcome) and result.status == "pending":
        return _coerce_request(result.pending)
    return None


def answer_output(id: str, output: str) -> Answer:
    """An ok answer carrying a text output (relay tools, questions)."""
    if not isinstance(output, str):
        raise ToolnexusTypeError(f"toolnexus: Answer output must be a str, got {type(output).__name__}")
    return Answer(id=id, ok=True, data={"output": output})


def answer_declined(id: str, reason: str = "declined") -> Answer:
    """A negative answer; `reason` is one of declined / cancelled / expired."""
    if reason not in ANSWER_REASONS:
        raise _bad_reason(reason)
    return Answer(id=id, ok=False, reason=reason)  # type: ignore[arg-type]


def declined_text(prompt: str, answer: Optional[Answer] = None) -> str:
    """What the model receives for a declined or expired request: the pinned
    `declined/expired: <prompt>`, then the answerer's message on its own line when there is one."""
    text = f"declined/expired: {prompt}"
    message = answer.message if answer is not None else None
    if message and message.strip():
        who = f"message from {answer.by}" if answer is not None and answer.by else "message"
        text += f"\n{who}: {message.strip()}"
    return text


_UNSAFE = re.compile(r"[^a-zA-Z0-9_-]")


def sanitize(value: str) -> str:
    """Replace each code point outside ASCII `[a-zA-Z0-9_-]` with one `_`."""
    return _UNSAFE.sub("_", value)


def signal_fired(signal: Any) -> bool:
    """Whether an advisory `ToolContext.signal` has fired.

    `signal.is_set()` when callable (an `asyncio.Event` / `threading.Event`), else
    `signal.aborted` (an AbortSignal-like object), else its truthiness; `None` never fires.
    """
    if signal is None:
        return False
    is_set = getattr(signal, "is_set", None)
    if callable(is_set):
        return bool(is_set())
    if hasattr(signal, "aborted"):
        return bool(signal.aborted)
    return bool(signal)
