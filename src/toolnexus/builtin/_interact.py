"""The `question` and `todowrite` built-ins: the two that talk to the host rather than the machine.

`question` suspends the run: the first call returns
`pending(kind="question", prompt=<rendered>, data={"questions": questions})`; the retry, with the
host's `Answer` in `ctx.answer`, returns that answer's data as JSON (`ok` is not checked: a
declined answer reads as `{}` and the model decides what to do). `todowrite` is stateless: it
renders the list it is given; the transcript is the session's memory.

Rendering choices of ours: a question item that is a bare string is asked as is; an
option that is not a string is shown via `str()`; a todo item that is not an object renders as
an unchecked empty entry.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from typing import Any, Optional

from ..types import Tool, ToolContext, ToolResult, pending
from ._tooling import build_tool, object_schema

QUESTION_DESCRIPTION = (
    'Ask the host one or more questions. Suspends via a kind:"question" Request (§10); '
    "the host's waitFor resolves it and the answer is returned to the model."
)
QUESTION_SCHEMA = object_schema(
    {
        "questions": {
            "type": "array",
            "description": "Questions to ask",
            "items": {
                "type": "object",
                "properties": {
                    "question": {"type": "string"},
                    "header": {"type": "string"},
                    "options": {"type": "array", "items": {"type": "string"}},
                    "multiple": {"type": "boolean"},
                },
                "required": ["question"],
            },
        }
    },
    ["questions"],
)
TODOWRITE_DESCRIPTION = "Replace the session todo list. Returns the rendered list."
TODOWRITE_SCHEMA = object_schema(
    {
        "todos": {
            "type": "array",
            "description": "The full todo list to store",
            "items": {
                "type": "object",
                "properties": {"id": {"type": "string"}, "text": {"type": "string"}, "completed": {"type": "boolean"}},
                "required": ["id", "text", "completed"],
            },
        }
    },
    ["todos"],
)

NO_TODOS = "(no todos)"


def _list_arg(args: Mapping[str, Any], key: str) -> list[Any]:
    value = args.get(key)
    return value if isinstance(value, list) else []


def _render_question(item: Any) -> str:
    if isinstance(item, str):
        return item
    if not isinstance(item, Mapping):
        return ""
    text = item.get("question")
    line = text if isinstance(text, str) else ""
    options = item.get("options")
    if isinstance(options, list) and options:
        line += " (options: " + ", ".join(str(option) for option in options) + ")"
    return line


def render_questions(questions: list[Any]) -> str:
    """The pinned prompt: one line per question, options in parentheses."""
    return "\n".join(_render_question(item) for item in questions)


def render_todos(todos: list[Any]) -> str:
    """The pinned todo rendering: `[x] text` / `[ ] text` lines, or `(no todos)`."""
    if not todos:
        return NO_TODOS
    lines = []
    for item in todos:
        entry = item if isinstance(item, Mapping) else {}
        text = entry.get("text")
        mark = "[x]" if entry.get("completed") else "[ ]"
        lines.append(f"{mark} {'' if text is None else text}")
    return "\n".join(lines)


def make_question() -> Tool:
    async def run(args: Mapping[str, Any], ctx: Optional[ToolContext]) -> ToolResult:
        questions = _list_arg(args, "questions")
        answer = ctx.answer if ctx is not None else None
        if answer is not None:
            return ToolResult(json.dumps({} if answer.data is None else answer.data), False)
        return pending(kind="question", prompt=render_questions(questions), data={"questions": questions})

    return build_tool("question", QUESTION_DESCRIPTION, QUESTION_SCHEMA, run)


def make_todowrite() -> Tool:
    async def run(args: Mapping[str, Any], ctx: Optional[ToolContext]) -> ToolResult:
        todos = _list_arg(args, "todos")
        return ToolResult(render_todos(todos), False, metadata={"todos": todos})

    return build_tool("todowrite", TODOWRITE_DESCRIPTION, TODOWRITE_SCHEMA, run, idempotent=True)
