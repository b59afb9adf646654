"""One JSON-RPC 2.0 exchange over HTTP POST, with the pinned error texts (spec §1.3).

Non-2xx → `RuntimeError("HTTP <status>: <body>")`. A reply with a truthy `error` → `RpcError`
carrying the error's `message`, else `JSON-RPC error <code>` (just `JSON-RPC error` without a
code). A null `result` or a body that is not JSON reads as `{}` (the baseline's tolerance: the
caller then keeps its previous view of the task). Not here: retries, budgets, aborts.
"""

from __future__ import annotations

import json
import uuid
from typing import Any, Optional

import httpx

from .card import http_error

__all__ = ["RpcError", "METHOD_NOT_FOUND", "VERSION_NOT_SUPPORTED", "call"]

METHOD_NOT_FOUND = -32601
VERSION_NOT_SUPPORTED = -32009  # A2A 1.0: the peer does not speak the requested version


class RpcError(RuntimeError):
    """A JSON-RPC error reply; `code` is the peer's error code (None when it sent none)."""

    def __init__(self, message: str, code: Optional[int] = None) -> None:
        super().__init__(message)
        self.code = code


def _rpc_error(error: Any) -> RpcError:
    if not isinstance(error, dict):
        return RpcError(str(error))
    code = error.get("code")
    message = error.get("message")
    if message:
        return RpcError(str(message), code if isinstance(code, int) else None)
    return RpcError(f"JSON-RPC error {'' if code is None else code}".strip(), code if isinstance(code, int) else None)


async def call(client: httpx.AsyncClient, url: str, method: str, params: dict[str, Any],
               headers: httpx.Headers, timeout_s: float) -> Any:
    """POST one request; return its `result` (`{}` when null or unreadable)."""
    body = {"jsonrpc": "2.0", "id": str(uuid.uuid4()), "method": method, "params": params}
    resp = await client.post(url, content=json.dumps(body).encode("utf-8"), headers=headers, timeout=timeout_s)
    if not resp.is_success:
        raise http_error(resp)
    try:
        reply = json.loads(resp.content)
    except ValueError:
        return {}
    if not isinstance(reply, dict):
        return {}
    if reply.get("error"):
        raise _rpc_error(reply["error"])
    result = reply.get("result")
    return {} if result is None else result
