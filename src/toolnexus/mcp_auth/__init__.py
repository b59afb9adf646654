"""OAuth for remote MCP servers, as a suspension.

A remote MCP server that answers 401 starts the MCP authorization flow; where a person must sign
in, the run parks on `Request(kind="auth", url=<authorization URL>)` and resumes when the answer
brings the redirect's code and state back — from this process or any other sharing the token
store. Tokens, client registrations and sign-ins in progress are kept encrypted with the host's
key (`TokenVault`), refreshed before they expire, and never shown in logs, errors or reprs.

- `OAuthOptions`: the host's settings (store, key, account, redirect URI, clock); pass them as
  `McpOptions(auth=...)`.
- `ServerAuth` / `server_auth`: one server entry's `"oauth"` settings (a configured client,
  scope, client credentials for machine-to-machine servers).
- `LoopbackCallback`: a `wait_for` that completes sign-ins in a browser on this machine (CLI,
  desktop); `callback_answer(request_id, url)`: the answer a web host builds in its own callback.
- `flow.OAuthClient` / `flow.BearerAuth`: the flow itself (imported on first use: it loads the
  `mcp` SDK's auth helpers).

Deliberately not here: which tool suspends and how a run resumes (`toolnexus.mcp_source`), a
browser, an authorization server.
"""

from ._loopback import LoopbackCallback
from ._model import (
                    AUTH_KIND,
                    DEFAULT_REDIRECT_URI,
                    AuthorizationDeclined,
                    AuthorizationRequired,
                    OAuthError,
                    OAuthOptions,
                    ServerAuth,
                    callback_answer,
                    server_auth,
)
from ._vault import TokenVault, new_token_key

__all__ = [
    "AUTH_KIND",
    "DEFAULT_REDIRECT_URI",
    "AuthorizationDeclined",
    "AuthorizationRequired",
    "LoopbackCallback",
    "OAuthError",
    "OAuthOptions",
    "ServerAuth",
    "TokenVault",
    "callback_answer",
    "new_token_key",
    "server_auth",
]
