"""Bridging a suspension (`kind: "input"`) to MCP elicitation on the calling client.

A served tool that returns `pending(kind="input", ...)` asks the *MCP caller* for the input,
instead of the suspension being flattened into error text. How depends on the connection:

- 2026-07-28 revision (stateless by design): the call answers `InputRequiredResult` holding one
  form elicitation keyed by the `Request.id`, and a `requestState` holding the `Request`. The
  client's elicitation callback answers, the client retries the call with `inputResponses`, and
  the tool is re-run with `ctx.answer`. The SDK's `RequestStateBoundary` (installed by
  `build_mcp_server`) seals that state, binds it to the tool name and arguments, and expires it.
- handshake era with a back channel (stdio, in-memory, stateful HTTP): an `elicitation/create`
  request goes to the client mid-call; its reply resolves the suspension inline.

An approval request (`kind: "approval"`, an approval gate's: `toolnexus.approvals`) is asked the
same way, as a small form whose message is the request's one-line prompt: `decision`
(approve / reject), an optional `message`, `always`, and `arguments` (the edited arguments as a
JSON object, optional). Declining the form rejects; unreadable edited arguments reject too,
saying why (an unclear answer never approves).

Neither applies to handshake-era requests on our stateless HTTP endpoint (no back channel),
clients that did not declare elicitation, other kinds, or a `data["schema"]` MCP cannot carry:
there the suspension is flattened as before (prompt text, `isError`).
Every answer says who gave it and through what: `via="mcp"`, and `by` the identity the endpoint
authenticated (a served `/mcp` with an `auth_token`: its `auth_identity`, see
`toolnexus.mcp_serve._config`); on stdio, or over HTTP without a token, nobody is known and `by`
stays empty — so a request made for a group is refused there (`_server`).
Answers follow the loop rule: accept ⇒ `Answer(ok=True, data=content)` and one
re-run; decline/cancel ⇒ `declined/expired: <prompt>` (and the answer's message, if any); a re-run that suspends again ⇒
`unresolved: <prompt>`.
"""

from __future__ import annotations

import dataclasses
import json
from collections.abc import Mapping
from typing import Any, Literal, Optional

import mcp_types as mtypes
from mcp.shared.exceptions import MCPError
from mcp_types import methods as wire_methods
from mcp_types.version import MODERN_PROTOCOL_VERSIONS
from pydantic import ValidationError

from .._text import strict_text, strict_value
from ..approvals import is_approval_request
from ..errors import ToolnexusValueError
from ..types import Answer, Request, ToolResult, declined_text

BRIDGED_KINDS = frozenset({"input", "approval"})
APPROVAL_FORM: dict[str, Any] = {
    "type": "object",
    "properties": {
        "decision": {"type": "string", "title": "Decision", "enum": ["approve", "reject"]},
        "message": {"type": "string", "title": "Message", "description": "why (sent to the agent)"},
        "always": {"type": "boolean", "title": "Always",
                   "description": "the same for this tool for the rest of the run"},
        "arguments": {"type": "string", "title": "Edited arguments",
                      "description": "optional: the call's arguments as a JSON object, to run with instead"},
    },
    "required": ["decision"],
}
_STATE_VERSION = 1
_ELICIT_FORM = mtypes.ClientCapabilities(
    elicitation=mtypes.ElicitationCapability(form=mtypes.FormElicitationCapability())
)

BridgeMode = Literal["input_required", "inline"]


def declined_result(req: Request, answer: Optional[Answer] = None) -> ToolResult:
    return ToolResult(output=declined_text(req.prompt, answer), is_error=True)


def unresolved_result(req: Request) -> ToolResult:
    return ToolResult(output=f"unresolved: {req.prompt}", is_error=True)


def elicitation_schema(req: Request) -> Optional[dict[str, Any]]:
    """The form schema to ask with: `data["schema"]` (made a flat object schema), or None.

    No schema ⇒ an empty form (the user can still accept or decline). A schema whose `type` is
    not `object`, or whose `properties` is not a mapping, cannot be an elicitation form ⇒ None.
    """
    if is_approval_request(req):
        return dict(APPROVAL_FORM)
    schema = (req.data or {}).get("schema") if isinstance(req.data, Mapping) else None
    if schema is None:
        return {"type": "object", "properties": {}}
    if not isinstance(schema, Mapping) or schema.get("type", "object") != "object":
        return None
    props = schema.get("properties", {})
    if not isinstance(props, Mapping):
        return None
    return {**schema, "type": "object", "properties": dict(props)}


def _client_can_elicit(ctx: Any) -> bool:
    try:
        return bool(ctx.session.check_client_capability(_ELICIT_FORM))
    except Exception:
        return False


def bridge_mode(ctx: Any, req: Request) -> Optional[BridgeMode]:
    """How this request's suspension can reach the caller, or None to flatten it."""
    if req.kind not in BRIDGED_KINDS or not _client_can_elicit(ctx):
        return None
    if getattr(ctx, "protocol_version", None) in MODERN_PROTOCOL_VERSIONS:
        return "input_required"
    if getattr(ctx.session, "can_send_request", False):
        return "inline"
    return None


def _form_request(req: Request, schema: dict[str, Any]) -> mtypes.ElicitRequest:
    return mtypes.ElicitRequest(
        method="elicitation/create",
        params=mtypes.ElicitRequestFormParams(mode="form", message=req.prompt, requested_schema=schema),
    )


def input_required(tool_name: str, req: Request, version: str) -> Optional[mtypes.InputRequiredResult]:
    """The `InputRequiredResult` asking for `req`, or None if MCP cannot carry its schema."""
    schema = elicitation_schema(req)
    if schema is None:
        return None
    state = json.dumps({"v": _STATE_VERSION, "tool": tool_name, "request": dataclasses.asdict(req)})
    try:
        result = mtypes.InputRequiredResult(input_requests={req.id: _form_request(req, schema)}, request_state=state)
        # Validate now, against the revision in use: an invalid shape would otherwise become a
        # bare "Handler returned an invalid result" error for the caller.
        wire_methods.serialize_server_result(
            "tools/call", version, result.model_dump(by_alias=True, mode="json", exclude_none=True)
        )
    except (ValidationError, KeyError, ValueError):
        return None
    return result


def _approval_answer(req: Request, content: Mapping[str, Any], by: Optional[str]) -> Answer:
    """An accepted approval form as an `Answer` (an unreadable edit rejects, saying why)."""
    message = content.get("message") if isinstance(content.get("message"), str) and content.get("message") else None
    always = content.get("always") is True
    if content.get("decision") != "approve":
        return Answer(id=req.id, ok=False, reason="declined", message=message, always=always, by=by, via="mcp")
    raw = content.get("arguments")
    arguments = None
    if isinstance(raw, str) and raw.strip():
        try:
            arguments = json.loads(raw)
        except ValueError:
            arguments = None
        if not isinstance(arguments, dict):
            return Answer(id=req.id, ok=False, reason="declined", by=by, via="mcp",
                          message="the edited arguments were not a JSON object, so the call was not approved")
    return Answer(id=req.id, ok=True, message=message, arguments=arguments, always=always, by=by, via="mcp")


def _answer(req: Request, response: Any, by: Optional[str] = None) -> Answer:
    if isinstance(response, mtypes.ElicitResult) and response.action == "accept":
        if is_approval_request(req):
            return _approval_answer(req, dict(response.content or {}), by)
        return Answer(id=req.id, ok=True, data=dict(response.content or {}), by=by, via="mcp")
    declined = isinstance(response, mtypes.ElicitResult) and response.action == "decline"
    return Answer(id=req.id, ok=False, reason="declined" if declined else "cancelled", by=by, via="mcp")


def resumed_round(tool_name: str, params: mtypes.CallToolRequestParams,
                  by: Optional[str] = None) -> Optional[tuple[Request, Answer]]:
    """For a retried call (`requestState` present): the original `Request` and the caller's `Answer`.

    The state reaching here was unsealed and checked by the SDK boundary; a state that is still
    not ours (another server's, or from a different tool) is an invalid-params error.
    """
    if params.request_state is None:
        return None
    try:
        state = json.loads(params.request_state)
        if state.get("v") != _STATE_VERSION or state.get("tool") != tool_name:
            raise ToolnexusValueError("state names another tool")
        req = Request.from_dict(state["request"])
    except (ValueError, TypeError, KeyError, AttributeError):
        raise MCPError(code=mtypes.INVALID_PARAMS, message="Invalid requestState") from None
    response = (params.input_responses or {}).get(req.id)
    return req, _answer(req, response, by)


async def ask_inline(ctx: Any, req: Request, by: Optional[str] = None) -> Optional[Answer]:
    """Ask over the back channel (`elicitation/create` mid-call); None if the schema can't be sent."""
    schema = elicitation_schema(req)
    if schema is None:
        return None
    response = await ctx.session.elicit_form(strict_text(req.prompt), strict_value(schema),
                                             related_request_id=ctx.request_id)
    return _answer(req, response, by)
