"""Reading one JSON-RPC 2.0 request envelope, as the JSON-RPC 2.0 specification says to.

`read_request(body)` returns a `Call` (id, method, params) or an `RpcError` to answer with:

    body not JSON (or not UTF-8)            -32700 Parse error                       id null
    an array (a batch)                      -32600 Invalid Request: batches …        id null
    not an object                           -32600 Invalid Request: …                id null
    `id` not a string, an integer or null   -32600 Invalid Request: "id" …           id null
    `jsonrpc` not exactly "2.0"             -32600 Invalid Request: "jsonrpc" …      id as sent
    `method` missing, empty or not a string -32600 Invalid Request: "method" …       id as sent
    `params` not an object (or null)        -32602 Invalid params: …                 id as sent

An invalid request never reaches a method, so it never gets a result. A request without an `id`
is answered like any other (A2A has no notifications; earlier toolnexus peers read the reply).
Not here: which methods exist and what their params mean (`toolnexus.serve._a2a_app`).
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from typing import Any, Union

from ..errors import ToolnexusError

PARSE_ERROR = -32700
INVALID_REQUEST = -32600
METHOD_NOT_FOUND = -32601
INVALID_PARAMS = -32602
INTERNAL_ERROR = -32603


class RpcError(ToolnexusError):
    """A JSON-RPC error to answer with: `code`, `message`, and the request `id` when it is known."""

    def __init__(self, code: int, message: str, rid: Any = None) -> None:
        super().__init__(message)
        self.code, self.message, self.rid = code, message, rid


@dataclass(frozen=True)
class Call:
    """A well-formed request: its `id` (str, int or None), `method` and `params` (an object)."""

    rid: Union[str, int, None]
    method: str
    params: dict[str, Any]


def _valid_id(rid: Any) -> bool:
    return rid is None or isinstance(rid, str) or (isinstance(rid, int) and not isinstance(rid, bool))


def read_request(body: bytes) -> Union[Call, RpcError]:
    """One request body → the call, or the error reply's contents (see the module docstring)."""
    try:
        request = json.loads(body)
    except ValueError:  # also bytes that are not UTF-8
        return RpcError(PARSE_ERROR, "Parse error")
    if isinstance(request, list):
        return RpcError(INVALID_REQUEST, "Invalid Request: batches are not supported; send one request object")
    if not isinstance(request, dict):
        return RpcError(INVALID_REQUEST, "Invalid Request: expected one JSON-RPC request object")
    rid = request.get("id")
    if not _valid_id(rid):
        return RpcError(INVALID_REQUEST, 'Invalid Request: "id" must be a string, an integer or null')
    if request.get("jsonrpc") != "2.0":
        return RpcError(INVALID_REQUEST, 'Invalid Request: "jsonrpc" must be exactly "2.0"', rid)
    method = request.get("method")
    if not isinstance(method, str) or not method:
        return RpcError(INVALID_REQUEST, 'Invalid Request: "method" must be a non-empty string', rid)
    params = request.get("params")
    if params is None:
        params = {}
    if not isinstance(params, dict):
        return RpcError(INVALID_PARAMS, "Invalid params: params must be a JSON object", rid)
    return Call(rid, method, params)


def error_reply(rid: Any, code: int, message: str) -> dict[str, Any]:
    return {"jsonrpc": "2.0", "id": rid, "error": {"code": code, "message": message}}
