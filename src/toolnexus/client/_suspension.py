"""Loop-side touches on relay suspensions: id stamping and the durable-halt merge.

A relay tool does not know the provider's call id, so its request's `data["calls"]` entries carry a
blank `id`; the loop stamps the call id in (and, where the wire gave a raw arguments string, that
string) before the `pending` event or `wait_for` sees the request. At a durable halt whose first
suspension is a relay request, the calls of every later relay suspension of the same turn are
appended to it, in order, so the host gets them together. A non-relay first suspension is never
mixed with relay calls.

Not here: answering relay requests or durable resume (those build on these helpers).
"""

from __future__ import annotations

from typing import Optional

from ..relay import is_relay_request
from ..types import Request
from ._wire.base import ToolCall


def stamp_relay_call(request: Optional[Request], call: ToolCall) -> None:
    """Fill blank call ids of a relay request with the provider call id (in place)."""
    if request is None or not is_relay_request(request) or not isinstance(request.data, dict):
        return
    for entry in request.data.get("calls") or []:
        if isinstance(entry, dict) and not entry.get("id"):
            entry["id"] = call.id
            if call.arguments is not None:
                entry["arguments"] = call.arguments


def merge_relay_halt(first: Request, later: list[Request]) -> Request:
    """The halting request, with later relay suspensions' calls appended when `first` is relay."""
    if not is_relay_request(first) or not isinstance(first.data, dict):
        return first
    calls = first.data.setdefault("calls", [])
    for request in later:
        if is_relay_request(request) and isinstance(request.data, dict):
            calls.extend(request.data.get("calls") or [])
    return first
