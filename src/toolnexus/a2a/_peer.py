"""Talking to one remote agent: fetch its Agent Card, plan the routes to it, one JSON-RPC call.

`fetch_card` is the resolve-time GET: non-2xx → `RuntimeError("HTTP <status>:
<body>")`, a body that is not a JSON object → a `ValueError` naming the URL. Its timeout is the
agent's budget, capped at `CARD_TIMEOUT_CAP` seconds (a card is one small document; a dead host
must not hold a whole toolkit build for the 300 s task budget).

`plan_routes` reads what the peer declares:

- a 1.0 card (`supportedInterfaces`): every `JSONRPC` interface in the card's order (first is
  preferred), 1.x → the `V1` dialect, 0.x → `V03`, at the interface's `url` (plus its `tenant`).
  A card whose interfaces offer no JSON-RPC binding is refused with a clear error, as we would
  only fail later with a confusing HTTP error.
- a legacy card: the endpoint is `card["url"]` when truthy, else `<scheme>://<netloc>` of the card
  URL. Its `protocolVersion` being 0.x (or absent) means the peer is either an existing toolnexus
  (`MIXED`) or a real 0.3 agent (`V03`); both look alike, so we try `MIXED` first and fall back to
  `V03` on "method not found". A 1.x `protocolVersion` puts `V1` first.

`Peer` remembers which route worked, so later calls of any of the agent's tools go there directly.

`rpc` is one JSON-RPC 2.0 exchange over HTTP POST: non-2xx → the same pinned
`HTTP <status>: <body>`; a reply with a truthy `error` → `RpcError` carrying the error's `message`,
else `JSON-RPC error <code>` (just `JSON-RPC error` without a code). A null `result` or a body
that is not JSON reads as `{}` (the baseline's tolerance: the caller then keeps its previous view
of the task).

All requests use the running loop's pooled client (`toolnexus.http.shared_client`: keep-alive,
redirects followed, no cookie jar). Not here: retries, budgets, aborts (`_call.py`).
"""

from __future__ import annotations

import json
import uuid
from dataclasses import dataclass, field
from typing import Any, Optional
from urllib.parse import urlsplit

import httpx

from .._http_exchange import shared_client
from .._text import strict_json
from ..errors import ConfigError, ToolnexusError, ToolnexusRuntimeError
from ._wire import MIXED, V03, V1, AgentCard, Dialect

CARD_TIMEOUT_CAP = 30.0  # seconds
METHOD_NOT_FOUND = -32601
VERSION_NOT_SUPPORTED = -32009  # A2A 1.0: the peer does not speak the requested version


def _http_error(resp: httpx.Response) -> RuntimeError:
    """The pinned non-2xx error: `HTTP <status>: <body>`."""
    return ToolnexusRuntimeError(f"HTTP {resp.status_code}: {resp.text}")


# ---------------------------------------------------------------------------- the card


async def fetch_card(url: str, headers: dict[str, str], timeout_s: float) -> AgentCard:
    """GET the card; raise on non-2xx or a body that is not a JSON object."""
    resp = await shared_client().get(url, headers=headers, timeout=timeout_s)
    if not resp.is_success:
        raise _http_error(resp)
    try:
        card = json.loads(resp.content)
    except ValueError as exc:
        raise ConfigError(f"agent card at {url} is not valid JSON: {exc}") from None
    if not isinstance(card, dict):
        raise ConfigError(f"agent card at {url} is not a JSON object (got {type(card).__name__})")
    return card


@dataclass(frozen=True)
class Route:
    """Where and how to send: a JSON-RPC endpoint, the dialect it speaks and an optional tenant."""

    url: str
    dialect: Dialect
    tenant: Optional[str] = None


@dataclass
class Peer:
    """A resolved agent: its display name and the routes to try, the one that last worked first."""

    name: str
    routes: list[Route]
    _preferred: int = field(default=0, repr=False)

    def in_order(self) -> list[Route]:
        first = self.routes[self._preferred]
        return [first] + [r for r in self.routes if r is not first]

    def prefer(self, route: Route) -> None:
        self._preferred = self.routes.index(route)

    @property
    def current(self) -> Route:
        return self.routes[self._preferred]


def legacy_endpoint(card: AgentCard, card_url: str) -> str:
    """`card["url"]` if truthy, else `<scheme>://<netloc>` of the card URL (no trailing slash)."""
    if card.get("url"):
        return str(card["url"])
    parts = urlsplit(card_url)
    return f"{parts.scheme}://{parts.netloc}"


def _major(version: Any) -> int:
    head = str(version or "").strip().split(".")[0]
    return int(head) if head.isdigit() else 0


def plan_routes(card: AgentCard, card_url: str) -> list[Route]:
    """The routes to try, best first, from what the card declares (see the module docstring)."""
    fallback = legacy_endpoint(card, card_url)
    interfaces = [i for i in card.get("supportedInterfaces") or [] if isinstance(i, dict)]
    if interfaces:
        routes = [
            Route(str(i.get("url") or fallback), V1 if _major(i.get("protocolVersion") or "1") >= 1 else V03,
                  str(i["tenant"]) if i.get("tenant") else None)
            for i in interfaces
            if str(i.get("protocolBinding") or i.get("transport") or "").upper().replace("-", "") == "JSONRPC"
        ]
        if not routes:
            offered = ", ".join(
                sorted({str(i.get("protocolBinding") or i.get("transport") or "?") for i in interfaces})
            )
            raise ConfigError(f"agent card at {card_url} offers no JSON-RPC interface (offers: {offered})")
        return routes
    dialects = [V1, MIXED, V03] if _major(card.get("protocolVersion")) >= 1 else [MIXED, V03]
    return [Route(fallback, d) for d in dialects]


# ---------------------------------------------------------------------------- JSON-RPC


class RpcError(ToolnexusError, RuntimeError):
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


async def rpc(url: str, method: str, params: dict[str, Any], headers: httpx.Headers, timeout_s: float) -> Any:
    """POST one request; return its `result` (`{}` when null or unreadable)."""
    body = {"jsonrpc": "2.0", "id": str(uuid.uuid4()), "method": method, "params": params}
    resp = await shared_client().post(url, content=strict_json(body), headers=headers, timeout=timeout_s)
    if not resp.is_success:
        raise _http_error(resp)
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
