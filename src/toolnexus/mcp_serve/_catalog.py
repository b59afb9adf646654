"""The `resources/*`, `prompts/*` and `completion/complete` handlers over live resources and prompts.

What is served is read on every request from a list or a provider (a zero-argument function,
sync or async), like the tools: a resource added later is listed. The first resource to claim a
URI and the first prompt to claim a name keep it (a later one is warned about once). A read
finds the static resource with that exact URI first, then the first template that matches it.

Errors, as JSON-RPC errors: an unknown resource is `-32002 Resource not found: <uri>`; an unknown
prompt, or prompt arguments that are missing, unknown or not strings, `-32602` with the reason; a
resource or prompt function that raises, `-32603` naming it and the error. Nothing is listed
page by page (no cursor): the lists are the host's own, not a remote's.
"""

from __future__ import annotations

import base64
import inspect
from collections.abc import Callable
from typing import Any, Optional, Union

import mcp_types as mtypes
from mcp.shared.exceptions import MCPError

from .._diag import logger, warn_once
from ..resources import MAX_COMPLETIONS, Prompt, PromptError, Resource, ResourceContent, ResourceError, complete_value
from ._content import prompt_content
from ._peers import Peers

RESOURCE_NOT_FOUND = -32002
ResourcesLike = Union[list[Resource], Callable[[], Any]]
PromptsLike = Union[list[Prompt], Callable[[], Any]]


async def _read_live(source: Any) -> list[Any]:
    if source is None:
        return []
    value = source() if callable(source) else source
    if inspect.isawaitable(value):
        value = await value
    return list(value or [])


def _first_claims(items: list[Any], key: Callable[[Any], str], what: str) -> list[Any]:
    seen: dict[str, Any] = {}
    for item in items:
        name = key(item)
        if name in seen:
            warn_once(f"mcp-serve-{what}:{name}",
                      f'[toolnexus] MCP serve: two {what}s claim "{name}" — keeping the first')
        else:
            seen[name] = item
    return list(seen.values())


def _wire_contents(got: ResourceContent) -> Union[mtypes.TextResourceContents, mtypes.BlobResourceContents]:
    if got.text is not None:
        return mtypes.TextResourceContents(uri=got.uri, mime_type=got.mime_type, text=got.text)
    blob = base64.b64encode(got.data or b"").decode("ascii")
    return mtypes.BlobResourceContents(uri=got.uri, mime_type=got.mime_type, blob=blob)


class Catalog:
    """The handlers, over `resources` and `prompts` (None: that part is not served at all)."""

    def __init__(self, resources: Optional[ResourcesLike], prompts: Optional[PromptsLike], peers: Peers) -> None:
        self.serves_resources = resources is not None
        self.serves_prompts = prompts is not None
        self._resources = resources
        self._prompts = prompts
        self._peers = peers

    async def resources(self) -> list[Resource]:
        return _first_claims(await _read_live(self._resources), lambda r: r.uri, "resource")

    async def prompts(self) -> list[Prompt]:
        return _first_claims(await _read_live(self._prompts), lambda p: p.name, "prompt")

    async def _find(self, uri: str) -> Resource:
        listed = await self.resources()
        found = next((r for r in listed if not r.is_template and r.uri == uri), None)
        found = found or next((r for r in listed if r.is_template and r.match(uri) is not None), None)
        if found is None:
            raise MCPError(code=RESOURCE_NOT_FOUND, message=f"Resource not found: {uri}", data={"uri": uri})
        return found

    async def _prompt(self, name: str) -> Prompt:
        found = next((p for p in await self.prompts() if p.name == name), None)
        if found is None:
            raise MCPError(code=mtypes.INVALID_PARAMS, message=f"Unknown prompt: {name}")
        return found

    # ------------------------------------------------------------------ resources

    async def list_resources(self, ctx: Any, params: Any) -> mtypes.ListResourcesResult:
        listed = [
            mtypes.Resource(uri=r.uri, name=r.name, title=r.title, description=r.description, mime_type=r.mime_type)
            for r in await self.resources() if not r.is_template
        ]
        return mtypes.ListResourcesResult(resources=listed)

    async def list_templates(self, ctx: Any, params: Any) -> mtypes.ListResourceTemplatesResult:
        listed = [
            mtypes.ResourceTemplate(uri_template=r.uri, name=r.name, title=r.title, description=r.description,
                                    mime_type=r.mime_type)
            for r in await self.resources() if r.is_template
        ]
        return mtypes.ListResourceTemplatesResult(resource_templates=listed)

    async def read_resource(self, ctx: Any, params: mtypes.ReadResourceRequestParams) -> mtypes.ReadResourceResult:
        uri = str(params.uri)
        found = await self._find(uri)
        try:
            got = await found.read(uri)
        except ResourceError as exc:
            raise MCPError(code=mtypes.INTERNAL_ERROR, message=str(exc)) from None
        except Exception as exc:
            logger.debug("toolnexus: MCP serve: reading %s raised", uri, exc_info=True)
            raise MCPError(code=mtypes.INTERNAL_ERROR, message=f"reading {uri} failed: {exc}") from None
        return mtypes.ReadResourceResult(contents=[_wire_contents(got)])

    async def subscribe(self, ctx: Any, params: mtypes.SubscribeRequestParams) -> mtypes.EmptyResult:
        uri = str(params.uri)
        await self._find(uri)
        self._peers.subscribe(ctx, uri)
        return mtypes.EmptyResult()

    async def unsubscribe(self, ctx: Any, params: mtypes.UnsubscribeRequestParams) -> mtypes.EmptyResult:
        self._peers.unsubscribe(ctx, str(params.uri))
        return mtypes.EmptyResult()

    # ------------------------------------------------------------------ prompts

    async def list_prompts(self, ctx: Any, params: Any) -> mtypes.ListPromptsResult:
        listed = [
            mtypes.Prompt(name=p.name, title=p.title, description=p.description,
                          arguments=[mtypes.PromptArgument(name=a.name, description=a.description, required=a.required)
                                     for a in p.arguments])
            for p in await self.prompts()
        ]
        return mtypes.ListPromptsResult(prompts=listed)

    async def get_prompt(self, ctx: Any, params: mtypes.GetPromptRequestParams) -> mtypes.GetPromptResult:
        found = await self._prompt(params.name)
        try:
            messages = await found.render(params.arguments)
            wire = [mtypes.PromptMessage(role=m["role"], content=prompt_content(m["content"])) for m in messages]
        except PromptError as exc:
            raise MCPError(code=mtypes.INVALID_PARAMS, message=str(exc)) from None
        except Exception as exc:
            logger.debug("toolnexus: MCP serve: prompt %s raised", found.name, exc_info=True)
            raise MCPError(code=mtypes.INTERNAL_ERROR, message=f"prompt {found.name} failed: {exc}") from None
        return mtypes.GetPromptResult(description=found.description, messages=wire)

    # ------------------------------------------------------------------ completion

    async def complete(self, ctx: Any, params: mtypes.CompleteRequestParams) -> mtypes.CompleteResult:
        ref, arg = params.ref, params.argument
        if isinstance(ref, mtypes.PromptReference):
            completers = (await self._prompt(ref.name)).complete
        else:
            uri = str(ref.uri)
            template = next((r for r in await self.resources() if r.uri == uri), None)
            if template is None:
                raise MCPError(code=RESOURCE_NOT_FOUND, message=f"Resource not found: {uri}", data={"uri": uri})
            completers = template.complete
        try:
            values = await complete_value(completers, arg.name, arg.value)
        except Exception as exc:
            logger.debug("toolnexus: MCP serve: completer for %s raised", arg.name, exc_info=True)
            raise MCPError(code=mtypes.INTERNAL_ERROR, message=f"completing {arg.name} failed: {exc}") from None
        completion = mtypes.Completion(values=values[:MAX_COMPLETIONS], total=len(values),
                                       has_more=len(values) > MAX_COMPLETIONS)
        return mtypes.CompleteResult(completion=completion)
