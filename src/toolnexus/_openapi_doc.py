"""Reading an OpenAPI 3.x document for `toolnexus.openapi`: load it, check its version, resolve `$ref`s.

`load_document` accepts a parsed mapping, a file path (`.json`, `.yaml`, `.yml`; other suffixes
try JSON, then YAML; read and parsed in a worker thread) or an `http(s)://` URL (fetched through
the shared HTTP client, capped at 32 MiB). `check_version` refuses Swagger 2.0 and anything not
3.x. `Refs` inlines local `$ref`s (`#/...`) with a cycle guard; an external reference in a schema
becomes `{}` with a warning, elsewhere it is a `ValueError`. Every error names the document.
Not here: turning operations into tools (`toolnexus.openapi`).
"""

from __future__ import annotations

import asyncio
import datetime
import json
import os
import stat
from collections.abc import Mapping
from pathlib import Path
from typing import Any, Optional
from urllib.parse import unquote

import yaml

from . import _diag
from ._http_exchange import OutgoingRequest, send
from .errors import ConfigError, ToolnexusTypeError

_SPEC_MAX_BYTES = 32 << 20



def _parse(text: str, suffix: str, where: str) -> Mapping[str, Any]:
    try:
        if suffix == ".json":
            doc = json.loads(text)
        elif suffix in (".yaml", ".yml"):
            doc = yaml.safe_load(text)
        else:
            try:
                doc = json.loads(text)
            except ValueError:
                doc = yaml.safe_load(text)
    except (ValueError, yaml.YAMLError) as exc:
        raise ConfigError(f"OpenAPI spec {where}: cannot parse it: {exc}") from exc
    except RecursionError:
        raise ConfigError(f"OpenAPI spec {where}: cannot parse it: nested too deeply") from None
    if not isinstance(doc, Mapping):
        raise ConfigError(f"OpenAPI spec {where}: expected a mapping at the top, got {type(doc).__name__}")
    return doc


async def _fetch(url: str, timeout: Optional[float]) -> str:
    result = await send(
        OutgoingRequest("GET", url, {"Accept": "application/json, application/yaml;q=0.9, */*;q=0.5"}),
        timeout=timeout,
        max_body_bytes=_SPEC_MAX_BYTES,
        result_mode="text",
    )
    if result.is_error:
        raise ConfigError(f"OpenAPI spec {url}: download failed: {result.output.splitlines()[0][:200]}")
    if (result.metadata or {}).get("truncated"):
        raise ConfigError(f"OpenAPI spec {url}: larger than {_SPEC_MAX_BYTES} bytes")
    return result.output


def _read_text(path: str) -> str:
    if "\0" in path:
        raise ConfigError(f"OpenAPI spec {path!r}: a file path cannot contain a NUL character")
    try:
        info = os.stat(path)
        if not stat.S_ISREG(info.st_mode):
            raise ConfigError(f"OpenAPI spec {path}: not a regular file")
        if info.st_size > _SPEC_MAX_BYTES:
            raise ConfigError(f"OpenAPI spec {path}: larger than {_SPEC_MAX_BYTES} bytes")
        return Path(path).read_text(encoding="utf-8-sig")
    except UnicodeDecodeError as exc:
        raise ConfigError(f"OpenAPI spec {path}: not UTF-8 text ({exc.reason} at byte {exc.start})") from exc
    except OSError as exc:
        raise ConfigError(f"OpenAPI spec {path}: cannot read the file: {exc.strerror or exc}") from exc


async def load_document(spec: Any, timeout: Optional[float]) -> tuple[Mapping[str, Any], Optional[str], str]:
    """The document, the URL it came from (for relative servers) and a name for messages."""
    if isinstance(spec, Mapping):
        return spec, None, "(dict)"
    if not isinstance(spec, (str, os.PathLike)):
        raise ToolnexusTypeError(
            f"OpenAPI spec must be a dict, a file path or an http(s) URL, got {type(spec).__name__}"
        )
    source = os.fspath(spec)
    if isinstance(source, bytes):
        source = os.fsdecode(source)
    if source.startswith(("http://", "https://")):
        text = await _fetch(source, timeout)
        suffix = Path(source.split("?", 1)[0]).suffix.lower()
        return await asyncio.to_thread(_parse, text, suffix, source), source, source
    suffix = Path(source).suffix.lower()
    return await asyncio.to_thread(lambda: _parse(_read_text(source), suffix, source)), None, source


def check_version(doc: Mapping[str, Any], where: str) -> None:
    version = doc.get("openapi")
    if version is None and "swagger" in doc:
        raise ConfigError(f"OpenAPI spec {where}: Swagger 2.0 is not supported; convert it to OpenAPI 3.x")
    if isinstance(version, (int, float)) and not isinstance(version, bool):
        version = str(version)  # `openapi: 3.0` unquoted in YAML
    if not isinstance(version, str) or not version.startswith("3."):
        raise ConfigError(f'OpenAPI spec {where}: not an OpenAPI 3.x document ("openapi" is {version!r})')


# ---------------------------------------------------------------------------- $ref


class Refs:
    """Resolves local `$ref`s of one document; `where` names the document in errors."""

    def __init__(self, doc: Mapping[str, Any], where: str) -> None:
        self.doc = doc
        self.where = where

    def lookup(self, ref: str, at: str) -> Any:
        node: Any = self.doc
        tokens = ref[2:].split("/") if ref.startswith("#/") else []
        for raw in tokens:
            token = unquote(raw).replace("~1", "/").replace("~0", "~")
            if isinstance(node, Mapping) and token in node:
                node = node[token]
            elif isinstance(node, list) and token.isdigit() and int(token) < len(node):
                node = node[int(token)]
            else:
                raise ConfigError(f"OpenAPI spec {self.where}: $ref {ref!r} at {at} does not resolve")
        return node

    def deref(self, node: Any, at: str) -> Any:
        """Follow `$ref` chains of a non-schema object (parameter, request body, path item)."""
        seen: list[str] = []
        while isinstance(node, Mapping) and isinstance(node.get("$ref"), str):
            ref = node["$ref"]
            if not ref.startswith("#"):
                raise ConfigError(f"OpenAPI spec {self.where}: external $ref {ref!r} at {at} is not supported")
            if ref in seen:
                raise ConfigError(f"OpenAPI spec {self.where}: $ref cycle at {at}: {' -> '.join([*seen, ref])}")
            seen.append(ref)
            node = self.lookup(ref, at)
        return node

    def schema(self, node: Any, at: str, stack: tuple[str, ...] = ()) -> Any:
        """A JSON-only copy of `node` with every local `$ref` inlined."""
        if isinstance(node, Mapping):
            ref = node.get("$ref")
            if isinstance(ref, str):
                return self._inline(node, ref, at, stack)
            return {str(k): self.schema(v, f"{at}/{k}", stack) for k, v in node.items()}
        if isinstance(node, list):
            return [self.schema(v, f"{at}/{i}", stack) for i, v in enumerate(node)]
        if isinstance(node, (datetime.date, datetime.time)):
            return node.isoformat()
        return node

    def _inline(self, node: Mapping[str, Any], ref: str, at: str, stack: tuple[str, ...]) -> Any:
        if not ref.startswith("#"):
            _diag.warn(f"[toolnexus] OpenAPI spec {self.where}: external $ref {ref!r} at {at} left as {{}}")
            return {}
        target = self.lookup(ref, at)
        if ref in stack:
            kind = target.get("type") if isinstance(target, Mapping) else None
            return {"type": kind} if isinstance(kind, str) else {}
        resolved = self.schema(target, ref, (*stack, ref))
        siblings = {str(k): self.schema(v, f"{at}/{k}", stack) for k, v in node.items() if k != "$ref"}
        return {**resolved, **siblings} if isinstance(resolved, dict) else resolved
