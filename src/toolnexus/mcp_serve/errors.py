"""The errors serving raises (MCP and A2A alike): bad profiles, unsafe exposure, unknown stores.

They live beside the MCP profile check because both serving packages use them and
`toolnexus.serve` already depends on `toolnexus.mcp_serve`, never the other way round. Each keeps
the builtin base the same failure had before (`ValueError` / `TypeError`), so existing `except`
clauses keep working.
"""

from __future__ import annotations

from ..errors import ToolnexusError

__all__ = ["ServeError", "ServeConfigError", "ServeTypeError", "UnsafeServeError", "UnknownStoreError"]


class ServeError(ToolnexusError):
    """Base of every serving error."""


class ServeConfigError(ServeError, ValueError):
    """A serve profile, address or limit has a bad value (the message names the key)."""


class ServeTypeError(ServeError, TypeError):
    """A serve profile, address or limit has the wrong type (the message names the key)."""


class UnsafeServeError(ServeConfigError):
    """Serving would hand shell or file tools to unauthenticated callers; the message says how to fix it."""


class UnknownStoreError(ServeConfigError):
    """A task-store selector string names no known store."""
