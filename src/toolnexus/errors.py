"""The one exception root: every error toolnexus raises derives from `ToolnexusError`.

Callers can write `except ToolnexusError` to catch ours and nothing else. Each subclass keeps the
builtin base it had before (a `ResumeError` is still a `ValueError`), so existing `except
ValueError` code keeps working.

The tree (kept in this docstring; each area's errors are defined next to the code that raises
them and listed here):

    ToolnexusError
    ├── ProviderError            client: a non-2xx reply from the LLM endpoint
    ├── ProviderResponseError    client: a 2xx body of the wrong shape (also ValueError)
    ├── RunTimeout               client: the run's deadline ran out (also TimeoutError)
    ├── RunCancelled             client: the run's cancel event was set
    ├── ContentPartError         client: an invalid or unsupported content part (also ValueError)
    ├── ResumeError              client/agents: a resume that cannot proceed (also ValueError)
    └── ServeError               serve/mcp_serve: base of the serving errors (mcp_serve/errors.py)
        ├── ServeConfigError     a bad serve profile, address or limit value (also ValueError)
        │   ├── UnsafeServeError     shell/file built-ins served without a token: refused
        │   └── UnknownStoreError    an unknown A2A task-store selector
        └── ServeTypeError       a serve profile value of the wrong type (also TypeError)
"""

from __future__ import annotations

__all__ = ["ToolnexusError"]


class ToolnexusError(Exception):
    """Base of every error toolnexus raises."""
