"""The one exception root: every error toolnexus raises derives from `ToolnexusError`.

Callers can write `except ToolnexusError` to catch ours and nothing else. Each subclass keeps the
builtin base it had before (a `ResumeError` is still a `ValueError`, a missing API key is still a
`RuntimeError`), so existing `except ValueError` code keeps working.

Most errors are raised where they are detected and defined next to that code; the generic ones
live here so that any module (even `toolnexus.types`, which imports nothing else of ours) can use
them. The tree (each entry: where it is defined, what it means):

    ToolnexusError                      errors      base of everything below
    ├── ToolnexusValueError             errors      a bad argument value (also ValueError)
    │   ├── ConfigError                 errors      a config that cannot be used: MCP server map,
    │   │                                           builtins dict, OpenAPI document, skills, agents
    │   └── InputTooLarge               errors      a peer sent more than a buffer's cap: an MCP
    │                                               stdout line, an SSE line/event, an LLM body
    ├── ToolnexusTypeError              errors      an argument of the wrong type (also TypeError);
    │                                               e.g. `Answer(ok="yes")`
    ├── ToolnexusRuntimeError           errors      an operation that cannot proceed (also
    │                                               RuntimeError): no API key, no shell, a closed
    │                                               MCP server, an MCP listing that loops
    ├── UnsupportedOperation            errors      not available on this object (also
    │                                               NotImplementedError): streaming in-process
    ├── NetworkError                    errors      one transport attempt failed (also
    │   │                                           ConnectionError, so retried like any OSError)
    │   └── StreamTruncated             errors      an LLM stream ended before its end marker
    ├── NetworkTimeout                  errors      one transport attempt timed out (also TimeoutError)
    ├── ProviderError                   client      a non-2xx reply from the LLM endpoint
    ├── ProviderResponseError           client      a 2xx body of the wrong shape (also ValueError)
    │   └── ResponseTooLarge            client      a 2xx body above `max_response_bytes`
    │                                               (also InputTooLarge)
    ├── RunTimeout                      client      the run's deadline ran out (also TimeoutError)
    ├── RunCancelled                    client      the run's cancel event was set
    ├── ContentPartError                client      an invalid or unsupported content part (also ValueError)
    ├── ResumeError                     client      a resume that cannot proceed (also ValueError)
    ├── ToolError                       builtin     a built-in tool's failure; never escapes (it
    │                                               becomes the error result `"<tool>: <message>"`)
    ├── Aborted                         _abort      `ctx.signal` fired during an HTTP tool call;
    │                                               never escapes (becomes `request cancelled`)
    └── RpcError                        a2a.peer    a JSON-RPC error reply from an A2A peer (also
                                                    RuntimeError)

Internal control-flow exceptions (`openapi._SkipOperation`, `builtin.search._Binary`, `mcp_source.connection.
_RemoteConnectError`) derive from `ToolnexusError` too, although neither leaves its module.

Not covered, on purpose: `asyncio.CancelledError` (cancellation is not an error and must
propagate untouched), and `OSError`s that the built-in file tools let the OS raise and then turn
into error results. Errors raised by code *you* hand us (a tool function, a hook, `wait_for`)
propagate as they are.
"""

from __future__ import annotations

__all__ = [
    "ToolnexusError",
    "ToolnexusValueError",
    "ToolnexusTypeError",
    "ToolnexusRuntimeError",
    "ConfigError",
    "InputTooLarge",
    "UnsupportedOperation",
    "NetworkError",
    "NetworkTimeout",
    "StreamTruncated",
]


class ToolnexusError(Exception):
    """Base of every error toolnexus raises."""


class ToolnexusValueError(ToolnexusError, ValueError):
    """An argument has a value we cannot use; the message says which and what would work."""


class ToolnexusTypeError(ToolnexusError, TypeError):
    """An argument has the wrong type; the message names it and the type expected."""


class ToolnexusRuntimeError(ToolnexusError, RuntimeError):
    """An operation cannot proceed in the current state (no API key, no shell, closed server...)."""


class ConfigError(ToolnexusValueError):
    """A configuration (file or dict) that cannot be used; the message names the key or file."""


class InputTooLarge(ToolnexusValueError):
    """A peer sent more than the buffer reading it allows; the message names the cap."""


class UnsupportedOperation(ToolnexusError, NotImplementedError):
    """The object does not support this operation (e.g. streaming from an in-process model)."""


class NetworkError(ToolnexusError, ConnectionError):
    """One transport attempt failed (refused, reset, dropped); an `OSError`, so it is retried."""


class NetworkTimeout(ToolnexusError, TimeoutError):
    """One transport attempt timed out; an `OSError`, so it is retried."""


class StreamTruncated(NetworkError):
    """A streamed LLM reply ended before its end marker (`[DONE]`, a finish reason, `message_stop`)."""
