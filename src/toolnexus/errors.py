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
    │   ├── InputTooLarge               errors      a peer sent more than a buffer's cap: an MCP
    │   │                                           stdout line, an SSE line/event, an LLM body
    │   ├── NotJsonRpc                  mcp_source  a stdout line of an MCP server that is not
    │   │                               .handshake  JSON-RPC; never raised (handed to the session)
    │   ├── ResourceError               resources   a resource defined or read wrongly (a template
    │   │                                           variable without a parameter, a non-JSON value)
    │   └── PromptError                 resources   a prompt defined wrongly, or arguments missing,
    │                                               unknown or not strings
    ├── ToolnexusTypeError              errors      an argument of the wrong type (also TypeError);
    │                                               e.g. `Answer(ok="yes")`
    ├── ToolnexusRuntimeError           errors      an operation that cannot proceed (also
    │   │                                           RuntimeError): no API key, no shell, a closed
    │   │                                           MCP server, an MCP listing that loops
    │   ├── HandshakeFailed             mcp_source  a program that is not an MCP server, or cannot
    │   │                               .handshake  start; never escapes (becomes the server's
    │   │                                           `failed` reason)
    │   ├── OAuthError                  mcp_auth    an OAuth step failed (discovery, registration,
    │   │   │                                       the token endpoint, a bad answer); no secrets
    │   │   ├── AuthorizationRequired               a person must sign in: carries the
    │   │   │                                       `Request(kind="auth")`
    │   │   └── AuthorizationDeclined               the sign-in was refused
    │   └── SamplingRefused             mcp_source  a server's sampling request the policy refused
    │                                   .sampling   (sent to the server, never raised to callers)
    ├── MissingExtra                    errors      an optional feature's packages are not installed
    │                                               (also ImportError): `pip install toolnexus[otel]`
    ├── UnsupportedOperation            errors      not available on this object (also
    │                                               NotImplementedError): streaming in-process
    ├── NetworkError                    errors      one transport attempt failed (also
    │   │                                           ConnectionError, so retried like any OSError);
    │   │                                           the client's final one names the endpoint
    │   └── StreamTruncated             errors      an LLM stream ended before its end marker
    ├── NetworkTimeout                  errors      one transport attempt timed out (also TimeoutError)
    ├── ProviderError                   client      a non-2xx reply from the LLM endpoint (names
    │                                               the endpoint; 401/403/404 say what to check)
    ├── ProviderResponseError           client      a 2xx body of the wrong shape (also ValueError)
    │   └── ResponseTooLarge            client      a 2xx body above `max_response_bytes`
    │                                               (also InputTooLarge)
    ├── RunTimeout                      client      the run's deadline ran out (also TimeoutError)
    ├── RunCancelled                    client      the run's cancel event was set
    ├── ContentPartError                content     an invalid, oversize or unreadable content part (also ValueError)
    ├── ResumeError                     client      a resume that cannot proceed (also ValueError)
    ├── UnsupportedPartError            content     a part a provider wire has no block for (also ValueError)
    ├── OutputValidationError           client      the final answer never matched the output_type (also ValueError)
    ├── ClassifierError                 classifier  bad questions or input, a failed call, a bad answer
    │   ├── BatteryConfigError          judge_batteries  a battery built without a usable option (also ValueError)
    │   └── ContentGuardBlocked         judge_batteries  the content guard hook blocked the latest user text
    ├── ACPError                        acp         the agent failed, timed out or replied an error (also RuntimeError)
    │   └── ACPPermissionTimeoutError   acp         a turn got no reply within its timeout
    ├── StoreError                      durable     base of the durable-store errors (durable/errors.py)
    │   ├── StoreUnavailable                        the store cannot be reached or written; what was committed is intact
    │   ├── StoreVersionError                       data written by a newer toolnexus
    │   ├── RunNotFound                             no run with this id (also KeyError)
    │   ├── RunExists                               a run id used twice
    │   ├── RunInProgress                           another live process holds the run's lease
    │   ├── RunChanged                              another process wrote the run since this runtime did
    │   ├── LeaseLost                               the lease was taken over: this runtime stopped writing
    │   ├── AnswerAlreadyApplied                    the request was answered already (or is being answered now)
    │   ├── RequestWithdrawn                        the request was cancelled by an interrupt
    │   ├── StoreConflict                           a client conversation changed under its writer
    │   ├── RestoreError                            the definitions given cannot restore a run (also ValueError)
    │   └── RunDamaged                              a stored row of the run cannot be read, or the run is quarantined
    ├── TemporalRunError                temporal    base of the Temporal integration's errors (temporal/_errors.py)
    │   ├── TemporalNotInstalled                    the temporalio SDK is missing (also ImportError)
    │   ├── TemporalUnavailable                     the Temporal server cannot be reached (also ConnectionError)
    │   ├── AnswerRejected                          a run's validator refused an answer (a ResumeError)
    │   ├── PayloadTooLarge                         a value for workflow history is over the limit (also ValueError)
    │   └── LLMCallFailed                           an LLM-call activity failed for good
    ├── ServeError                      mcp_serve   base of the serving errors (mcp_serve/errors.py)
    │   ├── ServeConfigError                        a bad serve profile, address or limit value (also ValueError)
    │   │   ├── UnsafeServeError                    shell/file built-ins served without a token: refused
    │   │   └── UnknownStoreError                   an unknown A2A task-store selector
    │   └── ServeTypeError                          a serve profile value of the wrong type (also TypeError)
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
    "MissingExtra",
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


class MissingExtra(ToolnexusError, ImportError):
    """An optional feature's packages are not installed; the message says which extra to install."""


class StreamTruncated(NetworkError):
    """A streamed LLM reply ended before its end marker (`[DONE]`, a finish reason, `message_stop`)."""
