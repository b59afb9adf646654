"""The toolkit the MCP conformance suite's server scenarios run against, written as a user would.

`conformance/mcp_server.py` serves it with `toolnexus serve --mcp --no-builtins --tools-from
mcp_app:ITEMS`: tools, resources and prompts named and shaped as the scenarios ask
(`npx @modelcontextprotocol/conformance list`), built only with toolnexus' public API —
`@tool`, `@resource`, `@prompt`, `pending(kind="input")` for elicitation and the `ToolContext`
methods for logging, progress and sampling.
"""

from __future__ import annotations

import asyncio
import json

from toolnexus import Tool, ToolContext, ToolResult, pending, prompt, resource, tool

# A 1x1 red PNG and a minimal WAV (44-byte header, no samples).
PNG = "iVBORw0KGgoAAAANSUhEUgAAAAEAAAABCAYAAAAfFcSJAAAADUlEQVR42mP8z8DwHwAFBQIAX8jx0gAAAABJRU5ErkJggg=="
WAV = "UklGRiQAAABXQVZFZm10IBAAAAABAAEAQB8AAIA+AAACABAAZGF0YQAAAAA="


@tool
def test_simple_text() -> str:
    """Returns a simple text response."""
    return "This is a simple text response for testing."


@tool
def test_image_content() -> ToolResult:
    """Returns an image."""
    return ToolResult("An image:", False, parts=[{"type": "image", "data": PNG, "mimeType": "image/png"}])


@tool
def test_audio_content() -> ToolResult:
    """Returns audio."""
    return ToolResult("A sound:", False, parts=[{"type": "audio", "data": WAV, "mimeType": "audio/wav"}])


@tool
def test_embedded_resource() -> ToolResult:
    """Returns an embedded resource."""
    data = "VGhpcyBpcyBhbiBlbWJlZGRlZCByZXNvdXJjZSBjb250ZW50Lg=="  # "This is an embedded resource content."
    part = {"type": "file", "data": data, "mimeType": "text/plain", "url": "test://embedded-resource"}
    return ToolResult("An embedded resource:", False, parts=[part])


@tool
def test_multiple_content_types() -> ToolResult:
    """Returns text, an image and an embedded resource."""
    blob = "eyJ0ZXN0IjoiZGF0YSIsInZhbHVlIjoxMjN9"  # {"test":"data","value":123}
    return ToolResult("Multiple content types test:", False, parts=[
        {"type": "image", "data": PNG, "mimeType": "image/png"},
        {"type": "file", "data": blob, "mimeType": "application/json", "url": "test://mixed-content-resource"},
    ])


@tool
async def test_tool_with_logging(ctx: ToolContext) -> str:
    """Logs three messages while it runs."""
    await ctx.log("info", "Tool execution started")
    await asyncio.sleep(0.05)
    await ctx.log("info", "Tool processing data")
    await asyncio.sleep(0.05)
    await ctx.log("info", "Tool execution completed")
    return "Logging test completed"


@tool
async def test_tool_with_progress(ctx: ToolContext) -> str:
    """Reports progress 0, 50 and 100 of 100."""
    for step in (0, 50, 100):
        await ctx.progress(step, 100, f"step {step}")
        if step < 100:
            await asyncio.sleep(0.05)
    return "Progress test completed"


@tool
async def test_error_handling() -> str:
    """Always fails."""
    raise RuntimeError("This tool intentionally returns an error for testing")


@tool
async def test_sampling(prompt: str, ctx: ToolContext) -> str:
    """Asks the client's model.

    Args:
        prompt: The prompt to send to the LLM.
    """
    return "LLM response: " + await ctx.sample(prompt, max_tokens=100)


def _elicit(prompt_text: str, schema: dict, ctx: ToolContext | None) -> ToolResult:
    """Ask the caller (the first run), or report what it answered (the run after)."""
    if ctx is None or ctx.answer is None:
        return pending(kind="input", prompt=prompt_text, data={"schema": schema})
    return ToolResult(f"Elicitation completed: action=accept, content={json.dumps(ctx.answer.data)}", False)


@tool
def test_elicitation(message: str, ctx: ToolContext) -> ToolResult:
    """Asks the user for a username and an email.

    Args:
        message: The message to show the user.
    """
    schema = {"type": "object", "properties": {
        "username": {"type": "string", "description": "User's response"},
        "email": {"type": "string", "description": "User's email address"},
    }, "required": ["username", "email"]}
    return _elicit(message, schema, ctx)


@tool
def test_elicitation_sep1034_defaults(ctx: ToolContext) -> ToolResult:
    """Asks with a default value for every primitive type."""
    schema = {"type": "object", "properties": {
        "name": {"type": "string", "default": "John Doe"},
        "age": {"type": "integer", "default": 30},
        "score": {"type": "number", "default": 95.5},
        "status": {"type": "string", "enum": ["active", "inactive", "pending"], "default": "active"},
        "verified": {"type": "boolean", "default": True},
    }}
    return _elicit("Please review your profile", schema, ctx)


@tool
def test_elicitation_sep1330_enums(ctx: ToolContext) -> ToolResult:
    """Asks with every kind of enum."""
    schema = {"type": "object", "properties": {
        "untitledSingle": {"type": "string", "enum": ["option1", "option2", "option3"]},
        "titledSingle": {"type": "string", "oneOf": [
            {"const": "value1", "title": "First Option"}, {"const": "value2", "title": "Second Option"},
            {"const": "value3", "title": "Third Option"}]},
        "legacyEnum": {"type": "string", "enum": ["opt1", "opt2", "opt3"],
                       "enumNames": ["Option One", "Option Two", "Option Three"]},
        "untitledMulti": {"type": "array", "items": {"type": "string", "enum": ["option1", "option2", "option3"]}},
        "titledMulti": {"type": "array", "items": {"anyOf": [
            {"const": "value1", "title": "First Choice"}, {"const": "value2", "title": "Second Choice"},
            {"const": "value3", "title": "Third Choice"}]}},
    }}
    return _elicit("Pick your options", schema, ctx)


@tool
async def test_reconnection(ctx: ToolContext) -> str:
    """Ends its response stream mid-call; the client resumes it and gets the result (SSE polling)."""
    if ctx.caller is not None:
        await ctx.caller.close_stream()
    await asyncio.sleep(0.2)
    return "Reconnection test completed"


async def _schema_2020_12(args: dict, ctx: ToolContext | None = None) -> ToolResult:
    return ToolResult(f"received {json.dumps(args)}", False)


SCHEMA_2020_12 = {
    "$schema": "https://json-schema.org/draft/2020-12/schema",
    "type": "object",
    "$defs": {"address": {"type": "object", "properties": {"street": {"type": "string"}, "city": {"type": "string"}}}},
    "properties": {"name": {"type": "string"}, "address": {"$ref": "#/$defs/address"}},
    "additionalProperties": False,
}
json_schema_2020_12_tool = Tool("json_schema_2020_12_tool", "Tool with JSON Schema 2020-12 features",
                                SCHEMA_2020_12, "native", _schema_2020_12)


@resource("test://static-text", mime_type="text/plain")
def static_text() -> str:
    """A static text resource."""
    return "This is the content of the static text resource."


@resource("test://static-binary", mime_type="image/png")
def static_binary() -> bytes:
    """A static binary resource (a PNG)."""
    import base64

    return base64.b64decode(PNG)


@resource("test://template/{id}/data", mime_type="application/json", complete={"id": ["123", "456"]})
def template_data(id: str) -> dict:
    """Data for an id."""
    return {"id": id, "templateTest": True, "data": f"Data for ID: {id}"}


@resource("test://watched-resource")
def watched() -> str:
    """A resource clients can subscribe to."""
    return "Watched resource content"


@prompt
def test_simple_prompt() -> str:
    """A simple prompt without arguments."""
    return "This is a simple prompt for testing."


@prompt(complete={"arg1": ["paris", "park", "party"], "arg2": ["world", "word"]})
def test_prompt_with_arguments(arg1: str, arg2: str) -> str:
    """A prompt with two arguments.

    Args:
        arg1: First test argument.
        arg2: Second test argument.
    """
    return f"Prompt with arguments: arg1='{arg1}', arg2='{arg2}'"


@prompt
def test_prompt_with_embedded_resource(resourceUri: str) -> list:
    """A prompt that embeds a resource.

    Args:
        resourceUri: URI of the resource to embed.
    """
    embedded = {"uri": resourceUri, "mimeType": "text/plain", "text": "Embedded resource content for testing."}
    return [{"type": "resource", "resource": embedded}, "Please process the embedded resource above."]


@prompt
def test_prompt_with_image() -> list:
    """A prompt with an image."""
    return [{"type": "image", "data": PNG, "mimeType": "image/png"}, "Please analyze the image above."]


ITEMS = [
    test_simple_text, test_image_content, test_audio_content, test_embedded_resource, test_multiple_content_types,
    test_tool_with_logging, test_tool_with_progress, test_error_handling, test_sampling, test_elicitation,
    test_elicitation_sep1034_defaults, test_elicitation_sep1330_enums, test_reconnection, json_schema_2020_12_tool,
    static_text, static_binary, template_data, watched,
    test_simple_prompt, test_prompt_with_arguments, test_prompt_with_embedded_resource, test_prompt_with_image,
]
