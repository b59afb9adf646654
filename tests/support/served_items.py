"""What the MCP-serve surface tests serve from a real `toolnexus serve` process (`--tools-from
served_items:ITEMS`): tools that ask, log, report progress, sample and end their stream early, and
resources and prompts of every shape, all made with toolnexus' public API."""

from __future__ import annotations

from toolnexus import ToolContext, ToolResult, pending, prompt, resource, tool

PNG = "iVBORw0KGgoAAAANSUhEUgAAAAEAAAABCAYAAAAfFcSJAAAADUlEQVR42mP8z8DwHwAFBQIAX8jx0gAAAABJRU5ErkJggg=="
NAME_SCHEMA = {"type": "object", "properties": {"name": {"type": "string"}}, "required": ["name"]}


@tool
def ask(greeting: str = "hello", ctx: ToolContext | None = None) -> ToolResult:
    """Asks the caller for a name, then greets it.

    Args:
        greeting: How to greet.
    """
    if ctx is None or ctx.answer is None:
        return pending(kind="input", prompt="What is your name?", data={"schema": NAME_SCHEMA})
    return ToolResult(f"{greeting} {(ctx.answer.data or {}).get('name')}", False)


@tool
async def chatty(ctx: ToolContext) -> str:
    """Logs at three levels."""
    await ctx.log("debug", "a detail")
    await ctx.log("info", {"step": "working"}, logger="chatty")
    await ctx.log("warning", "careful")
    return "chatted"


@tool
async def steps(ctx: ToolContext) -> str:
    """Reports progress in three steps."""
    for done in (1, 2, 3):
        await ctx.progress(done, 3, f"step {done} of 3")
    return "stepped"


@tool
async def ask_model(question: str, ctx: ToolContext) -> str:
    """Asks the caller's model.

    Args:
        question: What to ask.
    """
    return "model says: " + await ctx.sample(question, max_tokens=50, system="Be brief.")


@tool
async def poll_me(ctx: ToolContext) -> str:
    """Ends its response stream before it answers (SSE polling)."""
    if ctx.caller is not None:
        await ctx.caller.close_stream()
    return "answered after the stream was closed"


@resource("notes://readme", mime_type="text/markdown")
def readme() -> str:
    """The readme."""
    return "# Read me"


@resource("notes://logo")
def logo() -> bytes:
    """The logo."""
    import base64

    return base64.b64decode(PNG)


@resource("users://{user}/profile", complete={"user": ["ada", "alan", "grace"]})
async def profile(user: str) -> dict:
    """A user's profile."""
    return {"user": user, "langs": ["python"]}


@prompt
def greet() -> str:
    """Greets."""
    return "Say hello."


@prompt(complete={"language": ["python", "perl", "go"]})
def review(code: str, language: str = "python") -> list:
    """Asks for a code review.

    Args:
        code: The code to review.
        language: Its language.
    """
    return [f"Review this {language} code:", {"role": "assistant", "content": "Sure, show me."}, code]


@prompt
def with_readme() -> list:
    """Embeds the readme resource."""
    return [readme, "Summarise the document above."]


@prompt
def with_image() -> list:
    """Holds an image."""
    return [{"type": "image", "data": PNG, "mimeType": "image/png"}, "Describe the image."]


ITEMS = [ask, chatty, steps, ask_model, poll_me, readme, logo, profile, greet, review, with_readme, with_image]
