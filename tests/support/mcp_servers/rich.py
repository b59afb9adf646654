"""An MCP server with resources, prompts, logging, progress and sampling, on the SDK's `MCPServer`.

Run as a stdio server (`python rich.py`); `build()` is served over streamable HTTP by the tests.

- tools: `work(steps)` reports progress once per step and logs a line per step; `ask_model(question)`
  asks the client's model (`sampling/createMessage`, max 4000 tokens) and returns its answer, or
  the error the client sent; `client_info()` says which `clientInfo` the client introduced itself
  with;
- resources: `docs://readme` (markdown text), `docs://logo` (binary, PNG bytes), and the template
  `docs://pages/{name}`;
- prompts: `review(code)` (one user message) and `show_logo()` (a message embedding the logo
  resource and an image).
"""

from __future__ import annotations

import base64
import warnings

from mcp.server.mcpserver import Context, MCPServer
from mcp.server.mcpserver.prompts.base import UserMessage
from mcp.shared.exceptions import MCPDeprecationWarning
from mcp_types import EmbeddedResource, ImageContent, SamplingMessage, TextContent, TextResourceContents

PNG = base64.b64decode(
    "iVBORw0KGgoAAAANSUhEUgAAAAEAAAABCAYAAAAfFcSJAAAADUlEQVR42mP8z8BQDwAEhQGAhKmMIQAAAABJRU5ErkJggg=="
)


def build() -> MCPServer:
    # Logging and sampling are deprecated as of the 2026-07-28 revision; this server still speaks them.
    warnings.filterwarnings("ignore", category=MCPDeprecationWarning)
    server = MCPServer("rich")

    @server.tool(structured_output=False)
    async def work(steps: int, ctx: Context) -> str:
        """Do some steps, reporting progress."""
        for step in range(1, steps + 1):
            await ctx.info(f"step {step} of {steps}")
            await ctx.report_progress(step, steps, f"step {step}")
        return f"worked {steps} steps"

    @server.tool(structured_output=False)
    async def ask_model(question: str, ctx: Context) -> str:
        """Ask the client's model a question."""
        try:
            result = await ctx.session.create_message(
                [SamplingMessage(role="user", content=TextContent(type="text", text=question))],
                max_tokens=4000, system_prompt="Answer in one word.")
        except Exception as exc:
            return f"refused: {exc}"
        content = result.content
        return f"{result.model}: {content.text if isinstance(content, TextContent) else content}"

    @server.tool(structured_output=False)
    async def client_info(ctx: Context) -> str:
        """Which client is this."""
        params = ctx.session.client_params
        info = params.client_info if params is not None else None
        return f"{info.name} {info.version}" if info is not None else "unknown"

    @server.resource("docs://readme", mime_type="text/markdown", description="The project's readme")
    def readme() -> str:
        return "# Rich\nA server with everything."

    @server.resource("docs://logo", mime_type="image/png")
    def logo() -> bytes:
        return PNG

    @server.resource("docs://pages/{name}", mime_type="text/plain")
    def page(name: str) -> str:
        return f"page {name}"

    @server.prompt()
    def review(code: str) -> str:
        """Review a piece of code."""
        return f"Please review:\n{code}"

    @server.prompt()
    def show_logo() -> list:
        """Describe the logo."""
        return [UserMessage(content=EmbeddedResource(type="resource", resource=TextResourceContents(
                    uri="docs://readme", mimeType="text/markdown", text="# Rich"))),
                UserMessage(content=ImageContent(type="image", data=base64.b64encode(PNG).decode(),
                                                 mimeType="image/png"))]

    return server


if __name__ == "__main__":
    build().run()
