"""Resources and prompts: what a served toolkit offers MCP callers besides its tools.

`@resource(uri)` turns a function into a `Resource`. A plain URI (`docs://readme`) is one
resource, read by calling the function with no arguments; a URI template (`users://{id}/profile`)
is a family of them, read by calling the function with the URI's variables as keyword arguments.
`@prompt` turns a function into a `Prompt`: its parameters are the prompt's arguments (required
unless they have a default; described by a Google-style `Args:` section), and what it returns
becomes the prompt's messages. Serve them with `toolkit.serve(addr, mcp={"resources": [...],
"prompts": [...]})`, `toolnexus serve --tools-from module:ITEMS`, or `build_mcp_server(...,
resources=, prompts=)`.

What a resource function may return: `str` ⇒ text (`text/plain` unless `mime_type` says
otherwise), `bytes` ⇒ binary (`application/octet-stream`), any other JSON value ⇒ JSON text
(`application/json`). What a prompt function may return: a `str` (one user message), or a list
whose items are a `str` (a user text message), a content part (`toolnexus.content`: text, image,
audio, file — a user message holding it), an MCP embedded resource
(`{"type": "resource", "resource": {"uri", "mimeType", "text" | "blob"}}`), a static `Resource`
(read now and embedded), or `{"role": "user" | "assistant", "content": <any of those>}`.
Sync functions run in a worker thread (they may read files); async ones are awaited.

Templates follow RFC 6570 level 1 and 2: `{name}` matches one path segment (no `/`), `{+name}`
the rest of the URI; matched values are percent-decoded. `complete={"name": [...] | fn}` offers
completions for a template variable or a prompt argument: a list is filtered by the typed prefix,
a function gets the typed value and returns (or awaits) the candidates; at most 100 are sent.

`await resource.changed()` (`changed(uri)` for one URI of a template) tells every MCP client that
subscribed to it, in every server of this process (`resources/updated`). Those servers listen
through `listen_for_changes` (weakly held: a server that is gone stops listening by itself).

Deliberately not here: the MCP wire forms and access control (`toolnexus.mcp_serve` and the
serve profile), and any size cap (a resource is the host's own code; skills' files are capped
where they are read).
"""

from __future__ import annotations

import asyncio
import base64
import inspect
import json
import re
import weakref
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any, Literal, Optional, Protocol, TypeVar, Union, overload, runtime_checkable
from urllib.parse import unquote

from .errors import ToolnexusTypeError, ToolnexusValueError

__all__ = [
    "MAX_COMPLETIONS",
    "Completer",
    "Prompt",
    "PromptArgument",
    "PromptError",
    "Resource",
    "ResourceCatalog",
    "ResourceContent",
    "ResourceError",
    "ResourceListener",
    "complete_value",
    "listen_for_changes",
    "prompt",
    "resource",
]

MAX_COMPLETIONS = 100  # MCP's cap on completion values per reply
Completer = Union[Iterable[str], Callable[[str], Any]]
_F = TypeVar("_F", bound=Callable[..., Any])
_VAR = re.compile(r"\{(\+?)([A-Za-z_][A-Za-z0-9_]*)\}")
_SKIPPED = {"ctx", "context"}


class ResourceError(ToolnexusValueError):
    """A resource that cannot be defined or read as asked (the message says which and why)."""


class PromptError(ToolnexusValueError):
    """A prompt that cannot be defined, or arguments it cannot be rendered with."""


@dataclass
class ResourceContent:
    """One read of a resource: exactly one of `text` and `data` (raw bytes) is set."""

    uri: str
    mime_type: str
    text: Optional[str] = None
    data: Optional[bytes] = None


class ResourceListener(Protocol):
    """What `Resource.changed()` calls: a server that forwards updates to its subscribers."""

    async def resource_changed(self, uri: str) -> None: ...


_listeners: "weakref.WeakSet[Any]" = weakref.WeakSet()


def listen_for_changes(listener: ResourceListener) -> None:
    """Have `listener.resource_changed(uri)` awaited on every `Resource.changed()` (held weakly)."""
    _listeners.add(listener)


def _template_regex(uri: str) -> Optional[re.Pattern[str]]:
    if not _VAR.search(uri):
        return None
    pattern, last = "", 0
    for m in _VAR.finditer(uri):
        pattern += re.escape(uri[last:m.start()])
        pattern += f"(?P<{m.group(2)}>.+)" if m.group(1) else f"(?P<{m.group(2)}>[^/]+)"
        last = m.end()
    return re.compile(pattern + re.escape(uri[last:]) + r"\Z")


async def _call(fn: Callable[..., Any], *args: Any, **kwargs: Any) -> Any:
    """Await `fn(...)` if it is async, else run it in a worker thread (it may block)."""
    if inspect.iscoroutinefunction(fn) or inspect.iscoroutinefunction(type(fn).__call__):
        value = fn(*args, **kwargs)
    else:
        value = await asyncio.to_thread(fn, *args, **kwargs)
    if inspect.isawaitable(value):
        value = await value
    return value


def _first_doc_line(fn: Callable[..., Any]) -> Optional[str]:
    doc = inspect.getdoc(fn)
    return doc.strip().splitlines()[0].strip() if doc and doc.strip() else None


def _doc_args(fn: Callable[..., Any]) -> dict[str, str]:
    """A Google-style `Args:` section as {name: description}."""
    out: dict[str, str] = {}
    current: Optional[str] = None
    inside = False
    for line in (inspect.getdoc(fn) or "").splitlines():
        stripped = line.strip()
        if not inside:
            inside = stripped in ("Args:", "Arguments:", "Parameters:")
            continue
        if stripped and not line.startswith((" ", "\t")):
            break  # the next section
        m = re.match(r"^(\w+)\s*(?:\([^)]*\))?\s*:\s*(.*)$", stripped)
        if m:
            current = m.group(1)
            out[current] = m.group(2).strip()
        elif current is not None and stripped:
            out[current] = f"{out[current]} {stripped}"
    return out


def _parameters(fn: Callable[..., Any]) -> tuple[list[inspect.Parameter], bool]:
    """The named parameters of `fn` (minus `ctx`), and whether it takes `**kwargs`."""
    try:
        params = list(inspect.signature(fn).parameters.values())
    except (TypeError, ValueError):
        return [], True
    named = [p for p in params if p.name not in _SKIPPED
             and p.kind in (p.POSITIONAL_OR_KEYWORD, p.KEYWORD_ONLY)]
    return named, any(p.kind is p.VAR_KEYWORD for p in params)


def _check_completers(complete: Optional[Mapping[str, Completer]], names: Iterable[str], what: str) -> None:
    if complete is None:
        return
    if not isinstance(complete, Mapping):
        raise ToolnexusTypeError(f"toolnexus: {what}: complete= must be a dict of name -> list or function")
    unknown = sorted(set(complete) - set(names))
    if unknown:
        raise ToolnexusValueError(f"toolnexus: {what}: complete= names {', '.join(unknown)}, which it does not take")


async def complete_value(completers: Optional[Mapping[str, Completer]], name: str, value: str) -> list[str]:
    """Every completion for argument/variable `name` typed so far as `value` (servers send `MAX_COMPLETIONS`)."""
    source = (completers or {}).get(name)
    if source is None:
        return []
    if callable(source):
        found = await _call(source, value)
        values = [str(v) for v in (found or [])]
    else:
        typed = value.casefold()
        values = [str(v) for v in source if str(v).casefold().startswith(typed)]
    return values


@dataclass(eq=False)
class Resource:
    """A readable resource, or a family of them when `uri` is a template (see the module docstring)."""

    uri: str
    fn: Callable[..., Any]
    name: str = ""
    description: Optional[str] = None
    mime_type: Optional[str] = None
    title: Optional[str] = None
    complete: Optional[Mapping[str, Completer]] = None
    _pattern: Optional[re.Pattern[str]] = field(default=None, init=False, repr=False)

    def __post_init__(self) -> None:
        if not isinstance(self.uri, str) or ":" not in self.uri:
            raise ResourceError(f"toolnexus: resource uri must be a URI like \"docs://readme\", got {self.uri!r}")
        if not callable(self.fn):
            raise ToolnexusTypeError(f"toolnexus: resource {self.uri}: fn must be callable")
        self._pattern = _template_regex(self.uri)
        self.name = self.name or getattr(self.fn, "__name__", "") or self.uri
        params, open_ended = _parameters(self.fn)
        names = {p.name for p in params}
        if self._pattern is not None:
            missing = [v for v in self.variables if v not in names and not open_ended]
            if missing:
                raise ResourceError(f"toolnexus: resource {self.uri}: the function takes no parameter for "
                                    f"{', '.join(missing)}")
        else:
            needed = [p.name for p in params if p.default is p.empty]
            if needed:
                raise ResourceError(f"toolnexus: resource {self.uri}: a resource without template variables is "
                                    f"read with no arguments, but the function needs {', '.join(needed)}")
        _check_completers(self.complete, self.variables, f"resource {self.uri}")

    @property
    def is_template(self) -> bool:
        """True when `uri` holds `{variables}` (listed as an MCP resource template)."""
        return self._pattern is not None

    @property
    def variables(self) -> tuple[str, ...]:
        return tuple(m.group(2) for m in _VAR.finditer(self.uri))

    def match(self, uri: str) -> Optional[dict[str, str]]:
        """The template variables `uri` gives (`{}` for this static resource's own URI), or None."""
        if self._pattern is None:
            return {} if uri == self.uri else None
        m = self._pattern.match(uri)
        return None if m is None else {k: unquote(v) for k, v in m.groupdict().items()}

    async def read(self, uri: Optional[str] = None) -> ResourceContent:
        """Call the function for `uri` (default: this resource's own URI) and shape what it returns."""
        uri = self.uri if uri is None else uri
        values = self.match(uri)
        if values is None:
            raise ResourceError(f"toolnexus: {uri} is not a URI of resource {self.uri}")
        return _content(uri, self.mime_type, await _call(self.fn, **values))

    async def changed(self, uri: Optional[str] = None) -> None:
        """Tell subscribed MCP clients that `uri` (default: this resource's URI) has changed."""
        if uri is None:
            if self.is_template:
                raise ResourceError(f"toolnexus: resource template {self.uri}: changed() needs the uri that changed")
            uri = self.uri
        elif self.match(uri) is None:
            raise ResourceError(f"toolnexus: {uri} is not a URI of resource {self.uri}")
        for listener in list(_listeners):
            await listener.resource_changed(uri)


def _content(uri: str, mime_type: Optional[str], value: Any) -> ResourceContent:
    if isinstance(value, ResourceContent):
        return value
    if isinstance(value, str):
        return ResourceContent(uri, mime_type or "text/plain", text=value)
    if isinstance(value, (bytes, bytearray, memoryview)):
        return ResourceContent(uri, mime_type or "application/octet-stream", data=bytes(value))
    try:
        text = json.dumps(value, ensure_ascii=False)
    except (TypeError, ValueError) as exc:
        raise ResourceError(f"toolnexus: resource {uri} returned a {type(value).__name__}, which is not str, "
                            f"bytes or JSON data ({exc})") from None
    return ResourceContent(uri, mime_type or "application/json", text=text)


def resource(uri: str, *, name: Optional[str] = None, description: Optional[str] = None,
             mime_type: Optional[str] = None, title: Optional[str] = None,
             complete: Optional[Mapping[str, Completer]] = None) -> Callable[[Callable[..., Any]], Resource]:
    """Decorator: the function becomes a `Resource` at `uri` (a template when it holds `{variables}`).

    `name` defaults to the function's name, `description` to its docstring's first line.
    """

    def wrap(fn: Callable[..., Any]) -> Resource:
        return Resource(uri, fn, name=name or "", description=description or _first_doc_line(fn),
                        mime_type=mime_type, title=title, complete=complete)

    return wrap


@dataclass(frozen=True)
class PromptArgument:
    name: str
    description: Optional[str] = None
    required: bool = True


Role = Literal["user", "assistant"]


@dataclass(eq=False)
class Prompt:
    """A prompt template: `render(arguments)` gives its messages (see the module docstring)."""

    name: str
    fn: Callable[..., Any]
    description: Optional[str] = None
    arguments: list[PromptArgument] = field(default_factory=list)
    title: Optional[str] = None
    complete: Optional[Mapping[str, Completer]] = None

    def __post_init__(self) -> None:
        if not isinstance(self.name, str) or not self.name:
            raise PromptError(f"toolnexus: a prompt needs a non-empty name, got {self.name!r}")
        if not callable(self.fn):
            raise ToolnexusTypeError(f"toolnexus: prompt {self.name}: fn must be callable")
        _check_completers(self.complete, [a.name for a in self.arguments], f"prompt {self.name}")

    def check_arguments(self, arguments: Optional[Mapping[str, Any]]) -> dict[str, str]:
        """The arguments as strings, or a `PromptError` naming what is missing, unknown or not text."""
        given = dict(arguments or {})
        known = {a.name for a in self.arguments}
        unknown = sorted(set(given) - known)
        if unknown:
            listed = ", ".join(sorted(known)) or "none"
            raise PromptError(f"prompt {self.name}: unknown argument {', '.join(unknown)} (it takes: {listed})")
        missing = [a.name for a in self.arguments if a.required and given.get(a.name) is None]
        if missing:
            raise PromptError(f"prompt {self.name}: missing required argument {', '.join(missing)}")
        bad = sorted(k for k, v in given.items() if v is not None and not isinstance(v, str))
        if bad:
            raise PromptError(f"prompt {self.name}: argument {', '.join(bad)} must be a string")
        return {k: v for k, v in given.items() if v is not None}

    async def render(self, arguments: Optional[Mapping[str, Any]] = None) -> list[dict[str, Any]]:
        """The messages, each `{"role", "content"}` with `content` a part dict or an embedded resource."""
        value = await _call(self.fn, **self.check_arguments(arguments))
        items = [value] if isinstance(value, (str, Mapping, Resource)) else value
        if not isinstance(items, (list, tuple)):
            raise PromptError(f"prompt {self.name} returned a {type(value).__name__}, not a str or a list of messages")
        return [await self._message(item) for item in items]

    async def _message(self, item: Any) -> dict[str, Any]:
        role: Role = "user"
        if isinstance(item, Mapping) and "role" in item:
            if item["role"] not in ("user", "assistant"):
                raise PromptError(f"prompt {self.name}: a message role must be user or assistant, got {item['role']!r}")
            role, item = item["role"], item.get("content")
        if isinstance(item, str):
            return {"role": role, "content": {"type": "text", "text": item}}
        if isinstance(item, Resource):
            got = await item.read()
            embedded: dict[str, Any] = {"uri": got.uri, "mimeType": got.mime_type}
            if got.text is not None:
                embedded["text"] = got.text
            else:
                embedded["blob"] = base64.b64encode(got.data or b"").decode("ascii")
            return {"role": role, "content": {"type": "resource", "resource": embedded}}
        if isinstance(item, Mapping) and isinstance(item.get("type"), str):
            return {"role": role, "content": dict(item)}
        raise PromptError(f"prompt {self.name}: cannot make a message of a {type(item).__name__}")


@runtime_checkable
class ResourceCatalog(Protocol):
    """A toolkit source that also has resources and prompts to serve (e.g. one that proxies a server's).

    `toolkit.serve(..., mcp=...)` serves them after the profile's own, read on every request.
    """

    def served_resources(self) -> list[Resource]: ...

    def served_prompts(self) -> list[Prompt]: ...


@overload
def prompt(fn: _F) -> Prompt: ...
@overload
def prompt(*, name: Optional[str] = None, description: Optional[str] = None, title: Optional[str] = None,
           complete: Optional[Mapping[str, Completer]] = None) -> Callable[[Callable[..., Any]], Prompt]: ...


def prompt(fn: Optional[Callable[..., Any]] = None, *, name: Optional[str] = None, description: Optional[str] = None,
           title: Optional[str] = None, complete: Optional[Mapping[str, Completer]] = None) -> Any:
    """Decorator (bare or with options): the function becomes a `Prompt`.

    Its parameters are the arguments: required unless they have a default, described by the
    docstring's `Args:` section; `name` defaults to the function's name, `description` to the
    docstring's first line.
    """

    def wrap(f: Callable[..., Any]) -> Prompt:
        params, _ = _parameters(f)
        docs = _doc_args(f)
        arguments = [PromptArgument(p.name, docs.get(p.name), p.default is p.empty) for p in params]
        return Prompt(name or str(getattr(f, "__name__", "")), f, description or _first_doc_line(f), arguments,
                      title=title, complete=complete)

    return wrap(fn) if fn is not None else wrap
