"""OpenAPI 3.x import: every operation of a document becomes one HTTP `Tool` (source `"http"`).

`await http_tools_from_openapi(spec, base_url=None, headers=None)` accepts a parsed dict, a file
path (`.json`, `.yaml`, `.yml`; other suffixes try JSON, then YAML) or an `http(s)://` URL; files
are read and parsed in a worker thread. Requests share the pooled client and result mapping of
`http_tool` (see `toolnexus.http`), with `result_mode="text"`.

Rules, in the order they apply:
- Tool name: `sanitize(operationId)`, else `sanitize(f"{method}_{path}")` (`get__pets__id_`); a name
  already taken in this import gets `_2`, `_3`, ... with a warning. Description: `summary` and
  `description` joined by a blank line, else `"{METHOD} {path}"`.
- Base URL: the `base_url` argument, else the first `servers` entry of the operation, its path
  item or the document (server variables take their defaults). A relative server URL resolves
  against the spec's URL; for a dict or file it needs `base_url=` (else `ValueError`).
- Input schema `{"type": "object", "properties", "additionalProperties": False, "required"}`:
  path, query, header and cookie parameters (path-level ones overridden by operation-level ones
  with the same name and location) under their names; a name used twice gets `{in}_{name}` for
  the later one. Path parameters are always required, others when `required: true`. Header
  parameters `Accept`, `Content-Type` and `Authorization` are ignored, as OpenAPI says.
- Request body: the first JSON media type (`application/json`, `*/*+json`), else
  `application/x-www-form-urlencoded`. If its schema is an object with `properties` and none of
  them clashes with a parameter name, the (non-`readOnly`) properties are merged in under their
  names; otherwise the whole body is one property `body` (`request_body` if `body` is taken).
  Body fields are required only when the request body is `required: true`. Other media types
  (multipart, binary) are not supported: a required one skips the operation, an optional one is
  left out, both with a warning.
- `$ref`: local references (`#/...`) are inlined everywhere, with a cycle guard: a reference back
  into a schema being expanded becomes `{"type": <its type>}` (or `{}`). An external reference
  in a schema becomes `{}` with a warning; elsewhere it is a `ValueError`. YAML dates in schemas
  become ISO strings so schemas stay JSON.
- Calling: path values are percent-encoded (lists comma-joined); query values follow the
  parameter's `style`/`explode` (form+explode repeats the name, `deepObject` writes `name[key]`);
  `None` is omitted; non-string scalars are written as JSON. Unknown argument names and missing
  path values are error results (nothing is sent). `headers` (with `${ENV}` expansion) are sent
  on every call and win over header parameters of the same name.

Reading the document (loading, version check, `$ref`) lives in `toolnexus._openapi_doc`.

Not done: security schemes (pass credentials through `headers`), external `$ref` documents,
Swagger 2.0, response schemas, callbacks and links.
"""

from __future__ import annotations

import json
import os
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any, Optional
from urllib.parse import quote, urljoin

from . import _diag
from ._http_exchange import (
    DEFAULT_MAX_BODY_BYTES,
    OutgoingRequest,
    append_query,
    argument_error,
    check_limits,
    encode_body,
    expand_env_headers,
    header_secrets,
    query_pairs,
    render_scalar,
    send,
)
from ._openapi_doc import Refs, check_version, load_document
from .errors import ConfigError, ToolnexusError
from .types import JSONSchema, Tool, ToolContext, ToolResult, sanitize

__all__ = ["http_tools_from_openapi"]

_METHODS = ("get", "put", "post", "delete", "options", "head", "patch", "trace")
_IGNORED_HEADERS = ("accept", "content-type", "authorization")

# ---------------------------------------------------------------------------- operations


class _SkipOperation(ToolnexusError):
    """The operation cannot become a tool (already reported)."""


@dataclass
class _Param:
    prop: str  # property name in the input schema
    name: str  # name on the wire
    location: str  # path | query | header | cookie
    style: str
    explode: bool
    as_json: bool  # declared through `content` instead of `schema`


@dataclass
class _Body:
    mode: str  # "json" | "form"
    fields: list[str] = field(default_factory=list)  # merged properties, or
    whole: Optional[str] = None  # the one property holding the whole body


def _simple(value: Any, explode: bool) -> str:
    """OpenAPI `simple` style (path and header values)."""
    if isinstance(value, (list, tuple)):
        return ",".join(render_scalar(v) for v in value)
    if isinstance(value, Mapping):
        sep = "=" if explode else ","
        return ",".join(f"{k}{sep}{render_scalar(v)}" for k, v in value.items())
    return render_scalar(value)


def _query_items(p: _Param, value: Any) -> list[tuple[str, Any]]:
    if p.as_json:
        return [(p.name, json.dumps(value, separators=(",", ":")))]
    if isinstance(value, Mapping):
        if p.style == "deepObject":
            return [(f"{p.name}[{k}]", v) for k, v in value.items()]
        if p.explode:
            return list(value.items())
        return [(p.name, _simple(value, False))]
    if isinstance(value, (list, tuple)) and not p.explode:
        sep = {"spaceDelimited": " ", "pipeDelimited": "|"}.get(p.style, ",")
        return [(p.name, sep.join(render_scalar(v) for v in value if v is not None))]
    return [(p.name, value)]


@dataclass(frozen=True)
class _Options:
    """The caller's options of one import, shared by all its operations."""

    base_url: Optional[str]
    headers: Optional[dict[str, str]]
    timeout: Optional[float]
    max_body_bytes: Optional[int]


@dataclass
class _Operation:
    name: str
    method: str
    url: str  # base URL + path template
    params: list[_Param]
    body: Optional[_Body]
    properties: list[str]
    options: _Options

    def _encode(self, args: Mapping[str, Any], headers: dict[str, str]) -> Optional[bytes]:
        body = self.body
        if body is None:
            return None
        if body.whole is not None:
            if args.get(body.whole) is None:
                return None
            payload = args[body.whole]
        else:
            payload = {k: args[k] for k in body.fields if k in args}
            if not payload:
                return None
        return encode_body(body.mode, payload, headers)

    async def execute(self, args: Optional[dict[str, Any]] = None, ctx: Optional[ToolContext] = None) -> ToolResult:
        if args is not None and not isinstance(args, Mapping):
            return argument_error(f"arguments must be a JSON object, got {type(args).__name__}")
        args = dict(args or {})
        unknown = [k for k in args if k not in self.properties]
        if unknown:
            expected = ", ".join(self.properties) or "(none)"
            return argument_error(f'unknown argument "{unknown[0]}"; expected: {expected}')
        url, query, param_headers, cookies = self.url, [], {}, []
        for p in self.params:
            value = args.get(p.prop)
            if value is None:
                if p.location == "path":
                    return argument_error(f'missing argument "{p.prop}" for the path parameter {{{p.name}}}')
                continue
            if p.location == "query":
                query.extend(_query_items(p, value))
                continue
            text = json.dumps(value, separators=(",", ":")) if p.as_json else _simple(value, p.explode)
            if p.location == "path":
                url = url.replace("{" + p.name + "}", quote(text, safe=""))
            elif p.location == "header":
                param_headers[p.name] = text
            else:
                cookies.append(f"{p.name}={quote(text, safe='')}")
        headers = expand_env_headers(self.options.headers, self.name)
        present = {k.lower() for k in headers}
        if cookies:
            param_headers["Cookie"] = "; ".join(cookies)
        headers.update({k: v for k, v in param_headers.items() if k.lower() not in present})
        try:
            content = self._encode(args, headers)
        except (TypeError, ValueError) as exc:
            return argument_error(f"request body cannot be encoded: {exc}")
        return await send(
            OutgoingRequest(self.method, append_query(url, query_pairs(query)), headers, content,
                            header_secrets(self.options.headers, headers)),
            ctx=ctx,
            timeout=self.options.timeout,
            max_body_bytes=self.options.max_body_bytes,
            result_mode="text",
        )


def _server_url(servers: Any, origin: Optional[str]) -> Optional[str]:
    if not (isinstance(servers, list) and servers and isinstance(servers[0], Mapping)):
        servers = [{"url": "/"}]
    server = servers[0]
    url = str(server.get("url") or "/")
    for var, spec in (server.get("variables") or {}).items():
        if isinstance(spec, Mapping) and "default" in spec:
            url = url.replace("{" + str(var) + "}", str(spec["default"]))
    if url.startswith(("http://", "https://")):
        return url
    return urljoin(origin, url) if origin else None


def _free_name(preferred: str, taken: Mapping[str, Any] | set[str], fallback: str) -> str:
    name = preferred if preferred not in taken else fallback
    while name in taken:
        name = "_" + name
    return name


class _Importer:
    """Builds the tools of one document."""

    def __init__(self, doc: Mapping[str, Any], where: str, origin: Optional[str], options: _Options) -> None:
        self.refs = Refs(doc, where)
        self.doc = doc
        self.where = where
        self.origin = origin
        self.options = options
        self.names: set[str] = set()

    def tools(self) -> list[Tool]:
        paths = self.doc.get("paths") or {}
        if not isinstance(paths, Mapping):
            raise ConfigError(f'OpenAPI spec {self.where}: "paths" must be a mapping')
        out: list[Tool] = []
        for path, item in paths.items():
            item = self.refs.deref(item, f"paths/{path}")
            if not isinstance(item, Mapping):
                raise ConfigError(f"OpenAPI spec {self.where}: path item {path!r} must be a mapping")
            for method, op in item.items():
                if method in _METHODS and isinstance(op, Mapping):
                    tool = self._tool(str(path), method, item, op)
                    if tool is not None:
                        out.append(tool)
        return out

    def _name(self, op: Mapping[str, Any], method: str, path: str) -> str:
        op_id = op.get("operationId")
        base = sanitize(str(op_id) if op_id else f"{method}_{path}")
        name, n = base, 1
        while name in self.names:
            n += 1
            name = f"{base}_{n}"
        if name != base:
            _diag.warn(
                f'[toolnexus] OpenAPI spec {self.where}: duplicate tool name "{base}" \u2014 renamed to "{name}"'
            )
        self.names.add(name)
        return name

    def _base_url(self, method: str, path: str, item: Mapping[str, Any], op: Mapping[str, Any]) -> str:
        if self.options.base_url:
            return str(self.options.base_url)
        servers = op.get("servers") or item.get("servers") or self.doc.get("servers")
        url = _server_url(servers, self.origin)
        if url is None:
            raise ConfigError(
                f"OpenAPI spec {self.where}: {method.upper()} {path} has no absolute server URL; pass base_url="
            )
        return url

    def _parameters(
        self, item: Mapping[str, Any], op: Mapping[str, Any], path: str, at: str
    ) -> list[Mapping[str, Any]]:
        """Path-item parameters overridden by operation parameters with the same name and location."""
        merged: dict[tuple[str, str], Mapping[str, Any]] = {}
        for level, params in ((path, item.get("parameters")), (at, op.get("parameters"))):
            for i, raw in enumerate(params or []):
                where = f"{level}/parameters/{i}"
                p = self.refs.deref(raw, where)
                if not (isinstance(p, Mapping) and isinstance(p.get("name"), str) and p.get("in")):
                    raise ConfigError(f"OpenAPI spec {self.where}: parameter {where} needs a string name and an 'in'")
                merged[(p["in"], p["name"])] = p
        return list(merged.values())

    def _tool(self, path: str, method: str, item: Mapping[str, Any], op: Mapping[str, Any]) -> Optional[Tool]:
        at = f"{method.upper()} {path}"
        props: dict[str, Any] = {}
        required: list[str] = []
        params: list[_Param] = []
        for p in self._parameters(item, op, path, at):
            location, name = p["in"], p["name"]
            if location not in ("path", "query", "header", "cookie") or (
                location == "header" and name.lower() in _IGNORED_HEADERS
            ):
                continue
            content = p.get("content")
            as_json = isinstance(content, Mapping) and bool(content)
            media: Any = next(iter(content.values()), {}) if isinstance(content, Mapping) and content else {}
            raw_schema = media.get("schema") if as_json and isinstance(media, Mapping) else p.get("schema")
            schema = self.refs.schema(raw_schema or {"type": "string"}, f"{at}/{name}")
            if p.get("description") and isinstance(schema, dict) and "description" not in schema:
                schema = {**schema, "description": str(p["description"])}
            prop = name if name not in props else _free_name(f"{location}_{name}", props, f"{location}_{name}_")
            props[prop] = schema
            if location == "path" or p.get("required"):
                required.append(prop)
            style = str(p.get("style") or ("form" if location in ("query", "cookie") else "simple"))
            explode = bool(p.get("explode", style == "form"))
            params.append(_Param(prop, name, location, style, explode, as_json))
        try:
            body = self._body(op, at, props, required)
        except _SkipOperation:
            return None
        op_desc = [str(op[k]).strip() for k in ("summary", "description") if op.get(k)]
        description = "\n\n".join(dict.fromkeys(op_desc)) or at
        input_schema: JSONSchema = {"type": "object", "properties": props, "additionalProperties": False}
        if required:
            input_schema["required"] = required
        operation = _Operation(
            name=self._name(op, method, path),
            method=method.upper(),
            url=self._base_url(method, path, item, op).rstrip("/") + path,
            params=params,
            body=body,
            properties=list(props),
            options=self.options,
        )
        return Tool(operation.name, description, input_schema, "http", operation.execute)

    def _body(self, op: Mapping[str, Any], at: str, props: dict[str, Any], required: list[str]) -> Optional[_Body]:
        """The request body binding, also adding its properties to `props` and `required`."""
        if op.get("requestBody") is None:
            return None
        rb = self.refs.deref(op["requestBody"], f"{at}/requestBody")
        content = rb.get("content") if isinstance(rb, Mapping) else None
        content = content if isinstance(content, Mapping) else {}
        types = {str(k).split(";")[0].strip().lower(): v for k, v in content.items()}
        mode, media = None, None
        json_types = [t for t in types if t == "application/json" or t.endswith("+json")]
        if json_types:
            mode, media = "json", types[json_types[0]]
        elif "application/x-www-form-urlencoded" in types:
            mode, media = "form", types["application/x-www-form-urlencoded"]
        is_required = bool(rb.get("required"))
        if mode is None:
            if not types:
                return None
            action = "operation skipped" if is_required else "body left out"
            _diag.warn(
                f"[toolnexus] OpenAPI spec {self.where}: {at} request body type {next(iter(types))}"
                f" is not supported \u2014 {action}"
            )
            if is_required:
                raise _SkipOperation(at)
            return None
        schema = self.refs.schema((media or {}).get("schema") or {}, f"{at}/requestBody")
        fields = (
            schema.get("properties") if isinstance(schema, dict) and schema.get("type", "object") == "object" else None
        )
        if isinstance(fields, Mapping) and fields and not set(fields) & set(props):
            writable = {k: v for k, v in fields.items() if not (isinstance(v, Mapping) and v.get("readOnly"))}
            props.update(writable)
            if is_required:
                required.extend(k for k in schema.get("required") or [] if k in writable)
            return _Body(mode, fields=list(writable))
        whole = _free_name("body", props, "request_body")
        props[whole] = schema
        if is_required:
            required.append(whole)
        return _Body(mode, whole=whole)


async def http_tools_from_openapi(
    spec: Mapping[str, Any] | str | os.PathLike[str],
    *,
    base_url: Optional[str] = None,
    headers: Optional[dict[str, str]] = None,
    timeout: Optional[float] = None,
    max_body_bytes: Optional[int] = DEFAULT_MAX_BODY_BYTES,
) -> list[Tool]:
    """One `Tool` per operation of an OpenAPI 3.x document (dict, file path or http(s) URL).

    `timeout` and `max_body_bytes` apply to every call (as for `http_tool`) and `timeout` also to
    downloading the spec. Raises `ValueError` for an unreadable or invalid document.
    """
    check_limits("http_tools_from_openapi", timeout, max_body_bytes)
    doc, origin, where = await load_document(spec, timeout)
    check_version(doc, where)
    options = _Options(base_url, headers, timeout, max_body_bytes)
    return _Importer(doc, where, origin, options).tools()
