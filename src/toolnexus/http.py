"""HTTP tools: one HTTP endpoint as one `Tool` (`http_tool`), or a whole OpenAPI 3.x document as
many (`http_tools_from_openapi`, implemented in `toolnexus.openapi`).

Requests go through one keep-alive pooled `httpx.AsyncClient` per event loop (not stdlib urllib in
a thread); `aclose_shared_clients()` closes the running loop's client. Redirects are followed,
proxy environment variables are honoured, cookies are never stored.

Per call, on a copy of the arguments:
1. `method` is upper-cased.
2. `{name}` placeholders in `url` take `quote(str(value), safe="")` and leave the arguments; a
   missing or null placeholder argument is an error result naming it (nothing is sent).
3. Remaining arguments named in `query` go to the query string; for GET **and HEAD** all of them do.
4. Header values expand `${VAR}` from the environment at call time. An unset variable becomes `""`
   and is warned about once per variable name; header values are never logged.
5. Other methods send the remaining arguments (if any) as the body: `json` (`json.dumps`),
   `form` (urlencoded) or `raw` (only the `body` argument, as text). A default `Content-Type`
   (`application/json`, `application/x-www-form-urlencoded`, `text/plain; charset=utf-8`) is
   added unless the headers set one under any capitalisation.
6. Timeout: `ctx.timeout` > `timeout=` > `DEFAULT_TIMEOUT`, as an overall deadline for the exchange.
   Cancelling the calling task aborts the request, and so does `ctx.signal` firing (an
   `asyncio.Event` at once; other signals are checked every 20 ms, see `toolnexus._abort`).

Results: 2xx -> the body (`text`), `"{status}\\n{body}"` (`status+text`) or the body re-serialised
with `json.dumps` (`json`), `metadata={"status": status}`; non-2xx -> `HTTP {status}: {body}` as an
error. Bodies are decoded with the response charset (UTF-8 if absent or unknown, bad bytes
replaced) and capped at `max_body_bytes` (default 1 MiB, `None` = no cap) with a truncation marker.
Transport failures have stable texts and `metadata["error"]` (see `toolnexus._http_exchange`).

Choices beyond the pinned baseline:
- #22 raw bodies default to `text/plain; charset=utf-8` (the stdlib's form-urlencoded label was
  an accident of urllib and misleads servers that parse forms).
- #24 query and form values are written as JSON scalars (`true`, `3.0`), `None` is omitted and a
  list repeats the name per element (`?tag=a&tag=b`); Python reprs like `True`/`None` never reach
  the wire. Strings are sent verbatim.
- #30 is NOT applied: `json` mode still answers a non-JSON 2xx body with the body as a JSON string,
  so the output of `json` mode is always valid JSON (no new error path for successful calls).
- The default `input_schema` lists each `{placeholder}` and `query` name as a required string
  property; with neither it is the pinned `{"type": "object", "properties": {},
  "additionalProperties": False}`.
- `body`/`result_mode` typos, a non-positive `timeout` or `max_body_bytes` raise `ValueError` at
  construction.

Credentials (see `toolnexus._http_exchange`): a redirect to another origin carries no
credential header, and the tool's output masks the values of its credential headers (and of every
`${ENV}` header) if the server echoes them back.

Not done here: authentication flows, retries, streaming responses, multipart uploads.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from typing import Any, Optional
from urllib.parse import quote

from ._http_exchange import (
    DEFAULT_MAX_BODY_BYTES,
    DEFAULT_TIMEOUT,
    RESULT_MODES,
    OutgoingRequest,
    aclose_shared_clients,
    append_query,
    argument_error,
    check_limits,
    encode_body,
    expand_env_headers,
    header_secrets,
    query_pairs,
    send,
    shared_client,
)
from .errors import ConfigError
from .openapi import http_tools_from_openapi
from .types import JSONSchema, Tool, ToolContext, ToolResult

__all__ = [
    "DEFAULT_TIMEOUT",
    "DEFAULT_MAX_BODY_BYTES",
    "BODY_MODES",
    "RESULT_MODES",
    "http_tool",
    "http_tools_from_openapi",
    "shared_client",
    "aclose_shared_clients",
]

BODY_MODES = ("json", "form", "raw")
_PLACEHOLDER = re.compile(r"\{(\w+)\}")
_BODYLESS = ("GET", "HEAD")


def _default_schema(placeholders: list[str], query: list[str]) -> JSONSchema:
    names = list(dict.fromkeys([*placeholders, *query]))
    schema: JSONSchema = {
        "type": "object",
        "properties": {n: {"type": "string"} for n in names},
        "additionalProperties": False,
    }
    if names:
        schema["required"] = names
    return schema


def http_tool(
    *,
    name: str,
    description: str,
    method: str,
    url: str,
    headers: Optional[dict[str, str]] = None,
    query: Optional[list[str]] = None,
    body: str = "json",
    input_schema: Optional[JSONSchema] = None,
    timeout: Optional[float] = None,
    result_mode: str = "text",
    max_body_bytes: Optional[int] = DEFAULT_MAX_BODY_BYTES,
) -> Tool:
    """A `Tool` (source `"http"`) that calls one HTTP endpoint; no I/O happens here.

    Raises `ValueError` for an unknown `body` or `result_mode`, or a non-positive limit.
    """
    label = f'http_tool "{name}"'
    if body not in BODY_MODES:
        raise ConfigError(f'{label}: body must be one of "json", "form", "raw", got {body!r}')
    if result_mode not in RESULT_MODES:
        raise ConfigError(f'{label}: result_mode must be one of "text", "json", "status+text", got {result_mode!r}')
    check_limits(label, timeout, max_body_bytes)
    query_names = list(query or [])
    verb = method.upper()
    placeholders = list(dict.fromkeys(_PLACEHOLDER.findall(url)))
    schema = input_schema if input_schema is not None else _default_schema(placeholders, query_names)

    async def execute(args: Optional[dict[str, Any]] = None, ctx: Optional[ToolContext] = None) -> ToolResult:
        if args is not None and not isinstance(args, Mapping):
            return argument_error(f"arguments must be a JSON object, got {type(args).__name__}")
        remaining = dict(args or {})
        missing = [key for key in placeholders if remaining.get(key) is None]
        if missing:
            return argument_error(f'missing argument "{missing[0]}" for the URL placeholder {{{missing[0]}}}')
        values = {key: quote(str(remaining.pop(key)), safe="") for key in placeholders}
        target = _PLACEHOLDER.sub(lambda m: values[m.group(1)], url)
        in_query = [k for k in remaining if verb in _BODYLESS or k in query_names]
        target = append_query(target, query_pairs((k, remaining.pop(k)) for k in in_query))
        request_headers = expand_env_headers(headers, name)
        content = None
        if verb not in _BODYLESS and remaining:
            try:
                payload = str(remaining.get("body", "")) if body == "raw" else remaining
                content = encode_body(body, payload, request_headers)
            except (TypeError, ValueError) as exc:
                return argument_error(f"arguments cannot be encoded as a {body} body: {exc}")
        return await send(
            OutgoingRequest(verb, target, request_headers, content, header_secrets(headers, request_headers)),
            ctx=ctx,
            timeout=timeout,
            max_body_bytes=max_body_bytes,
            result_mode=result_mode,
        )

    return Tool(name=name, description=description, input_schema=schema, source="http", execute=execute)
